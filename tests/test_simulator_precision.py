"""The auditor against the simulator's ground truth: for several seeds, fault mixes and
dump styles, the findings at WARNING or above are exactly ``expected_findings.json``
(precision and recall 1.0) and every follower's divergence and truncation offsets match."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from auditor import audit, load_snapshot
from auditor.simulator import continue_simulation, simulate
from auditor.simulator.history import FAULTS
from tests.conftest import large_input
from tests.invariants import KEYS, disagreements, repeated_rows

pytestmark = pytest.mark.spark

CASES = {
    # name: simulate() arguments
    "all-faults-3.3": dict(seed=11, brokers=3, topics=3, partitions=12, batches=30, faults="all=3"),
    "elections-2.2-records": dict(seed=12, brokers=5, topics=2, partitions=8, batches=20,
                                  faults="unclean-election=3,kip-101=3,fast-failover=3,zombie-leader=2",
                                  dump_style="2.2", records=True, segment_batches=6),
    "disk-faults-1.0": dict(seed=13, brokers=4, topics=2, partitions=8, batches=25,
                            faults="lossy-shutdown=3,stale-epoch-checkpoint=3,lost-epoch-checkpoint=2,"
                                   "corrupt-batch=2,torn-tail=2,stopped-follower=2",
                            dump_style="1.0", segment_batches=5),
    # one multi-section dump file per broker and log dir (SPEC 3.1: sections take their
    # partition from the header), as collect-broker-snapshot.sh --per-broker-file writes it
    "per-broker-file-3.3": dict(seed=14, brokers=3, topics=2, partitions=6, batches=20, faults="all=2",
                                segment_batches=7, dump_layout="per-broker"),
    # the third snapshot of one cluster (simulate --continue-from twice): more traffic, a
    # rolled segment or two, and new incidents on top of the first snapshot's
    "continued-3.3": dict(seed=15, brokers=3, topics=2, partitions=6, batches=20, faults="all",
                          segment_batches=8, continue_with=[(12, "unclean-election=2,lossy-shutdown"),
                                                            (10, "fast-failover,stale-epoch-checkpoint")]),
}


def _key(f: dict) -> tuple:  # type: ignore[type-arg]
    return (f["check"], f["topic"], f["partition"], f["replica"], f["offset_start"], f["offset_end"])


def merged_input(root: Path) -> tuple[dict, dict]:  # type: ignore[type-arg]
    """Every case simulated on its own beside ``root``, then merged into one input under it
    (each case in its own log directory of each broker, topics prefixed by the case).
    Returns each case's ground truth and simulation summary. (``benchmarks/jobs.py``
    audits the same input.)"""
    expected, summaries, describe = {}, {}, []
    for i, (case, kwargs) in enumerate(CASES.items()):
        one = root.parent / f"{root.name}-{case}"
        kwargs = dict(kwargs)
        steps = kwargs.pop("continue_with", [])
        summaries[case] = simulate(one, topic_prefix=f"c{i}.", **kwargs)  # type: ignore[arg-type]
        for k, (more, faults) in enumerate(steps):  # type: ignore[attr-defined]
            nxt = root.parent / f"{root.name}-{case}-{k + 1}"
            summaries[case] = continue_simulation(one, nxt, more, faults)
            one = nxt
        expected[case] = json.loads((one / "expected_findings.json").read_text())
        describe.append((one / "topics-describe.txt").read_text())
        for broker in one.glob("broker=*"):
            (root / broker.name).mkdir(exist_ok=True)
            shutil.move(str(broker / "data"), str(root / broker.name / f"logs-{case}"))
    (root / "topics-describe.txt").write_text("".join(describe))
    return expected, summaries


@pytest.fixture(scope="module")
def merged(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    """The cases merged into one input (:func:`merged_input`) and audited once, as a large
    input is (the path of real clusters): the scan keeps summaries only, the drill-downs
    read the dump files again, code generation and the text readers' broadcasts on. (The
    small-input path has the seed cases, the model tests' other half and every CLI test.)"""
    root = tmp_path_factory.mktemp("merged")
    expected, summaries = merged_input(root)
    with large_input(spark) as policy:
        snap = load_snapshot(spark, str(root), policy=policy)
        assert snap.source.stored is None
        stored = audit(snap, "epoch", run_id="precision")
    findings = [r.asDict() for r in stored["findings"].filter(
        F.col("severity").isin("WARNING", "ERROR", "CRITICAL")).collect()]
    status = {(r.topic, r.partition, r.replica): (r.divergence_offset, r.truncation_offset)
              for r in stored["replica_status"].filter(F.col("role") == "follower").collect()}
    # (the tables of this audit are a few thousand rows)
    rows = {name: [r.asDict() for r in stored[name].collect()] for name in KEYS}
    repeats = repeated_rows(rows)
    repeats["disagreements"] = disagreements(rows)
    return expected, summaries, findings, status, stored["parse_errors"].count(), repeats


