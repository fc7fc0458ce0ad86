package auditor.spark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.CoalesceExec;
import org.apache.spark.sql.execution.ColumnarRule;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.exchange.ENSURE_REQUIREMENTS$;
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec;
import org.apache.spark.sql.internal.SQLConf;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/**
 * A session extension (spark.sql.extensions) for plans over one-partition data: while the
 * session setting {@link #KEY} is "true", a shuffle that the planner added to bring rows
 * into one partition (hash or single partitioning, one partition, added to meet an
 * operator's required distribution) is replaced by a coalesce of its child into one
 * partition, which moves no data between stages. A shuffle that the plan uses twice (the
 * planner reuses its output) is kept.
 *
 * <p>Both put every row of the child in one partition; neither promises an order, and the
 * planner has already put a sort above the shuffle wherever the operator needs one. An
 * operator with several children (a join) gets every child in one partition either way.
 */
public final class OnePartitionShuffles extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {
    /** The session setting that turns the rewrite on. */
    public static final String KEY = "spark.auditor.onePartitionShuffles";

    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
        extensions.injectColumnar(new AbstractFunction1<SparkSession, ColumnarRule>() {
            @Override
            public ColumnarRule apply(SparkSession session) {
                return new Columnar();
            }
        });
        return BoxedUnit.UNIT;
    }

    /** Runs the rewrite before the columnar transitions: after the planner's exchanges. */
    static final class Columnar extends ColumnarRule {
        @Override
        public Rule<SparkPlan> preColumnarTransitions() {
            return new Rewrite();
        }
    }

    static final class Rewrite extends Rule<SparkPlan> {
        @Override
        public SparkPlan apply(SparkPlan plan) {
            if (!"true".equals(SQLConf.get().getConfString(KEY, "false"))) {
                return plan;
            }
            Map<SparkPlan, Integer> uses = new HashMap<>();
            count(plan, uses);
            return rewrite(plan, uses);
        }

        private static boolean candidate(SparkPlan node) {
            if (!(node instanceof ShuffleExchangeExec)) {
                return false;
            }
            ShuffleExchangeExec shuffle = (ShuffleExchangeExec) node;
            return shuffle.outputPartitioning().numPartitions() == 1
                    && shuffle.shuffleOrigin() == ENSURE_REQUIREMENTS$.MODULE$;
        }

        private static void count(SparkPlan node, Map<SparkPlan, Integer> uses) {
            if (candidate(node)) {
                uses.merge(node.canonicalized(), 1, Integer::sum);
            }
            for (SparkPlan child : CollectionConverters.asJava(node.children())) {
                count(child, uses);
            }
        }

        private static SparkPlan rewrite(SparkPlan node, Map<SparkPlan, Integer> uses) {
            List<SparkPlan> children = CollectionConverters.asJava(node.children());
            List<SparkPlan> rewritten = new ArrayList<>(children.size());
            boolean changed = false;
            for (SparkPlan child : children) {
                SparkPlan next = rewrite(child, uses);
                changed |= next != child;
                rewritten.add(next);
            }
            if (candidate(node) && uses.getOrDefault(node.canonicalized(), 0) == 1) {
                return new CoalesceExec(1, rewritten.get(0));
            }
            return changed ? node.withNewChildren(CollectionConverters.asScala(rewritten).toSeq()) : node;
        }
    }
}
