"""Work dirs (auditor.workdir): a dir whose process ended without removing it (SIGKILL) is
removed by the next audit's, and only such a dir: never a live process's (another's or
this one's), another host's, one kept for inspection, a fresh one without an owner file, or
anything not named as a work dir."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from auditor import workdir

HOLDER = """
import sys, time
from auditor.workdir import new_work_dir
print(new_work_dir(sys.argv[1]), flush=True)
time.sleep(600)
"""


def _holder(parent: Path, **env: str) -> tuple[subprocess.Popen[str], Path]:
    """Another process that made a work dir under ``parent`` and lives on."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(parent)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, **env}, cwd=Path(__file__).parent.parent)
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)


def test_a_killed_processs_work_dir_is_swept_and_a_live_ones_is_not(tmp_path: Path) -> None:
    live, live_dir = _holder(tmp_path)
    dead, dead_dir = _holder(tmp_path)
    try:
        (dead_dir / "scan").mkdir()
        (dead_dir / "scan" / "part-0.parquet").write_bytes(b"x" * 100)
        _kill(dead)
        assert dead_dir.is_dir()  # nothing removed it
        mine = workdir.new_work_dir(str(tmp_path))  # sweeps first
        assert not dead_dir.exists()
        assert live_dir.is_dir() and Path(mine).is_dir()
        assert workdir.sweep(str(tmp_path)) == []  # this process's own dir and the live one stay
        assert live_dir.is_dir() and Path(mine).is_dir()
        _kill(live)
        assert workdir.sweep(str(tmp_path)) == [str(live_dir)]
        workdir.remove_work_dir(mine)
        assert not Path(mine).exists() and mine not in workdir._held
        assert list(tmp_path.iterdir()) == []
    finally:
        for proc in (live, dead):
            if proc.poll() is None:
                _kill(proc)


def test_kept_unowned_and_foreign_dirs_are_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept_proc, kept = _holder(tmp_path, **{workdir.KEEP_ENV: "1"})
    _kill(kept_proc)
    assert (kept / workdir.KEEP_FILE).exists() and not (kept / workdir.OWNER_FILE).exists()
    fresh = tmp_path / f"{workdir.PREFIX}fresh"  # made an instant ago: no owner file yet
    fresh.mkdir()
    old = tmp_path / f"{workdir.PREFIX}old"  # left by a version without owner files, two days ago
    (old / "scan").mkdir(parents=True)
    day_ago = time.time() - 2 * 24 * 3600
    os.utime(old, (day_ago, day_ago))
    elsewhere = tmp_path / f"{workdir.PREFIX}elsewhere"  # another host's, on a shared mount
    elsewhere.mkdir()
    (elsewhere / workdir.OWNER_FILE).write_text("pid 1 on another-host.example\n")  # unlocked here
    foreign = tmp_path / "spark-1234"  # not a work dir, however old
    foreign.mkdir()
    os.utime(foreign, (day_ago, day_ago))
    assert workdir.sweep(str(tmp_path)) == [str(old)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([kept.name, fresh.name, elsewhere.name, foreign.name])
    # a kept dir outlives the run that made it, whatever removes that run's dirs
    monkeypatch.setenv(workdir.KEEP_ENV, "1")
    mine = workdir.new_work_dir(str(tmp_path))
    monkeypatch.delenv(workdir.KEEP_ENV)
    workdir.remove_work_dir(mine)
    assert (Path(mine) / workdir.KEEP_FILE).exists()


def test_a_local_jvm_keeps_its_temporary_files_in_a_work_dir_unless_told_where(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``auditor.spark._own_temp_dir``: Spark's local dir and the JVM's temporary folder go
    in a work dir of this process (swept once the process is killed), unless the user chose
    a place for them."""
    from auditor.spark import _own_temp_dir

    for variable in ("SPARK_LOCAL_DIRS", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS"):
        monkeypatch.delenv(variable, raising=False)
    conf_dir = tmp_path.parent / f"{tmp_path.name}-conf"  # an empty Spark conf folder: no defaults file
    conf_dir.mkdir()
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    settings: dict[str, str] = {}
    option = _own_temp_dir(settings, {}, ["-XX:+UseParallelGC"], str(tmp_path))
    made = settings["spark.local.dir"]
    assert option == [f"-Djava.io.tmpdir={made}"]
    assert Path(made).parent == tmp_path and Path(made).name.startswith(workdir.PREFIX)
    assert (Path(made) / workdir.OWNER_FILE).is_file()  # locked by this process: a sweep leaves it
    assert workdir.sweep(str(tmp_path)) == [] and Path(made).is_dir()
    workdir.remove_work_dir(made)
    # the user's choice wins, wherever it was made; nothing is created then
    chosen = [({"spark.local.dir": "/big"}, [], {}),
              ({"spark.driver.extraJavaOptions": "-Djava.io.tmpdir=/big"}, [], {}),
              ({}, ["-Djava.io.tmpdir=/big"], {}),
              ({}, [], {"SPARK_LOCAL_DIRS": "/big"}),
              ({}, [], {"JAVA_TOOL_OPTIONS": "-Xss4m -Djava.io.tmpdir=/big"})]
    for conf, options, env in chosen:
        with monkeypatch.context() as m:
            for key, value in env.items():
                m.setenv(key, value)
            settings = {}
            assert _own_temp_dir(settings, conf, options, str(tmp_path)) == [], (conf, options, env)
            assert settings == {}
    # ... the machine's spark-defaults.conf included (a properties file: "=", ":" or blanks)
    for line in ("spark.local.dir   /data/spark-tmp", "spark.driver.extraJavaOptions=-Xss4m -Djava.io.tmpdir=/big"):
        (conf_dir / "spark-defaults.conf").write_text(f"# the machine's defaults\n{line}\n")
        settings = {}
        assert _own_temp_dir(settings, {}, [], str(tmp_path)) == [], line
        assert settings == {}
    assert list(tmp_path.iterdir()) == []
