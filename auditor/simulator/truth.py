"""Ground truth of a simulated partition: the findings at WARNING or above that SPEC 5
requires for the state the simulator wrote, and every follower's divergence and
truncation offsets.

It is computed from what the simulator knows, not from what the auditor reads:
agreement is identity of the append that wrote a batch (not a CRC comparison), the
truncation is the simulated follower's own next fetch (`auditor.simulator.model`), and
the checkpoint a broker would load is the one the simulator wrote.
"""

from __future__ import annotations

from dataclasses import dataclass

from auditor.simulator.history import PartitionHistory
from auditor.simulator.model import (
    BatchRef,
    EpochCache,
    Log,
    Replica,
    epoch_truncation,
    rebuild_from_log,
)


@dataclass(frozen=True)
class Claim:
    """One finding the auditor must report."""

    check: str
    severity: str
    topic: str
    partition: int
    replica: int | None
    offset_start: int | None
    offset_end: int | None

    def as_json(self) -> dict[str, object]:
        return {"check": self.check, "severity": self.severity, "topic": self.topic, "partition": self.partition,
                "replica": self.replica, "offset_start": self.offset_start, "offset_end": self.offset_end}


@dataclass(frozen=True)
class FollowerTruth:
    topic: str
    partition: int
    replica: int
    divergence_offset: int | None
    truncation_offset: int | None
    truncation_rounds: int

    def as_json(self) -> dict[str, object]:
        return {"topic": self.topic, "partition": self.partition, "replica": self.replica,
                "divergence_offset": self.divergence_offset, "truncation_offset": self.truncation_offset}


def checkpoint_entries(r: Replica) -> list[tuple[int, int]] | None:
    """The ``leader-epoch-checkpoint`` the snapshot holds for ``r`` (None: no file)."""
    if r.checkpoint_lost:
        return None
    return list(r.checkpoint_file) if r.checkpoint_file is not None else list(r.cache.entries)


def loaded_cache(r: Replica) -> EpochCache:
    """The cache a broker loads from that disk state: the file without entries past the log
    end, or the one rebuilt from the log when the file is gone."""
    entries = checkpoint_entries(r)
    if entries is None:
        return rebuild_from_log(r.log)
    return EpochCache(entries).without_entries_above(r.log.leo)


