"""A small pure-Python model of Kafka's epoch-cache algorithms: plain lists, written to be
obviously correct rather than fast. The Spark engine is tested against it.

A batch is ``(base_offset, last_offset, epoch)``; a cache is a list of
``(epoch, start_offset)`` in ascending order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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


def effective_cache(checkpoint: list[Entry], leo: int | None) -> list[Entry]:
    """SPEC 4.1: the checkpoint without entries whose start is above the LEO."""
    return [e for e in checkpoint if leo is None or e[1] <= leo]


def floor_offset(batches: list[Batch], o: int) -> int:
    """``floor_F(o)``: base offset of the batch containing ``o``, else ``o``."""
    containing = [b for b in batches if b[0] <= o <= b[1]]
    return min(b[0] for b in containing) if containing else o


@dataclass
class Truncation:
    """Where a follower truncates: ``offset`` (None: nothing removed), ``rounds``, and
    ``missing_hwm`` (an undefined answer needed the follower's HWM, which is absent)."""

    offset: int | None
    rounds: int
    missing_hwm: bool = False


def truncate_epoch(leader_cache: list[Entry], leader_leo: int, cache: list[Entry], leo: int,
                   hwm: int | None, batches: list[Batch], max_rounds: int = 64) -> Truncation:
    """SPEC 4.3 ``epoch``: Kafka 2.0.1+ OffsetsForLeaderEpoch, round after round."""
    cache = list(cache)
    t: int | None = None
    rounds = 0
    for _ in range(max_rounds):
        e = cache[-1][0] if cache else -1
        el, ol = end_offset_for(leader_cache, leader_leo, e)
        if el >= e and ol >= leo:
            break
        rounds += 1
        if ol == -1:
            if hwm is None:
                return Truncation(None, rounds, True)
            o, final = min(hwm, leo), True
        else:
            ef, of = end_offset_for(cache, leo, el)
            if of == -1:
                o, final = min(ol, leo), True
            elif ef != el:
                o, final = min(of, leo), False
            else:
                o, final = min(of, ol, leo), True
        cut = floor_offset(batches, o)
        if cut < leo:
            t, leo = cut, cut
        cache = [x for x in cache if x[1] < cut]
        if final:
            break
    return Truncation(t, rounds)


def kip101_answer(leader_cache: list[Entry], leader_leo: int, follower_cache: list[Entry]) -> int | None:
    """SPEC 4.3 ``kip-101``: the leader's answer A, None when undefined."""
    e = follower_cache[-1][0] if follower_cache else -1
    if e == -1 or not leader_cache or e < leader_cache[0][0]:
        return None
    if e == leader_cache[-1][0]:
        return leader_leo
    higher = [x for x in leader_cache if x[0] > e]
    return higher[0][1] if higher else None


def truncate_kip101(leader_cache: list[Entry], leader_leo: int, cache: list[Entry], leo: int,
                    hwm: int | None, batches: list[Batch]) -> Truncation:
    """SPEC 4.3 ``kip-101`` (Kafka 0.11 to 1.1): one answer, no epoch in the reply."""
    answer = kip101_answer(leader_cache, leader_leo, cache)
    if answer is None:
        if hwm is None:
            return Truncation(None, 0, True)
        o = min(hwm, leo)
    elif answer >= leo:
        return Truncation(None, 0)
    else:
        o = answer
    cut = floor_offset(batches, o)
    return Truncation(cut, 1) if cut < leo else Truncation(None, 0)


def truncate_raft(leader: list[Batch], follower: list[Batch], leo: int) -> Truncation:
    """SPEC 4.3 ``raft``: ``o`` = the first index the follower holds at which the leader has
    no entry or an entry of another term, then ``floor_F(o)`` below LEO(F). Index by index:
    an index holds one entry per batch covering it (``(base, last, epoch)``), and it
    conflicts when one of the follower's entries there has a term no leader entry there
    has."""
    def terms(batches: list[Batch], o: int) -> set[int]:
        return {b[2] for b in batches if b[0] <= o <= b[1]}

    for o in sorted({o for b in follower for o in range(b[0], b[1] + 1)}):
        if terms(follower, o) - terms(leader, o):
            cut = floor_offset(follower, o)
            return Truncation(cut, 1) if cut < leo else Truncation(None, 0)
    return Truncation(None, 0)


def divergence_offset(follower: list[tuple[int, int, int, int | None]],
                      leader: list[tuple[int, int, int, int | None]],
                      lso: int | None, hmax: int | None = None, compacted: bool = False) -> int | None:
    """SPEC 4.4, offset by offset: the smallest offset the follower holds (in scope: at or
    above ``lso`` and, compacted, ``hmax``) where it does not agree with the leader. Batches
    are ``(base, last, epoch, crc)``. The two agree at an offset when some batch of the
    follower covering it is a batch the leader holds (same base, last and epoch; the same
    CRC when both have one): a follower batch the leader lacks holds no divergence at the
    offsets its own agreeing batches also cover (an overlap)."""
    floors = ([lso] if lso is not None else []) + ([hmax] if compacted and hmax is not None else [])

    def agrees(b: tuple[int, int, int, int | None]) -> bool:
        base, last, epoch, crc = b
        return any(lb == base and ll == last and le == epoch and (crc is None or lc is None or crc == lc)
                   for lb, ll, le, lc in leader)

    agreeing = [b for b in follower if agrees(b)]
    # the smallest such offset is the first in scope of a batch, or one past an agreeing batch
    candidates = {max([b[0], *floors]) for b in follower} | {b[1] + 1 for b in agreeing}
    for o in sorted(candidates):
        held = any(b[0] <= o <= b[1] for b in follower) and all(o >= f for f in floors)
        if held and not any(b[0] <= o <= b[1] for b in agreeing):
            return o
    return None


def pair_checks(d: int | None, t: int | None, leo_f: int, leo_l: int, hwm_f: int | None,
                hwm_l: int | None) -> set[tuple[str, int | None, int | None]]:
    """SPEC 5's leader-against-follower decision table: ``(check, start, end)`` findings."""
    out: set[tuple[str, int | None, int | None]] = set()
    if d is None and leo_f < leo_l:
        out.add(("FOLLOWER_LAG", leo_f, leo_l))
    if d is not None and t == d:
        out.add(("DIVERGENT_SUFFIX", d, leo_f))
    if t is not None and (d is None or t < d):
        out.add(("OVER_TRUNCATION", t, d if d is not None else leo_f))
    if d is not None and (t is None or t > d):
        out.add(("SILENT_DIVERGENCE", d, t if t is not None else leo_f))
    if d is not None and hwm_l is not None and hwm_f is not None and d < min(hwm_l, hwm_f):
        out.add(("LOG_MATCHING_VIOLATION", d, min(hwm_l, hwm_f)))
    if t is not None and hwm_f is not None and t < hwm_f:
        out.add(("COMMITTED_DATA_LOSS", t, hwm_f))
    return out


# --- KRaft's metadata log (SPEC 4.7) -------------------------------------------------------

SnapshotId = tuple[int, int]  # (end offset, epoch)


@dataclass
class KRaftReplica:
    """One node's copy of the metadata log as 4.7's ``kraft`` truncation sees it."""

    cache: list[Entry]  # the effective epoch cache (SPEC 4.1)
    batches: list[Batch]
    log_start: int  # log start offset (no checkpoint for this log: the lowest segment base)
    local_log_start: int
    snapshots: list[SnapshotId]  # the bootstrap id (0, 0) left out
    leo: int = 0

    def __post_init__(self) -> None:
        self.leo = log_end_offset(self.batches, [self.log_start]) or 0


@dataclass
class KRaftTruncation:
    """Where a follower ends under ``kraft``: ``offset`` (None: nothing removed), ``rounds``,
    and the leader's latest snapshot id when the exchange ended in FETCH_SNAPSHOT."""

    offset: int | None
    rounds: int
    fetch_snapshot: SnapshotId | None = None


def kraft_end_offset(r: KRaftReplica, leo: int, cache: list[Entry], epoch: int) -> tuple[int, int]:
    """``KafkaMetadataLog.endOffsetForEpoch`` as SPEC 4.7 states it: the cache's answer, the
    earliest snapshot's (epoch, end) when that answer is (epoch, log start) and a snapshot
    exists, (epoch, LEO) when it is undefined."""
    e, o = end_offset_for(cache, leo, epoch)
    if r.snapshots and (e, o) == (epoch, r.log_start):
        first = min(r.snapshots)
        return first[1], first[0]
    if (e, o) == (-1, -1):
        return epoch, leo
    return e, o


def truncate_kraft(leader: KRaftReplica, follower: KRaftReplica, max_rounds: int = 64) -> KRaftTruncation:
    """SPEC 4.7 ``kraft``: Kafka's ``validateOffsetAndEpoch`` on the leader and
    ``truncateToEndOffset`` on the follower, fetch after fetch."""
    cache, leo = list(follower.cache), follower.leo
    t: int | None = None
    rounds = 0
    lowest = min((b[0] for b in follower.batches), default=None)
    for _ in range(max_rounds):
        holds = lowest is not None and lowest < leo
        if holds:
            e = cache[-1][0] if cache else -1
        elif follower.snapshots:
            e = max(follower.snapshots)[1]
        else:
            e = cache[-1][0] if cache else -1
        if leader.snapshots:
            first = min(leader.snapshots)
            if (leo < leader.log_start or (leo == leader.log_start and e != first[1]) or e < first[1]
                    or leo == 0):
                rounds += 1
                return KRaftTruncation(follower.local_log_start if holds else t, rounds, max(leader.snapshots))
        el, ol = kraft_end_offset(leader, leader.leo, leader.cache, e)
        if el == e and ol >= leo:
            break
        rounds += 1
        if el == 0:
            o, final = min(ol, leo), True
        else:
            ef, of = kraft_end_offset(follower, leo, cache, el)
            if ef == el:
                o, final = min(of, ol), True
            else:
                o, final = of, False
        cut = floor_offset(follower.batches, o)
        if cut < leo:
            t, leo = cut, cut
        cache = [x for x in cache if x[1] < cut]
        if final:
            break
    return KRaftTruncation(t, rounds)


@dataclass(frozen=True)
class CheckpointRead:
    """What Kafka's checkpoint reader (KAFKA-FORMATS 2.1, 3.1; SPEC 8) makes of one file."""

    reason: str | None  # why the file is unusable; None: usable
    lines: list[tuple[int, str, str | None, str]]  # (line number, disposition, error, line shown)
    entries: list[tuple[int, tuple[object, ...]]]  # (line number, (epoch, offset) or (topic, partition, offset))


_NUMBER = re.compile(r"[+-]?[0-9]+")


def _int(text: str, bits: int) -> int | None:
    """``text`` as a signed integer of ``bits`` bits (as Spark's try_cast reads a decimal), else None."""
    if not _NUMBER.fullmatch(text):
        return None
    value = int(text)
    return value if -(1 << (bits - 1)) <= value < (1 << (bits - 1)) else None


def _entry(text: str, epoch_file: bool) -> tuple[bool, str | None]:
    """Whether an entry line (trimmed) is well formed, and why not when only its numbers are
    out of Kafka's range."""
    fields = [] if text == "" else re.split(r"[ \t\n\x0b\f\r]+", text)
    if epoch_file:
        ok = len(fields) == 2 and _int(fields[0], 32) is not None and _int(fields[1], 64) is not None
        epoch, offset = (fields[0] if fields else None), (fields[1] if len(fields) > 1 else None)
    else:
        ok = (len(fields) == 3 and re.fullmatch(r"[A-Za-z0-9._-]+", fields[0]) is not None
              and _int(fields[1], 32) is not None and _int(fields[2], 64) is not None)
        epoch, offset = None, (fields[2] if len(fields) > 2 else None)

    def outside(number: str | None, bits: int) -> bool:  # a number Kafka never writes there
        value = _int(number, bits) if number is not None and _NUMBER.fullmatch(number) else 0
        return value is None or value < 0

    problem = None
    if epoch_file and outside(epoch, 32):
        problem = "an epoch outside [0, 2^31 - 1]"
    elif len(fields) >= 2 and outside(offset, 64):
        problem = "an offset outside [0, 2^63 - 1]"
    return ok and problem is None, problem


def read_checkpoint(text: str, epoch_file: bool) -> CheckpointRead:
    """Kafka's checkpoint reader on a file's whole ``text``: line 1 (of the non-blank lines)
    the version ``0``, line 2 the entry count, then the entries; an unknown version, a count
    that is not a number or does not match, or a malformed entry rejects the whole file; an
    empty file, or a version alone, is an empty checkpoint; blank lines are skipped. Lines end
    at ``\\n``, ``\\r\\n`` or ``\\r``; only spaces are trimmed (as Spark's ``trim``)."""
    raw = [] if text == "" else re.split(r"\r\n|\r|\n", re.sub(r"(\r\n|\r|\n)\Z", "", text, count=1))
    lines = [line.strip(" ") for line in raw]
    nonblank = [n for n, line in enumerate(lines, 1) if line != ""]
    version = lines[nonblank[0] - 1] if nonblank else None
    count = lines[nonblank[1] - 1] if len(nonblank) > 1 else None
    at = nonblank[2:]
    bad = [n for n in at if not _entry(lines[n - 1], epoch_file)[0]]
    reason = None
    if version is None or (version == "0" and count is None):
        reason = None
    elif version != "0":
        reason = f"unrecognised checkpoint version {version[:40]} (expected 0)"
    elif re.fullmatch(r"[0-9]+", count) is None or _int(count, 64) is None:
        reason = "entry count line is not a number"
    elif bad:
        why = _entry(lines[bad[0] - 1], epoch_file)[1]
        reason = (f"malformed entry on line {bad[0]}: {why}, a value Kafka never writes" if why
                  else f"malformed entry on line {bad[0]}")
    elif int(count) != len(at):
        reason = f"expected {count} entries but found {len(at)}"
    shown = []
    for n, line in enumerate(lines, 1):
        if line == "":
            shown.append((n, "skipped", None, line))
        elif reason is not None:
            shown.append((n, "quarantined", f"checkpoint file rejected: {reason}", line[:200]))
        else:
            shown.append((n, "skipped" if n not in at else "parsed", None, line[:200]))
    entries: list[tuple[int, tuple[object, ...]]] = []
    if reason is None:
        for n in at:
            fields = re.split(r"[ \t\n\x0b\f\r]+", lines[n - 1])
            entries.append((n, (int(fields[0]), int(fields[1])) if epoch_file
                            else (fields[0], int(fields[1]), int(fields[2]))))
    return CheckpointRead(reason, shown, entries)
