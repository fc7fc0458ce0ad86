"""The KRaft quorum's ground truth (SPEC 4.4, 4.7 and 5, computed without Spark from the
nodes' final state), what the quorum writes into a snapshot, and ``simulate_quorum``."""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence
from pathlib import Path

from auditor.simulator.kafka_binary import encode_meta_segment
from auditor.simulator.kafka_text import checkpoint_text, content_crc
from auditor.simulator.kraft import (
    KRAFT_FAULTS,
    LOG_DIR,
    META_TOPIC,
    SEGMENT_OFFSETS,
    MetaNode,
    Quorum,
    exchange,
)
from auditor.simulator.kraft_text import (
    KRaftStyle,
    MetaBatch,
    QuorumState,
    log_dump,
    quorum_status_text,
    snapshot_batches,
    snapshot_dump,
    snapshot_name,
)

# --- the ground truth ------------------------------------------------------------------------

def _claim_of(check: str, severity: str, replica: int | None, start: int | None, end: int | None,
              topic: str) -> dict[str, object]:
    return {"check": check, "severity": severity, "topic": topic, "partition": 0, "replica": replica,
            "offset_start": start, "offset_end": end}


def _leader(q: Quorum) -> int | None:
    """SPEC 4.7: the leader the top-epoch quorum-state files agree on (else inferred, 4.6)."""
    files = [(n.q_epoch, n.q_leader) for n in q.nodes.values() if not n.q_missing and n.q_leader >= 0]
    if files:
        top = max(e for e, _ in files)
        named = {leader for e, leader in files if e == top}
        if len(named) == 1:
            return named.pop()
    ranked = sorted(q.nodes.values(), key=lambda n: (-(n.cache()[-1][0] if n.cache() else -1), -n.leo, n.id))
    return ranked[0].id if ranked and ranked[0].cache() else None