def _same_epoch_conflict(follower: Log, leader: Log, floor: int = 0) -> BatchRef | None:
    """The follower's first batch (of those reaching ``floor``) at whose base the leader
    holds another batch of the same epoch."""
    best: BatchRef | None = None
    for ra in follower.runs:
        if best is not None and ra.base > best.base:
            break
        if ra.epoch < 0 or ra.end <= floor:
            continue
        for rb in leader.runs:
            if rb.end <= ra.base or rb.base >= ra.end or rb.tag == ra.tag or rb.epoch != ra.epoch:
                continue
            start = max(rb.base, ra.base_reaching(floor))
            o = ra.base + -(-(start - ra.base) // ra.size) * ra.size  # first batch base of ra from start
            for _ in range(rb.size):  # the bases of both runs meet within one period, if at all
                if o >= min(ra.end, rb.end):
                    break
                if (o - rb.base) % rb.size == 0:
                    if best is None or o < best.base:
                        best = BatchRef(o, o + ra.size - 1, ra.epoch, ra.tag)
                    break
                o += ra.size
    return best


def _epoch_regressions(h: PartitionHistory, r: Replica) -> list[Claim]:
    """One claim per batch in an epoch below an earlier batch's (SPEC 5: per occurrence)."""
    claims: list[Claim] = []
    highest = -1
    for run in r.log.runs:
        if 0 <= run.epoch < highest:
            claims.extend(Claim("EPOCH_REGRESSION", "ERROR", h.topic, h.partition, r.broker, base, base + run.size)
                          for base in range(run.base, run.end, run.size))
        highest = max(highest, run.epoch)
    return claims


def _cache_mismatches(h: PartitionHistory, r: Replica) -> list[Claim]:
    entries = checkpoint_entries(r)
    if entries is None:
        return []
    leo, lso = r.log.leo, 0
    log_cache = rebuild_from_log(r.log).entries
    from_log = dict(log_cache)
    claims = []
    for i, (epoch, start) in enumerate(entries):
        end = entries[i + 1][1] if i + 1 < len(entries) else leo
        if lso <= start < leo:
            ok = epoch in from_log and (from_log[epoch] == start or (start == lso and from_log[epoch] <= start))
            if not ok:
                claims.append(Claim("EPOCH_CACHE_MISMATCH", "ERROR", h.topic, h.partition, r.broker, start, end))
    in_file = {e for e, _ in entries}
    for i, (epoch, start) in enumerate(log_cache):
        if epoch not in in_file and start >= lso:
            end = log_cache[i + 1][1] if i + 1 < len(log_cache) else leo
            claims.append(Claim("EPOCH_CACHE_MISMATCH", "ERROR", h.topic, h.partition, r.broker, start, end))
    return claims


def in_isr(h: PartitionHistory, broker: int) -> bool:
    """An ISR member in SPEC's sense: a member of the ISR or of the ELR (SPEC 4.6)."""
    return broker in h.isr or broker in h.elr


def _gaps(h: PartitionHistory, r: Replica) -> list[Claim]:
    """``OFFSET_GAP`` at WARNING: a batch missing from inside ``r``'s log (a cleaner bug's
    doing). On a compacted topic a gap that ends at or below the partition's highest HWM
    is the cleaner's own work (INFO, SPEC 4.5: not claimed)."""
    hmax = max(x.hwm for x in h.replicas.values())
    claims, prev_end = [], None
    for run in r.log.runs:
        if prev_end is not None and run.base > prev_end and not (h.compacted and run.base <= hmax):
            claims.append(Claim("OFFSET_GAP", "WARNING", h.topic, h.partition, r.broker, prev_end, run.base))
        prev_end = run.end
    return claims


def _replica_claims(h: PartitionHistory, r: Replica) -> list[Claim]:
    t, p, b = h.topic, h.partition, r.broker
    claims = []
    for base in sorted(r.corrupt):
        batch = r.log.batch_at(base)
        if batch is not None:
            claims.append(Claim("CORRUPT_BATCH", "CRITICAL", t, p, b, batch.base, batch.last + 1))
    if r.torn_bytes:
        claims.append(Claim("CORRUPT_BATCH", "WARNING", t, p, b, r.log.leo, None))  # always the newest segment
    claims += _gaps(h, r)
    if r.hwm > r.log.leo:
        important = b == h.leader or in_isr(h, b)
        claims.append(Claim("HWM_ABOVE_LEO", "CRITICAL" if important else "ERROR", t, p, b, r.log.leo, r.hwm))
    claims += _epoch_regressions(h, r)
    claims += _cache_mismatches(h, r)
    if r.checkpoint_lost:
        claims.append(Claim("MISSING_INPUT", "WARNING", t, p, b, None, None))
    return claims


def _pair(h: PartitionHistory, f: Replica) -> tuple[FollowerTruth, list[Claim]]:
    lead = h.lead
    t_, p, b = h.topic, h.partition, f.broker
    # SPEC 4.5: on a compacted topic each replica's cleaner works below its own HWM, so
    # batches are compared only from the higher of the two HWMs
    floor = max(lead.hwm, f.hwm) if h.compacted else 0
    d = f.log.first_disagreement(lead.log, start=floor)
    tr = epoch_truncation(f.log, loaded_cache(f), f.hwm, loaded_cache(lead), lead.log.leo)
    t = tr.offset
    leo_f = f.log.leo
    claims = []

    def claim(check: str, severity: str, start: int | None, end: int | None) -> None:
        claims.append(Claim(check, severity, t_, p, b, start, end))

    if d is not None and t == d:
        claim("DIVERGENT_SUFFIX", "WARNING", d, leo_f)
    if t is not None and (d is None or t < d):
        claim("OVER_TRUNCATION", "WARNING", t, d if d is not None else leo_f)
    if d is not None and (t is None or t > d):
        claim("SILENT_DIVERGENCE", "CRITICAL", d, t if t is not None else leo_f)
    if d is not None and d < min(lead.hwm, f.hwm):
        claim("LOG_MATCHING_VIOLATION", "CRITICAL", d, min(lead.hwm, f.hwm))
    if t is not None and t < f.hwm:
        claim("COMMITTED_DATA_LOSS", "CRITICAL", t, f.hwm)
    conflict = _same_epoch_conflict(f.log, lead.log, floor)
    if conflict is not None:
        claim("SAME_EPOCH_CONFLICT", "CRITICAL", conflict.base, conflict.last + 1)
    if in_isr(h, b):
        missing = lead.log.first_disagreement(f.log, below=lead.hwm, start=floor, whole=True)
        if missing is not None:
            claim("ISR_INCOMPLETE", "CRITICAL", missing, lead.hwm)
    return FollowerTruth(t_, p, b, d, t, tr.rounds), claims


def partition_truth(h: PartitionHistory) -> tuple[list[Claim], list[FollowerTruth]]:
    """Every WARNING-or-above finding the auditor must report for ``h``, and each follower's offsets."""
    claims: list[Claim] = []
    followers = []
    for broker in h.assignment:
        r = h.replicas[broker]
        claims += _replica_claims(h, r)
        if broker != h.leader:
            truth, pair_claims = _pair(h, r)
            followers.append(truth)
            claims += pair_claims
    max_hwm = max(r.hwm for r in h.replicas.values())
    if h.lead.log.leo < max_hwm:
        claims.append(Claim("LEADER_INCOMPLETE", "CRITICAL", h.topic, h.partition, None, h.lead.log.leo, max_hwm))
    return claims, followers
