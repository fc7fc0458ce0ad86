"""A small pure-Python model of Kafka's epoch-cache algorithms: plain lists, written to be
obviously correct rather than fast. The Spark engine is tested against it.

A batch is ``(base_offset, last_offset, epoch)``; a cache is a list of
``(epoch, start_offset)`` in ascending order.
"""

from __future__ import annotations

Batch = tuple[int, int, int]
Entry = tuple[int, int]


def assign(cache: list[Entry], epoch: int, start: int) -> list[Entry]:
    """Kafka 2.0.1+ ``LeaderEpochFileCache.assign`` (KAFKA-FORMATS 2.2), returning a new cache."""
    if epoch < 0 or start < 0:
        raise ValueError("assign needs epoch >= 0 and start >= 0")
    if cache:
        latest_epoch, latest_start = cache[-1]
        if epoch == latest_epoch and start >= latest_start:
            return list(cache)  # no update needed
    kept = list(cache)
    while kept and (kept[-1][0] >= epoch or kept[-1][1] >= start):
        kept.pop()
    kept.append((epoch, start))
    return kept


def rebuild_cache(batches: list[Batch]) -> list[Entry]:
    """The cache Kafka rebuilds from a log: ``assign(epoch, base)`` per batch with epoch >= 0,
    in offset order."""
    cache: list[Entry] = []
    for base, _last, epoch in sorted(batches):
        if epoch >= 0:
            cache = assign(cache, epoch, base)
    return cache


def log_lineage(batches: list[Batch]) -> list[tuple[int, int, int, int]]:
    """Maximal runs of contiguous same-epoch batches: ``(epoch, start, end, batch_count)``,
    ``end`` exclusive."""
    runs: list[list[int]] = []
    prev_last: int | None = None
    for base, last, epoch in sorted(batches, key=lambda b: (b[0], b[1], b[2])):
        if runs and prev_last is not None and runs[-1][0] == epoch and base == prev_last + 1:
            runs[-1][2] = last + 1
            runs[-1][3] += 1
        else:
            runs.append([epoch, base, last + 1, 1])
        prev_last = last
    return [tuple(r) for r in runs]  # type: ignore[misc]


def log_end_offset(batches: list[Batch], segment_bases: list[int] = ()) -> int | None:  # type: ignore[assignment]
    """LEO = max(last offset of the last batch + 1, base offset of the newest segment)."""
    candidates = [max(b[1] for b in batches) + 1] if batches else []
    candidates += list(segment_bases)
    return max(candidates) if candidates else None


def end_offset_for(cache: list[Entry], leo: int, requested: int) -> tuple[int, int]:
    """SPEC 4.2: Kafka's ``endOffsetFor(requestedEpoch, logEndOffset)`` (2.0.1 and later)."""
    if requested == -1 or not cache:
        return (-1, -1)
    if cache[-1][0] == requested:
        return (requested, leo)
    higher = [e for e in cache if e[0] > requested]
    if not higher:
        return (-1, -1)
    lower_or_equal = [e for e in cache if e[0] <= requested]
    if not lower_or_equal:
        return (requested, higher[0][1])
    return (lower_or_equal[-1][0], higher[0][1])
