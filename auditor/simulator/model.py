"""The broker-side state the simulator evolves: logs, epoch caches, and the follower's
truncation protocols, written after Kafka's own classes (KAFKA-FORMATS 2.2 to 4.3) rather
than after the auditor's code, so the simulator is an independent witness.

A log is a list of *runs*: consecutive batches appended by one produce request (same
epoch, same records per batch, same writer). Memory therefore grows with the number of
events, not with the number of batches, and a partition of millions of batches costs a
few kilobytes. A batch's identity is ``(tag, base_offset)``: two replicas hold the same
batch exactly when they copied it from the same append.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field

UNDEFINED = -1


@dataclass(frozen=True)
class Run:
    """``n`` batches of ``size`` records each from ``base``, all in ``epoch``, by writer ``tag``."""

    base: int
    n: int
    size: int
    epoch: int
    tag: int

    @property
    def end(self) -> int:
        """The offset after the run's last record."""
        return self.base + self.n * self.size

    def base_reaching(self, offset: int) -> int:
        """The base of the run's first batch that reaches ``offset`` (the run's base when it
        starts at or above it)."""
        return self.base + max(0, offset - self.base) // self.size * self.size


@dataclass(frozen=True)
class BatchRef:
    """One batch: offsets, epoch and the identity of the append that wrote it."""

    base: int
    last: int
    epoch: int
    tag: int

    @property
    def records(self) -> int:
        return self.last - self.base + 1


