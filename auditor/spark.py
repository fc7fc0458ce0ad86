"""The one place where a SparkSession is built."""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from auditor.jvm import use_options as archive_options
from auditor.workdir import new_work_dir

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pyspark.sql import SparkSession

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
#: Measured 2026-11-26, CLI start to exit, alternating runs: the
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
        building = any(o.startswith("-XX:ArchiveClassesAtExit") for o in extra_java_options)
        java_options += ([] if building else archive_options()) + list(extra_java_options)
        java_options += collector_options(extra_java_options, os.environ)
        if local:
            java_options += _own_temp_dir(settings, conf or {}, java_options, work_parent)
    if java_options:
        # (Local mode: the executors live in the driver's JVM. A cluster keeps its own
        # executor options.)
        settings["spark.driver.extraJavaOptions"] = " ".join(java_options)
    settings.update(conf or {})
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
