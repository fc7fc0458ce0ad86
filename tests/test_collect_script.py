"""scripts/collect-broker-snapshot.sh against a fake kafka-dump-log.sh: layout, order of
copies (HWM first, epoch checkpoints last), skipped folders, no --print-data-log."""

from __future__ import annotations

import os
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from auditor.ingest import discovery as d
from tests.conftest import write

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "collect-broker-snapshot.sh"

FAKE_DUMP = """#!/usr/bin/env bash
# fake kafka-dump-log.sh: records its arguments and what the snapshot held when it ran
echo "$*" >> "$FAKE_LOG"
seg="$2"
ls -R "$FAKE_OUT" | grep -c leader-epoch-checkpoint >> "$FAKE_LOG.epochs" || true
ls -R "$FAKE_OUT" | grep -c replication-offset-checkpoint >> "$FAKE_LOG.hwm" || true
echo "Dumping $seg"
echo "Log starting offset: 0"
echo "baseOffset: 0 lastOffset: 0 count: 1 partitionLeaderEpoch: 1 crc: 1 isvalid: true"
"""


def test_collects_the_spec_layout(tmp_path: Path) -> None:
    logs = tmp_path / "kafka-logs"
    for part in ("orders-0", "orders-1", "__consumer_offsets-7"):
        write(logs / part / "00000000000000000000.log", "binary")
        write(logs / part / "00000000000000000000.index", "binary")
        write(logs / part / "leader-epoch-checkpoint", "0\n1\n1 0\n")
    write(logs / "orders-0" / "00000000000000000100.log", "binary")
    write(logs / "orders-2.6f1d-delete" / "00000000000000000000.log", "binary")
    write(logs / "__cluster_metadata-0" / "00000000000000000000.log", "binary")
    write(logs / "__cluster_metadata-0" / "00000000000000000042-0000000003.checkpoint", "binary")
    write(logs / "__cluster_metadata-0" / "leader-epoch-checkpoint", "0\n1\n3 0\n")
    write(logs / "__cluster_metadata-0" / "quorum-state", '{"leaderId":1,"leaderEpoch":3,"data_version":0}')
    write(logs / "replication-offset-checkpoint", "0\n1\norders 0 5\n")
    write(logs / "recovery-point-offset-checkpoint", "0\n0\n")
    write(logs / "meta.properties", "broker.id=4\n")
    kafka_bin = tmp_path / "bin"
    fake = write(kafka_bin / "kafka-dump-log.sh", FAKE_DUMP)
    fake.chmod(0o755)
    out = tmp_path / "snapshot"
    env = {**os.environ, "FAKE_LOG": str(tmp_path / "calls"), "FAKE_OUT": str(out)}
    result = subprocess.run(
        ["bash", str(SCRIPT), "--broker-id", "4", "--log-dirs", str(logs), "--out", str(out),
         "--kafka-bin", str(kafka_bin), "--deep-iteration"],
        capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0, result.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    data_calls = [c for c in calls if "__cluster_metadata" not in c]
    assert len(data_calls) == 4 and all(c.endswith("--deep-iteration") for c in data_calls)
    assert not any("print-data-log" in c or "delete" in c for c in calls)
    # the metadata log: its segment and its snapshot, with the decoder (SPEC 4.7)
    meta_calls = sorted(c for c in calls if "__cluster_metadata" in c)
    assert len(meta_calls) == 2 and all(c.endswith("--cluster-metadata-decoder") for c in meta_calls)
    meta = out / "broker=4" / "logdir0-kafka-logs" / "__cluster_metadata-0"
    assert (meta / "00000000000000000042-0000000003.checkpoint").read_bytes() == b""  # the name only
    assert (meta / "quorum-state").exists()
    # every dump ran after the HWM checkpoint was copied and before any epoch checkpoint was
    assert set((tmp_path / "calls.hwm").read_text().split()) == {"1"}
    assert set((tmp_path / "calls.epochs").read_text().split()) == {"0"}
    found = d.discover(out, datetime.now(timezone.utc))
    kinds = sorted((f.kind, f.topic, f.partition) for f in found.files)
    assert kinds == sorted([
        (d.DUMP, "__consumer_offsets", 7), (d.DUMP, "orders", 0), (d.DUMP, "orders", 0), (d.DUMP, "orders", 1),
        (d.LEADER_EPOCH, "__consumer_offsets", 7), (d.LEADER_EPOCH, "orders", 0), (d.LEADER_EPOCH, "orders", 1),
        (d.HWM, None, None), (d.RECOVERY_POINT, None, None),
        *[(kind, "__cluster_metadata", 0) for kind in (d.DUMP, d.DUMP, d.KRAFT_SNAPSHOT_FILE, d.LEADER_EPOCH,
                                                     d.QUORUM_STATE)]])
    assert all(f.broker == 4 for f in found.files)


def test_bad_arguments_exit_2(tmp_path: Path) -> None:
    for args in ([], ["--broker-id", "x", "--log-dirs", str(tmp_path), "--out", str(tmp_path)]):
        result = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, check=False)
        assert result.returncode == 2


FAKE_MULTI_DUMP = """#!/usr/bin/env bash
# fake kafka-dump-log.sh: one "Dumping" section per file of --files a,b,c
echo "$*" >> "$FAKE_LOG"
IFS=',' read -r -a segs <<< "$2"
for seg in "${segs[@]}"; do
    echo "Dumping $seg"
    echo "Log starting offset: 0"
    echo "baseOffset: 0 lastOffset: 0 count: 1 partitionLeaderEpoch: 1 crc: 1 isvalid: true"
done
"""


def test_per_broker_file_holds_every_section(tmp_path: Path) -> None:
    logs = tmp_path / "kafka-logs"
    for part in ("orders-0", "orders-1"):
        write(logs / part / "00000000000000000000.log", "binary")
        write(logs / part / "leader-epoch-checkpoint", "0\n1\n1 0\n")
    write(logs / "orders-0" / "00000000000000000100.log", "binary")
    write(logs / "replication-offset-checkpoint", "0\n1\norders 0 5\n")
    kafka_bin = tmp_path / "bin"
    write(kafka_bin / "kafka-dump-log.sh", FAKE_MULTI_DUMP).chmod(0o755)
    out = tmp_path / "snapshot"
    result = subprocess.run(
        ["bash", str(SCRIPT), "--broker-id", "2", "--log-dirs", str(logs), "--out", str(out),
         "--kafka-bin", str(kafka_bin), "--per-broker-file"],
        capture_output=True, text=True, env={**os.environ, "FAKE_LOG": str(tmp_path / "calls")}, check=False)
    assert result.returncode == 0, result.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert len(calls) == 2  # one run per partition, over all of its segments
    assert calls[0].startswith(f"--files {logs}/orders-0/00000000000000000000.log,{logs}/orders-0/00000000000000000100.log")
    found = d.discover(out, datetime.now(timezone.utc))
    dumps = [f for f in found.files if f.kind == d.DUMP]
    assert [(f.rel, f.topic) for f in dumps] == [("broker=2/logdir0-kafka-logs/kafka-dump-log.txt", None)]
    text = (out / "broker=2" / "logdir0-kafka-logs" / "kafka-dump-log.txt").read_text()
    assert text.count("Dumping ") == 3
    epochs = sorted((f.topic, f.partition) for f in found.files if f.kind == d.LEADER_EPOCH)
    assert epochs == [("orders", 0), ("orders", 1)]
