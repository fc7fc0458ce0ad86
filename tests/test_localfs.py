"""Hadoop's local file system without a child process per permission change
(auditor.localfs): what a session gets, and that it sets the modes Hadoop's own sets."""

from __future__ import annotations

import os
import stat
import zipfile
from pathlib import Path

import pytest

from auditor import localfs


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_settings_name_the_jar_first_and_keep_the_callers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jar = tmp_path / "fs.jar"
    monkeypatch.setattr(localfs, "jar_path", lambda: jar)
    assert localfs.session_conf({}) == {}  # not built: Hadoop's own file system
    jar.write_bytes(b"PK")
    assert localfs.session_conf({}) == {localfs.CLASS_PATH_KEY: str(jar), localfs.IMPL_KEY: localfs.CLASS}
    theirs = {localfs.CLASS_PATH_KEY: "/opt/a.jar:/opt/b.jar"}
    assert localfs.session_conf(theirs)[localfs.CLASS_PATH_KEY] == f"{jar}{os.pathsep}/opt/a.jar:/opt/b.jar"
    # a caller's own file system for file: is kept, and so is their class path
    assert localfs.session_conf({localfs.IMPL_KEY: "org.example.FS"}) == {}


def test_the_setting_turns_it_off_and_the_jar_is_keyed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(localfs.ENV, raising=False)
    path = localfs.jar_path()
    assert path is not None and path.parent == tmp_path / "log-auditor" and path.name.startswith("local-fs-")
    assert localfs.jar_path() == path and localfs.built_jar() is None
    monkeypatch.setenv(localfs.ENV, "0")
    assert localfs.jar_path() is None and localfs.session_conf({}) == {}


@pytest.mark.skipif(localfs._javac() is None, reason="no Java compiler on this machine")
def test_build_writes_a_jar_with_the_class(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(localfs.ENV, raising=False)
    jar = localfs.build()
    assert jar is not None and jar == localfs.built_jar()
    with zipfile.ZipFile(jar) as archive:
        names = set(archive.namelist())
    assert {"auditor/hadoop/NoForkLocalFileSystem.class", "auditor/hadoop/NoForkLocalFileSystem$Raw.class"} <= names
    assert not list(jar.parent.glob("*.partial"))


@pytest.mark.spark
def test_a_session_started_here_writes_through_it_with_hadoops_modes(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The test session is started like an audit's: with the jar built (scripts/setup.sh
    builds it when the machine has javac) it writes through the class, and every file and
    folder of a Spark write gets the mode Hadoop's own gives (0644, 0755 under its 022
    umask); any mode is set exactly, bit by bit."""
    if localfs.built_jar() is None:
        if localfs._javac() is not None and localfs.jar_path() is not None:
            pytest.fail("this machine has javac but the jar is not built: run `auditor warm-up`")
        pytest.skip("the jar is not built (no javac, or AUDITOR_LOCAL_FS=0)")
    jvm = spark._jvm
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), spark._jsc.hadoopConfiguration())
    assert fs.getClass().getName() == localfs.CLASS
    out = tmp_path / "written"
    spark.range(10).selectExpr("id", "id * 2 AS twice").repartition(2).write.partitionBy("id").parquet(str(out))
    files = [p for p in out.rglob("*") if p.is_file()]
    folders = [out, *(p for p in out.rglob("*") if p.is_dir())]
    assert len(files) > 10 and len(folders) > 10
    assert {_mode(p) for p in files} == {0o644} and {_mode(p) for p in folders} == {0o755}
    target = tmp_path / "one"
    target.write_text("x")
    for mode in ("0640", "0751", "0007", "0400", "0777", "0000"):
        fs.setPermission(jvm.org.apache.hadoop.fs.Path(target.as_uri()), jvm.org.apache.hadoop.fs.permission.FsPermission(mode))
        assert _mode(target) == int(mode, 8), mode
