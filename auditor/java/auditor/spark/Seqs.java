package auditor.spark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Scala sequences built from Python in few calls: {@code of(a, b, c)} is what PySpark's
 * {@code PythonUtils.toSeq([a, b, c])} returns, but py4j sends a Python list as a new
 * {@code ArrayList} and one {@code add} per element, each a round trip between the two
 * processes, and PySpark turns every list of columns (select, groupBy, agg, struct ...) into
 * a sequence that way. Here the elements are the call's arguments: one round trip per eight
 * elements ({@code of} the first eight, {@code plus} each next eight; used by
 * {@code auditor.jvmlookups}).
 */
public final class Seqs {
    private Seqs() {
    }

    private static Seq<Object> seq(List<Object> elements) {
        return CollectionConverters.asScala(elements).toSeq();
    }

    private static Seq<Object> joined(Seq<Object> head, Object... elements) {
        List<Object> all = new ArrayList<>(CollectionConverters.asJava(head));
        all.addAll(Arrays.asList(elements));
        return seq(all);
    }

    public static Seq<Object> of() {
        return seq(Arrays.asList());
    }

    public static Seq<Object> of(Object e0) {
        return seq(Arrays.asList(e0));
    }

    public static Seq<Object> of(Object e0, Object e1) {
        return seq(Arrays.asList(e0, e1));
    }

    public static Seq<Object> of(Object e0, Object e1, Object e2) {
        return seq(Arrays.asList(e0, e1, e2));
    }

    public static Seq<Object> of(Object e0, Object e1, Object e2, Object e3) {
        return seq(Arrays.asList(e0, e1, e2, e3));
    }

    public static Seq<Object> of(Object e0, Object e1, Object e2, Object e3, Object e4) {
        return seq(Arrays.asList(e0, e1, e2, e3, e4));
    }

    public static Seq<Object> of(Object e0, Object e1, Object e2, Object e3, Object e4, Object e5) {
        return seq(Arrays.asList(e0, e1, e2, e3, e4, e5));
    }

    public static Seq<Object> of(Object e0, Object e1, Object e2, Object e3, Object e4, Object e5, Object e6) {
        return seq(Arrays.asList(e0, e1, e2, e3, e4, e5, e6));
    }

    public static Seq<Object> of(Object e0, Object e1, Object e2, Object e3, Object e4, Object e5, Object e6, Object e7) {
        return seq(Arrays.asList(e0, e1, e2, e3, e4, e5, e6, e7));
    }

    public static Seq<Object> plus(Seq<Object> head, Object e0) {
        return joined(head, e0);
    }

    public static Seq<Object> plus(Seq<Object> head, Object e0, Object e1) {
        return joined(head, e0, e1);
    }

    public static Seq<Object> plus(Seq<Object> head, Object e0, Object e1, Object e2) {
        return joined(head, e0, e1, e2);
    }

    public static Seq<Object> plus(Seq<Object> head, Object e0, Object e1, Object e2, Object e3) {
        return joined(head, e0, e1, e2, e3);
    }

    public static Seq<Object> plus(Seq<Object> head, Object e0, Object e1, Object e2, Object e3, Object e4) {
        return joined(head, e0, e1, e2, e3, e4);
    }

    public static Seq<Object> plus(Seq<Object> head, Object e0, Object e1, Object e2, Object e3, Object e4, Object e5) {
        return joined(head, e0, e1, e2, e3, e4, e5);
    }

    public static Seq<Object> plus(Seq<Object> head, Object e0, Object e1, Object e2, Object e3, Object e4, Object e5, Object e6) {
        return joined(head, e0, e1, e2, e3, e4, e5, e6);
    }

    public static Seq<Object> plus(Seq<Object> head, Object e0, Object e1, Object e2, Object e3, Object e4, Object e5, Object e6, Object e7) {
        return joined(head, e0, e1, e2, e3, e4, e5, e6, e7);
    }
}
