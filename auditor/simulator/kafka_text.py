"""Write Kafka's own text formats: ``kafka-dump-log.sh`` output (batch lines of eras D to I,
record lines of eras E to I), checkpoint files and ``kafka-topics.sh --describe``
(KAFKA-FORMATS sections 1 to 3).

Used by ``auditor simulate`` and the tests' snapshots; the parsers never import it.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Producer:
    """Who wrote a batch: an idempotent or transactional producer (sequence numbers), or a
    transaction marker (``control``: ``COMMIT`` or ``ABORT``, one record, written by the
    broker for the producer)."""

    producer_id: int
    producer_epoch: int = 0
    base_sequence: int = 0
    transactional: bool = True
    control: str | None = None


@dataclass(frozen=True)
class Batch:
    """One record batch as a dump prints it (uncompressed; ``producer`` None: no producer id)."""

    base_offset: int
    last_offset: int
    epoch: int
    crc: int
    timestamp: int = 1_700_000_000_000
    valid: bool = True
    bytes_per_record: int = 10
    producer: Producer | None = None

    @property
    def count(self) -> int:
        """Records in the batch."""
        return self.last_offset - self.base_offset + 1

    @property
    def size(self) -> int:
        """Bytes on disk (a plausible value: 61 bytes of header plus a fixed size per record;
        78 for a transaction marker, as in every real dump)."""
        if self.producer is not None and self.producer.control is not None:
            return 78
        return 61 + self.bytes_per_record * self.count


def content_crc(*parts: object) -> int:
    """A stable CRC standing for a batch's content: equal content, equal CRC."""
    return zlib.crc32("/".join(str(p) for p in parts).encode()) & 0xFFFFFFFF


def segment_file_name(base_offset: int) -> str:
    """``00000000000000012345.log``."""
    return f"{base_offset:020d}.log"


# release name -> era (KAFKA-FORMATS 1.4)
DUMP_STYLES = {"1.0": "D0", "2.1": "D", "2.2": "E", "2.8": "F", "3.0": "G", "3.2": "H", "3.3": "I"}
DEFAULT_STYLE = "3.3"


@dataclass(frozen=True)
class DumpStyle:
    """How one Kafka release prints a v2 batch (uncompressed, non-transactional)."""

    version: str = DEFAULT_STYLE

    def __post_init__(self) -> None:
        if self.version not in DUMP_STYLES:
            raise ValueError(f"unknown dump style {self.version!r}; one of {', '.join(DUMP_STYLES)}")

    @property
    def era(self) -> str:
        return DUMP_STYLES[self.version]

    @property
    def prints_records(self) -> bool:
        """Whether ``--deep-iteration`` keeps the batch line (2.2+; before, records replace it)."""
        return self.era not in ("D0", "D")

    def header(self, segment_base: int) -> str:
        label = "Log starting offset" if self.era == "I" else "Starting offset"
        return f"{label}: {segment_base}"

    def batch_line(self, base: int, last: int, epoch: int, crc: int, position: int, timestamp: int,
                   size: int, valid: bool, producer: Producer | None = None) -> str:
        era, count = self.era, last - base + 1
        codec = "none" if era in ("G", "H", "I") else "NONE"
        head = f"baseOffset: {base} lastOffset: {last} "
        if era != "D0":
            head += f"count: {count} "
        if producer is None:
            head += "baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
            txn, control = "false", "false"
        else:
            first = -1 if producer.control else producer.base_sequence
            final = -1 if producer.control else producer.base_sequence + count - 1
            head += (f"baseSequence: {first} lastSequence: {final} producerId: {producer.producer_id} "
                     f"producerEpoch: {producer.producer_epoch} ")
            txn, control = str(producer.transactional).lower(), str(producer.control is not None).lower()
        head += f"partitionLeaderEpoch: {epoch} isTransactional: {txn}"
        if era != "D0":
            head += f" isControl: {control}"
        if era in ("H", "I"):
            head += " deleteHorizonMs: OptionalLong.empty"
        v = str(valid).lower()
        if era in ("D0", "D"):
            return (f"{head} position: {position} CreateTime: {timestamp} isvalid: {v} size: {size} "
                    f"magic: 2 compresscodec: {codec} crc: {crc}")
        return (f"{head} position: {position} CreateTime: {timestamp} size: {size} magic: 2 "
                f"compresscodec: {codec} crc: {crc} isvalid: {v}")

    def record_line(self, offset: int, base: int, last: int, epoch: int, position: int, timestamp: int,
                    size: int, producer: Producer | None = None) -> str:
        era = self.era
        marker = producer is not None and producer.control is not None
        # a marker's key is its control type (4 bytes), its value the marker (6 bytes)
        key, value = (4, 6) if marker else (-1, 8)
        seq = -1 if producer is None or marker else producer.base_sequence + offset - base
        tail = f" endTxnMarker: {producer.control} coordinatorEpoch: 0" if marker else ""  # type: ignore[union-attr]
        if era == "E":
            return (f"| offset: {offset} CreateTime: {timestamp} keysize: {key} valuesize: {value} sequence: {seq} "
                    f"headerKeys: []{tail}")
        if era == "F":
            first = -1 if producer is None or marker else producer.base_sequence
            final = -1 if producer is None or marker else producer.base_sequence + last - base
            pepoch = -1 if producer is None else producer.producer_epoch
            return (f"| offset: {offset} isValid: true crc: null keySize: {key} valueSize: {value} "
                    f"CreateTime: {timestamp} baseOffset: {base} lastOffset: {last} baseSequence: {first} "
                    f"lastSequence: {final} producerEpoch: {pepoch} partitionLeaderEpoch: {epoch} batchSize: {size} "
                    f"magic: 2 compressType: NONE position: {position} sequence: {seq} headerKeys: []{tail}")
        return (f"| offset: {offset} CreateTime: {timestamp} keySize: {key} valueSize: {value} sequence: {seq} "
                f"headerKeys: []{tail}")


