"""The JVM a local session starts: where its class-data-sharing archive lives, and the
options that use it.

An audit's JVM loads and verifies about 26,000 classes (Spark, Catalyst, Hadoop, Parquet)
before and while it plans; on a small input that is a large part of the run. The JVM can
map an archive of those classes, already parsed and verified, instead (JDK 13+ dynamic
class-data sharing). ``auditor warm-up`` (:mod:`auditor.warmup`, run by
``scripts/setup.sh``) records the archive once per machine; :func:`auditor.spark.build_session`
then starts local-mode JVMs with ``-XX:SharedArchiveFile``.

Safe by construction: the JVM checks the archive against its own version and class path
and, when they differ or the file is missing, starts without it (its warning is turned
off: it would only say the archive was not used). ``AUDITOR_CLASS_ARCHIVE=0`` disables
the archive; ``AUDITOR_CLASS_ARCHIVE=/path`` moves it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

ENV = "AUDITOR_CLASS_ARCHIVE"
#: JVM log settings that keep class-data-sharing messages off the console.
QUIET = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
#: Class archives of other builds (another pyspark or Java) that ``auditor warm-up``
#: removes from the cache folder once their file is this old: each is ~160 MB, and every
#: upgrade leaves the previous one behind. Removing one never breaks another installation's
#: audits: a JVM whose archive is missing starts without it, only slower.
STALE_ARCHIVE_DAYS = 7


def cache_dir() -> Path:
    """Where the auditor keeps what ``auditor warm-up`` builds (~/.cache/log-auditor)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "log-auditor"


def java_executable() -> str:
    """The java binary pyspark will start (``JAVA_HOME`` first, as spark-class does)."""
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java") or "java"
    return os.path.realpath(found)


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
    return f"{pyspark.__version__}|{jars}|{stamp}|{java_executable()}"


def archive_path() -> Path | None:
    """Where the archive of this pyspark and this Java lives; None when disabled."""
    setting = os.environ.get(ENV, "")
    if setting in ("0", "off", "false"):
        return None
    if setting:
        return Path(setting)
    key = hashlib.sha256(spark_build().encode()).hexdigest()[:16]
    return cache_dir() / f"spark-classes-{key}.jsa"


def use_options() -> list[str]:
    """JVM options that map the archive when it exists (none otherwise)."""
    path = archive_path()
    if path is None or not path.is_file():
        return []
    return [f"-XX:SharedArchiveFile={path}", *QUIET]


def prune_stale(keep: Path | None, now: float) -> list[Path]:
    """Remove the archives (and half-written ones) in :func:`cache_dir` other than ``keep``
    whose files were last written more than :data:`STALE_ARCHIVE_DAYS` before ``now`` (a
    Unix time); returns what was removed."""
    removed: list[Path] = []
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
