"""KRaft's metadata log (SPEC 4.7): the ``kraft`` truncation against the pure-Python model,
and the audit of hand-worked metadata logs (inputs, leader, committed bound, every
``KRAFT_*`` check)."""

from __future__ import annotations

import json
import random
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest

from auditor import audit, load_snapshot
from auditor.semantics.kraft import truncate_kraft
from auditor.simulator.kafka_text import content_crc
from auditor.simulator.kraft_text import KRaftStyle, MetaBatch, QuorumState
from tests import reference as ref
from tests.conftest import copy_fixture
from tests.invariants import KEYS, disagreements, repeated_rows
from tests.kraft_fixtures import Node, data, epoch_log, leader_change, write_kraft

pytestmark = pytest.mark.spark
META = "__cluster_metadata"


# --- the kraft truncation, Spark against the model -----------------------------------------

def _log(rng: random.Random, start: int, epochs: list[int]) -> list[ref.Batch]:
    out, o = [], start
    for e in epochs:
        for _ in range(rng.randint(1, 3)):
            n = rng.randint(1, 3)
            out.append((o, o + n - 1, e))
            o += n
    return out


def _replica(rng: random.Random, batches: list[ref.Batch]) -> ref.KRaftReplica:
    """A node holding ``batches``: snapshots at some batch ends, the log start at one of them
    (or 0); sometimes every batch is gone (log start = LEO, a snapshot there)."""
    ends = [(b[1] + 1, b[2]) for b in batches]
    snaps = sorted(rng.sample(ends, k=min(len(ends), rng.choice([0, 0, 1, 2])))) if ends else []
    start = 0
    if snaps and rng.random() < 0.6:
        start = rng.choice(snaps)[0]
    held = [b for b in batches if b[0] >= start]
    return ref.KRaftReplica(cache=ref.rebuild_cache(held), batches=held, log_start=start, local_log_start=start,
                            snapshots=snaps)


def _history(rng: random.Random) -> tuple[ref.KRaftReplica, ref.KRaftReplica]:
    common_epochs = sorted(rng.sample(range(1, 6), k=rng.randint(0, 2)))
    common = _log(rng, 0, common_epochs)
    end = common[-1][1] + 1 if common else 0
    last = common_epochs[-1] if common_epochs else 1
    lead_epochs = sorted(rng.sample(range(last, last + 5), k=rng.randint(0, 3)))
    fol_epochs = sorted(rng.sample(range(max(1, last - 1), last + 4), k=rng.randint(0, 2)))
    lead = common + _log(rng, end, lead_epochs)
    fol = common + [(b, l_, e) for b, l_, e in _log(rng, end, fol_epochs)]
    return _replica(rng, lead), _replica(rng, fol)


ENTRIES = "array<struct<epoch:int,start_offset:bigint>>"
SNAP = "struct<end_offset:bigint,epoch:int>"


def test_kraft_truncation_matches_the_model(spark) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(4711)
    cases = [_history(rng) for _ in range(400)]
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def entries(cache: list[ref.Entry]) -> list[tuple[int, int]]:
        return [(e, s) for e, s in cache]

    pair_rows, input_rows, batch_rows = [], [], []
    for i, (lead, fol) in enumerate(cases):
        key = (now, f"h{i}", 0, 2)
        pair_rows.append((*key, entries(fol.cache), fol.leo, entries(lead.cache), lead.leo, lead.log_start,
                          fol.log_start, fol.local_log_start, None))
        input_rows.append((*key, min(lead.snapshots) if lead.snapshots else None,
                           max(lead.snapshots) if lead.snapshots else None,
                           min(fol.snapshots) if fol.snapshots else None,
                           max(fol.snapshots)[1] if fol.snapshots else None,
                           min((b[0] for b in fol.batches), default=None)))
        batch_rows += [(*key, b, last) for b, last, _ in fol.batches]
    k = "snapshot timestamp, topic string, partition int, replica int"
    pairs = spark.createDataFrame(pair_rows, f"{k}, f_entries {ENTRIES}, f_leo bigint, l_entries {ENTRIES}, "
                                             "l_leo bigint, l_log_start bigint, f_log_start bigint, f_lso bigint, "
                                             "f_hwm bigint")
    inputs = spark.createDataFrame(input_rows, f"{k}, l_first {SNAP}, l_latest {SNAP}, f_first {SNAP}, "
                                               "f_snap_epoch int, f_min_base bigint")
    batches = spark.createDataFrame(batch_rows, f"{k}, base_offset bigint, last_offset bigint")
    got = {r.topic: (r.truncation_offset, r.truncation_rounds,
                     (r.fetch_snapshot.end_offset, r.fetch_snapshot.epoch) if r.fetch_snapshot else None)
           for r in truncate_kraft(pairs, inputs, batches).collect()}
    kinds = {"fetch": 0, "truncated": 0, "several rounds": 0}
    for i, (lead, fol) in enumerate(cases):
        want = ref.truncate_kraft(lead, fol)
        assert got[f"h{i}"] == (want.offset, want.rounds, want.fetch_snapshot), (i, lead, fol)
        kinds["fetch"] += want.fetch_snapshot is not None
        kinds["truncated"] += want.offset is not None
        kinds["several rounds"] += want.rounds > 1
    # the generated histories reach every branch
    assert all(v >= 10 for v in kinds.values()), kinds