@pytest.mark.parametrize("case", list(CASES))
def test_auditor_matches_ground_truth(merged, case: str) -> None:  # type: ignore[no-untyped-def]
    expected_all, summaries, findings, status, parse_errors, *_ = merged
    expected, prefix = expected_all[case], f"c{list(CASES).index(case)}."
    rows = [f for f in findings if f["topic"].startswith(prefix)]
    got = Counter(_key(r) for r in rows)
    want = Counter(_key(f) for f in expected["findings"])
    assert want, "the simulator claimed nothing: the comparison would be empty"
    missed, spurious = want - got, got - want
    recall = 1 - sum(missed.values()) / sum(want.values())
    precision = 1 - sum(spurious.values()) / max(1, sum(got.values()))
    assert (precision, recall) == (1.0, 1.0), {"missed": sorted(missed, key=str), "spurious": sorted(spurious, key=str)}
    severities = {_key(r): r["severity"] for r in rows}
    assert all(severities[_key(f)] == f["severity"] for f in expected["findings"])

    truth = {(f["topic"], f["partition"], f["replica"]): (f["divergence_offset"], f["truncation_offset"])
             for f in expected["replicas"]}
    assert {k: v for k, v in status.items() if k[0].startswith(prefix)} == truth
    assert parse_errors == 0
    # the case exercised what it meant to: every requested fault kind found a place
    requested = {name.split("=")[0] for name in str(CASES[case]["faults"]).split(",")}
    requested |= {name.split("=")[0] for _, later in CASES[case].get("continue_with", []) for name in later.split(",")}
    assert set(summaries[case].faults) == (set(FAULTS) if "all" in requested else requested)


def test_no_table_holds_a_row_twice_or_contradicts_another(merged) -> None:  # type: ignore[no-untyped-def]
    """SPEC 6's keys hold in every table of the large-input audit of all the cases, and the
    tables agree with each other."""
    repeats = merged[-1]
    assert set(repeats) == {*KEYS, "disagreements"} and not any(repeats.values()), repeats


def test_the_mix_holds_tiered_and_retained_partitions(merged) -> None:  # type: ignore[no-untyped-def]
    """The cases above audit real clusters' shapes too (issue 23): partitions with tiered
    storage (remote segments not dumped, log start 0), with a log start inside the first
    segment, transactional topics, a compacted ``__consumer_offsets`` cleaned by each
    replica on its own, and an ELR in the describe output; their findings are in the
    comparisons above."""
    _, summaries, *_ = merged
    shapes = Counter()  # type: ignore[var-annotated]
    for summary in summaries.values():
        shapes.update(summary.shapes)
    assert shapes["tiered"] >= 3 and shapes["retention"] >= 1 and shapes["compacted"] == 2 * len(CASES), shapes
    assert shapes["elr"] >= 1, shapes  # a describe line names an eligible leader replica (KIP-966)
