"""Write Kafka's own text formats: ``kafka-dump-log.sh`` output (3.3+ style), checkpoint
files and ``kafka-topics.sh --describe`` (KAFKA-FORMATS sections 1 to 3).

Used to generate demo and test snapshots; the parsers never import it.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Batch:
    """One record batch as a dump prints it."""

    base_offset: int
    last_offset: int
    epoch: int
    crc: int
    timestamp: int = 1_700_000_000_000
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    transactional: bool = False
    control: bool = False
    codec: str = "none"
    valid: bool = True

    @property
    def count(self) -> int:
        """Records in the batch."""
        return self.last_offset - self.base_offset + 1

    @property
    def size(self) -> int:
        """Bytes on disk (a plausible value: 61 bytes of header plus 10 per record)."""
        return 61 + 10 * self.count


def content_crc(*parts: object) -> int:
    """A stable CRC standing for a batch's content: equal content, equal CRC."""
    return zlib.crc32("/".join(str(p) for p in parts).encode()) & 0xFFFFFFFF


def segment_file_name(base_offset: int) -> str:
    """``00000000000000012345.log``."""
    return f"{base_offset:020d}.log"


def batch_line(b: Batch, position: int) -> str:
    """A v2 batch line exactly as Kafka 3.3 to 4.x prints it."""
    last_seq = -1 if b.base_sequence < 0 else b.base_sequence + b.count - 1
    return (
        f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {b.count} "
        f"baseSequence: {b.base_sequence} lastSequence: {last_seq} producerId: {b.producer_id} "
        f"producerEpoch: {b.producer_epoch} partitionLeaderEpoch: {b.epoch} "
        f"isTransactional: {str(b.transactional).lower()} isControl: {str(b.control).lower()} "
        f"deleteHorizonMs: OptionalLong.empty position: {position} CreateTime: {b.timestamp} "
        f"size: {b.size} magic: 2 compresscodec: {b.codec} crc: {b.crc} isvalid: {str(b.valid).lower()}"
    )


def dump_segment(log_dir: str, topic: str, partition: int, segment_base: int,
                 batches: Iterable[Batch], invalid_bytes: int = 0) -> str:
    """The text ``kafka-dump-log.sh --files <segment>`` prints for one segment (3.3+)."""
    lines = [f"Dumping {log_dir}/{topic}-{partition}/{segment_file_name(segment_base)}",
             f"Log starting offset: {segment_base}"]
    position = 0
    for b in batches:
        lines.append(batch_line(b, position))
        position += b.size
    if invalid_bytes:
        lines.append(f"Found {invalid_bytes} invalid bytes at the end of {segment_file_name(segment_base)}")
    return "\n".join(lines) + "\n"


def checkpoint_text(entries: Iterable[tuple[object, ...]]) -> str:
    """A Kafka checkpoint file: version 0, the entry count, one entry per line."""
    rows = [" ".join(str(x) for x in e) for e in entries]
    return "\n".join(["0", str(len(rows)), *rows]) + "\n"


@dataclass(frozen=True)
class PartitionMeta:
    """One partition line of ``kafka-topics.sh --describe``."""

    partition: int
    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    elr: tuple[int, ...] = ()


def describe_text(topics: dict[str, tuple[dict[str, str], list[PartitionMeta]]]) -> str:
    """``kafka-topics.sh --describe`` output of Kafka 3.7+ (with ``Elr:`` fields)."""
    out = []
    for topic, (configs, parts) in topics.items():
        cfg = ",".join(f"{k}={v}" for k, v in configs.items())
        topic_id = f"{content_crc(topic):08x}AAAAAAAAAAAAAA"[:22]
        out.append(f"Topic: {topic}\tTopicId: {topic_id}\tPartitionCount: {len(parts)}\t"
                   f"ReplicationFactor: {len(parts[0].replicas) if parts else 0}\tConfigs: {cfg}")
        for p in parts:
            leader = "none" if p.leader is None else str(p.leader)
            out.append(f"\tTopic: {topic}\tPartition: {p.partition}\tLeader: {leader}\t"
                       f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}\t"
                       f"Elr: {','.join(map(str, p.elr))}\tLastKnownElr: ")
    return "\n".join(out) + "\n"