def test_model_worked_examples() -> None:
    """Hand-worked cases of the model itself (KRAFT.md rule 5)."""
    lead_log = [(0, 0, 1), (1, 4, 1), (5, 5, 3), (6, 9, 3)]
    # a follower that wrote offsets 5-7 in epoch 2, which the leader never had: one round,
    # the leader answers (1, 5) for epoch 2, the follower's own EOE(1) is (1, 5): truncate to 5
    fol_log = [(0, 0, 1), (1, 4, 1), (5, 7, 2)]
    lead = ref.KRaftReplica(ref.rebuild_cache(lead_log), lead_log, 0, 0, [])
    fol = ref.KRaftReplica(ref.rebuild_cache(fol_log), fol_log, 0, 0, [])
    assert ref.truncate_kraft(lead, fol) == ref.KRaftTruncation(5, 1)
    # the leader deleted its log below its snapshot (10, 3); the follower's LEO 8 is below
    # the leader's log start 10: FETCH_SNAPSHOT, the follower drops its whole log
    lead2 = ref.KRaftReplica([(3, 10)], [(10, 12, 3)], 10, 10, [(10, 3)])
    fol2 = ref.KRaftReplica(ref.rebuild_cache(fol_log), fol_log, 0, 0, [])
    assert ref.truncate_kraft(lead2, fol2) == ref.KRaftTruncation(0, 1, (10, 3))
    # a follower with an empty log fetches at (0, -1): FETCH_SNAPSHOT, nothing to remove
    fol3 = ref.KRaftReplica([], [], 0, 0, [])
    assert ref.truncate_kraft(lead2, fol3) == ref.KRaftTruncation(None, 1, (10, 3))
    # in sync: no round
    assert ref.truncate_kraft(lead, ref.KRaftReplica(ref.rebuild_cache(lead_log), lead_log, 0, 0, [])) == \
        ref.KRaftTruncation(None, 0)


# --- the audit of hand-worked metadata logs ----------------------------------------------

def _snapshots(root: Path) -> dict[str, Path]:
    return {name: root / f"snapshot=2026-01-0{i + 1}T00:00:00" for i, name in enumerate(
        ("healthy", "elections", "epochs", "snapshots", "truncation", "v28", "real"))}