@dataclass
class Log:
    """A replica's log (log start offset 0: the simulator has no retention). Batches are
    contiguous but where :meth:`remove` took one out."""

    runs: list[Run] = field(default_factory=list)

    @property
    def leo(self) -> int:
        return self.runs[-1].end if self.runs else 0

    @property
    def batch_count(self) -> int:
        return sum(r.n for r in self.runs)

    def copy(self) -> Log:
        return Log(list(self.runs))

    def append(self, n: int, size: int, epoch: int, tag: int) -> Run:
        run = Run(self.leo, n, size, epoch, tag)
        self.runs.append(run)
        return run

    def batches(self) -> Iterator[BatchRef]:
        for r in self.runs:
            for i in range(r.n):
                base = r.base + i * r.size
                yield BatchRef(base, base + r.size - 1, r.epoch, r.tag)

    def _run_index(self, offset: int) -> int:
        """Index of the run holding ``offset`` (or the one after it)."""
        return bisect.bisect_right(self.runs, offset, key=lambda r: r.end)

    def batch_at(self, offset: int) -> BatchRef | None:
        """The batch covering ``offset``, if any."""
        i = self._run_index(offset)
        if i >= len(self.runs) or offset < self.runs[i].base:
            return None
        r = self.runs[i]
        base = r.base + (offset - r.base) // r.size * r.size
        return BatchRef(base, base + r.size - 1, r.epoch, r.tag)

    def first_disagreement(self, other: Log, below: int | None = None, start: int = 0,
                           whole: bool = False) -> int | None:
        """The first offset of this log (below ``below``) held by a batch that ``other`` does
        not hold an identical copy of: that batch's base, or ``start`` when the batch
        reaches over it (batches ending below ``start`` are not compared: SPEC 4.5's
        compacted range). ``whole``: only batches starting at or above ``start``
        (``ISR_INCOMPLETE``, SPEC 5). Copies keep the writer's tag and offsets, so this
        walks runs."""
        for ra in self.runs:
            if ra.end <= start:
                continue
            pos = ra.base_reaching(start)
            if whole and pos < start:
                pos += ra.size
                if pos >= ra.end:
                    continue
            if below is not None and max(pos, start) >= below:
                return None
            i = other._run_index(pos)
            while pos < ra.end:
                rb = other.runs[i] if i < len(other.runs) else None
                if rb is None or rb.base > pos or rb.tag != ra.tag:
                    found = max(pos, start)
                    return found if below is None or found < below else None
                pos = min(rb.end, ra.end)
                i += 1
        return None

    def floor(self, offset: int) -> int:
        """``floor_F(offset)``: the base of the batch containing it, else the offset itself."""
        b = self.batch_at(offset)
        return b.base if b else offset

    def truncate(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; returns the records removed."""
        before = self.leo
        kept: list[Run] = []
        for r in self.runs:
            if r.end <= offset:
                kept.append(r)
            elif r.base < offset:
                whole = (offset - r.base) // r.size  # batches entirely below offset
                if whole:
                    kept.append(Run(r.base, whole, r.size, r.epoch, r.tag))
        self.runs = kept
        return before - self.leo

    def remove(self, base: int) -> None:
        """Remove the batch at ``base`` from inside the log (a cleaner's doing: a gap)."""
        i = self._run_index(base)
        r = self.runs[i]
        k = (base - r.base) // r.size
        if not r.base <= base < r.end or r.base + k * r.size != base:
            raise ValueError(f"no batch starts at {base}")
        parts = [Run(r.base, k, r.size, r.epoch, r.tag), Run(base + r.size, r.n - k - 1, r.size, r.epoch, r.tag)]
        self.runs[i:i + 1] = [p for p in parts if p.n > 0]

    def copy_from(self, source: Log, start: int, max_batches: int) -> int:
        """Append ``source``'s batches from ``start`` (a batch base of ``source`` equal to this
        log's end), at most ``max_batches``; returns the batches copied."""
        copied = 0
        i = source._run_index(start)
        while i < len(source.runs) and copied < max_batches:
            r = source.runs[i]
            skip = max(0, (start - r.base) // r.size) if start > r.base else 0
            take = min(r.n - skip, max_batches - copied)
            if take > 0:
                self.runs.append(Run(r.base + skip * r.size, take, r.size, r.epoch, r.tag))
                copied += take
            start = r.end
            i += 1
        return copied


class EpochCache:
    """Kafka's ``LeaderEpochFileCache``: ``assign`` (2.0.1+ semantics), ``endOffsetFor``,
    ``truncateFromEnd``. Entries are ``(epoch, start_offset)`` in ascending epoch order."""

    def __init__(self, entries: list[tuple[int, int]] | None = None) -> None:
        self.entries: list[tuple[int, int]] = list(entries or [])

    def copy(self) -> EpochCache:
        return EpochCache(self.entries)

    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED

    def assign(self, epoch: int, start: int) -> None:
        if epoch < 0:
            return  # Kafka throws; the simulator never asks
        if self.entries:
            last_epoch, last_start = self.entries[-1]
            if epoch == last_epoch and start >= last_start:
                return  # no update needed
        while self.entries and (self.entries[-1][0] >= epoch or self.entries[-1][1] >= start):
            self.entries.pop()  # maybeTruncateNonMonotonicEntries
        self.entries.append((epoch, start))

    def end_offset_for(self, requested: int, leo: int) -> tuple[int, int]:
        if requested == UNDEFINED:
            return UNDEFINED, UNDEFINED
        if self.entries and self.entries[-1][0] == requested:
            return requested, leo
        higher = next((e for e in self.entries if e[0] > requested), None)
        if higher is None:
            return UNDEFINED, UNDEFINED
        floor = [e for e in self.entries if e[0] <= requested]
        return (floor[-1][0] if floor else requested), higher[1]

    def truncate_from_end(self, end: int) -> None:
        """Keep only entries starting below ``end``."""
        self.entries = [e for e in self.entries if e[1] < end]

    def without_entries_above(self, leo: int) -> EpochCache:
        """The cache as a broker loads it: entries whose start is above the LEO dropped."""
        return EpochCache([e for e in self.entries if e[1] <= leo])


def rebuild_from_log(log: Log) -> EpochCache:
    """The cache a broker rebuilds when its checkpoint is gone: ``assign`` per batch, in order."""
    cache = EpochCache()
    for r in log.runs:
        if r.epoch >= 0:
            cache.assign(r.epoch, r.base)  # later batches of the run assign the same epoch: no-op
    return cache


@dataclass
class Truncation:
    """Where a follower truncates on its next fetch, and how many rounds told it so."""

    offset: int | None
    rounds: int
    needed_hwm: bool = False


def epoch_truncation(log: Log, cache: EpochCache, hwm: int | None,
                     leader_cache: EpochCache, leader_leo: int, apply: bool = False) -> Truncation:
    """The follower's side of OffsetsForLeaderEpoch / divergingEpoch (Kafka 2.0.1+):
    ``AbstractFetcherThread.getOffsetTruncationState`` repeated while it is not completed.

    With ``apply`` the log and cache are truncated in place; otherwise copies are used.
    """
    if not apply:
        log, cache = log.copy(), cache.copy()
    result: int | None = None
    rounds, needed_hwm = 0, False
    for _ in range(64):
        fetch_epoch = cache.latest_epoch()
        leader_epoch, leader_end = leader_cache.end_offset_for(fetch_epoch, leader_leo)
        # the leader reports divergence when its answer is below what the follower holds
        if leader_epoch >= fetch_epoch and leader_end >= log.leo:
            break
        rounds += 1
        completed = True
        if leader_end == UNDEFINED:
            if hwm is None:
                needed_hwm = True
                break
            target = min(hwm, log.leo)
        else:
            own_epoch, own_end = cache.end_offset_for(leader_epoch, log.leo)
            if own_end == UNDEFINED:
                target = min(leader_end, log.leo)
            elif own_epoch != leader_epoch:
                target, completed = min(own_end, log.leo), False
            else:
                target = min(own_end, leader_end, log.leo)
        effective = log.floor(target)
        if effective < log.leo:
            result = effective
            log.truncate(target)
        cache.truncate_from_end(effective)
        if completed:
            break
    return Truncation(result, rounds, needed_hwm)


def kip101_truncation(log: Log, cache: EpochCache, hwm: int | None,
                      leader_cache: EpochCache, leader_leo: int, apply: bool = False) -> Truncation:
    """Kafka 0.11 to 1.1 (``ReplicaFetcherThread.maybeTruncate``): one OffsetsForLeaderEpoch
    round with the offset-only answer; undefined answers fall back to the high watermark."""
    if not apply:
        log, cache = log.copy(), cache.copy()
    epoch = cache.latest_epoch()
    entries = leader_cache.entries
    if epoch == UNDEFINED or not entries or epoch < entries[0][0]:
        answer = None
    elif epoch == entries[-1][0]:
        answer = leader_leo
    else:
        answer = next((s for e, s in entries if e > epoch), None)
    if answer is None:
        if hwm is None:
            return Truncation(None, 0, True)
        target = min(hwm, log.leo)
    elif answer >= log.leo:
        return Truncation(None, 0)
    else:
        target = answer
    effective = log.floor(target)
    if effective >= log.leo:
        return Truncation(None, 0)
    log.truncate(target)
    cache.truncate_from_end(effective)
    return Truncation(effective, 1)


@dataclass
class Replica:
    """One broker's copy of the partition, as its disk holds it."""

    broker: int
    log: Log = field(default_factory=Log)
    cache: EpochCache = field(default_factory=EpochCache)
    hwm: int = 0                       # the replication-offset-checkpoint entry
    protocol: str = "epoch"            # how it truncates during the history
    frozen: bool = False               # no longer fetches (stopped, crashed, or mid-incident)
    needs_truncation: bool = False     # a leader change happened since its last fetch
    corrupt: set[int] = field(default_factory=set)  # base offsets printed isvalid: false
    torn_bytes: int = 0
    checkpoint_file: list[tuple[int, int]] | None = None  # None: the file is written from the cache
    checkpoint_lost: bool = False
