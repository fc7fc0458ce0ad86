"""The one place where a SparkSession is built."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import os
import re
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

logger = logging.getLogger(__name__)

#: Settings every session of the auditor gets; callers may add or override entries.
BASE_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "false",
    # We list the input files ourselves (cheap os.scandir walk); never start a Spark job to
    # list thousands of explicit paths again.
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
    # Adaptive execution re-plans each shuffle stage as a job of its own (a small audit
    # became ~300 jobs); our plans read stored, sized inputs, so static planning is as good,
    # and runs one job per cut point.
    "spark.sql.adaptive.enabled": "false",
    # Every broadcast is a Spark job of its own (a 1M-line audit ran 40 of them, one per
    # small table joined in the scan and snapshot cuts); a shuffle join is a stage of the
    # job that needs it. The code asks for a broadcast (a hint) only where the other side
    # is log-sized, which a shuffle would move: the file lookups of the text readers
    # (`auditor.ingest.lines.with_file_ids`: lines, whole files' text, WAL records), and
    # the incremental store's rows of reused files.
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    # Stored cut points are read back by pyarrow too: UTC-adjusted microsecond timestamps.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.driver.memory": "4g",
    # A whole-stage method larger than HotSpot compiles (8,000 bytes of bytecode) runs
    # interpreted: such a stage falls back to per-operator code instead, which JIT compiles.
    # Measured on the dump grammar over 1M lines: 72 s of task time with the default limit,
    # 27 s with this one.
    "spark.sql.codegen.hugeMethodLimit": "8000",
    # Inputs are many small local files (a dump per segment, a checkpoint per partition).
    # Spark's default open cost (4 MB) gives each task about 32 of them: 9,400 tasks for
    # 300,000 checkpoint files, and one task per file of the demo. Opening a local file costs
    # far less: tasks now hold hundreds of small files.
    "spark.sql.files.openCostInBytes": str(256 * 1024),
    # PySpark records the Python call site of every DataFrame/Column call for error
    # messages: about five JVM round trips per call, a third of the py4j traffic of an
    # audit (the demo: 55k -> 21k calls, 36 s -> 27 s).
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # Constraint propagation infers filters from every projection and join; on the
    # engine's wide plans it costs planning time and adds nothing (our joins are on keys
    # that are never null).
    "spark.sql.constraintPropagation.enabled": "false",
    # A cut point is one write partitioned by frame name. Spark's planned write sorts each
    # task's whole output by the partition column first (an in-memory sort that shares the
    # heap with the input's file metadata: 300,000 small files' worth on a large cluster);
    # with concurrent writers, one open file per frame, nothing is sorted.
    "spark.sql.optimizer.plannedWrite.enabled": "false",
    "spark.sql.maxConcurrentOutputFileWriters": "16",
}


#: The JIT of a JVM that audits a small input: a method is compiled after twice HotSpot's
#: default number of calls. Such a run calls thousands of Catalyst methods for a few
#: seconds, and on 2 cores the compiler threads compete with the one thread that plans.
#: Measured 2026-11-26 (sixth session), CLI start to exit, alternating runs: the
#: one-partition audit 21.5-22.1 s against 22.6-23.2 s (8 pairs), the demo 22.2-22.5 s
#: against 23.0 s (2 pairs); a factor of 0.5 or 0.2 (compile sooner) was slower, 24.1-26.5 s.
SMALL_INPUT_JIT = ("-XX:CompileThresholdScaling=2",)

#: Environment variables whose Java options every JVM started here also takes.
JAVA_OPTION_VARIABLES = ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS")


def with_variable_options(options: Sequence[str], environ: Mapping[str, str]) -> list[str]:
    """``options`` and the Java options of :data:`JAVA_OPTION_VARIABLES`: all a JVM started
    here would be given."""
    return [*options, *(o for v in JAVA_OPTION_VARIABLES for o in environ.get(v, "").split())]


def collector_options(extra_java_options: Sequence[str], environ: Mapping[str, str]) -> list[str]:
    """The garbage collector for a driver JVM started here: HotSpot's throughput collector,
    unless the caller's options or the JVM's option variables already choose one (a JVM
    given two refuses to start).

    Why not the JDK's default G1: a driver (and, in local mode, its executors) allocates
    short-lived plan trees and rows in bursts and has no pause target to keep, and G1's
    concurrent threads and costlier write barriers share its few cores. Measured on 2
    cores, alternating runs (docs/performance-log.md, part 2, 2026-11-26): one-partition
    CLI audits 8% faster (22.3-23.3 s against 24.5-25.7 s), 1M lines 10% (53.2-54.3 s
    against 57.9-63.2 s), 100,000 partitions in a 2 GB heap 343 and 347 s where G1 ran out
    of heap twice.
    """
    chosen = with_variable_options(extra_java_options, environ)
    if any(re.fullmatch(r"-XX:\+Use\w+GC", o) for o in chosen):
        return []
    return ["-XX:+UseParallelGC"]


def build_session(
    master: str | None = None,
    app_name: str = "log-auditor",
    conf: dict[str, str] | None = None,
    quiet: bool = False,
    small_input: bool = False,
    extra_java_options: Sequence[str] = (),
    work_parent: str | None = None,
) -> SparkSession:
    """Return the active SparkSession, or build one with the auditor's settings.

    Args:
        master: Spark master URL; ``None`` keeps what spark-submit set, else ``local[*]``.
        app_name: application name shown in the Spark UI.
        conf: extra Spark settings, applied after :data:`BASE_CONF`.
        quiet: keep Spark's console log to errors from the JVM's start (the CLI's default).
        small_input: the session will audit a small input: its JVM leaves huge generated
            methods to the interpreter (HotSpot's default); Spark's planning, not data, is
            the work there. It keeps HotSpot's tiered compilation (C1, then C2): a C1-only
            JVM (``-XX:TieredStopAtLevel=1``, tried until 2026-11-25) plans 2x slower once
            warm and was slower in 5 of 6 cold CLI audits measured (the sixth a tie). It
            compiles a method after twice as many calls as HotSpot's default
            (:data:`SMALL_INPUT_JIT`).
        extra_java_options: more options for a driver JVM started here (not under spark-submit).
        work_parent: the folder under which a local-mode JVM started here keeps its
            temporary files (None: the system's temporary folder; the CLI passes ``[run]
            work_dir``): see :func:`_own_temp_dir`.

    Returns:
        The session. When one is already active (spark-submit, a notebook) it is reused.
    """
    from pyspark.sql import SparkSession

    from auditor import jvmlookups

    # (PySpark's lookups of JVM static methods made once, not at every column: auditor.jvmlookups)
    jvmlookups.install()
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    elif "SPARK_MASTER" not in os.environ and not _launched_by_spark_submit():
        master = "local[*]"
        builder = builder.master(master)
    settings = dict(BASE_CONF)
    local = _runs_locally(master)
    if local:
        # Few, larger shuffle partitions suit one machine (unless spark-submit was given a
        # number); clusters: :func:`fit_shuffle_partitions`.
        settings["spark.sql.shuffle.partitions"] = (
            _submitted("spark.sql.shuffle.partitions") or str(max(4, 2 * (os.cpu_count() or 2))))
        # Local files have no block locations worth asking for (300,000 BlockLocation
        # objects for a 100,000-partition snapshot), and each file list is read once, so
        # Spark's file-status cache only holds heap.
        settings["spark.sql.sources.ignoreDataLocality"] = "true"
        settings["spark.sql.hive.filesourcePartitionFileCacheSize"] = "0"
        # Python workers (the WAL decoder's mapInArrow) run this interpreter, with this
        # environment's packages, not whatever `python3` is first on the PATH (PySpark
        # reads the variable when the context starts).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # Spark generates one Java method per whole-stage pipeline; a wide projection (the
    # dump line grammar, the checks) exceeds HotSpot's 8,000-byte limit for compiling a
    # method, and then runs interpreted: 2.7x slower parsing, measured on 1M lines.
    # (Not for small inputs, where run time is planning, not generated code.)
    java_options = list(SMALL_INPUT_JIT) if small_input else ["-XX:-DontCompileHugeMethods"]
    if quiet:
        log_conf = Path(__file__).with_name("log4j2.properties")
        java_options.append(f"-Dlog4j2.configurationFile={log_conf.as_uri()}")
    if not _launched_by_spark_submit():
        # The JVM started here maps the classes it loads from the archive `auditor warm-up`
        # built, when there is one (not while building one: one dynamic archive at a time),
        # and runs the throughput collector. (Under spark-submit the driver's JVM is already
        # running, with the options its user gave it.)
        from auditor import classarchive

        building = any(o.startswith("-XX:ArchiveClassesAtExit") for o in extra_java_options)
        java_options += ([] if building else classarchive.use_options()) + list(extra_java_options)
        java_options += collector_options(extra_java_options, os.environ)
        if local:
            java_options += _own_temp_dir(settings, conf or {}, java_options, work_parent)
    if java_options:
        # (Local mode: the executors live in the driver's JVM. A cluster keeps its own
        # executor options.)
        settings["spark.driver.extraJavaOptions"] = " ".join(java_options)
    settings.update(conf or {})
    if local and not _launched_by_spark_submit():
        # Hadoop's local file system without a `chmod` child process per file a write
        # creates, and the one-partition shuffle rule (auditor.localjar; only when
        # `auditor warm-up` has built its jar).
        from auditor import localjar

        settings.update(localjar.session_conf(settings))
    if not local:
        # Executors in their own JVMs take only the cluster's and these options: without
        # this flag they run the scan's wide generated methods interpreted (measured on the
        # loopback cluster, 1M lines: the scan job 142 s). Added to what the user set.
        theirs = settings.get("spark.executor.extraJavaOptions") or _submitted("spark.executor.extraJavaOptions") or ""
        if "DontCompileHugeMethods" not in theirs:
            settings["spark.executor.extraJavaOptions"] = f"{theirs} -XX:-DontCompileHugeMethods".strip()
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _own_temp_dir(settings: dict[str, str], conf: Mapping[str, str], java_options: Sequence[str],
                  parent: str | None) -> list[str]:
    """Give a local-mode JVM started here a work dir of its own for its temporary files
    (``spark.local.dir``: shuffle and spill files, Spark's ``blockmgr-*`` and ``spark-*``
    folders; ``java.io.tmpdir``: native libraries, artifacts), and return the Java option
    that points there.

    Spark removes those files when its JVM shuts down, not when it is killed: every
    ``SIGKILL``ed audit (a scheduler's timeout, the OOM killer) left them in /tmp for good,
    shuffle files included. In a work dir (:mod:`auditor.workdir`) they go when this process
    exits, and a killed process's are removed by the next audit under the same parent, like
    its cut points. Left alone when the user chose a place (``spark.local.dir`` or
    ``-Djava.io.tmpdir`` in ``[spark.conf]`` or the machine's ``spark-defaults.conf``,
    ``SPARK_LOCAL_DIRS``, ``-Djava.io.tmpdir`` in a JVM option variable): that folder is
    theirs to manage.
    """
    theirs = {**spark_defaults(), **conf}
    chosen = with_variable_options([*theirs.get("spark.driver.extraJavaOptions", "").split(), *java_options],
                                   os.environ)
    if ("spark.local.dir" in theirs or os.environ.get("SPARK_LOCAL_DIRS")
            or any(o.startswith("-Djava.io.tmpdir=") for o in chosen)):
        return []
    from auditor.workdir import new_work_dir

    path = new_work_dir(os.path.abspath(parent) if parent is not None else None)
    settings["spark.local.dir"] = path
    return [f"-Djava.io.tmpdir={path}"]


def spark_defaults() -> dict[str, str]:
    """The settings of the ``spark-defaults.conf`` a JVM started here reads (in
    ``SPARK_CONF_DIR``, else ``SPARK_HOME/conf``, else PySpark's own ``conf`` folder); {}
    when there is none. (A machine's defaults file is where a larger disk for
    ``spark.local.dir`` is usually named.)"""
    folder = os.environ.get("SPARK_CONF_DIR")
    if not folder:
        home = os.environ.get("SPARK_HOME")
        if not home:
            import pyspark

            home = os.path.dirname(pyspark.__file__)
        folder = os.path.join(home, "conf")
    try:
        with open(os.path.join(folder, "spark-defaults.conf"), encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return {}
    found: dict[str, str] = {}
    for line in text.splitlines():
        # a Java properties line: key, then "=", ":" or white space, then the value
        m = re.match(r"\s*([^\s=:#!][^\s=:]*)\s*[=:\s]?\s*(.*?)\s*$", line)
        if m is not None:
            found[m.group(1)] = m.group(2)
    return found


def _submitted(key: str) -> str | None:
    """A setting spark-submit passed to this process (``--conf``, spark-defaults), if any."""
    if not _launched_by_spark_submit():
        return None
    from pyspark import SparkConf

    return SparkConf().get(key, None)


def _runs_locally(master: str | None) -> bool:
    """True when the session about to be built runs in one JVM (``local[...]``)."""
    chosen = master or _submitted("spark.master") or os.environ.get("SPARK_MASTER") or "local"
    return chosen.startswith("local")


def fit_shuffle_partitions(spark: SparkSession) -> None:
    """On a cluster, unless the user set ``spark.sql.shuffle.partitions``: 2 per executor
    core (at least 4) instead of Spark's 200. After the scan a shuffle moves a few rows per
    file, and 200 tasks per shuffle cost more than they carry (measured on the loopback
    cluster: 7,905 tasks where local mode runs 447). Results never depend on it."""
    if is_local_master(spark) or spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        return
    spark.conf.set("spark.sql.shuffle.partitions", str(max(4, 2 * spark.sparkContext.defaultParallelism)))


def _launched_by_spark_submit() -> bool:
    """True when spark-submit started this Python process (it sets the master for us)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ or "SPARK_ENV_LOADED" in os.environ


def has_delta_classes(spark: SparkSession) -> bool:
    """True when Delta Lake's Spark classes are on the JVM classpath of ``spark``.

    A missing Delta extension only logs a warning at session start, so the classes are
    checked directly.
    """
    try:
        jvm = spark.sparkContext._jvm  # noqa: SLF001 - the only way to probe the classpath
        assert jvm is not None
        jvm.java.lang.Class.forName("io.delta.tables.DeltaTable")
        return True
    except Exception:  # py4j raises Py4JJavaError, a missing gateway AttributeError
        return False


#: Above this many rows, or :data:`LOCAL_BYTES` of Arrow data, driver-side rows are stored
#: as a Parquet file instead of a local relation (:func:`arrow_frame`).
LOCAL_ROWS = 10_000
LOCAL_BYTES = 4 << 20


def local_frame(spark: SparkSession, rows: Sequence[Sequence[object]], schema: StructType | str) -> DataFrame:
    """A DataFrame of driver-side rows (file lists, lookup tables), as :func:`arrow_frame`
    makes it."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType, _parse_datatype_string

    struct = schema if isinstance(schema, StructType) else _parse_datatype_string(schema)
    assert isinstance(struct, StructType)
    arrow_schema = to_arrow_schema(struct)
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in struct.fields]
    table = pa.Table.from_arrays(
        [pa.array(list(col), type=field.type) for col, field in zip(columns, arrow_schema, strict=True)],
        schema=arrow_schema)
    return arrow_frame(spark, [table], struct)


def arrow_frame(spark: SparkSession, chunks: Iterable[pa.Table], struct: StructType) -> DataFrame:
    """A DataFrame of driver-side Arrow rows, given as tables of ``struct``'s columns in
    turn (only one chunk is held at a time).

    Up to :data:`LOCAL_ROWS` rows and :data:`LOCAL_BYTES` in one chunk: a local relation
    built through Arrow. The plan holds the rows themselves (``LocalTableScan``), so reading
    or broadcasting them starts no Python worker and no Spark job, where
    ``createDataFrame`` over a Python list is a Python RDD (about a second per use on a cold
    JVM).

    More rows (the file list of a 100,000-partition cluster, its checkpoint files' text) are
    written by pyarrow to a Parquet file in a directory of this process under the run's
    scratch root (:func:`scratch_root`: on a cluster, a folder the executors see), and read
    from there: every plan that filters or projects a local relation keeps its own copy of
    the rows as boxed JVM objects (Catalyst's ``ConvertToLocalRelation``), which was ~1.3 GB
    of a 2 GB heap for 300,000 files.

    Either way in one partition where :func:`one_partition` says so (a small input's
    parsing, :func:`small_input_plans`; the work after the scan, :func:`replica_sized`).
    """
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(struct)
    tables = iter(chunks)
    first = next(tables, None)
    second = next(tables, None) if first is not None else None
    if first is None:
        return one_partition(spark.createDataFrame(arrow_schema.empty_table(), struct))
    if second is None and first.num_rows <= LOCAL_ROWS and first.nbytes <= LOCAL_BYTES:
        return one_partition(spark.createDataFrame(first.cast(arrow_schema), struct))
    path = os.path.join(_spill_dir(), f"{uuid.uuid4().hex}.parquet")
    with pq.ParquetWriter(path, arrow_schema) as writer:
        for table in (first, *([second] if second is not None else []), *tables):
            writer.write_table(table.cast(arrow_schema))
    return one_partition(spark.read.schema(struct).parquet(path))


_SCRATCH: contextvars.ContextVar[str | None] = contextvars.ContextVar("auditor_scratch", default=None)


@contextlib.contextmanager
def scratch_root(path: str | None) -> Iterator[None]:
    """Files the driver writes for executors to read go under ``path`` inside the block
    (None: the system's temporary folder, which only a local-mode run may use)."""
    token = _SCRATCH.set(path)
    try:
        yield
    finally:
        _SCRATCH.reset(token)


def _spill_dir() -> str:
    """This process's directory for :func:`local_frame`'s Parquet files under the current
    scratch root, removed at exit."""
    return _spill_dir_under(_SCRATCH.get())


@functools.cache
def _spill_dir_under(root: str | None) -> str:
    # a work dir (auditor.workdir): removed at exit, or by the next audit's sweep when this
    # process is killed
    from auditor.workdir import new_work_dir

    return new_work_dir(root)


def is_local_master(spark: SparkSession) -> bool:
    """True when the driver and its executors share one JVM (``local``, ``local[N]``)."""
    return spark.sparkContext.master.startswith("local")


def drop_pending_jvm_call() -> None:
    """Close this thread's connection to the JVM, so its next call opens a new one.

    For exceptions raised by a signal handler (SIGTERM's :class:`auditor.errors.Stopped`):
    such an exception can leave a JVM call halfway, its answer unread, and py4j keeps one
    connection per thread, so the thread's next call (a ``finally`` clause, the FAILED row's
    work) would read the abandoned call's answer instead of its own. Harmless when no
    call is under way.
    """
    pyspark = sys.modules.get("pyspark")  # not imported yet: no JVM, no call under way
    if pyspark is None:
        return
    gateway = pyspark.SparkContext._gateway
    client = getattr(gateway, "_gateway_client", None) if gateway is not None else None
    current = getattr(client, "get_thread_connection", None)
    connection = current() if current is not None else None
    if connection is not None:
        connection.close(reset=True)


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
#: The session setting of the one-partition shuffle rule (``auditor.localjar``: a shuffle
#: into one partition becomes a coalesce into one; inert without the auditor's jar). On for
#: a small input's whole audit and for the work after the scan when it runs in one
#: partition (:func:`replica_sized`); off wherever text is parsed at scale (:func:`parsing`).
ONE_PARTITION_SHUFFLES = "spark.auditor.onePartitionShuffles"
#: What :func:`replica_sized` adds when the work after the scan runs in one partition.
ONE_PARTITION_CONF: dict[str, str | None] = {ONE_PARTITION_SHUFFLES: "true"}
#: Replicas per shuffle partition after the scan.
REPLICAS_PER_PARTITION = 50_000
#: Up to this many replicas, the work after the scan runs in one partition (:func:`one_partition`).
ONE_PARTITION_REPLICAS = 200_000


def replica_partitions(replicas: int) -> int:
    """Partitions for tables the size of ``replicas``: one per :data:`REPLICAS_PER_PARTITION`."""
    return max(1, -(-replicas // REPLICAS_PER_PARTITION))


_ONE_PARTITION: contextvars.ContextVar[bool] = contextvars.ContextVar("auditor_one_partition", default=False)

#: The settings :func:`replica_sized` replaced, for :func:`parsing` to put back.
_PARSE_CONF: contextvars.ContextVar[dict[str, str | None] | None] = contextvars.ContextVar(
    "auditor_parse_conf", default=None)


@contextlib.contextmanager
def session_conf(spark: SparkSession, wanted: dict[str, str | None]) -> Iterator[dict[str, str | None]]:
    """Run the block with the session settings ``wanted`` (None: unset), then restore them.
    Yields the settings it replaced."""
    saved = {k: spark.conf.get(k, None) for k in wanted}
    for key, value in wanted.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)
    try:
        yield saved
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


@contextlib.contextmanager
def replica_sized(spark: SparkSession, replicas: int) -> Iterator[None]:
    """Run the block with :data:`REPLICA_SIZED_CONF` (but the session's own code generation
    above :data:`ONE_PARTITION_REPLICAS` replicas) and one shuffle partition per
    :data:`REPLICAS_PER_PARTITION` of ``replicas`` (at least one, at most the session's own).
    Text read inside the block (:func:`parsing`) keeps the settings it had before."""
    current = int(spark.conf.get("spark.sql.shuffle.partitions") or 200)
    partitions = min(current, replica_partitions(replicas))
    # Above ONE_PARTITION_REPLICAS the tables are as large as log-sized ones (LOG_SIZED_ROWS)
    # and keep the session's code generation: interpreting every expression over 300,000
    # replicas cost more than compiling (the 100,000-partition audit 201 -> 187 s, its first
    # engine cut 12.7 -> 6.5 s).
    conf = {**REPLICA_SIZED_CONF, **ONE_PARTITION_CONF} if replicas <= ONE_PARTITION_REPLICAS else {
        k: v for k, v in REPLICA_SIZED_CONF.items() if k not in CODEGEN_CONF}
    with session_conf(spark, {**conf, "spark.sql.shuffle.partitions": str(partitions)}) as saved:
        token = _PARSE_CONF.set(saved)
        one = _ONE_PARTITION.set(replicas <= ONE_PARTITION_REPLICAS)
        try:
            yield
        finally:
            _ONE_PARTITION.reset(one)
            _PARSE_CONF.reset(token)


@contextlib.contextmanager
def small_input_plans(on: bool = True) -> Iterator[None]:
    """Inside the block (``on``), :func:`one_partition` puts frames in one partition, and
    with it every driver-side table (:func:`arrow_frame`): a small input's parsing
    (``auditor.run.compute_run``) joins its file lists and small files' lines without
    shuffling both sides of every join. Measured 2026-11-27 on the demo's snapshot: the scan
    and snapshot cut points' jobs 41 and 42 stages -> 15 and 12, CLI audits ~0.7-1.2 s
    faster (one-partition 20.3-21.6 s against 21.4-22.8 s, alternating runs); tables
    identical."""
    token = _ONE_PARTITION.set(on)
    try:
        yield
    finally:
        _ONE_PARTITION.reset(token)


def one_partition(df: DataFrame) -> DataFrame:
    """``df`` in one partition when the work after the scan is small enough
    (:func:`replica_sized`, up to :data:`ONE_PARTITION_REPLICAS` replicas) or a small
    input is parsed (:func:`small_input_plans`), else as it is.

    Spark plans a join or an aggregate over frames that are each one partition (coalesced to
    one: ``SinglePartition``) with no exchange: a query over a few thousand rows is then one
    stage, not one per join (each stage costs tens of milliseconds to schedule, whatever it
    holds)."""
    return df.coalesce(1) if _ONE_PARTITION.get() else df


def union_all(frames: Sequence[DataFrame]) -> DataFrame:
    """The rows of ``frames`` (matched by column name), in one partition when
    :func:`one_partition` says so: a union of one-partition frames is not one partition to
    Spark's planner, so every join after it would shuffle again."""
    return one_partition(union_tree(frames, lambda a, b: a.unionByName(b)))


def union_tree(frames: Sequence[DataFrame], union: Callable[[DataFrame, DataFrame], DataFrame]) -> DataFrame:
    """``frames`` (at least one) combined by ``union`` pairwise, level by level, in their
    order: a balanced tree, not a chain.

    Spark analyses every new DataFrame as a whole, and some of its rules
    (``DeduplicateRelations``) walk the whole plan each time. Unioning n frames left to
    right analyses plans of 2, 3, ... n frames; a tree analyses each frame's plan about
    log2(n) times. The rows are the same, in the same order (the optimizer flattens nested
    unions: ``CombineUnions``). Measured 2026-11-28, warm one-partition audits alternating
    in one process: the py4j time of their union calls 1.19-1.46 s as chains, 1.04-1.52 s
    (median 1.10 s) as trees."""
    level = list(frames)
    while len(level) > 1:
        paired = [union(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        level = [*paired, level[-1]] if len(level) % 2 else paired
    return level[0]


#: A stored frame with more rows than this is log-sized (drilled batches of many diverged
#: or irregular replicas): the work over it runs with :func:`spread_out`.
LOG_SIZED_ROWS = 200_000


@contextlib.contextmanager
def spread_out(spark: SparkSession, rows: int) -> Iterator[None]:
    """Run the block with the settings the session had before :func:`replica_sized` (its
    shuffle partitions, code generation: as :func:`parsing`) when it reads ``rows``, more
    than :data:`LOG_SIZED_ROWS`; frames read back inside it are left as they are stored,
    not put in one partition. Else (and outside :func:`replica_sized`) the block runs as
    it is.

    The drill-down's batches are usually a few per differing window, but a wide divergence
    (or many irregular logs) makes them log-sized: 800,000 batches at 10M lines with one
    partition in 20 diverged, which one interpreted task took 11.5 s to build and the cut
    after them 8.3 s to join (4.4 s and 7.0 s spread out, measured in-process)."""
    if rows <= LOG_SIZED_ROWS:
        yield
        return
    with parsing(spark):
        yield


@contextlib.contextmanager
def parsing(spark: SparkSession) -> Iterator[None]:
    """Run a block that parses text (the drill-down re-reads dump files) with the settings
    the session had before :func:`replica_sized`: code generation on."""
    before = _PARSE_CONF.get()
    if before is None:
        yield
        return
    one = _ONE_PARTITION.set(False)
    try:
        with session_conf(spark, before):
            yield
    finally:
        _ONE_PARTITION.reset(one)
