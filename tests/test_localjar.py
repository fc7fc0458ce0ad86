"""The auditor's jar (auditor.localjar): what a session gets; Hadoop's local file system
without a child process per permission change sets the modes Hadoop's own sets; the
one-partition shuffle rule removes exactly the shuffles it should and changes no row."""

from __future__ import annotations

import os
import stat
import zipfile
from pathlib import Path

import pytest

from auditor import localjar


def _need_the_jar() -> None:
    """Skip where the jar cannot be built (no javac, or turned off); fail where it could be."""
    if localjar.built_jar() is None:
        if localjar._javac() is not None and localjar.jar_path() is not None:
            pytest.fail("this machine has javac but the jar is not built: run `auditor warm-up`")
        pytest.skip("the jar is not built (no javac, or AUDITOR_LOCAL_JAR=0)")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_settings_name_the_jar_first_and_keep_the_callers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jar = tmp_path / "classes.jar"
    monkeypatch.setattr(localjar, "jar_path", lambda: jar)
    assert localjar.session_conf({}) == {}  # not built: Hadoop's own file system, Spark's own plans
    jar.write_bytes(b"PK")
    assert localjar.session_conf({}) == {localjar.CLASS_PATH_KEY: str(jar), localjar.IMPL_KEY: localjar.FS_CLASS,
                                         localjar.EXTENSIONS_KEY: localjar.EXTENSION}
    theirs = {localjar.CLASS_PATH_KEY: "/opt/a.jar:/opt/b.jar", localjar.EXTENSIONS_KEY: "org.example.Ext"}
    mine = localjar.session_conf(theirs)
    assert mine[localjar.CLASS_PATH_KEY] == f"{jar}{os.pathsep}/opt/a.jar:/opt/b.jar"
    assert mine[localjar.EXTENSIONS_KEY] == f"org.example.Ext,{localjar.EXTENSION}"
    assert localjar.session_conf(mine)[localjar.EXTENSIONS_KEY] == mine[localjar.EXTENSIONS_KEY]  # named once
    # a caller's own file system for file: is kept, and so is their class path
    assert localjar.IMPL_KEY not in localjar.session_conf({localjar.IMPL_KEY: "org.example.FS"})


def test_the_setting_turns_it_off_and_the_jar_is_keyed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(localjar.ENV, raising=False)
    monkeypatch.delenv(localjar.OLD_ENV, raising=False)
    path = localjar.jar_path()
    assert path is not None and path.parent == tmp_path / "log-auditor" and path.name.startswith("auditor-classes-")
    assert localjar.jar_path() == path and localjar.built_jar() is None
    for name in (localjar.ENV, localjar.OLD_ENV):
        monkeypatch.setenv(name, "0")
        assert localjar.jar_path() is None and localjar.session_conf({}) == {}
        monkeypatch.delenv(name)


@pytest.mark.skipif(localjar._javac() is None, reason="no Java compiler on this machine")
def test_build_writes_a_jar_with_the_classes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(localjar.ENV, raising=False)
    monkeypatch.delenv(localjar.OLD_ENV, raising=False)
    jar = localjar.build()
    assert jar is not None and jar == localjar.built_jar()
    with zipfile.ZipFile(jar) as archive:
        names = set(archive.namelist())
    assert {"auditor/hadoop/NoForkLocalFileSystem.class", "auditor/hadoop/NoForkLocalFileSystem$Raw.class",
            "auditor/spark/OnePartitionShuffles.class", "auditor/spark/OnePartitionShuffles$Rewrite.class"} <= names
    assert not list(jar.parent.glob("*.partial"))


@pytest.mark.spark
def test_a_session_started_here_writes_through_it_with_hadoops_modes(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The test session is started like an audit's: with the jar built (scripts/setup.sh
    builds it when the machine has javac) it writes through the class, and every file and
    folder of a Spark write gets the mode Hadoop's own gives (0644, 0755 under its 022
    umask); any mode is set exactly, bit by bit."""
    _need_the_jar()
    jvm = spark._jvm
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), spark._jsc.hadoopConfiguration())
    assert fs.getClass().getName() == localjar.FS_CLASS
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


def _shuffles(df) -> int:  # type: ignore[no-untyped-def]
    plan = df._jdf.queryExecution().executedPlan()
    return plan.toString().count("Exchange hashpartitioning") + plan.toString().count("Exchange SinglePartition")


@pytest.mark.spark
def test_the_rule_turns_one_partition_shuffles_into_coalesces_and_keeps_every_row(spark) -> None:  # type: ignore[no-untyped-def]
    """With one shuffle partition and the setting on, the shuffles the planner adds for a
    join, an aggregate, a window and a union (over sides of one and of several partitions)
    become coalesces: no shuffle left, each side in one partition, the same rows as Spark's
    own plan. A shuffle whose output the plan reuses is kept. Off, nothing changes."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from auditor.spark import ONE_PARTITION_SHUFFLES, session_conf

    _need_the_jar()
    assert localjar.EXTENSION in (spark.conf.get(localjar.EXTENSIONS_KEY, "") or "")
    assert f'"{ONE_PARTITION_SHUFFLES}"' in localjar.SOURCES[1].read_text()  # the key the rule reads
    def frames():  # type: ignore[no-untyped-def]
        """The frames, built anew: a frame keeps the plan it was first planned with."""
        wide = spark.range(0, 400, 1, numPartitions=4).select((F.col("id") % 37).alias("k"), F.col("id").alias("v"))
        one = spark.createDataFrame([(k, f"n{k}") for k in range(0, 37, 3)], "k long, name string").coalesce(1)
        both = wide.unionByName(wide.select("k", (F.col("v") + 1000).alias("v")))
        counted = both.groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("s"))
        joined = counted.join(one, "k", "left").select(
            "k", "n", "s", "name", F.row_number().over(Window.partitionBy("name").orderBy("k")).alias("r"))
        # the same aggregate twice: Spark reuses one shuffle's output for both
        twice = counted.unionByName(counted)
        return joined, twice

    with session_conf(spark, {"spark.sql.shuffle.partitions": "1", ONE_PARTITION_SHUFFLES: "false"}):
        joined, twice = frames()
        want, want_twice = sorted(joined.collect()), sorted(twice.collect())
        assert _shuffles(joined) >= 2 and _shuffles(twice) >= 2
    with session_conf(spark, {"spark.sql.shuffle.partitions": "1", ONE_PARTITION_SHUFFLES: "true"}):
        joined, twice = frames()
        assert _shuffles(joined) == 0
        assert sorted(joined.collect()) == want and len(want) == 37
        assert joined._jdf.queryExecution().executedPlan().execute().getNumPartitions() == 1
        plan = twice._jdf.queryExecution().executedPlan().toString()
        assert "ReusedExchange" in plan and _shuffles(twice) >= 1
        assert sorted(twice.collect()) == want_twice
    with session_conf(spark, {"spark.sql.shuffle.partitions": "2", ONE_PARTITION_SHUFFLES: "true"}):
        joined, _ = frames()
        assert _shuffles(joined) >= 2  # shuffles into two partitions are Spark's
