"""The seed cases: divergence cases A to G, KIP-279 scenarios 1 (n < 20, n == 20, n > 20),
2 and 3 under the epoch and kip-101 protocols, and the openraft example as tables."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import functions as F

from auditor import audit, load_snapshot
from auditor.simulator.kafka_text import PartitionMeta
from tests.conftest import write
from tests.scenarios import Replica, write_describe, write_partition

pytestmark = pytest.mark.spark
L, FO = 1, 2  # leader and follower broker ids

# topic -> (leader replica, follower replica); the leader's current epoch 3 sits at its LEO
CASES: dict[str, tuple[Replica, Replica]] = {
    # A: follower behind, same epoch; B: leader has more records in a higher epoch
    "case-a": (Replica([(0, 1, 1), (2, 3, 1)], 2, [(3, 4)]), Replica([(0, 1, 1)], 2)),
    "case-b": (Replica([(0, 1, 1), (2, 3, 2)], 2, [(3, 4)]), Replica([(0, 1, 1)], 2)),
    # C: follower ahead with extra epoch-1 records; D: follower ahead in a higher epoch
    "case-c": (Replica([(0, 1, 1)], 2, [(3, 2)]), Replica([(0, 1, 1), (2, 3, 1)], 2)),
    "case-d": (Replica([(0, 1, 1)], 2, [(3, 2)]), Replica([(0, 1, 1), (2, 3, 2)], 2)),
    # E: forks in different epochs; F: leader fork holds more epoch-1 records
    "case-e": (Replica([(0, 1, 1), (2, 3, 3)], 2), Replica([(0, 1, 1), (2, 3, 2)], 2)),
    "case-f": (Replica([(0, 0, 1), (1, 1, 1)], 1, [(3, 2)]), Replica([(0, 0, 1), (1, 2, 2)], 1)),
    # G: no common epoch at all
    "case-g": (Replica([(0, 1, 1)], 0, [(3, 2)]), Replica([(0, 1, 2)], 0)),
    # KIP-279 scenario 1: A (leader, epoch 3) vs B with [11, n] in epoch 2
    "kip1-lt": (Replica([(0, 10, 1), (11, 20, 1), (21, 30, 3)], 11), Replica([(0, 10, 1), (11, 15, 2)], 11)),
    "kip1-eq": (Replica([(0, 10, 1), (11, 20, 1), (21, 30, 3)], 11), Replica([(0, 10, 1), (11, 20, 2)], 11)),
    "kip1-gt": (Replica([(0, 10, 1), (11, 20, 1), (21, 30, 3)], 11), Replica([(0, 10, 1), (11, 25, 2)], 11)),
    # scenario 2: B leads with HW 21, A restarts with HW 11
    "kip2": (Replica([(0, 10, 1), (11, 20, 1)], 21), Replica([(0, 10, 1), (11, 20, 1)], 11)),
    # scenario 3: unclean fail-overs; leader B has epochs 1 and 3, follower A epochs 0 and 2
    "kip3": (Replica([(0, 0, 1), (1, 1, 3)], 2), Replica([(0, 0, 0), (1, 1, 2)], 2)),
}

# topic -> (divergence_offset, truncation_offset, rounds, status) per protocol
EXPECTED = {
    "epoch": {
        "case-a": (None, None, 0, "lagging"), "case-b": (None, None, 0, "lagging"),
        "case-c": (2, 2, 1, "divergent_suffix"), "case-d": (2, 2, 1, "divergent_suffix"),
        "case-e": (2, 2, 1, "divergent_suffix"), "case-f": (1, 1, 1, "divergent_suffix"),
        "case-g": (0, 0, 1, "divergent_suffix"),
        "kip1-lt": (11, 11, 1, "divergent_suffix"), "kip1-eq": (11, 11, 1, "divergent_suffix"),
        "kip1-gt": (11, 11, 1, "divergent_suffix"), "kip2": (None, None, 0, "in_sync"),
        "kip3": (0, 0, 2, "divergent_suffix"),
    },
    "kip-101": {
        "case-a": (None, None, 0, "lagging"), "case-b": (None, None, 0, "lagging"),
        "case-c": (2, 2, 1, "divergent_suffix"), "case-d": (2, 2, 1, "divergent_suffix"),
        "case-e": (2, 2, 1, "divergent_suffix"), "case-f": (1, 1, 1, "divergent_suffix"),
        "case-g": (0, None, 0, "silent_divergence"),
        "kip1-lt": (11, None, 0, "silent_divergence"), "kip1-eq": (11, None, 0, "silent_divergence"),
        "kip1-gt": (11, 11, 1, "divergent_suffix"), "kip2": (None, None, 0, "in_sync"),
        "kip3": (0, 1, 1, "silent_divergence"),
    },
}


@pytest.fixture(scope="module")
def seeds(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("seeds")
    for topic, (leader, follower) in CASES.items():
        write_partition(root, topic, 0, {L: leader, FO: follower})
    # kip3 came out of unclean elections: the follower is not in the ISR
    write_describe(root, {t: [PartitionMeta(0, L, (L, FO), (L,) if t == "kip3" else (L, FO))] for t in CASES})
    snap = load_snapshot(spark, str(root))
    return {p: audit(snap, p, run_id=p) for p in ("epoch", "kip-101")}


@pytest.mark.parametrize("protocol", ["epoch", "kip-101"])
def test_follower_offsets_per_protocol(seeds, protocol: str) -> None:  # type: ignore[no-untyped-def]
    rows = seeds[protocol]["replica_status"].filter(F.col("replica") == FO).collect()
    got = {r.topic: (r.divergence_offset, r.truncation_offset, r.truncation_rounds, r.status) for r in rows}
    assert got == EXPECTED[protocol]


def _findings(tables, topic: str) -> dict[str, tuple]:  # type: ignore[no-untyped-def,type-arg]
    rows = tables["findings"].filter(F.col("topic") == topic).collect()
    return {r.check: (r.severity, r.offset_start, r.offset_end, r.replica) for r in rows}


def test_epoch_protocol_findings(seeds) -> None:  # type: ignore[no-untyped-def]
    t = seeds["epoch"]
    assert _findings(t, "case-a") == {"FOLLOWER_LAG": ("INFO", 2, 4, FO)}
    assert _findings(t, "case-c") == {"DIVERGENT_SUFFIX": ("WARNING", 2, 4, FO)}
    assert _findings(t, "case-g") == {"DIVERGENT_SUFFIX": ("WARNING", 0, 2, FO)}
    assert _findings(t, "kip1-lt") == {"DIVERGENT_SUFFIX": ("WARNING", 11, 16, FO)}  # d set: no FOLLOWER_LAG
    assert _findings(t, "kip2") == {}
    assert _findings(t, "kip3") == {
        "DIVERGENT_SUFFIX": ("WARNING", 0, 2, FO),
        "LOG_MATCHING_VIOLATION": ("CRITICAL", 0, 2, FO),
        "COMMITTED_DATA_LOSS": ("CRITICAL", 0, 2, FO),
    }
    ps = {r.topic: r for r in t["partition_status"].collect()}
    assert ps["kip3"].worst_severity == "CRITICAL" and ps["kip3"].finding_count == 3
    assert ps["kip2"].worst_severity is None and ps["kip2"].leader_source == "metadata"


def test_kip279_scenario_3_takes_two_rounds(seeds) -> None:  # type: ignore[no-untyped-def]
    import json

    row = seeds["epoch"]["findings"].filter((F.col("topic") == "kip3") & (F.col("check") == "DIVERGENT_SUFFIX")).first()
    rounds = json.loads(row.details)["rounds"]
    assert [(r["requested_epoch"], r["leader_epoch"], r["leader_offset"], r["effective_offset"]) for r in rounds] == [
        (2, 1, 1, 1), (0, 0, 0, 0)]


def test_kip101_silent_divergence(seeds) -> None:  # type: ignore[no-untyped-def]
    import json

    t = seeds["kip-101"]
    assert _findings(t, "kip1-lt")["SILENT_DIVERGENCE"] == ("CRITICAL", 11, 16, FO)
    assert _findings(t, "kip1-eq")["SILENT_DIVERGENCE"] == ("CRITICAL", 11, 21, FO)
    gt = t["findings"].filter((F.col("topic") == "kip1-gt") & (F.col("check") == "DIVERGENT_SUFFIX")).first()
    details = json.loads(gt.details)
    assert (details["truncation_offset"], details["resume_offset"]) == (11, 21)
    assert "resumes fetching at 21" in gt.message
    assert _findings(t, "kip3")["SILENT_DIVERGENCE"] == ("CRITICAL", 0, 1, FO)


def test_openraft_example_as_tables(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # R5 (leader, terms 2 4 4) and R3 (5 3 3): R3's entry 5-0 conflicts at index 0.
    # raft-1: same terms, different content at index 1: raft never truncates it.
    write(tmp_path / "batches.csv", "topic,partition,replica,base_offset,last_offset,epoch,crc\n" + "".join(
        f"raft,0,{r},{i},{i},{term},{100 * r + i}\n" for r, terms in ((5, (2, 4, 4)), (3, (5, 3, 3)))
        for i, term in enumerate(terms)) + "".join(
        f"raft,1,{r},{i},{i},{term},{crc}\n" for r, entries in ((5, ((1, 10), (1, 11), (2, 12))),
                                                                (3, ((1, 10), (1, 99), (2, 12))))
        for i, (term, crc) in enumerate(entries)))
    write(tmp_path / "hwm.csv", "topic,partition,replica,high_watermark\nraft,0,3,1\nraft,0,5,0\nraft,1,3,0\nraft,1,5,0\n")
    write(tmp_path / "metadata.csv", 'topic,partition,leader,replicas,isr\nraft,0,5,"3,5","5"\nraft,1,5,"3,5","5"\n')
    tables = audit(load_snapshot(spark, str(tmp_path), format="table"), run_id="raft")
    rs = {(r.partition, r.replica): (r.divergence_offset, r.truncation_offset, r.status)
          for r in tables["replica_status"].filter(F.col("replica") == 3).collect()}
    assert rs == {(0, 3): (0, 0, "divergent_suffix"), (1, 3): (1, None, "silent_divergence")}
    found = {(r.partition, r.check) for r in tables["findings"].filter(F.col("severity") != "INFO").collect()}
    # R3 wrote term 3 after term 5: that is also an epoch regression in its own log
    assert found == {(0, "DIVERGENT_SUFFIX"), (0, "COMMITTED_DATA_LOSS"), (0, "EPOCH_REGRESSION"),
                     (1, "SILENT_DIVERGENCE"), (1, "SAME_EPOCH_CONFLICT")}
