"""Snapshot layouts of SPEC 3.1: per-broker collector files, header/folder conflicts,
duplicate dumps of one segment, snapshot= folders over time, and epoch caches."""

from __future__ import annotations

import contextlib
from datetime import datetime, timezone

import pytest
from pyspark.sql import functions as F

from auditor import audit, load_snapshot
from auditor.simulator.kafka_text import Batch, checkpoint_text, dump_segment

pytestmark = pytest.mark.spark
T1 = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
T2 = datetime(2026, 3, 1, 13, tzinfo=timezone.utc)


def seg(topic: str, part: int, base: int, spans: list[tuple[int, int, int]], crc_salt: int = 0) -> str:
    return dump_segment("/kafka/data", topic, part, base,
                        [Batch(b, last, e, 1000 + b + crc_salt) for b, last, e in spans])


@pytest.fixture(scope="module")
def layout(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("layout")
    for label, t in (("2026-03-01T12:00:00Z", T1), ("2026-03-01T14:00:00+01:00", T2)):
        s = root / f"snapshot={label}"
        b1 = s / "broker=1"
        # a collector's per-broker file above the partition folders: sections name their partitions
        (b1 / "dumps").mkdir(parents=True)
        (b1 / "dumps" / "all-segments.txt").write_text(
            seg("alpha", 0, 0, [(0, 4, 1), (5, 9, 1)]) + seg("beta", 3, 0, [(0, 0, 2)])
            + "Dumping ./00000000000000000000.log\nLog starting offset: 0\n"
            + "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
              "producerEpoch: -1 partitionLeaderEpoch: 1 isTransactional: false isControl: false "
              "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1 size: 71 magic: 2 "
              "compresscodec: none crc: 1 isvalid: true\n",
            encoding="utf-8")
        (b1 / "logs" / "alpha-0").mkdir(parents=True)
        (b1 / "logs" / "alpha-0" / "leader-epoch-checkpoint").write_text(checkpoint_text([(1, 0)]))
        (b1 / "logs" / "replication-offset-checkpoint").write_text(
            checkpoint_text([("alpha", 0, 10 if t == T1 else 8), ("beta", 3, 1)]))
        # broker 2: the same segment dumped twice (identical), plus a later segment
        p2 = s / "broker=2" / "data" / "alpha-0"
        p2.mkdir(parents=True)
        (p2 / "00000000000000000000.log.txt").write_text(seg("alpha", 0, 0, [(0, 4, 1), (5, 9, 1)]))
        (p2 / "copy-of-first-segment.dump").write_text(seg("alpha", 0, 0, [(0, 4, 1), (5, 9, 1)]))
        (p2 / "00000000000000000010.log.txt").write_text(seg("alpha", 0, 10, [(10, 11, 3)]))
        # no leader-epoch-checkpoint on broker 2: the cache is rebuilt from the log
        (s / "broker=2" / "data" / "replication-offset-checkpoint").write_text(checkpoint_text([("alpha", 0, 12)]))
        # broker 3: a dump whose header names another partition than its folder
        p3 = s / "broker=3" / "data" / "alpha-0"
        p3.mkdir(parents=True)
        (p3 / "00000000000000000000.log.txt").write_text(seg("alpha", 1, 0, [(0, 4, 1)]))
        (p3 / "leader-epoch-checkpoint").write_text("0\n2\n1 0\n")  # count mismatch: unusable
        (s / "topics-describe.txt").write_text(
            "Topic: alpha\tPartitionCount: 1\tReplicationFactor: 3\tConfigs: \n"
            f"\tTopic: alpha\tPartition: 0\tLeader: {2 if t == T1 else 1}\tReplicas: 1,2,3\tIsr: 1,2\n")
    snap = load_snapshot(spark, str(root))
    return root, snap


def test_snapshots_are_ordered_instants(layout) -> None:  # type: ignore[no-untyped-def]
    _, snap = layout
    assert snap.snapshots == [T1, T2]
    labels = sorted({r.snapshot for r in snap.batches.select("snapshot").distinct().collect()})
    assert [x.replace(tzinfo=timezone.utc) for x in labels] == [T1, T2]
    md = {(r.snapshot.replace(tzinfo=timezone.utc), r.partition): r.leader for r in snap.metadata.collect()}
    assert md == {(T1, 0): 2, (T2, 0): 1}


def test_collector_file_sections_take_their_partition_from_the_header(layout) -> None:  # type: ignore[no-untyped-def]
    _, snap = layout
    b1 = snap.batches.filter((F.col("replica") == 1) & (F.col("snapshot") == T1))
    got = sorted((r.topic, r.partition, r.base_offset) for r in b1.collect())
    assert got == [("alpha", 0, 0), ("alpha", 0, 5), ("beta", 3, 0)]
    errors = snap.parse_errors.filter((F.col("snapshot") == T1) & (F.col("broker") == 1)).collect()
    assert sorted((e.line_number, e.error.split(" and ")[0]) for e in errors) == [
        (8, "section header (line 8) names no <topic>-<partition> folder"),
        (10, "section header (line 8) names no <topic>-<partition> folder")]


def test_header_naming_another_partition_is_a_parse_error(layout) -> None:  # type: ignore[no-untyped-def]
    _, snap = layout
    assert snap.batches.filter(F.col("replica") == 3).count() == 0
    errors = snap.parse_errors.filter((F.col("snapshot") == T1) & (F.col("broker") == 3)).orderBy("line_number").collect()
    dump_errors = [e for e in errors if e.file.endswith(".log.txt")]
    assert [e.line_number for e in dump_errors] == [1, 3]
    assert "names partition alpha-1 but the file is in folder alpha-0" in dump_errors[0].error
    rep3 = snap.replicas.filter((F.col("replica") == 3) & (F.col("snapshot") == T1)).first()
    assert rep3.has_dump and rep3.has_epoch_file and not rep3.epoch_file_usable


def test_duplicate_segment_dumps_count_once(layout) -> None:  # type: ignore[no-untyped-def]
    _, snap = layout
    b2 = snap.batches.filter((F.col("replica") == 2) & (F.col("snapshot") == T1))
    assert sorted(r.base_offset for r in b2.collect()) == [0, 5, 10]
    segs = snap.segments.filter((F.col("replica") == 2) & (F.col("snapshot") == T1))
    assert sorted(r.segment_base_offset for r in segs.collect()) == [0, 10]


def test_hwm_and_epoch_cache_per_replica(layout) -> None:  # type: ignore[no-untyped-def]
    _, snap = layout
    hwm = {(r.snapshot.replace(tzinfo=timezone.utc), r.topic, r.replica): r.high_watermark for r in snap.hwm.collect()}
    assert hwm[(T1, "alpha", 1)] == 10 and hwm[(T2, "alpha", 1)] == 8
    assert hwm[(T1, "beta", 1)] == 1 and hwm[(T1, "alpha", 2)] == 12
    tables = audit(snap, run_id="r", cluster="c", audit_time=T2)
    rs = {(r.snapshot.replace(tzinfo=timezone.utc), r.replica, r.topic): r
          for r in tables["replica_status"].collect()}
    r2 = rs[(T1, 2, "alpha")]
    assert (r2.log_end_offset, r2.latest_epoch, r2.role, r2.batch_count) == (12, 3, "leader", 3)
    assert rs[(T2, 2, "alpha")].role == "follower" and rs[(T2, 1, "alpha")].role == "leader"
    r3 = rs[(T1, 3, "alpha")]
    assert (r3.batch_count, r3.latest_epoch, r3.in_isr) == (0, None, False)
    lineage = tables["epoch_lineage"].filter((F.col("replica") == 2) & (F.col("snapshot") == T1))
    assert sorted((r.source, r.epoch, r.start_offset, r.end_offset) for r in lineage.collect()) == [
        ("log", 1, 0, 10), ("log", 3, 10, 12)]


def test_a_drill_down_parses_only_the_sections_it_wants(layout) -> None:  # type: ignore[no-untyped-def]
    """A drill-down reads a per-broker dump whole but parses only its wanted sections
    (``DumpFiles.items`` with sections): the items of those sections, exactly as when every
    section is parsed."""
    from auditor.ingest.batches import SECTION_FILTER_LIMIT, section_keys

    _, snap = layout
    dumps = snap.source.dumps
    placed = dumps.sections.filter(F.col("file").endswith("all-segments.txt")).collect()
    beta = next(s for s in placed if s.topic == "beta")
    alpha = next(s for s in placed if s.topic == "alpha" and s.file_id == beta.file_id)

    def rows(df):  # type: ignore[no-untyped-def]
        got = [(r.file_id, r.sec, r.item_kind, r.item, r.i_base, r.i_last, r.i_crc) for r in df.collect()]
        return sorted(got, key=lambda t: [(v is None, str(v)) for v in t])

    whole = [r for r in rows(dumps.items()) if r[0] == beta.file_id]
    assert {r[1] for r in whole} >= {alpha.sec, beta.sec}  # the file holds more than beta's section
    only_beta = rows(dumps.items({beta.file_id: {beta.sec}}))
    assert only_beta and only_beta == [r for r in whole if r[1] == beta.sec]
    both = rows(dumps.items({beta.file_id: {alpha.sec, beta.sec}}))
    assert both == [r for r in whole if r[1] in (alpha.sec, beta.sec)]
    # keys are file_id * 2^32 + sec; past the limit, every section is parsed
    assert section_keys({3: {1, 2}, 4: {0}}) == {(3 << 32) + 1, (3 << 32) + 2, 4 << 32}
    assert section_keys({1: set(range(SECTION_FILTER_LIMIT + 1))}) is None


def test_a_large_input_parses_its_small_files_in_a_job_of_their_own_with_the_same_rows(  # type: ignore[no-untyped-def]
        spark, tmp_path) -> None:
    """A large input's small files (checkpoints, describe, KRaft's quorum files and metadata
    log) are parsed in a cut point of their own, without generated code, after the dump
    lines' scan (``auditor.load.kafka.load_kafka``), in one partition up to
    ``Limits.small_files_one_partition_bytes`` (a job of a few stages, not one per join and
    window); a small input, or one of more than ``Limits.one_partition_replicas`` replicas,
    parses them in the scan's job. Every way gives the same parsed tables."""
    import json
    import os
    from functools import reduce

    from pyspark.sql import DataFrame

    from auditor.simulator import simulate
    from auditor.simulator.kraft import KRAFT_FAULTS
    from tests.conftest import large_input

    simulate(tmp_path / "snap", topics=2, partitions=2, batches=30, seed=5, kraft_controllers=3, shapes=False,
             faults=",".join(["all", *KRAFT_FAULTS]))
    # a damaged line in a checkpoint file and in a dump: parse errors from both kinds of cut
    cp = next((tmp_path / "snap").rglob("replication-offset-checkpoint"))
    cp.write_text(cp.read_text() + "not an entry\n")
    dump = next(p for p in (tmp_path / "snap").rglob("*.log.txt") if "__cluster_metadata" not in str(p))
    dump.write_text(dump.read_text() + "baseOffset: seven\n")

    context = spark.sparkContext
    small_stages: list[list[int]] = []  # per parse: the stages of each job of the small cut

    def parsed(split: bool, **limits: int) -> tuple[dict[str, list[tuple[object, ...]]], list[str]]:
        settings = large_input(spark, **limits) if split else contextlib.nullcontext(None)
        group = f"layout-{split}-{len(small_stages)}"
        small_stages.append([])
        with settings as policy:
            context.setJobGroup(group, group)
            try:
                snap = load_snapshot(spark, str(tmp_path / "snap"), default_snapshot=T1, policy=policy)
            finally:
                context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
            tracker = context.statusTracker()
            for job in tracker.getJobIdsForGroup(group):  # the small cut's job: its stages are named "small"
                stages = tracker.getJobInfo(job).stageIds  # type: ignore[union-attr]
                if any(getattr(tracker.getStageInfo(st), "name", None) == "small" for st in stages):
                    small_stages[-1].append(len(stages))
            frames = {name: getattr(snap, name) for name in (
                "summaries", "epoch_cache", "hwm", "metadata", "parse_errors", "segments", "log_start",
                "recovery_point", "topics", "replicas", "accounting", "sections")}
            assert snap.kraft is not None
            frames.update(kraft_batches=snap.kraft.batches, kraft_snapshots=snap.kraft.snapshots,
                          quorum_state=snap.kraft.quorum_state, status=snap.kraft.status)
            # every frame's rows as JSON text, in one job (a collect per frame made 16 jobs per way)
            union = reduce(DataFrame.unionByName, [
                df.select(F.lit(name).alias("frame"), F.to_json(F.struct(*[F.col(f"`{c}`") for c in df.columns]))
                          .alias("row")) for name, df in frames.items()])
            rows: dict[str, list[str]] = {name: [] for name in frames}
            for r in union.collect():
                rows[r.frame].append(r.row)
        return {name: sorted(got) for name, got in rows.items()}, sorted(os.listdir(snap.work_dir))

    split, split_cuts = parsed(True)
    together, together_cuts = parsed(False)
    assert "small" in split_cuts and "small" not in together_cuts, (split_cuts, together_cuts)
    # one job of a few stages (38 at 1M lines before it ran in one partition, 5 since)
    assert len(small_stages[0]) == 1 and small_stages[0][0] <= 6, small_stages
    for name, rows in together.items():
        assert split[name] == rows, name
    # small files of more than Limits.small_files_one_partition_bytes: their own job still,
    # over the session's shuffle partitions
    spread, spread_cuts = parsed(True, small_files_one_partition_bytes=-1)
    assert "small" in spread_cuts and sum(small_stages[2]) > 6, small_stages
    assert spread == together
    many, many_cuts = parsed(True, small_files_one_partition_bytes=-1, one_partition_replicas=1)
    assert "small" not in many_cuts, many_cuts
    assert many == together
    assert together["hwm"] and together["quorum_state"] and together["kraft_batches"]
    files = {json.loads(r)["file"] for r in together["parse_errors"]}
    assert any(f.endswith("replication-offset-checkpoint") for f in files), files
    assert any(f.endswith(".log.txt") for f in files), files
