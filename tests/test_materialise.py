"""Stored cut points: several frames in one job, read back unchanged, by Spark and by pyarrow."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from auditor.materialise import materialise, read_frame_arrow, stored_rows

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.mark.spark
@pytest.mark.parametrize("collected", [True, False], ids=["collected", "written-by-spark"])
@pytest.mark.parametrize("small_rows", [10_000, 1, -1])
def test_frames_of_one_cut_point_come_back_unchanged(spark, tmp_path: Path, monkeypatch, small_rows: int,  # type: ignore[no-untyped-def]
                                                     collected: bool) -> None:
    """Frames come back with their rows, columns and types, nullable; small ones as rows in
    the plan (a local relation), larger ones as a Parquet scan, and either way alike; and
    alike whether the cut point was collected and written by pyarrow or written by Spark."""
    import auditor.materialise
    from auditor.policy import Plan

    plan = Plan(collect=collected, local_rows=small_rows)
    batches = spark.createDataFrame(
        [(T0, "t", 0, 1, 0, 9, None), (T0, "t", 0, 2, 10, 19, 7)],
        "snapshot timestamp, topic string, partition int, replica int, base_offset bigint, last_offset bigint, "
        "crc bigint")
    errors = spark.createDataFrame([("f.txt", 3, "unrecognised line")], "file string, line_number bigint, error string")
    empty = spark.createDataFrame([], "epoch int, start_offset bigint")
    # fields that are never null, nested (a null struct holds them in the other frames' rows)
    nested = spark.range(3).groupBy((F.col("id") % 2).alias("k")).agg(
        F.count(F.lit(1)).alias("n"), F.collect_list(F.struct(F.col("id").alias("a"), F.lit("x").alias("b"))).alias("arr"))
    group = f"materialise-test-{small_rows}-{collected}"
    spark.sparkContext.setJobGroup(group, group)
    stored = materialise({"batches": batches, "errors": errors, "empty": empty, "nested": nested}, str(tmp_path),
                         "cut", plan)
    tracker = spark.sparkContext.statusTracker()
    jobs = tracker.getJobIdsForGroup(group)
    assert len(jobs) == 1  # all the frames in one job
    # collected: one task per core, not one per frame's partition (each task
    # deserialises the whole stage's plan); Spark's write keeps a task per partition
    info = tracker.getJobInfo(jobs[0])
    assert info is not None
    tasks = max(stage.numTasks for stage in map(tracker.getStageInfo, info.stageIds) if stage is not None)
    cores = spark.sparkContext.defaultParallelism
    assert (tasks <= cores) if collected else (tasks > cores), (tasks, cores)
    # which way it went: Spark's output committer leaves its marker file, pyarrow none
    assert (tmp_path / "cut" / "_SUCCESS").exists() is not collected
    for name, df in (("batches", batches), ("errors", errors), ("empty", empty), ("nested", nested)):
        assert stored[name].columns == df.columns
        assert [f.dataType for f in stored[name].schema.fields] == [
            f.dataType for f in auditor.materialise._nullable(df.schema).fields]  # noqa: SLF001
        assert all(f.nullable for f in stored[name].schema.fields)
        assert sorted(stored[name].collect()) == sorted(df.collect())
    for name, rows in (("batches", 2), ("errors", 1)):
        plan = stored[name]._jdf.queryExecution().executedPlan().toString()  # noqa: SLF001
        local = rows <= small_rows
        assert ("LocalTableScan" in plan, "FileScan parquet" in plan) == (local, not local), (name, plan)
    arrow = read_frame_arrow(str(tmp_path), "cut", "batches")
    assert arrow is not None
    assert sorted(arrow.to_pylist(), key=lambda r: r["replica"]) == [
        {"snapshot": T0, "topic": "t", "partition": 0, "replica": 1, "base_offset": 0, "last_offset": 9, "crc": None},
        {"snapshot": T0, "topic": "t", "partition": 0, "replica": 2, "base_offset": 10, "last_offset": 19, "crc": 7}]
    assert read_frame_arrow(str(tmp_path), "cut", "empty") is None
    assert [stored_rows(str(tmp_path), "cut", n) for n in ("batches", "errors", "empty")] == [2, 1, 0]


@pytest.mark.spark
@pytest.mark.parametrize("collected", [True, False], ids=["collected", "written-by-spark"])
def test_a_cut_points_job_has_its_label_as_call_site(spark, tmp_path: Path, monkeypatch,  # type: ignore[no-untyped-def]
                                                      collected: bool) -> None:
    """While a cut point's job runs, both of Spark's call-site properties hold its label
    (so Spark names its stages and RDDs after it instead of walking the driver thread's
    stack at every RDD), and after it they are what they were (unset, or the caller's)."""
    from pyspark.sql.classic.dataframe import DataFrame
    from pyspark.sql.readwriter import DataFrameWriter

    from auditor.policy import Plan

    context = spark.sparkContext
    seen: list[tuple[str | None, str | None]] = []

    def spy(method):  # type: ignore[no-untyped-def]
        def run(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            seen.append((context.getLocalProperty("callSite.short"), context.getLocalProperty("callSite.long")))
            return method(self, *args, **kwargs)
        return run

    monkeypatch.setattr(DataFrame, "toArrow", spy(DataFrame.toArrow))
    monkeypatch.setattr(DataFrameWriter, "parquet", spy(DataFrameWriter.parquet))
    group = f"call-site-{collected}"
    plan = Plan(collect=collected)
    context.setJobGroup(group, group)
    try:
        stored = materialise({"rows": spark.range(5).select((F.col("id") * 2).alias("x"))}, str(tmp_path), "cut-7",
                             plan)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert seen == [("cut-7", "cut-7")]
    assert context.getLocalProperty("callSite.short") is None
    assert context.getLocalProperty("callSite.long") is None
    assert sorted(r.x for r in stored["rows"].collect()) == [0, 2, 4, 6, 8]
    if not collected:
        # (a collect sets the short form to its Python caller itself: only Spark's write shows it)
        tracker = context.statusTracker()
        (job,) = tracker.getJobIdsForGroup(group)
        info = tracker.getJobInfo(job)
        assert info is not None
        names = {stage.name for stage in map(tracker.getStageInfo, info.stageIds) if stage is not None}
        assert names == {"cut-7"}
    context.setLocalProperty("callSite.long", "the caller's")
    try:
        materialise({"more": spark.range(2)}, str(tmp_path), "cut-8", plan)
        assert seen[-1] == ("cut-8", "cut-8")
        assert context.getLocalProperty("callSite.long") == "the caller's"
    finally:
        context.setLocalProperty("callSite.long", None)  # type: ignore[arg-type]


@pytest.mark.spark
def test_log_sized_work_after_the_scan_is_spread_over_the_cores(spark) -> None:  # type: ignore[no-untyped-def]
    """The work after the scan runs with one shuffle partition, frames in one partition and
    no generated code; the spread plan puts back the session's own settings for work over
    more than ``log_sized_rows`` rows, and only for it; above ``one_partition_replicas``
    replicas, the work after the scan keeps the session's code generation."""
    from auditor.engine.cuts import Cuts
    from auditor.policy import Limits, SizePolicy

    conf = spark.conf
    own = {k: conf.get(k) for k in ("spark.sql.shuffle.partitions", "spark.sql.codegen.wholeStage")}
    conf.set("spark.sql.codegen.wholeStage", "true")
    try:
        df = spark.range(0, 100, 1, 2)
        large = SizePolicy(input_bytes=1 << 40, replicas=10)
        plans = large.plans(spark)
        cuts = Cuts(spark, "/unused", large, plans)
        rows = large.limits.log_sized_rows
        with plans.after_scan.applied(spark):
            assert conf.get("spark.sql.shuffle.partitions") == "1"
            assert conf.get("spark.sql.codegen.wholeStage") == "false"
            assert plans.after_scan.narrowed(df).rdd.getNumPartitions() == 1
            assert cuts.plan(rows) == plans.after_scan
            spread = cuts.plan(rows + 1)
            assert spread == plans.spread
            with cuts.applied(spread):
                assert conf.get("spark.sql.shuffle.partitions") == own["spark.sql.shuffle.partitions"]
                assert conf.get("spark.sql.codegen.wholeStage") == "true"
                assert spread.narrowed(df).rdd.getNumPartitions() == 2
            assert conf.get("spark.sql.shuffle.partitions") == "1"
        assert conf.get("spark.sql.codegen.wholeStage") == "true"  # put back
        assert conf.get("spark.sql.shuffle.partitions") == own["spark.sql.shuffle.partitions"]
        # more replicas than one partition takes: tables as large as log-sized ones, compiled
        many = SizePolicy(input_bytes=1 << 40, replicas=Limits().one_partition_replicas + 1).plans(spark)
        with many.after_scan.applied(spark):
            assert conf.get("spark.sql.codegen.wholeStage") == "true"
            assert conf.get("spark.sql.autoBroadcastJoinThreshold") == "-1"
            assert many.after_scan.narrowed(df).rdd.getNumPartitions() == 2
        edge = SizePolicy(input_bytes=1 << 40, replicas=Limits().one_partition_replicas).plans(spark)
        with edge.after_scan.applied(spark):
            assert conf.get("spark.sql.codegen.wholeStage") == "false"
        # a small input: its own settings while it is parsed, and the spread plan puts those back
        small = SizePolicy(input_bytes=10, replicas=10).plans(spark)
        assert small.parse.collect and small.parse.narrow
        with small.parse.applied(spark), small.after_scan.applied(spark), small.spread.applied(spark):
            assert conf.get("spark.sql.shuffle.partitions") == "1"
            assert conf.get("spark.sql.codegen.wholeStage") == "false"
    finally:
        conf.set("spark.sql.codegen.wholeStage", own["spark.sql.codegen.wholeStage"])


@pytest.mark.spark
def test_a_small_inputs_driver_side_tables_are_joined_without_a_shuffle(spark) -> None:  # type: ignore[no-untyped-def]
    from auditor.frames import local_frame

    def joined(narrow: bool) -> tuple[int, str]:
        files = local_frame(spark, [(i, f"f{i}") for i in range(50)], "file_id int, rel string", narrow=narrow)
        lines = local_frame(spark, [(i % 50, i) for i in range(200)], "file_id int, line bigint", narrow=narrow)
        df = lines.join(files, "file_id").groupBy("rel").count()
        assert sorted(tuple(r) for r in df.collect()) == sorted((f"f{i}", 4) for i in range(50))
        return files.rdd.getNumPartitions(), df._jdf.queryExecution().executedPlan().toString()  # noqa: SLF001

    parts, plan = joined(True)
    assert parts == 1 and "Exchange" not in plan, plan
    parts, plan = joined(False)  # as Spark plans it
    assert parts > 1 and "Exchange" in plan, plan


def test_small_input_is_measured_by_bytes(tmp_path: Path) -> None:
    from auditor.load import measure
    from auditor.policy import Limits, SizePolicy

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.txt").write_bytes(b"x" * 1000)
    (tmp_path / "y.txt").write_bytes(b"y" * 1000)
    assert measure(str(tmp_path), "table").input_bytes == 2000
    assert measure(str(tmp_path), "table", template=SizePolicy(limits=Limits(small_input_bytes=2001))).small_input
    assert not measure(str(tmp_path), "table", template=SizePolicy(limits=Limits(small_input_bytes=2000))).small_input


@pytest.mark.spark
def test_local_frame_keeps_rows_types_and_nulls(spark) -> None:  # type: ignore[no-untyped-def]
    from auditor.frames import local_frame

    naive = datetime(2026, 1, 1)  # discovery's labels are UTC; a naive one is read as UTC too
    rows = [(1, "a", T0, None), (2, None, naive, 7)]
    df = local_frame(spark, rows, "id int, name string, at timestamp, n bigint")
    assert "LocalTableScan" in df._jdf.queryExecution().executedPlan().toString()  # no Python RDD
    got = sorted(df.collect())
    assert [(r.id, r.name, r.n) for r in got] == [(1, "a", None), (2, None, 7)]
    assert {r.at.replace(tzinfo=None) for r in got} == {datetime(2026, 1, 1)}
    assert local_frame(spark, [], "id int").collect() == []


@pytest.mark.spark
def test_many_driver_rows_are_read_from_a_stored_file(spark, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Above LOCAL_ROWS rows the frame is a Parquet scan (no copy of the rows in every
    plan), with the same rows, types and nulls."""
    import auditor.frames
    from auditor.frames import local_frame

    monkeypatch.setattr(auditor.frames, "LOCAL_ROWS", 1)
    rows = [(1, "a", T0, None), (2, None, datetime(2026, 1, 1), 7)]
    df = local_frame(spark, rows, "id int, name string, at timestamp, n bigint")
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "LocalTableScan" not in plan and "FileScan parquet" in plan
    assert [f.dataType.simpleString() for f in df.schema.fields] == ["int", "string", "timestamp", "bigint"]
    got = sorted(df.collect())
    assert [(r.id, r.name, r.n) for r in got] == [(1, "a", None), (2, None, 7)]
    assert {r.at.replace(tzinfo=None) for r in got} == {datetime(2026, 1, 1)}


@pytest.mark.spark
def test_fields_by_token(spark) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    from auditor.ingest import dump_grammar as g

    lines = ["baseOffset: 5 lastOffset: 9 crc: 77 isvalid: true",
             "baseOffset: 5 lastOffset: 9 crc:",  # cut after the name
             "baseOffset:  5 crc: x",  # empty value, value not a number
             "lastOffset: 1 baseOffset: 2 baseOffset: 3"]  # the first occurrence counts
    df = spark.createDataFrame([(i, t) for i, t in enumerate(lines)], "i int, t string").select(
        "i", g.tokens(F.col("t")).alias("k"))
    got = {r.i: (r.base, r.crc, r.valid, r.codec) for r in df.select(
        "i", g.field_long(F.col("k"), "baseOffset").alias("base"), g.field_long(F.col("k"), "crc").alias("crc"),
        g.field_bool(F.col("k"), "isvalid", "isValid").alias("valid"),
        g.field_text(F.col("k"), "compresscodec").alias("codec")).collect()}
    assert got == {0: (5, 77, True, None), 1: (5, None, None, None), 2: (None, None, None, None),
                   3: (2, None, None, None)}


@pytest.mark.spark
@pytest.mark.parametrize(("small_input", "reader"), [(False, "spark"), (True, "spark"), (False, "driver"),
                                                     (True, "driver"), (True, "driver-parquet"),
                                                     (False, "driver-threads")])
def test_whole_file_lines_match_the_line_reader(spark, tmp_path: Path, monkeypatch, small_input: bool,  # type: ignore[no-untyped-def]
                                                reader: str) -> None:
    """Small files read whole and split where they are read number their lines exactly as
    the line reader and its per-file window do (including with the small-input settings,
    where joins are shuffles), whether Spark's file source reads them or the driver does
    (its rows a local relation, or a Parquet file when they are many), bytes that are not
    UTF-8 included."""
    from auditor import frames as sp
    from auditor.ingest import lines
    from auditor.ingest.discovery import InputFile
    from auditor.ingest.lines import number_lines, read_small_files, read_text_lines
    from auditor.policy import SMALL_INPUT_CONF, session_conf
    from tests.conftest import large_input

    monkeypatch.setattr(lines, "DRIVER_READ_BYTES", -1 if reader == "spark" else 1 << 20)
    if reader == "driver-parquet":  # chunks of three files, written to one Parquet file
        monkeypatch.setattr(lines, "LOCAL_ROWS", 3)
        monkeypatch.setattr(sp, "LOCAL_ROWS", 3)
    if reader == "driver-threads":  # as from a cold page cache: all but each block's first file by threads
        monkeypatch.setattr(lines, "READ_BLOCK", 4)
        monkeypatch.setattr(lines, "PROBE_FILES", 1)
        monkeypatch.setattr(lines, "SLOW_READ_SECONDS", -1.0)
    contents = [b"", b"\n", b"a", b"a\n", b"a\r\nb\rc\n\n", b"a\n\nb", b"\r\n\r\n", b"x\ry\r", b"0\n1\n2\n" * 700,
                b"\xff\xfe\xc3(\n\xe2\x82\n"]
    files = []
    for i, body in enumerate(contents):
        path = tmp_path / f"f {i}+.txt"
        path.write_bytes(body)
        files.append((i + 10, InputFile(path=str(path), rel=path.name, kind="k", snapshot=T0, broker=1,
                                        log_dir=None, topic=None, partition=None, size=len(body))))
    with session_conf(spark, SMALL_INPUT_CONF) if small_input else large_input(spark):
        read = read_small_files(spark, files)
        whole = sorted(tuple(r) for r in read.collect())
        by_line = sorted(tuple(r) for r in number_lines(read_text_lines(spark, files)).select(
            "file_id", "line_number", "text").collect())
    scans = read._jdf.queryExecution().executedPlan().toString()  # noqa: SLF001
    assert ("FileScan binaryFile" in scans) == (reader == "spark"), scans
    assert ("FileScan parquet" in scans) == (reader == "driver-parquet"), scans
    assert whole == by_line
    assert len(whole) == 0 + 1 + 1 + 1 + 4 + 3 + 2 + 2 + 2100 + 2
    assert [r for r in whole if r[0] == 14] == [(14, 1, "a"), (14, 2, "b"), (14, 3, "c"), (14, 4, "")]


@pytest.mark.parametrize("cold", [False, True])
def test_the_driver_reads_small_files_in_order_one_by_one_or_by_threads(tmp_path: Path, monkeypatch,  # type: ignore[no-untyped-def]
                                                                         cold: bool) -> None:
    """A block whose first files are read slowly (a cold page cache) has the rest read by
    threads; either way the tables hold every file's bytes in the listing's order, and a
    file gone after listing is an InputError naming it."""
    import threading

    from auditor.errors import InputError
    from auditor.ingest import lines
    from auditor.ingest.discovery import InputFile

    monkeypatch.setattr(lines, "READ_BLOCK", 5)
    monkeypatch.setattr(lines, "PROBE_FILES", 2)
    monkeypatch.setattr(lines, "SLOW_READ_SECONDS", -1.0 if cold else 1.0)
    monkeypatch.setattr(lines, "LOCAL_ROWS", 4)
    readers: set[str] = set()
    read_file = lines._read_file

    def noted(f: InputFile) -> bytes:
        readers.add(threading.current_thread().name)
        return read_file(f)

    monkeypatch.setattr(lines, "_read_file", noted)
    files = []
    for i in range(13):
        path = tmp_path / f"c{i}"
        path.write_bytes(b"0\n%d\n" % i * (i % 3))
        files.append((100 + i, InputFile(path=str(path), rel=path.name, kind="k", snapshot=T0, broker=1,
                                         log_dir=None, topic=None, partition=None, size=path.stat().st_size)))
    tables = list(lines._read_by_driver(files))
    assert [len(t) for t in tables] == [4, 4, 4, 1]
    assert [i for t in tables for i in t.column("file_id").to_pylist()] == [i for i, _ in files]
    assert [b for t in tables for b in t.column("content").to_pylist()] == [
        b"0\n%d\n" % i * (i % 3) for i in range(13)]
    assert any(name.startswith("auditor-read") for name in readers) == cold, readers
    (tmp_path / "c8").unlink()  # in a block's threaded part
    with pytest.raises(InputError, match=r"^c8: listed, then could not be read"):
        list(lines._read_by_driver(files))


def test_a_small_file_gone_after_listing_is_a_clear_input_error(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from auditor.errors import InputError
    from auditor.ingest.discovery import InputFile
    from auditor.ingest.lines import read_small_files

    gone = InputFile(path=str(tmp_path / "leader-epoch-checkpoint"), rel="broker=1/data/t-0/leader-epoch-checkpoint",
                     kind="leader-epoch-checkpoint", snapshot=T0, broker=1, log_dir="data", topic="t", partition=0,
                     size=12)
    with pytest.raises(InputError, match=r"^broker=1/data/t-0/leader-epoch-checkpoint: listed, then could not be read"):
        read_small_files(spark, [(0, gone)])


def test_many_paths_reach_the_jvm_in_one_call_with_spark_s_own_spelling(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The file list handed to a reader and read back from it (``load_paths``,
    ``input_files``) is the one PySpark's own calls give, odd characters included; a path
    with a line break takes PySpark's way."""
    from auditor.ingest.lines import input_files, load_paths

    names = ["plain.txt", "a b.txt", "x+y%z.txt", "ünï.txt", "semi;colon,comma.txt", "line\nbreak.txt"]
    paths = []
    for name in names:
        (tmp_path / name).write_text(f"{name}\n", encoding="utf-8")
        paths.append(str(tmp_path / name))
    for chosen in (paths[:-1], paths):
        ours = load_paths(spark.read.format("binaryFile"), chosen)
        theirs = spark.read.format("binaryFile").load(chosen)
        assert sorted(input_files(ours)) == sorted(theirs.inputFiles())
        assert len(input_files(ours)) == len(chosen) == ours.count()


def test_union_tree_keeps_every_frame_in_order() -> None:
    from auditor.frames import union_tree

    calls: list[int] = []

    def union(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
        calls.append(len(a) + len(b))
        return a + b

    seen = []
    for n in range(1, 12):
        calls.clear()
        combined = union_tree([(i,) for i in range(n)], union)  # type: ignore[arg-type]
        assert combined == tuple(range(n)), n
        assert len(calls) == n - 1, n
        seen.append(sum(calls))  # the sizes of the plans analysed
    # a tree, not a chain: 11 frames analyse 40 frames' plans (a chain: 2 + 3 + ... + 11 = 65)
    assert seen[10] == 40 and seen[7] == 24, seen


def test_union_all_and_a_cut_points_union_give_the_rows_of_a_chain(spark) -> None:  # type: ignore[no-untyped-def]
    from functools import reduce

    from auditor.frames import union_all, union_tree

    frames = [spark.createDataFrame([(i, f"x{i}"), (i + 100, None)], "a long, b string") for i in range(7)]
    flipped = [f.select("b", "a") if i % 3 == 1 else f for i, f in enumerate(frames)]  # matched by name
    chained = [tuple(r) for r in reduce(lambda a, b: a.unionByName(b), flipped).collect()]
    assert [tuple(r) for r in union_all(flipped).collect()] == chained and len(chained) == 14
    tagged = [f.select(F.lit(f"t{i}").alias("_frame"), F.struct("a", "b").alias(f"f{i}")) for i, f in enumerate(frames)]
    missing = lambda a, b: a.unionByName(b, allowMissingColumns=True)  # noqa: E731
    tree, chain = union_tree(tagged, missing), reduce(missing, tagged)
    assert tree.columns == chain.columns == ["_frame", *[f"f{i}" for i in range(7)]]
    assert [tuple(r) for r in tree.collect()] == [tuple(r) for r in chain.collect()]