def dump_lines(log_dir: str, topic: str, partition: int, segment_base: int, batches: Iterable[Batch],
               invalid_bytes: int = 0, style: DumpStyle = DumpStyle(), records: bool = False) -> Iterator[str]:
    """The lines (with newlines) ``kafka-dump-log.sh --files <segment>`` prints for one
    segment, in ``style``; ``records`` adds the ``--deep-iteration`` record lines."""
    yield f"Dumping {log_dir}/{topic}-{partition}/{segment_file_name(segment_base)}\n"
    yield style.header(segment_base) + "\n"
    position = 0
    for b in batches:
        yield style.batch_line(b.base_offset, b.last_offset, b.epoch, b.crc, position, b.timestamp, b.size,
                               b.valid, b.producer) + "\n"
        if records:
            for o in range(b.base_offset, b.last_offset + 1):
                yield style.record_line(o, b.base_offset, b.last_offset, b.epoch, position, b.timestamp,
                                        b.size, b.producer) + "\n"
        position += b.size
    if invalid_bytes:
        yield f"Found {invalid_bytes} invalid bytes at the end of {segment_file_name(segment_base)}\n"


def dump_segment(log_dir: str, topic: str, partition: int, segment_base: int,
                 batches: Iterable[Batch], invalid_bytes: int = 0) -> str:
    """The text ``kafka-dump-log.sh --files <segment>`` prints for one segment (3.3+)."""
    return "".join(dump_lines(log_dir, topic, partition, segment_base, batches, invalid_bytes))


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


def describe_topic_line(topic: str, configs: dict[str, str], partition_count: int, replication_factor: int) -> str:
    """The ``Topic:`` line of ``kafka-topics.sh --describe`` (3.7+), with its newline."""
    cfg = ",".join(f"{k}={v}" for k, v in configs.items())
    topic_id = f"{content_crc(topic):08x}AAAAAAAAAAAAAA"[:22]
    return (f"Topic: {topic}\tTopicId: {topic_id}\tPartitionCount: {partition_count}\t"
            f"ReplicationFactor: {replication_factor}\tConfigs: {cfg}\n")


def describe_partition_line(topic: str, p: PartitionMeta) -> str:
    """One partition line of ``kafka-topics.sh --describe`` (3.7+, with ``Elr:``), with its newline."""
    leader = "none" if p.leader is None else str(p.leader)
    return (f"\tTopic: {topic}\tPartition: {p.partition}\tLeader: {leader}\t"
            f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}\t"
            f"Elr: {','.join(map(str, p.elr))}\tLastKnownElr: \n")


def describe_text(topics: dict[str, tuple[dict[str, str], list[PartitionMeta]]]) -> str:
    """``kafka-topics.sh --describe`` output of Kafka 3.7+ (with ``Elr:`` fields)."""
    out = []
    for topic, (configs, parts) in topics.items():
        out.append(describe_topic_line(topic, configs, len(parts), len(parts[0].replicas) if parts else 0))
        out.extend(describe_partition_line(topic, p) for p in parts)
    return "".join(out)
