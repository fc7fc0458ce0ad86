"""Hadoop's local file system without a child process per permission change.

Every Parquet write Spark makes (the audit's cut points) goes through Hadoop's local file
system. Without Hadoop's native library, which pyspark does not ship, that file system sets
the mode of each directory and file it creates by starting ``chmod`` as a child process:
some 400 process starts per small audit (608 traced over under two), each from a JVM of
several GB, on the thread that plans (job setup) and in the tasks (every output file and
its checksum file). The class in
``auditor/java`` (:data:`CLASS`) is Hadoop's local file system with the mode set through
``java.nio`` instead. Measured 2026-11-26 (ninth session), the demo's snapshot audited in
one process, two sessions per variant, alternating: warm audits 12.1-13.6 s against
13.4-16.9 s, the first audit of a session 24.8-26.0 s against 28.2-30.3 s.

``auditor warm-up`` (run by ``scripts/setup.sh``) compiles it once per machine into a jar
in ~/.cache/log-auditor/ (it needs ``javac``, a JDK's compiler); :func:`auditor.spark.build_session`
then puts the jar on the driver's class path and registers the class for the ``file``
scheme, in a local-mode session it starts itself only (a cluster's executors do not have
the jar; spark-submit's driver JVM is already running). Without the jar, or with
``AUDITOR_LOCAL_FS=0``, sessions use Hadoop's own: the same files, the same modes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

ENV = "AUDITOR_LOCAL_FS"
#: The file system class, registered for the ``file`` scheme.
CLASS = "auditor.hadoop.NoForkLocalFileSystem"
#: Its source, shipped with the package.
SOURCE = Path(__file__).with_name("java") / "auditor" / "hadoop" / "NoForkLocalFileSystem.java"
#: The Spark settings that carry the jar and name the class.
CLASS_PATH_KEY = "spark.driver.extraClassPath"
IMPL_KEY = "spark.hadoop.fs.file.impl"


def jar_path() -> Path | None:
    """Where this source's jar for this pyspark and this Java lives; None when disabled."""
    if os.environ.get(ENV, "") in ("0", "off", "false"):
        return None
    from auditor.classarchive import cache_dir, spark_build

    key = hashlib.sha256(SOURCE.read_bytes() + f"|{spark_build()}".encode())
    return cache_dir() / f"local-fs-{key.hexdigest()[:16]}.jar"


def built_jar() -> Path | None:
    """The jar when it has been built (and is not disabled), else None."""
    path = jar_path()
    return path if path is not None and path.is_file() else None


def session_conf(conf: dict[str, str]) -> dict[str, str]:
    """The settings that make a local session use the class, given the session's other
    settings ``conf``: the jar first on the driver's class path (the class archive is built
    with the same class path), kept with a class path the caller set; nothing when the jar
    is not built or the caller chose a ``file`` file system of their own."""
    jar = built_jar()
    if jar is None or conf.get(IMPL_KEY):
        return {}
    theirs = conf.get(CLASS_PATH_KEY)
    return {CLASS_PATH_KEY: os.pathsep.join([str(jar), *([theirs] if theirs else [])]), IMPL_KEY: CLASS}


def _javac() -> str | None:
    """The Java compiler beside the java that pyspark starts, else the first on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "javac"), os.X_OK):
        return os.path.join(home, "bin", "javac")
    from auditor.classarchive import _java_executable

    beside = os.path.join(os.path.dirname(_java_executable()), "javac")
    return beside if os.access(beside, os.X_OK) else shutil.which("javac")


def build() -> Path | None:
    """Compile the class into its jar (written under a temporary name and renamed, so a
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

    hadoop = sorted(spark_jars().glob("hadoop-client-api-*.jar"))
    if not hadoop:
        raise RuntimeError(f"no hadoop-client-api jar under {spark_jars()}")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="auditor-local-fs-") as tmp:
        done = subprocess.run([javac, "--release", "17", "-nowarn", "-cp", os.pathsep.join(map(str, hadoop)),
                               "-d", tmp, str(SOURCE)], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"javac failed: {(done.stderr or done.stdout).strip()[-1000:]}")
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            for file in sorted(Path(tmp).rglob("*.class")):
                jar.write(file, file.relative_to(tmp).as_posix())
        os.replace(partial, path)
    return path
