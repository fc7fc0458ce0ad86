"""A small hand-written cluster snapshot whose every value is known (used by test_run).

Three brokers, topic ``orders`` (3 partitions) and the compacted topic ``payments``:
partition orders-0 is healthy, orders-1 has a follower that restarted after a lossy
shutdown (its HWM is above its log end) and now lags behind, orders-2 went
through an unclean election (broker 1 holds epoch-2 records the new leader never had),
and payments-0 has compaction gaps. Written in Kafka 3.3+ dump format, with checkpoint
files and ``topics-describe.txt``, in the SPEC 3.1 layout.
"""

from __future__ import annotations

from pathlib import Path

from auditor.simulator.kafka_text import (
    Batch,
    PartitionMeta,
    checkpoint_text,
    content_crc,
    describe_text,
    dump_segment,
)

LOG_DIR = "/var/lib/kafka/data"


def _log(topic: str, partition: int, spans: list[tuple[int, int, int]], salt: str = "") -> list[Batch]:
    """Batches for ``(base, last, epoch)`` spans; the CRC depends on the content only."""
    return [Batch(b, last, e, content_crc(topic, partition, b, last, e, salt), timestamp=1_763_000_000_000 + b)
            for b, last, e in spans]


def _spans(start: int, end: int, step: int, epoch: int) -> list[tuple[int, int, int]]:
    return [(o, min(o + step, end) - 1, epoch) for o in range(start, end, step)]


def write_demo_snapshot(root: str | Path) -> Path:
    """Write the demo snapshot under ``root`` and return its path."""
    base = Path(root)
    # replica logs: {(topic, partition): {broker: (batches, epoch entries, hwm)}}
    healthy = _log("orders", 0, _spans(0, 400, 50, 1) + _spans(400, 600, 50, 2))
    lag_leader = _log("orders", 1, _spans(0, 500, 25, 3))
    fork_common = _spans(0, 300, 20, 1)
    fork_leader = _log("orders", 2, fork_common + _spans(300, 360, 20, 3))
    fork_old = _log("orders", 2, fork_common) + _log("orders", 2, _spans(300, 340, 10, 2), salt="lost")
    pay = _log("payments", 0, [(0, 9, 1), (14, 20, 1), (30, 44, 1), (45, 60, 2)])
    replicas = {
        ("orders", 0): {b: (healthy, [(1, 0), (2, 400)], 600) for b in (1, 2, 3)},
        ("orders", 1): {1: (lag_leader, [(3, 0)], 450), 2: (lag_leader, [(3, 0)], 450),
                        3: (lag_leader[:12], [(3, 0)], 420)},  # lossy restart: HWM above its LEO
        ("orders", 2): {2: (fork_leader, [(1, 0), (3, 300)], 300), 3: (fork_leader, [(1, 0), (3, 300)], 300),
                        1: (fork_old, [(1, 0), (2, 300)], 300)},
        ("payments", 0): {b: (pay, [(1, 0), (2, 45)], 61) for b in (1, 2, 3)},
    }
    hwms: dict[int, list[tuple[str, int, int]]] = {}
    for (topic, part), by_broker in replicas.items():
        for broker, (batches, epochs, hwm) in by_broker.items():
            folder = base / f"broker={broker}" / "data" / f"{topic}-{part}"
            folder.mkdir(parents=True, exist_ok=True)
            half = len(batches) // 2
            segments = [batches[:half], batches[half:]] if half else [batches]
            for seg in segments:
                if seg:
                    (folder / f"{seg[0].base_offset:020d}.log.txt").write_text(
                        dump_segment(LOG_DIR, topic, part, seg[0].base_offset, seg), encoding="utf-8")
            (folder / "leader-epoch-checkpoint").write_text(checkpoint_text(epochs), encoding="utf-8")
            (folder / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", encoding="utf-8")
            hwms.setdefault(broker, []).append((topic, part, hwm))
    for broker, entries in hwms.items():
        (base / f"broker={broker}" / "data" / "replication-offset-checkpoint").write_text(
            checkpoint_text(entries), encoding="utf-8")
    (base / "topics-describe.txt").write_text(describe_text({
        "orders": ({"retention.ms": "604800000"}, [
            PartitionMeta(0, 1, (1, 2, 3), (1, 2, 3)),
            PartitionMeta(1, 1, (1, 2, 3), (1, 2)),
            PartitionMeta(2, 2, (2, 3, 1), (2, 3)),
        ]),
        "payments": ({"cleanup.policy": "compact", "min.insync.replicas": "2"}, [
            PartitionMeta(0, 3, (3, 1, 2), (3, 1, 2))]),
    }), encoding="utf-8")
    return base
