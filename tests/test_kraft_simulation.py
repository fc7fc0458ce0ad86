"""``auditor simulate`` with a KRaft controller quorum (SPEC 4.7): the audit finds exactly the
simulator's ground truth for the metadata partition, with every KRaft fault and without, in
each release's layout (Kafka 2.8 names the folder ``@metadata-0``, later ones
``__cluster_metadata-0``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from auditor import audit, load_snapshot
from auditor.simulator import continue_simulation, simulate
from auditor.simulator.kraft import KRAFT_FAULTS
from tests.invariants import KEYS, disagreements, repeated_rows
from tests.kraft_fixtures import into_per_broker_files

pytestmark = pytest.mark.spark
META = ("__cluster_metadata", "@metadata")
#: snapshot label -> (seed, faults, the release whose dump text the snapshot is printed in)
RUNS = {"2026-02-01T00:00:00": (1, "all-kraft", "3.3"), "2026-02-02T00:00:00": (2, "all-kraft", "2.8"),
        "2026-02-03T00:00:00": (3, "all-kraft", "3.2"), "2026-02-04T00:00:00": (4, "none", "3.3"),
        # the third snapshot of one cluster (simulate --continue-from twice): the quorum's
        # history goes on, and the faults come with the last step
        "2026-02-05T00:00:00": (5, "all-kraft", "3.3"),
        # a hand-made per-broker collection (SPEC 3.1): each node's metadata log dumps (segments
        # and snapshots) moved into a multi-section file above the folders
        # (tests.kraft_fixtures.into_per_broker_files)
        "2026-02-06T00:00:00": (6, "all-kraft", "3.3")}
#: labels of continued clusters -> the (more batches per partition, faults) of each later snapshot
CONTINUED = {"2026-02-05T00:00:00": [(30, "none"), (40, "all-kraft")]}
PER_BROKER = {"2026-02-06T00:00:00"}
NAMED = re.compile(r"^(\d{20})-(\d{10})\.checkpoint(\.txt)?$")


def _spec(faults: str) -> str:
    return ",".join(KRAFT_FAULTS) if faults == "all-kraft" else "none"


def _snapshot_ids(snapshot: Path) -> dict[int, list[tuple[int, int]]]:
    """Node -> the ids of the snapshot files (dumped or bare) in its metadata log folder."""
    ids = {}
    for folder in snapshot.glob("broker=*/meta/*"):
        node = int(folder.parts[-3].split("=")[1])
        ids[node] = sorted({(int(m[1]), int(m[2])) for m in map(NAMED.match, (f.name for f in folder.iterdir())) if m})
    return ids


@pytest.fixture(scope="module")
def simulated(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("kraft-sim")
    applied, snapshot_ids = {}, {}
    for label, (seed, faults, release) in RUNS.items():
        steps = CONTINUED.get(label, [])
        first = root / f"snapshot={label}" if not steps else root.parent / f"{root.name}-{label}-0"
        summary = simulate(first, topics=1, partitions=1, batches=40, faults=_spec("none" if steps else faults),
                           seed=seed, kraft_controllers=3, shapes=False, dump_style=release,
                           dump_layout="per-broker" if label in PER_BROKER else "per-segment")
        for k, (more, later) in enumerate(steps):
            last = k == len(steps) - 1
            nxt = root / f"snapshot={label}" if last else root.parent / f"{root.name}-{label}-{k + 1}"
            summary = continue_simulation(first, nxt, more, _spec(later))
            first = nxt
        applied[label] = summary.faults
        snapshot_ids[label] = _snapshot_ids(first)
        if label in PER_BROKER:
            into_per_broker_files(first)
    tables = audit(load_snapshot(spark, str(root)))
    found = tables["findings"].filter(F.col("topic").isin(*META) & F.col("severity").isin("CRITICAL", "ERROR", "WARNING"))
    reps = tables["replica_status"].filter(F.col("topic").isin(*META) & (F.col("role") == "follower"))
    parts = tables["partition_status"].filter(F.col("topic").isin(*META))
    ids = tables["replica_status"].select("snapshot", "topic", "partition", "replica", "kraft_snapshots")
    rows = {name: [r.asDict() for r in tables[name].collect()] for name in KEYS}  # a few hundred rows
    repeats = repeated_rows(rows)
    assert set(repeats) == set(KEYS) and not any(repeats.values()), repeats  # SPEC 6's keys, every table
    assert disagreements(rows) == []
    return root, applied, found.collect(), reps.collect(), parts.collect(), ids.collect(), snapshot_ids


def _label(ts) -> str:  # type: ignore[no-untyped-def]
    return ts.strftime("%Y-%m-%dT%H:%M:%S")


@pytest.mark.parametrize("label", list(RUNS))
def test_audit_matches_the_simulated_truth(simulated, label: str) -> None:  # type: ignore[no-untyped-def]
    root, applied, found, reps, parts, _, _ = simulated
    truth = json.loads((root / f"snapshot={label}" / "expected_findings.json").read_text())
    # the truth names the metadata log's topic as the release's folder does, like the tables
    want = {(f["topic"], f["check"], f["severity"], f["replica"], f["offset_start"], f["offset_end"])
            for f in truth["findings"] if f["topic"] in META}
    got = {(f.topic, f.check, f.severity, f.replica, f.offset_start, f.offset_end)
           for f in found if _label(f.snapshot) == label}
    assert got == want
    want_f = {(r["topic"], r["replica"]): (r["divergence_offset"], r["truncation_offset"]) for r in truth["replicas"]
              if r["topic"] in META}
    got_f = {(r.topic, r.replica): (r.divergence_offset, r.truncation_offset)
             for r in reps if _label(r.snapshot) == label}
    assert got_f == want_f and got_f, got_f
    assert {t for t, _ in got_f} == {"@metadata" if RUNS[label][2] == "2.8" else "__cluster_metadata"}
    (part,) = [p for p in parts if _label(p.snapshot) == label]
    assert part.leader_source == "quorum-state" and part.max_high_watermark is not None
    if RUNS[label][1] == "none":
        assert want == set() and not applied[label]
    else:
        assert set(applied[label]) == set(KRAFT_FAULTS), applied[label]


def test_the_faults_leave_their_evidence(simulated) -> None:  # type: ignore[no-untyped-def]
    """Across the seeds with faults, the KRaft faults show as the checks KRAFT.md section 4
    names."""
    _, _, found, _, _, _, _ = simulated
    checks = {f.check for f in found if RUNS[_label(f.snapshot)][1] != "none"}
    assert checks >= {"CORRUPT_BATCH", "KRAFT_SNAPSHOT_INVALID", "KRAFT_SNAPSHOT_MISSING", "KRAFT_QUORUM_STATE_BEHIND",
                      "SAME_EPOCH_CONFLICT", "SILENT_DIVERGENCE", "LEADER_INCOMPLETE", "DIVERGENT_SUFFIX"}, sorted(checks)


def test_replica_status_holds_each_node_s_snapshot_ids(simulated) -> None:  # type: ignore[no-untyped-def]
    """``replica_status.kraft_snapshots``: on the metadata log, the ids of the snapshot files
    the simulator left in each node's folder (zero-length ones included, ``bootstrap`` never);
    null on every other partition."""
    _, _, _, _, _, ids, snapshot_ids = simulated
    for label in RUNS:
        want = snapshot_ids[label]  # (of a per-broker collection: before its dumps were moved)
        got = {r.replica: [(i["end_offset"], i["epoch"]) for i in json.loads(r.kraft_snapshots)]
               for r in ids if _label(r.snapshot) == label and r.topic in META}
        assert got == want and any(got.values()), (label, got, want)
        others = [r for r in ids if _label(r.snapshot) == label and r.topic not in META]
        assert others and all(r.kraft_snapshots is None for r in others)
