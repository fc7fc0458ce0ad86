"""A live broker's log dir collected while it works, without a broker (SPEC 3.4): while
``auditor collect`` runs, batches are appended to each partition's newest segment (one write
each, as Kafka appends), segments roll, and ``replication-offset-checkpoint`` and
``leader-epoch-checkpoint`` are rewritten as Kafka writes them (a temporary file renamed
over the old one). The audit of what was collected has no finding at WARNING or above."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from auditor import collect
from auditor.config import Config
from auditor.run import run_audit
from auditor.simulator import simulate
from auditor.simulator.kafka_binary import encode_batch
from auditor.simulator.kafka_text import Batch

pytestmark = pytest.mark.spark

SEVERE = {"WARNING", "ERROR", "CRITICAL"}


def _rename_into_place(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


class Broker(threading.Thread):
    """Appends, rolls and rewrites checkpoints in ``log_dir`` until stopped."""

    def __init__(self, log_dir: Path) -> None:
        super().__init__(daemon=True)
        self.log_dir, self.stopping, self.appended, self.rolled = log_dir, threading.Event(), 0, 0
        self.ends: dict[Path, int] = {}
        self.epochs: dict[Path, int] = {}
        self.caches: dict[Path, str] = {}
        for folder in sorted(p for p in log_dir.iterdir() if p.is_dir()):
            newest = max(folder.glob("*.log"))
            entries: list = []
            data = newest.read_bytes()
            collect.walk_entries(lambda at, n: data[at:at + n], len(data), entries, newest=True,
                                 segment_base=int(newest.name[:20]))
            self.ends[folder] = entries[-1][5] + 1 if entries else int(newest.name[:20])
            self.epochs[folder] = entries[-1][6] if entries else 0
            self.caches[folder] = (folder / "leader-epoch-checkpoint").read_text()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                for folder, end in self.ends.items():
                    newest = max(folder.glob("*.log"))
                    if self.appended and self.appended % 7 == 0:  # roll: the next batch starts a new segment
                        newest = folder / f"{end:020d}.log"
                        self.rolled += 1
                    batch = encode_batch(Batch(end, end + 1, self.epochs[folder], (end * 2654435761) & 0xFFFFFFFF,
                                               bytes_per_record=18))
                    fd = os.open(newest, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                    try:
                        os.write(fd, batch)  # one write per batch, as Kafka appends
                    finally:
                        os.close(fd)
                    self.ends[folder] = end + 2
                    self.appended += 1
                    # (rewritten as it was: the leader's epoch does not change here)
                    _rename_into_place(folder / "leader-epoch-checkpoint", self.caches[folder])
                # the high watermarks: what every replica holds (replication factor 1)
                _rename_into_place(self.log_dir / collect.HWM, "0\n%d\n" % len(self.ends) + "".join(
                    f"{f.name.rsplit('-', 1)[0]} {f.name.rsplit('-', 1)[1]} {end}\n" for f, end in self.ends.items()))
                time.sleep(0.002)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


def test_a_log_dir_collected_while_the_broker_writes_audits_clean(spark: object, tmp_path: Path) -> None:
    snap = tmp_path / "live"
    simulate(snap, brokers=1, topics=2, partitions=3, batches=30, faults="none", replication_factor=1, min_isr=1,
             segment_batches=8, shapes=False, log_format="segments")
    log_dir = snap / "broker=1" / "data"
    broker = Broker(log_dir)
    broker.start()
    try:
        while broker.appended < 12:  # it is running
            time.sleep(0.01)
        before = broker.appended
        out = tmp_path / "collected"
        # a slow collection (a busy node's rate cap): the broker keeps writing while it reads
        assert collect.main(["--broker-id", "1", "--log-dirs", str(log_dir), "--out", str(out),
                             "--max-read-mb-per-s", "0.04"]) == 0
        during = broker.appended - before
    finally:
        broker.stopping.set()
        broker.join()
    assert broker.error is None, broker.error
    assert during > 10 and broker.rolled > 0  # it appended and rolled while collect ran
    (out / "topics-describe.txt").write_bytes((snap / "topics-describe.txt").read_bytes())
    audit_out = tmp_path / "out"
    run_audit(spark, str(out), str(audit_out), Config(), run_id="live", snapshot_label="2026-03-01T00:00:00Z")
    findings = DeltaTable(str(audit_out / "findings")).to_pyarrow_table().to_pylist()
    assert not [(f["check"], f["severity"], f["message"]) for f in findings if f["severity"] in SEVERE]
    status = DeltaTable(str(audit_out / "replica_status")).to_pyarrow_table().to_pylist()
    assert len(status) == 6 and all(s["log_end_offset"] >= s["high_watermark"] for s in status)
    assert sum(s["batch_count"] for s in status) > 6 * 30
