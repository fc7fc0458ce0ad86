"""How large one input is, decided once, and how each stretch of its run is planned.

:class:`SizePolicy` is measured from the file walk before Spark reads anything (bytes of
the input and of its dumps, replicas found) and stored on the loaded snapshot. Everything
that depends on size reads it from there, as values: which :class:`Plan` (session
settings, frames in one partition or not, cut points collected or written) each stretch
of the run takes, whether the scan keeps every batch, how many partitions the tables the
size of the replica count get. Nothing is read from context variables or globals.

The stretches (:class:`Plans`):

- ``parse``: reading and parsing the input. A small input (the files under it add up to
  less than :attr:`Limits.small_input_bytes`) runs without generated code, broadcasts or
  more than one shuffle partition (:data:`SMALL_INPUT_CONF`), its cut points collected by
  the driver: Spark's fixed costs, not data, are its work. A large input keeps the
  session's settings.
- ``after_scan``: the work after the scan, on tables the size of the replica count
  (:data:`REPLICA_SIZED_CONF`, one shuffle partition per
  :attr:`Limits.replicas_per_partition` replicas), in one partition up to
  :attr:`Limits.one_partition_replicas` replicas.
- ``spread``: inside ``after_scan``, what is log-sized (more than
  :attr:`Limits.log_sized_rows` rows: the drilled batches of a wide divergence) and the
  dump text a drill-down parses again: the parse settings back, frames left as stored.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

from pyspark.sql import DataFrame, SparkSession

#: Settings for tables of a few thousand rows: no broadcast, hinted or not (each is a
#: Spark job of its own: a join is then a stage of the job that needs it) and no code
#: generation (compiling a stage's code costs more than running it, interpreted).
SMALL_TABLE_CONF: dict[str, str | None] = {
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.sql.optimizer.disableHints": "true",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
#: The settings of :data:`SMALL_TABLE_CONF` that turn code generation off.
CODEGEN_CONF = ("spark.sql.codegen.wholeStage", "spark.sql.codegen.factoryMode")



def codegen_on(spark: SparkSession) -> bool:
    """True when the session compiles whole stages (a large input's parsing), False under
    :data:`SMALL_TABLE_CONF`'s settings (a small input, the work after the scan)."""
    return (spark.conf.get("spark.sql.codegen.wholeStage", "true") or "true").lower() == "true"


#: Settings for the work after the scan, on tables the size of the replica count.
REPLICA_SIZED_CONF: dict[str, str | None] = {
    **SMALL_TABLE_CONF,
    # Frames of one partition are joined without a shuffle only while the planner's size
    # estimate of each side stays below this; estimates after a few joins are wild guesses.
    "spark.sql.maxSinglePartitionBytes": str(2**62),
}

#: Settings for the run of a small input, where Spark's fixed costs dominate: no code
#: compilation (compiling ~200 stages costs more than it saves), one shuffle partition and
#: no broadcasts (each broadcast is a job of its own; a one-partition shuffle join is a
#: stage of the job that needs it). Measured on the demo input (1,000 batches): 52 s and
#: 107 jobs -> 34 s and 29 jobs; broadcast hints ignored too: 29 -> 15 jobs.
SMALL_INPUT_CONF: dict[str, str | None] = {**SMALL_TABLE_CONF, "spark.sql.shuffle.partitions": "1"}

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


def session_conf(spark: SparkSession, wanted: Mapping[str, str | None]) -> contextlib.AbstractContextManager[None]:
    """Run the block with the session settings ``wanted`` (None: unset), then put back what
    they replaced."""
    return _session_conf(spark, dict(wanted))


@contextlib.contextmanager
def _session_conf(spark: SparkSession, wanted: dict[str, str | None]) -> Iterator[None]:
    saved = {k: spark.conf.get(k, None) for k in wanted}
    for key, value in wanted.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


@dataclass(frozen=True)
class Plan:
    """How one stretch of a run is planned.

    Attributes:
        settings: session settings while it runs (None: unset), as ``(key, value)`` pairs.
        narrow: frames read back from its cut points, made on the driver or unioned go in
            one partition: Spark then plans a join or an aggregate over them with no
            exchange, and a query over a few thousand rows is one stage, not one per join
            (each stage costs tens of milliseconds to schedule, whatever it holds).
        collect: its cut points are computed by one job and collected as Arrow, then
            written by pyarrow (no output committer, no listing): only for small inputs,
            whose rows all fit the driver.
        local_rows: a stored frame of at most this many rows (and 1 MB of Parquet) comes
            back as a local relation of its rows, not a file scan.
    """

    settings: tuple[tuple[str, str | None], ...] = ()
    narrow: bool = False
    collect: bool = False
    local_rows: int = 10_000

    @property
    def conf(self) -> dict[str, str | None]:
        """The settings as a dict."""
        return dict(self.settings)

    def applied(self, spark: SparkSession) -> contextlib.AbstractContextManager[None]:
        """The block runs with this plan's settings."""
        return session_conf(spark, self.conf)

    def narrowed(self, df: DataFrame) -> DataFrame:
        """``df`` in one partition when the plan is :attr:`narrow`, else as it is."""
        return df.coalesce(1) if self.narrow else df


def plan_of(conf: Mapping[str, str | None], **kw: object) -> Plan:
    """A :class:`Plan` with the settings ``conf``."""
    return Plan(settings=tuple(sorted(conf.items())), **kw)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Plans:
    """The plans of one run's stretches (see the module docstring)."""

    parse: Plan
    after_scan: Plan
    spread: Plan

    @classmethod
    def as_session(cls, collect: bool = False) -> Plans:
        """Every stretch with the session's own settings, frames as Spark makes them (tests
        of results that must not depend on partitioning); ``collect``: cut points collected."""
        plan = Plan(collect=collect)
        return cls(plan, plan, plan)


@dataclass(frozen=True)
class Limits:
    """Where sizes change plans (each measured: docs/design.md, "Sizes")."""

    #: Up to this many bytes under the input, a run takes the small-input plan, and the
    #: scan keeps every batch of its dumps (so drill-downs filter stored rows instead of
    #: building the line parser again: on a one-partition audit about 10 s less). Above it,
    #: a row per batch would be a stored copy of the input's batches, which the summaries
    #: exist to avoid.
    small_input_bytes: int = 32 << 20
    #: Up to this many replicas the work after the scan runs in one partition; above it the
    #: tables are as large as log-sized ones and keep the session's code generation
    #: (interpreting every expression over 300,000 replicas cost more than compiling: the
    #: 100,000-partition audit 201 -> 187 s).
    one_partition_replicas: int = 200_000
    #: Replicas per shuffle partition after the scan.
    replicas_per_partition: int = 50_000
    #: A stored frame with more rows than this is log-sized: the work over it is spread.
    log_sized_rows: int = 200_000
    #: A large input's small files (checkpoints, describe, KRaft's quorum files and
    #: metadata log) up to this many bytes are parsed in one partition: about
    #: ``log_sized_rows`` lines (a checkpoint line is 4 to ~40 bytes).
    small_files_one_partition_bytes: int = 2 << 20
    #: A stored frame of at most this many rows comes back as a local relation.
    local_frame_rows: int = 10_000


@dataclass(frozen=True)
class SizePolicy:
    """How large one input is, measured once before Spark reads it, and what follows.

    Attributes:
        input_bytes: the bytes of the input's files.
        dump_bytes: the bytes of its dump files (Kafka's text format) and segment files.
        replicas: about how many replicas it holds (partition folders per broker); 0 when
            the walk cannot tell (tables, etcd).
        incremental: an incremental run (dump files read from the store): the scan never
            keeps every batch.
        limits: the thresholds.
        planned: False: every stretch keeps the session's settings (:meth:`Plans.as_session`).
    """

    input_bytes: int = 0
    dump_bytes: int = 0
    replicas: int = 0
    incremental: bool = False
    limits: Limits = field(default_factory=Limits)
    planned: bool = True

    @property
    def small_input(self) -> bool:
        """The run takes the small-input plan."""
        return self.input_bytes < self.limits.small_input_bytes

    @property
    def per_batch(self) -> bool:
        """The scan keeps every batch (a small input's dumps, not incremental)."""
        return not self.incremental and self.dump_bytes <= self.limits.small_input_bytes

    @property
    def narrow_after_scan(self) -> bool:
        """The work after the scan runs in one partition."""
        return self.replicas <= self.limits.one_partition_replicas

    @property
    def replica_partitions(self) -> int:
        """Partitions for tables the size of the replica count."""
        return max(1, -(-self.replicas // self.limits.replicas_per_partition))

    def is_log_sized(self, rows: int) -> bool:
        """``rows`` stored rows are log-sized (their work is spread)."""
        return rows > self.limits.log_sized_rows

    def small_files_in_one_partition(self, small_bytes: int) -> bool:
        """A large input's small files, ``small_bytes`` of them, are parsed in one partition."""
        return small_bytes <= self.limits.small_files_one_partition_bytes

    def with_sizes(self, **sizes: int | bool) -> SizePolicy:
        """The same limits and planning with other measured sizes."""
        return replace(self, **sizes)  # type: ignore[arg-type]

    def plans(self, spark: SparkSession) -> Plans:
        """The plans of the run, from this policy and the session's settings now (before
        any stretch is applied: the spread plan puts those back)."""
        if not self.planned:
            return Plans.as_session(collect=self.small_input)
        local = self.limits.local_frame_rows
        small = self.small_input
        parse_conf = SMALL_INPUT_CONF if small else {}
        parse = plan_of(parse_conf, narrow=small, collect=small, local_rows=local)
        current = int(parse_conf.get(SHUFFLE_PARTITIONS) or spark.conf.get(SHUFFLE_PARTITIONS, None) or 200)
        partitions = str(min(current, self.replica_partitions))
        if self.narrow_after_scan:
            after = {**REPLICA_SIZED_CONF, SHUFFLE_PARTITIONS: partitions}
        else:
            after = {**{k: v for k, v in REPLICA_SIZED_CONF.items() if k not in CODEGEN_CONF},
                     SHUFFLE_PARTITIONS: partitions}
        after_scan = plan_of(after, narrow=self.narrow_after_scan, collect=small, local_rows=local)
        before = {k: parse_conf[k] if k in parse_conf else spark.conf.get(k, None) for k in after}
        spread = plan_of(before, narrow=False, collect=small, local_rows=local)
        return Plans(parse=parse, after_scan=after_scan, spread=spread)
