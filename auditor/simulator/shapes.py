"""The shapes real clusters give their partitions, as the simulator lays them out: tiered
storage and retention (a log start inside the log), compaction, transactional producers."""

from __future__ import annotations

import dataclasses
import sys
import zlib
from collections.abc import Iterator

from auditor.simulator.kafka_text import (
    Batch,
    Producer,
)

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover - exercised on 3.10 only
    pass
from auditor.simulator.history import (
    PartitionHistory,
)
from auditor.simulator.model import BatchRef


def cleaned(batches: list[Batch], below: int, replica: str) -> list[Batch]:
    """One replica's log cleaner over a segment: below ``below`` (its HWM), about a quarter
    of the batches lose every record (dropped: a gap) and a quarter lose their first
    records (a later base offset, the same last offset, a new CRC), as Kafka's cleaner
    keeps each batch's last offset. Decided per replica and batch, so every replica cleans
    on its own, and the same batch the same way in a later snapshot."""
    out = []
    for b in batches:
        if b.last_offset >= below:
            out.append(b)
            continue
        pick = zlib.crc32(f"{replica}/{b.base_offset}/clean".encode())
        if pick % 4 == 0:
            continue
        if pick % 4 == 1 and b.count > 1:
            base = b.base_offset + 1 + (pick >> 8) % (b.count - 1)
            out.append(dataclasses.replace(b, base_offset=base, crc=(b.crc ^ pick) & 0xFFFFFFFF))
        else:
            out.append(b)
    return out


#: Always compacted (SPEC 4.5): the simulated cluster's consumer offsets topic.
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 2


def retained_log_start(h: PartitionHistory, committed: int, segment_batches: int) -> int | None:
    """A log start inside the partition's first segment, below every replica's HWM, as
    DeleteRecords leaves it; None while there is no such offset. A stable offset 1 to 8
    above the first base offset, so a later snapshot of the cluster keeps it."""
    first = [next(r.log.batches(), None) for r in h.replicas.values()]
    if any(b is None for b in first):
        return None
    base = max(b.base for b in first)  # type: ignore[union-attr]
    offset = base + 1 + zlib.crc32(f"{h.topic}/{h.partition}/log-start".encode()) % 8
    ends = [_first_segment_end(r.log.batches(), segment_batches) for r in h.replicas.values()]
    inside = all(end is not None and end >= offset for end in ends)
    return offset if inside and offset < committed else None


def _first_segment_end(batches: Iterator[BatchRef], segment_batches: int) -> int | None:
    """The last offset of the first segment (its first ``segment_batches`` batches)."""
    last = None
    for _, b in zip(range(segment_batches), batches):
        last = b.last
    return last


def truncate_from_start(entries: list[tuple[int, int]], log_start: int) -> list[tuple[int, int]]:
    """Kafka's ``LeaderEpochFileCache.truncateFromStart``: entries that start below the new
    log start are removed, except the latest of them, which now starts at the log start."""
    below = [(e, s) for e, s in entries if s < log_start]
    kept = [(e, s) for e, s in entries if s >= log_start]
    if below and not any(s == log_start for _, s in kept):
        kept.insert(0, (below[-1][0], log_start))
    return kept


#: How often each shape of a real cluster appears (``shapes=True``, the default): of every
#: TOPIC_CYCLE topics the second has tiered storage and the third transactional producers;
#: every RETENTION_EVERY-th partition of the others has had DeleteRecords. Only partitions
#: without faults are tiered or retained.
TOPIC_CYCLE = 3
RETENTION_EVERY = 4


def is_tiered_topic(topic_index: int) -> bool:
    return topic_index % TOPIC_CYCLE == 1


def is_transactional_topic(topic_index: int) -> bool:
    """The third of every three topics is written by transactional producers."""
    return topic_index % TOPIC_CYCLE == 2


def transactional_producer(b: BatchRef, crc: int) -> Producer:
    """Who wrote batch ``b`` of a transactional topic, a pure function of the batch (so
    every replica prints the same): one of four transactional producers, or, for about
    half of the one-record batches, the broker's COMMIT or (one in four) ABORT marker for
    that producer's transaction."""
    producer_id = 4000 + b.tag % 4
    if b.last == b.base and (b.tag + b.base) % 2 == 0:
        return Producer(producer_id, producer_epoch=b.tag % 2, control="ABORT" if crc % 4 == 0 else "COMMIT")
    return Producer(producer_id, producer_epoch=b.tag % 2, base_sequence=b.base % (1 << 31))


def zombie_producer(b: BatchRef) -> Producer:
    """The writer of a zombie transaction's batch (the ``zombie-transaction`` fault): a
    transactional producer that another instance has fenced, still writing to a deposed
    leader; no marker ever ends its transaction."""
    return Producer(4900 + b.tag % 4, producer_epoch=7, base_sequence=b.base % (1 << 31))


def partition_shape(topic_index: int, partition: int, faults: list[str]) -> str | None:
    """The shape of one partition (None: a plain log from offset 0)."""
    if faults:
        return None
    if is_tiered_topic(topic_index):
        return "tiered"
    if partition % RETENTION_EVERY == RETENTION_EVERY - 1:
        return "retention"
    return None


