"""A class-data-sharing archive of the classes an audit loads, to start Spark's JVM faster.

An audit's JVM loads and verifies about 26,000 classes (Spark, Catalyst, Hadoop, Parquet)
before and while it plans; on a small input that is a large part of the run. The JVM can
map an archive of those classes, already parsed and verified, instead (JDK 13+ dynamic
class-data sharing). ``auditor warm-up`` (run by ``scripts/setup.sh``) builds the archive
once per machine by auditing a tiny simulated snapshot with
``-XX:ArchiveClassesAtExit``; :func:`auditor.spark.build_session` then starts local-mode
JVMs with ``-XX:SharedArchiveFile``.

Safe by construction: the JVM checks the archive against its own version and classpath
and, when they differ or the file is missing, starts without it (its warning is turned
off: it would only say the archive was not used). ``AUDITOR_CLASS_ARCHIVE=0`` disables
the archive; ``AUDITOR_CLASS_ARCHIVE=/path`` moves it. Warm-up removes other builds' archives
from the cache folder once they are :data:`STALE_ARCHIVE_DAYS` old (:func:`prune_stale`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

ENV = "AUDITOR_CLASS_ARCHIVE"
#: JVM log settings that keep class-data-sharing messages off the console.
QUIET = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


def archive_path() -> Path | None:
    """Where the archive of this pyspark and this Java lives; None when disabled."""
    setting = os.environ.get(ENV, "")
    if setting in ("0", "off", "false"):
        return None
    if setting:
        return Path(setting)
    # Keyed by what the JVM checks: the Java build and the jars (spark_build) ...
    from auditor import localjar

    # ... and the auditor's own jar, first on the class path when it is built
    # (auditor.localjar): an archive recorded without it would not match, nor one recorded
    # with an older build of it.
    fs_jar = localjar.built_jar()
    fs_stamp = f"{fs_jar}|{fs_jar.stat().st_mtime_ns}" if fs_jar is not None else "-"
    key = hashlib.sha256(f"{spark_build()}|{fs_stamp}".encode()).hexdigest()[:16]
    return cache_dir() / f"spark-classes-{key}.jsa"


def spark_jars() -> Path:
    """The folder of the jars pyspark's JVM loads."""
    import pyspark

    return Path(pyspark.__file__).with_name("jars")


def spark_build() -> str:
    """What names the JVM pyspark starts: pyspark's version, its jars folder and that
    folder's modification time (a reinstall changes it), and the java binary."""
    import pyspark

    jars = spark_jars()
    stamp = jars.stat().st_mtime_ns if jars.is_dir() else 0
    return f"{pyspark.__version__}|{jars}|{stamp}|{_java_executable()}"


def cache_dir() -> Path:
    """Where the auditor keeps what ``auditor warm-up`` builds (~/.cache/log-auditor)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "log-auditor"


def _java_executable() -> str:
    """The java binary pyspark will start (``JAVA_HOME`` first, as spark-class does)."""
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java") or "java"
    return os.path.realpath(found)


#: Class archives of other builds (another pyspark, Java or jar) that ``auditor warm-up``
#: removes from the cache folder once their file is this old: each is ~160 MB, and every
#: upgrade (or change of the auditor's jar) leaves the previous one behind. Removing one
#: never breaks another installation's audits: a JVM whose archive is missing starts
#: without it, only slower, until that installation's own warm-up records it again. (The
#: jars, a few KB each, are kept: a session that named a jar needs its classes.)
STALE_ARCHIVE_DAYS = 7


def prune_stale(keep: Path | None, now: float) -> list[Path]:
    """Remove the archives (and half-written ones) in :func:`cache_dir` other than ``keep``
    whose files were last written more than :data:`STALE_ARCHIVE_DAYS` before ``now`` (a
    Unix time); returns what was removed."""
    removed = []
    limit = now - STALE_ARCHIVE_DAYS * 86400
    folder = cache_dir()
    if not folder.is_dir():
        return removed
    for path in sorted(folder.glob("spark-classes-*.jsa*")):
        if keep is not None and path == keep:
            continue
        try:
            if path.is_file() and path.stat().st_mtime < limit:
                path.unlink()
                removed.append(path)
        except FileNotFoundError:  # removed by another warm-up meanwhile
            pass
    return removed


def use_options() -> list[str]:
    """JVM options that map the archive when it exists (none otherwise)."""
    path = archive_path()
    if path is None or not path.is_file():
        return []
    return [f"-XX:SharedArchiveFile={path}", *QUIET]


def build(progress: Callable[[str], None] = print) -> Path | None:
    """Build the archive: audit a tiny simulated snapshot in a JVM that writes the classes
    it loaded when it exits. Returns the archive's path (None when disabled).

    Written to a temporary name and renamed when the JVM has exited, so a reader never
    maps a half-written archive and two concurrent builds cannot mix.
    """
    path = archive_path()
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    from pyspark import SparkContext

    from auditor.config import Config
    from auditor.run import run_audit
    from auditor.simulator import simulate
    from auditor.spark import build_session

    if SparkContext._active_spark_context is not None:  # noqa: SLF001 - the JVM must be ours to stop
        raise RuntimeError("warm-up needs a fresh process: a Spark session is already running")
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    with tempfile.TemporaryDirectory(prefix="auditor-warm-up-") as tmp:
        simulate(os.path.join(tmp, "snapshot"), topics=1, partitions=2, batches=20, faults="unclean-election",
                 seed=1, kraft_controllers=3)
        spark = build_session(quiet=True, small_input=True,
                              extra_java_options=[f"-XX:ArchiveClassesAtExit={partial}", *QUIET])
        progress("auditing a tiny simulated snapshot to record the classes Spark loads")
        run_audit(spark, os.path.join(tmp, "snapshot"), os.path.join(tmp, "out"),
                  Config(cluster="warm-up", fail_on="never"))
        gateway = SparkContext._gateway  # noqa: SLF001 - the JVM writes the archive as it exits
        spark.stop()
        proc = getattr(gateway, "proc", None)
        gateway.shutdown()
        if proc is not None:
            if proc.stdin is not None:
                proc.stdin.close()  # spark-submit's JVM exits when its stdin closes
            proc.wait(timeout=300)
    if not partial.is_file():
        raise RuntimeError(f"the JVM did not write {partial}")
    os.replace(partial, path)
    return path