@pytest.fixture(scope="module")
def kraft_run(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("kraft")
    at = _snapshots(root)
    voters = (1, 2, 3)
    # healthy: 3 controllers and a broker (observer 4); epochs 1 and 2; snapshots at 10 on
    # two nodes; the status file's HighWatermark 18; 4.1 text on node 2
    log = epoch_log([(1, 0, 10), (2, 10, 20)], {1: 1, 2: 2})
    write_kraft(at["healthy"], {
        1: Node([log[:3], log[3:]], snapshots=[(10, 1, "dump")], quorum=QuorumState(2, 2, voters=voters)),
        2: Node([log], snapshots=[(10, 1, "bare")], quorum=QuorumState(2, 2, voters=voters), style=KRaftStyle("4.1")),
        3: Node([log], quorum=QuorumState(2, 2, voters=voters)),
        4: Node([log[:-1]], quorum=QuorumState(2, 2, voters=voters)),
    }, status=(2, 2, 18))
    # v28: Kafka 2.8's @metadata-0 with --skip-record-metadata text (no control types)
    v28 = KRaftStyle("2.8")
    write_kraft(at["v28"], {n: Node([log], quorum=QuorumState(1, 2, voters=voters), style=v28) for n in voters})
    # elections: nodes 1 and 2 both claim epoch 3 (quorum-state and LeaderChange records in
    # 4.1 text); node 3's quorum-state lags its log (epoch 1 < 3) and names other voters
    base = epoch_log([(1, 0, 10)], {1: 1})
    mine = base + [leader_change(10, 3, 1, salt="a"), data(11, 3, 3, salt="a")]
    theirs = base + [leader_change(10, 3, 2, salt="b"), data(11, 3, 5, salt="b")]
    v41 = KRaftStyle("4.1")
    write_kraft(at["elections"], {
        1: Node([mine], quorum=QuorumState(1, 3, voters=voters), style=v41),
        2: Node([theirs], quorum=QuorumState(2, 3, voters=voters), style=v41),
        3: Node([theirs], quorum=QuorumState(1, 1, voters=(1, 2)), style=v41),
    })
    # epochs: node 2's epoch 2 opens with a data batch; node 3 holds a batch in epoch 0
    good = epoch_log([(1, 0, 10), (2, 10, 20)], {1: 1, 2: 1})
    bad_start = good[:4] + [data(10, 2, 1)] + good[5:]
    epoch0 = [data(0, 0, 1)] + good[1:]
    write_kraft(at["epochs"], {
        1: Node([good], quorum=QuorumState(1, 2, voters=voters)),
        2: Node([bad_start], quorum=QuorumState(1, 2, voters=voters)),
        3: Node([epoch0], quorum=QuorumState(1, 2, voters=voters)),
    })
    # snapshots: node 1 zero-length (7,1) and a good one (10,1); node 2 a snapshot whose
    # batches are data only (10,1) and a bare id (14,1) whose offset 13 is in epoch 2 in its
    # log; node 3's log starts at 14 with no snapshot at or above 14 (retention past the
    # latest snapshot, KAFKA-14240)
    log = epoch_log([(1, 0, 10), (2, 10, 20)], {1: 1, 2: 1})
    tail = [b for b in log if b.base_offset >= 14]
    write_kraft(at["snapshots"], {
        1: Node([log], snapshots=[(7, 1, "empty"), (10, 1, "dump")], quorum=QuorumState(1, 2, voters=voters)),
        2: Node([log], snapshots=[(10, 1, "bad"), (14, 1, "bare")], quorum=QuorumState(1, 2, voters=voters)),
        3: Node([tail], snapshots=[(10, 1, "bare")], quorum=QuorumState(1, 2, voters=voters)),
    })
    # truncation: leader 1 (epochs 1, 3; log from 10 after its snapshot (10, 1)); node 2
    # wrote offsets 13-15 in epoch 2 that the leader never had (snapshot (13, 2) of its own:
    # committed as far as it knows); node 3 restarted leader in epoch 3 with other data at
    # 14 (KAFKA-10527); node 4 lags below the leader's log start (FETCH_SNAPSHOT)
    lead = epoch_log([(1, 0, 10), (3, 10, 20)], {1: 1, 3: 1})
    lead_held = [b for b in lead if b.base_offset >= 10]
    f2 = epoch_log([(1, 0, 10), (2, 10, 16)], {1: 1, 2: 2}, salt="x")
    f2 = lead[:4] + [b for b in f2 if b.base_offset >= 10]
    f3 = lead[:6] + [MetaBatch(14, 3, ("data",) * 2, content_crc("other", 14))]
    f4 = lead[:2]
    write_kraft(at["truncation"], {
        1: Node([lead_held], snapshots=[(10, 1, "dump")], quorum=QuorumState(1, 3, voters=voters)),
        2: Node([f2], snapshots=[(13, 2, "bare")], quorum=QuorumState(1, 3, voters=voters)),
        3: Node([f3], quorum=QuorumState(1, 3, voters=voters)),
        4: Node([f4], quorum=QuorumState(1, 3, voters=voters)),
    })

    def model(batches: list[MetaBatch], snaps: list[tuple[int, int]]) -> ref.KRaftReplica:
        spans = [(b.base_offset, b.last_offset, b.epoch) for b in batches]
        start = spans[0][0]
        return ref.KRaftReplica(ref.rebuild_cache(spans), spans, start, start, snaps)

    leader_model = model(lead_held, [(10, 1)])
    expected_truncation = {rid: ref.truncate_kraft(leader_model, model(batches, snaps)) for rid, batches, snaps in (
        (2, f2, [(13, 2)]), (3, f3, []), (4, f4, []))}
    # real: Kafka's own text (KRAFT.md section 2): a single voter's first segment (PR #19729)
    # and the 3.3 bootstrap snapshot (0, 0) (PR #12084), whose batches never enter the log
    folder = at["real"] / "broker=1" / "meta" / f"{META}-0"
    folder.mkdir(parents=True)
    for name in ("kraft-4.0-metadata-segment.txt", "kraft-3.3-bootstrap-snapshot.txt"):
        copy_fixture(name, folder)
    (folder / "leader-epoch-checkpoint").write_text("0\n1\n1 0\n")
    (folder / "quorum-state").write_text(QuorumState(1, 1, voters=(1,), data_version=1).text())
    snap = load_snapshot(spark, str(root))
    tables = audit(snap)
    label = {datetime(2026, 1, i + 1): name for i, name in enumerate(_snapshots(root))}

    def rows(name: str) -> list:  # type: ignore[type-arg]
        return [r.asDict() | {"snapshot": label[r.snapshot.replace(tzinfo=None)]} for r in tables[name].collect()]

    run = {name: rows(name) for name in ("findings", "replica_status", "partition_status", "parse_errors",
                                         "epoch_lineage")}
    return run | {"model": expected_truncation}


def _found(run, scenario: str) -> set[tuple]:  # type: ignore[no-untyped-def,type-arg]
    return {(f["check"], f["replica"], f["offset_start"], f["offset_end"], f["epoch"])
            for f in run["findings"] if f["snapshot"] == scenario}


def test_healthy_metadata_log_has_no_warning(kraft_run) -> None:  # type: ignore[no-untyped-def]
    assert not [p for p in kraft_run["parse_errors"] if p["snapshot"] == "healthy"]
    found = [f for f in kraft_run["findings"] if f["snapshot"] == "healthy"]
    assert [(f["check"], f["replica"]) for f in found] == [("FOLLOWER_LAG", 4)]  # INFO only: the observer lags
    part = next(p for p in kraft_run["partition_status"] if p["snapshot"] == "healthy")
    assert (part["topic"], part["leader"], part["leader_source"], part["max_high_watermark"]) == (META, 2, "quorum-state", 18)
    reps = {r["replica"]: r for r in kraft_run["replica_status"] if r["snapshot"] == "healthy"}
    assert len(reps) == 4
    assert {r["high_watermark"] for r in reps.values()} == {None}
    assert {r["in_isr"] for r in reps.values()} == {None}
    assert reps[2]["role"] == "leader" and reps[1]["status"] == "in_sync" and reps[4]["status"] == "lagging"


def test_one_row_per_run_entry_and_finding(kraft_run) -> None:  # type: ignore[no-untyped-def]
    """The metadata log's facts come from its batches alone: one ``epoch_lineage`` row per
    run of an epoch or cache entry, and ``finding_id`` unique per snapshot (SPEC 6)."""
    lineage = Counter((r["snapshot"], r["topic"], r["partition"], r["replica"], r["source"], r["start_offset"])
                      for r in kraft_run["epoch_lineage"])
    assert lineage and max(lineage.values()) == 1, [k for k, n in lineage.items() if n > 1]
    tables = {name: kraft_run[name] for name in KEYS}
    assert kraft_run["findings"] and repeated_rows(tables) == {name: [] for name in KEYS}  # finding_id included
    assert disagreements(tables) == []
    # a healthy node's log: one run per epoch
    runs = sorted((r["epoch"], r["start_offset"], r["end_offset"], r["batch_count"]) for r in kraft_run["epoch_lineage"]
                  if r["snapshot"] == "healthy" and r["replica"] == 3 and r["source"] == "log")
    assert [r[:3] for r in runs] == [(1, 0, 10), (2, 10, 20)]


def test_real_kafka_text(kraft_run) -> None:  # type: ignore[no-untyped-def]
    """Kafka's own dump text of a metadata segment and a bootstrap snapshot: no parse error,
    no finding, the snapshot's batches kept out of the log."""
    assert not [p for p in kraft_run["parse_errors"] if p["snapshot"] == "real"]
    assert not [f for f in kraft_run["findings"] if f["snapshot"] == "real"]
    (rep,) = [r for r in kraft_run["replica_status"] if r["snapshot"] == "real"]
    assert (rep["role"], rep["log_end_offset"], rep["batch_count"], rep["record_count"], rep["latest_epoch"]) == (
        "leader", 5, 3, 5, 1)
    part = next(p for p in kraft_run["partition_status"] if p["snapshot"] == "real")
    assert (part["leader_source"], part["max_high_watermark"]) == ("quorum-state", None)  # (0, 0) is no snapshot


def test_kafka_28_metadata_folder(kraft_run) -> None:  # type: ignore[no-untyped-def]
    assert not [p for p in kraft_run["parse_errors"] if p["snapshot"] == "v28"]
    assert not [f for f in kraft_run["findings"] if f["snapshot"] == "v28"]
    part = next(p for p in kraft_run["partition_status"] if p["snapshot"] == "v28")
    assert (part["topic"], part["leader"], part["leader_source"], part["max_high_watermark"]) == (
        "@metadata", 1, "quorum-state", None)


def test_election_safety_voters_and_quorum_state(kraft_run) -> None:  # type: ignore[no-untyped-def]
    found = _found(kraft_run, "elections")
    assert ("KRAFT_ELECTION_SAFETY", None, None, None, 3) in found
    assert ("KRAFT_VOTERS_DIFFER", None, None, None, None) in found
    assert ("KRAFT_QUORUM_STATE_BEHIND", 3, None, None, 3) in found
    assert not any(c == "KRAFT_QUORUM_STATE_BEHIND" and r != 3 for c, r, *_ in found)
    safety = next(f for f in kraft_run["findings"] if f["snapshot"] == "elections"
                  and f["check"] == "KRAFT_ELECTION_SAFETY")
    details = json.loads(safety["details"])
    assert details["leaders"] == [1, 2]
    assert {(c["node"], c["leader"], c["source"]) for c in details["claims"]} >= {
        (1, 1, "quorum-state"), (2, 2, "quorum-state"), (1, 1, "LeaderChange"), (2, 2, "LeaderChange")}
    # the top-epoch quorum-state files disagree: the leader is inferred (SPEC 4.6)
    part = next(p for p in kraft_run["partition_status"] if p["snapshot"] == "elections")
    assert part["leader_source"] == "inferred"


def test_epoch_start(kraft_run) -> None:  # type: ignore[no-untyped-def]
    found = {f for f in _found(kraft_run, "epochs") if f[0] == "KRAFT_EPOCH_START"}
    # node 3: its epoch-0 batch, and epoch 1 then opens with a data batch
    assert found == {("KRAFT_EPOCH_START", 2, 10, 11, 2), ("KRAFT_EPOCH_START", 3, 0, 1, 0),
                     ("KRAFT_EPOCH_START", 3, 1, 4, 1)}


def test_snapshot_checks(kraft_run) -> None:  # type: ignore[no-untyped-def]
    found = {f for f in _found(kraft_run, "snapshots") if f[0].startswith("KRAFT_SNAPSHOT")}
    assert found == {
        ("KRAFT_SNAPSHOT_INVALID", 1, 6, 7, 1),  # zero-length
        ("KRAFT_SNAPSHOT_INVALID", 2, 9, 10, 1),  # no header/footer control batches
        ("KRAFT_SNAPSHOT_INVALID", 2, 13, 14, 1),  # offset 13 is in epoch 2 in the log
        ("KRAFT_SNAPSHOT_MISSING", 3, 0, 14, None),  # log from 14, latest snapshot ends at 10
    }
    # each node's own snapshot ids, valid or not, in replica_status (the report's lanes)
    ids = {r["replica"]: [(i["end_offset"], i["epoch"]) for i in json.loads(r["kraft_snapshots"])]
           for r in kraft_run["replica_status"] if r["snapshot"] == "snapshots"}
    assert ids == {1: [(7, 1), (10, 1)], 2: [(10, 1), (14, 1)], 3: [(10, 1)]}
    (rs,) = [r for r in kraft_run["replica_status"] if r["snapshot"] == "truncation" and r["replica"] == 3]
    assert rs["kraft_snapshots"] == "[]"


def test_truncation_and_pair_checks(kraft_run) -> None:  # type: ignore[no-untyped-def]
    reps = {r["replica"]: r for r in kraft_run["replica_status"] if r["snapshot"] == "truncation"}
    got = {rid: (r["divergence_offset"], r["truncation_offset"], r["truncation_rounds"], r["status"])
           for rid, r in reps.items() if r["role"] == "follower"}
    assert got == {2: (10, 10, 1, "divergent_suffix"), 3: (14, None, 0, "silent_divergence"),
                   4: (None, 0, 1, "lagging")}
    # the pure-Python model of SPEC 4.7 agrees, FETCH_SNAPSHOT included
    assert {rid: (t.offset, t.rounds, t.fetch_snapshot) for rid, t in kraft_run["model"].items()} == {
        rid: (r["truncation_offset"], r["truncation_rounds"], (10, 1) if rid == 4 else None)
        for rid, r in reps.items() if r["role"] == "follower"}
    found = _found(kraft_run, "truncation")
    # node 2 saw offsets below 13 committed (its snapshot) and truncates to 10
    assert ("COMMITTED_DATA_LOSS", 2, 10, 13, None) in found
    assert ("SAME_EPOCH_CONFLICT", 3, 14, 16, 3) in found
    assert ("SILENT_DIVERGENCE", 3, 14, 16, None) in found
    assert not any(c in ("OVER_TRUNCATION", "SILENT_DIVERGENCE") and r == 4 for c, r, *_ in found)
    fetch = next(f for f in kraft_run["findings"] if f["snapshot"] == "truncation" and f["replica"] == 4
                 and f["check"] == "FOLLOWER_LAG")
    assert json.loads(fetch["details"])["fetch_snapshot"] == {"end_offset": 10, "epoch": 1}
    assert json.loads(fetch["details"])["protocol"] == "kraft"
    # no MISSING_INPUT for the absent HWM anywhere
    assert not [f for f in kraft_run["findings"] if f["check"] == "MISSING_INPUT"]


def test_report_marks_the_committed_bound_and_snapshots() -> None:
    """The metadata partition's lanes carry its committed bound C (it has no HWM), and each
    node's lane its own snapshot ids."""
    from auditor.report import partition_svg
    from auditor.sinks.runview import PartitionView

    replicas = [{"replica": n, "role": role, "in_isr": None, "status": role, "log_start_offset": 0,
                 "high_watermark": None, "log_end_offset": 20, "divergence_offset": None, "truncation_offset": None}
                for n, role in ((1, "leader"), (2, "follower"))]
    status = {"max_high_watermark": 15, "leader": 1}
    replicas[1]["kraft_snapshots"] = '[{"end_offset":10,"epoch":1},{"end_offset":15,"epoch":2}]'
    svg = partition_svg(PartitionView(META, 0, status, replicas, [], []))
    assert svg.count('data-kind="committed" data-offset="15"') == 2
    # the snapshot ids of each node on its own lane
    assert svg.count('data-kind="snapshot"') == 2
    lanes = svg.split('<g class="lane"')[1:]
    assert 'data-kind="snapshot"' not in lanes[0]
    assert 'data-kind="snapshot" data-offset="10" data-epoch="1"' in lanes[1]
    assert 'data-kind="snapshot" data-offset="15" data-epoch="2"' in lanes[1]
    assert 'data-kind="hwm"' not in svg
    other = partition_svg(PartitionView("orders", 0, status, replicas, [], []))
    assert 'data-kind="committed"' not in other
