"""Write replica histories as a real snapshot (Kafka 3.3+ dump text, checkpoints, describe)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from auditor.simulator.kafka_text import (
    Batch,
    PartitionMeta,
    checkpoint_text,
    content_crc,
    describe_text,
    dump_segment,
)
from tests.reference import rebuild_cache

Span = tuple[int, int, int]  # (base, last, epoch)


@dataclass
class Replica:
    """One replica's log: batch spans, checkpoint entries (default: rebuilt from the log,
    plus ``extra_epochs``), HWM, and a salt that changes its CRCs (other content)."""

    spans: list[Span]
    hwm: int | None
    extra_epochs: list[tuple[int, int]] = field(default_factory=list)
    checkpoint: list[tuple[int, int]] | None = None
    salt: dict[int, str] = field(default_factory=dict)  # base offset -> salt for that batch's CRC
    segments: int = 1  # dump files the log is split into, by batch count (one per segment)


def write_partition(root: Path, topic: str, partition: int, replicas: dict[int, Replica]) -> None:
    for broker, r in replicas.items():
        folder = root / f"broker={broker}" / "data" / f"{topic}-{partition}"
        folder.mkdir(parents=True, exist_ok=True)
        batches = [Batch(b, last, e, content_crc(topic, partition, b, last, e, r.salt.get(b, "")))
                   for b, last, e in sorted(r.spans)]
        count = max(1, min(r.segments, len(batches)))
        cuts = [round(j * len(batches) / count) for j in range(count + 1)]
        # a segment file is named by its first batch's base offset: two batches with one base
        # offset (an overlap) stay in one segment, or the second file would replace the first
        for j in range(1, count):
            while 0 < cuts[j] < len(batches) and batches[cuts[j]].base_offset == batches[cuts[j] - 1].base_offset:
                cuts[j] += 1
        cuts = sorted(set(cuts)) if batches else cuts  # (an empty log: one empty segment at 0)
        for segment in [batches[a:b] for a, b in zip(cuts, cuts[1:])]:
            base = segment[0].base_offset if segment else 0
            (folder / f"{base:020d}.log.txt").write_text(
                dump_segment("/var/lib/kafka/data", topic, partition, base, segment), encoding="utf-8")
        entries = r.checkpoint if r.checkpoint is not None else rebuild_cache(r.spans) + r.extra_epochs
        (folder / "leader-epoch-checkpoint").write_text(checkpoint_text(entries), encoding="utf-8")
        hwm_file = root / f"broker={broker}" / "data" / "replication-offset-checkpoint"
        lines = hwm_file.read_text().splitlines()[2:] if hwm_file.exists() else []
        if r.hwm is not None:
            lines.append(f"{topic} {partition} {r.hwm}")
        hwm_file.write_text("\n".join(["0", str(len(lines)), *lines]) + "\n", encoding="utf-8")


def add_hwm(root: Path, broker: int, topic: str, partition: int, hwm: int, log_dir: str = "data") -> None:
    """Add one entry to a broker's replication-offset-checkpoint."""
    path = root / f"broker={broker}" / log_dir / "replication-offset-checkpoint"
    lines = path.read_text().splitlines()[2:] if path.exists() else []
    lines.append(f"{topic} {partition} {hwm}")
    path.write_text("\n".join(["0", str(len(lines)), *lines]) + "\n", encoding="utf-8")


def write_describe(root: Path, parts: dict[str, list[PartitionMeta]], configs: dict[str, dict[str, str]] | None = None) -> None:
    configs = configs or {}
    (root / "topics-describe.txt").write_text(
        describe_text({t: (configs.get(t, {}), metas) for t, metas in parts.items()}), encoding="utf-8")
