"""The auditor's own Java classes, built into one jar for the local sessions it starts.

Three classes (sources in ``auditor/java``), each measured to matter for small audits:

- :data:`FS_CLASS`: Hadoop's local file system without a child process per permission
  change. Every Parquet write Spark makes goes through Hadoop's local file system. Without
  Hadoop's native library, which pyspark does not ship, that file system sets the mode of
  each directory and file it creates by starting ``chmod`` as a child process: some 400
  process starts per small audit (608 traced over under two), each from a JVM of several
  GB, on the thread that plans (job setup) and in the tasks. The class sets the mode through
  ``java.nio`` instead. Measured 2026-11-26 (ninth session), the demo's snapshot audited in
  one process, two sessions per variant, alternating: warm audits 12.1-13.6 s against
  13.4-16.9 s, the first audit of a session 24.8-26.0 s against 28.2-30.3 s.
- :data:`EXTENSION`: a planner rule (a session extension) that, while the session setting
  :data:`auditor.spark.ONE_PARTITION_SHUFFLES` is "true" (a small input's audit,
  ``auditor.run.SMALL_INPUT_CONF``, and the replica-sized work of
  ``auditor.spark.replica_sized`` in one partition), replaces each shuffle the planner adds
  to bring rows into one partition by a coalesce of its child into one partition: no
  stage boundary, no shuffle files. Spark plans a join of two one-partition frames without
  a shuffle only while its size estimate of each side stays small, and estimates multiply
  at every join; a union of one-partition frames is not one partition to it. Measured
  2026-11-27 (eleventh session) on the demo's snapshot, alternating warm audits in one
  process: 142 stages -> 31, 10.5-11.3 s against 11.3-13.1 s; tables identical.
- :data:`SEQS_CLASS`: Scala sequences made in one py4j call per :data:`SEQ_ARITY` elements,
  for the lists of columns PySpark sends to the JVM (``auditor.jvmlookups``).

``auditor warm-up`` (run by ``scripts/setup.sh``) compiles them once per machine into a jar
in ~/.cache/log-auditor/ (it needs ``javac``, a JDK's compiler); :func:`auditor.spark.build_session`
then puts the jar on the driver's class path, registers the file system for the ``file``
scheme and the extension, in a local-mode session it starts itself only (a cluster's
executors do not have the jar; spark-submit's driver JVM is already running). Without the
jar, or with ``AUDITOR_LOCAL_JAR=0`` (the older ``AUDITOR_LOCAL_FS=0`` too), sessions use
Hadoop's own file system and Spark's own plans: the same files, modes and rows.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

ENV = "AUDITOR_LOCAL_JAR"
#: The same switch's older name (it once built the file system alone).
OLD_ENV = "AUDITOR_LOCAL_FS"
#: The file system class, registered for the ``file`` scheme.
FS_CLASS = "auditor.hadoop.NoForkLocalFileSystem"
#: The session extension (``spark.sql.extensions``) with the one-partition shuffle rule.
EXTENSION = "auditor.spark.OnePartitionShuffles"
#: The class that builds short Scala sequences in one call (``of(a, b, ...)``).
SEQS_CLASS = "auditor.spark.Seqs"
#: The most elements its ``of`` methods take.
SEQ_ARITY = 8
#: The sources, shipped with the package.
SOURCE_ROOT = Path(__file__).with_name("java")
SOURCES = (SOURCE_ROOT / "auditor" / "hadoop" / "NoForkLocalFileSystem.java",
           SOURCE_ROOT / "auditor" / "spark" / "OnePartitionShuffles.java",
           SOURCE_ROOT / "auditor" / "spark" / "Seqs.java")
#: The Spark settings that carry the jar and name the classes.
CLASS_PATH_KEY = "spark.driver.extraClassPath"
IMPL_KEY = "spark.hadoop.fs.file.impl"
EXTENSIONS_KEY = "spark.sql.extensions"


def jar_path() -> Path | None:
    """Where the jar of these sources for this pyspark and this Java lives; None when disabled."""
    if any(os.environ.get(name, "") in ("0", "off", "false") for name in (ENV, OLD_ENV)):
        return None
    from auditor.classarchive import cache_dir, spark_build

    key = hashlib.sha256(b"".join(source.read_bytes() for source in SOURCES) + f"|{spark_build()}".encode())
    return cache_dir() / f"auditor-classes-{key.hexdigest()[:16]}.jar"


def built_jar() -> Path | None:
    """The jar when it has been built (and is not disabled), else None."""
    path = jar_path()
    return path if path is not None and path.is_file() else None


def session_conf(conf: dict[str, str]) -> dict[str, str]:
    """The settings that make a local session use the classes, given the session's other
    settings ``conf``: the jar first on the driver's class path (the class archive is built
    with the same class path), kept with a class path the caller set; the file system unless
    the caller chose a ``file`` file system of their own; the extension after the caller's.
    Nothing when the jar is not built."""
    jar = built_jar()
    if jar is None:
        return {}
    theirs = conf.get(CLASS_PATH_KEY)
    settings = {CLASS_PATH_KEY: os.pathsep.join([str(jar), *([theirs] if theirs else [])])}
    if not conf.get(IMPL_KEY):
        settings[IMPL_KEY] = FS_CLASS
    extensions = [e.strip() for e in (conf.get(EXTENSIONS_KEY) or "").split(",") if e.strip()]
    settings[EXTENSIONS_KEY] = ",".join([*extensions, *([] if EXTENSION in extensions else [EXTENSION])])
    return settings


def _javac() -> str | None:
    """The Java compiler beside the java that pyspark starts, else the first on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "javac"), os.X_OK):
        return os.path.join(home, "bin", "javac")
    from auditor.classarchive import _java_executable

    beside = os.path.join(os.path.dirname(_java_executable()), "javac")
    return beside if os.access(beside, os.X_OK) else shutil.which("javac")


def build() -> Path | None:
    """Compile the classes into the jar (written under a temporary name and renamed, so a
    JVM never opens a half-written jar). Returns the jar's path; None when disabled.

    Raises:
        RuntimeError: no Java compiler, or it failed (audits then use Hadoop's own).
    """
    path = jar_path()
    if path is None:
        return None
    javac = _javac()
    if javac is None:
        raise RuntimeError("no Java compiler (javac, from a JDK) was found")
    from auditor.classarchive import spark_jars

    jars = sorted(spark_jars().glob("*.jar"))
    if not any(j.name.startswith("hadoop-client-api-") for j in jars):
        raise RuntimeError(f"no hadoop-client-api jar under {spark_jars()}")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="auditor-classes-") as tmp:
        done = subprocess.run([javac, "--release", "17", "-nowarn", "-cp", os.pathsep.join(map(str, jars)),
                               "-d", tmp, *map(str, SOURCES)], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"javac failed: {(done.stderr or done.stdout).strip()[-1000:]}")
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            for file in sorted(Path(tmp).rglob("*.class")):
                jar.write(file, file.relative_to(tmp).as_posix())
        os.replace(partial, path)
    return path