def kraft_truth(q: Quorum, topic: str = META_TOPIC) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Every WARNING-or-above finding of the metadata partition, and each follower's offsets;
    ``topic``: the partition folder's topic (``@metadata`` in Kafka 2.8's layout)."""
    claims: list[dict[str, object]] = []
    _claim = functools.partial(_claim_of, topic=topic)
    followers: list[dict[str, object]] = []
    committed = max([s[0] for n in q.nodes.values() for s in n.snapshots] + [q.hw]) or None
    leader_id = _leader(q)
    lead = q.nodes[leader_id] if leader_id is not None else None

    def own(n: MetaNode) -> int | None:
        return max((s[0] for s in n.snapshots), default=None)

    def batch_key(b: MetaBatch) -> tuple[int, int, int, int]:
        return (b.base_offset, b.last_offset, b.epoch, b.crc)

    for n in q.nodes.values():
        lls = n.log_start
        for b in n.log:  # SPEC 4.7 KRAFT_EPOCH_START never fires: every epoch opens with LeaderChange
            if b.base_offset in n.corrupt:
                claims.append(_claim("CORRUPT_BATCH", "CRITICAL", n.id, b.base_offset, b.last_offset + 1))
        for (end, epoch), kind in sorted(n.snapshots.items()):
            held = next((b.epoch for b in n.log if b.base_offset <= end - 1 <= b.last_offset), epoch)
            if kind == "empty" or held != epoch:
                claims.append(_claim("KRAFT_SNAPSHOT_INVALID", "ERROR", n.id, end - 1, end))
        if lls > 0 and (own(n) or 0) < lls:
            claims.append(_claim("KRAFT_SNAPSHOT_MISSING", "CRITICAL", n.id, 0, lls))
        cache = n.cache()
        state_epoch = 0 if n.q_missing else n.q_epoch
        if cache and state_epoch < cache[-1][0]:
            claims.append(_claim("KRAFT_QUORUM_STATE_BEHIND", "WARNING", n.id, None, None))
    if lead is None:
        return claims, followers
    if committed is not None and lead.leo < committed:
        claims.append(_claim("LEADER_INCOMPLETE", "CRITICAL", None, lead.leo, committed))
    leader_batches = {batch_key(b) for b in lead.log}
    by_base = {b.base_offset: b for b in lead.log}
    for n in sorted(q.nodes.values(), key=lambda x: x.id):
        if n.id == leader_id:
            continue
        scope = max(n.log_start, lead.log_start)
        differing = [b for b in n.log if b.last_offset >= scope and batch_key(b) not in leader_batches]
        d = max(differing[0].base_offset, scope) if differing else None
        ex = exchange(lead, n)
        t = ex.truncation
        fs = ex.fetch_snapshot
        leo_f = n.leo
        hwm_f = own(n)
        followers.append({"topic": topic, "partition": 0, "replica": n.id, "divergence_offset": d,
                          "truncation_offset": t})
        if d is not None and (t == d or fs is not None):
            claims.append(_claim("DIVERGENT_SUFFIX", "WARNING", n.id, d, leo_f))
        if fs is None and t is not None and (d is None or t < d):
            claims.append(_claim("OVER_TRUNCATION", "WARNING", n.id, t, d if d is not None else leo_f))
        if fs is None and d is not None and (t is None or t > d):
            claims.append(_claim("SILENT_DIVERGENCE", "CRITICAL", n.id, d, t if t is not None else leo_f))
        conflict = next((b for b in n.log if b.last_offset >= scope and b.base_offset in by_base
                         and by_base[b.base_offset].epoch == b.epoch
                         and (by_base[b.base_offset].crc != b.crc
                              or by_base[b.base_offset].last_offset != b.last_offset)), None)
        if conflict is not None:
            claims.append(_claim("SAME_EPOCH_CONFLICT", "CRITICAL", n.id, conflict.base_offset,
                                 conflict.last_offset + 1))
        if d is not None and committed is not None and hwm_f is not None and d < min(committed, hwm_f):
            claims.append(_claim("LOG_MATCHING_VIOLATION", "CRITICAL", n.id, d, min(committed, hwm_f)))
        if hwm_f is not None:
            if fs is not None and fs[0] < hwm_f:
                claims.append(_claim("COMMITTED_DATA_LOSS", "CRITICAL", n.id, fs[0], hwm_f))
            elif fs is None and t is not None and t < hwm_f:
                claims.append(_claim("COMMITTED_DATA_LOSS", "CRITICAL", n.id, t, hwm_f))
    return claims, followers


# --- writing -------------------------------------------------------------------------------

def write_quorum(root: Path, q: Quorum, style: KRaftStyle, binary: bool = False) -> int:
    """Write every node's metadata log folder and the status file; returns the files written.
    ``binary``: the log's segments and the snapshots as Kafka stores them (``<base>.log``,
    ``<end>-<epoch>.checkpoint``; an empty snapshot a zero-length file), else their dumps."""
    files = 0
    data_version = 1 if style.version == "4.1" else 0
    for n in q.nodes.values():
        folder = root / f"broker={n.id}" / "meta" / style.folder
        folder.mkdir(parents=True, exist_ok=True)
        groups: dict[int, list[MetaBatch]] = {}
        for b in n.log:
            groups.setdefault(b.base_offset // SEGMENT_OFFSETS, []).append(b)
        segments = [g for _, g in sorted(groups.items())] or [[]]
        for seg in segments:
            base = seg[0].base_offset if seg else n.log_start
            shown = [MetaBatch(b.base_offset, b.epoch, b.records, b.crc, b.leader_id, b.voters, b.timestamp,
                               valid=b.base_offset not in n.corrupt) for b in seg]
            if binary:
                (folder / f"{base:020d}.log").write_bytes(encode_meta_segment(shown))
            else:
                (folder / f"{base:020d}.log.txt").write_text(log_dump(LOG_DIR, base, shown, style), encoding="utf-8")
            files += 1
        (folder / "leader-epoch-checkpoint").write_text(checkpoint_text(n.cache()), encoding="utf-8")
        files += 1
        for (end, epoch), kind in sorted(n.snapshots.items()):
            content = snapshot_batches(epoch, 3, content_crc("snapshot", end, epoch)) if kind == "dump" else []
            if binary:
                (folder / snapshot_name(end, epoch)).write_bytes(encode_meta_segment(content))
            else:
                (folder / f"{snapshot_name(end, epoch)}.txt").write_text(
                    snapshot_dump(LOG_DIR, end, epoch, content, style), encoding="utf-8")
            files += 1
        if not n.q_missing:
            voters = tuple(q.voters) if data_version == 0 else ()
            (folder / "quorum-state").write_text(
                QuorumState(n.q_leader, n.q_epoch, n.q_voted, voters, data_version).text(), encoding="utf-8")
            files += 1
    status_leader = q.leader if q.leader not in q.unreachable else -1
    (root / "metadata-quorum-status.txt").write_text(
        quorum_status_text(status_leader, q.epoch, q.hw, q.voters,
                           [n for n in sorted(q.nodes) if not q.nodes[n].voter]), encoding="utf-8")
    return files + 1


def kraft_style_for(dump_style: str) -> KRaftStyle | None:
    """How the cluster's release prints the metadata log; None before KRaft (Kafka < 2.8)."""
    if dump_style in ("2.8",):
        return KRaftStyle("2.8")
    if dump_style in ("3.0", "3.2"):
        return KRaftStyle("3.3")
    if dump_style == "3.3":
        return KRaftStyle("4.1")
    return None


def simulate_quorum(root: Path, controllers: int, brokers: int, steps: int, faults: list[str], seed: int,
                    style: KRaftStyle, more_steps: Sequence[int] = (), binary: bool = False) -> tuple[
                        Quorum, list[dict[str, object]], list[dict[str, object]], int]:
    """Simulate and write the metadata log of ``controllers`` voters (ids after the brokers')
    and ``brokers`` observers; returns the quorum, its claims and follower truths, files.

    ``more_steps``: the later snapshots of a continued simulation, each this many more steps
    of the same history (the same seed replays the earlier ones exactly: a segment that did
    not change keeps its bytes). The faults come after the last step: a fault is a state the
    snapshot shows, and each snapshot is simulated from the start."""
    rng = random.Random(f"{seed}/kraft")
    q = Quorum(list(range(brokers + 1, brokers + controllers + 1)), list(range(1, brokers + 1)), rng)
    done = max(12, steps)
    q.run(done)
    for more in more_steps:
        q.run(max(1, more), start=done)
        done += max(1, more)
    for fault in KRAFT_FAULTS:
        if fault in faults:
            q.inject(fault)
    claims, followers = kraft_truth(q, style.topic)
    return q, claims, followers, write_quorum(root, q, style, binary)
