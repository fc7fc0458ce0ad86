"""The class-data-sharing archive: used when present, ignored when absent, off on request,
and never able to stop a JVM from starting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from auditor import jvm


def test_archive_options_follow_the_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "classes.jsa"
    monkeypatch.setenv(jvm.ENV, str(archive))
    assert jvm.use_options() == []  # not built yet: the JVM starts as usual
    archive.write_bytes(b"x")
    assert jvm.use_options() == [f"-XX:SharedArchiveFile={archive}", *jvm.QUIET]
    monkeypatch.setenv(jvm.ENV, "0")
    assert jvm.archive_path() is None and jvm.use_options() == []


def test_default_archive_is_per_user_cache_and_keyed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(jvm.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = jvm.archive_path()
    assert path is not None and path.parent == tmp_path / "log-auditor"
    assert path.name.startswith("spark-classes-") and path.suffix == ".jsa"
    assert jvm.archive_path() == path  # stable for one installation


def test_warm_up_removes_only_other_builds_old_archives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another build's archive written over STALE_ARCHIVE_DAYS ago goes (and a half-written
    one); this build's archive, recent ones and the jars stay."""
    monkeypatch.delenv(jvm.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    now = 2_000_000_000.0
    old = now - (jvm.STALE_ARCHIVE_DAYS + 1) * 86400
    recent = now - (jvm.STALE_ARCHIVE_DAYS - 1) * 86400
    folder = jvm.cache_dir()
    folder.mkdir(parents=True)
    files = {name: folder / name for name in (
        "spark-classes-current.jsa", "spark-classes-old.jsa", "spark-classes-recent.jsa",
        "spark-classes-old.jsa.123.partial", "auditor-classes-old.jar", "local-fs-old.jar")}
    for name, path in files.items():
        path.write_bytes(b"x")
        stamp = recent if "recent" in name else old
        os.utime(path, (stamp, stamp))
    removed = jvm.prune_stale(files["spark-classes-current.jsa"], now)
    assert sorted(p.name for p in removed) == ["spark-classes-old.jsa", "spark-classes-old.jsa.123.partial"]
    assert sorted(p.name for p in folder.iterdir()) == [
        "auditor-classes-old.jar", "local-fs-old.jar", "spark-classes-current.jsa", "spark-classes-recent.jsa"]
    # what kept it: the archive named as this build's
    assert [p.name for p in jvm.prune_stale(None, now)] == ["spark-classes-current.jsa"]


def _collectors(spark: object) -> set[str]:
    """Names of the garbage collectors of the session's (driver) JVM."""
    beans = spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()  # type: ignore[attr-defined]
    return {beans.get(i).getName() for i in range(beans.size())}


@pytest.mark.spark
def test_a_session_started_here_runs_the_throughput_collector(spark: object) -> None:
    assert _collectors(spark) == {"PS Scavenge", "PS MarkSweep"}


def test_a_collector_chosen_elsewhere_is_not_doubled() -> None:
    """The caller's options or the JVM's option variables may name a collector; a JVM
    given two refuses to start ("Multiple garbage collectors selected")."""
    from auditor.spark import collector_options

    assert collector_options([], {}) == ["-XX:+UseParallelGC"]
    assert collector_options(["-Xss4m", "-XX:-UseGCOverheadLimit"], {"PATH": "/bin"}) == ["-XX:+UseParallelGC"]
    assert collector_options(["-XX:+UseZGC"], {}) == []
    for variable in ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS"):
        assert collector_options([], {variable: "-Xmx1g -XX:+UseG1GC"}) == [], variable


@pytest.mark.spark
def test_a_broken_archive_does_not_stop_the_jvm(tmp_path: Path) -> None:
    """A stale or corrupt archive (another Spark, a half-copied file) is skipped silently.
    (The same JVM checks that a collector the caller chose replaces ours: two would not start,
    and that a small input's JIT setting reaches the JVM.)"""
    bogus = tmp_path / "broken.jsa"
    bogus.write_bytes(os.urandom(4096))
    code = ("from auditor.spark import build_session\n"
            "from tests.test_jvm import _collectors\n"
            "spark = build_session('local[1]', quiet=True, small_input=True, conf={'spark.ui.enabled': 'false'},\n"
            "                      extra_java_options=['-XX:+UseSerialGC'])\n"
            "print('count', spark.range(5).count(), sorted(_collectors(spark)))\n"
            "print('args', spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, jvm.ENV: str(bogus)}, cwd=Path(__file__).parent.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "count 5 ['Copy', 'MarkSweepCompact']" in done.stdout
    # a small input's JVM compiles later than HotSpot's default (auditor.spark.SMALL_INPUT_JIT)
    assert "-XX:CompileThresholdScaling=2" in done.stdout
    assert "shared archive" not in (done.stdout + done.stderr).lower()
