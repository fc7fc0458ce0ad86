"""Simulate KRaft's controller quorum and its metadata log (SPEC 4.7, KRAFT.md sections 3 and 4).

N controllers vote; every broker is an observer with a full copy. The leader opens each
epoch with a LeaderChange control batch, appends metadata batches, and the others fetch
with KRaft's rules (``ReplicatedLog.validateOffsetAndEpoch`` and ``truncateToEndOffset``,
FETCH_SNAPSHOT below the leader's log start). The high watermark is the voters' majority
offset, once the leader has one record of its epoch committed. Each node takes its own
snapshots, batch-aligned at or below the high watermark, and deletes the segments below its
latest one. ``quorum-state`` is written before a node acts in a new epoch.

Faults (KRAFT.md section 4), applied after the normal history, in this order:

``kraft-corrupt-batch``        KAFKA-15968: a batch printed ``isvalid: false`` in an old segment
``kraft-zero-length-snapshot`` KAFKA-15312: a node's latest snapshot is an empty file
``kraft-retention-past-snapshot`` KAFKA-14238/14240: a node's log starts past its latest snapshot
``kraft-lost-unflushed``       KAFKA-10527: the leader restarts in its own epoch without its
                               unflushed tail and writes other batches at those offsets
``kraft-partitioned-leader``   KAFKA-15489: a leader cut off from the quorum keeps appending in
                               its epoch; the others elect a new leader
``kraft-voter-reformatted``    KAFKA-14205: a voter's disk formatted anew, restored from the
                               leader's snapshot, its ``quorum-state`` not written yet
``kraft-truncated-below-hwm``  KAFKA-12460: the leader's log truncated below the high watermark

The ground truth (:func:`kraft_truth`) is computed from the nodes' final state with the rules
of SPEC 4.4, 4.7 and 5, written here without Spark.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from auditor.simulator.kafka_text import checkpoint_text, content_crc
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
from auditor.simulator.model import EpochCache

KRAFT_FAULTS = ("kraft-corrupt-batch", "kraft-zero-length-snapshot", "kraft-retention-past-snapshot",
                "kraft-lost-unflushed", "kraft-partitioned-leader", "kraft-voter-reformatted",
                "kraft-truncated-below-hwm")
META_TOPIC = "__cluster_metadata"
SEGMENT_OFFSETS = 40  # a segment holds the batches whose base offset falls in one such range
LOG_DIR = "/var/lib/kafka/meta"
Entry = tuple[int, int]
SnapshotId = tuple[int, int]  # (end offset, epoch)


@dataclass
class MetaNode:
    """One node's disk: its metadata log (from its log start), snapshots and quorum-state."""

    id: int
    voter: bool
    log: list[MetaBatch] = field(default_factory=list)
    log_start: int = 0
    snapshots: dict[SnapshotId, str] = field(default_factory=dict)  # id -> "dump" | "empty"
    q_leader: int = -1
    q_epoch: int = 0
    q_voted: int = -1
    q_missing: bool = False
    corrupt: set[int] = field(default_factory=set)  # base offsets printed isvalid: false

    @property
    def leo(self) -> int:
        return max([self.log_start] + [b.last_offset + 1 for b in self.log])

    def cache(self) -> list[Entry]:
        """The epoch cache Kafka keeps for the log it holds: each epoch's first offset."""
        out: list[Entry] = []
        for b in self.log:
            if not out or out[-1][0] != b.epoch:
                out.append((b.epoch, b.base_offset))
        return out

    def floor(self, o: int) -> int:
        return next((b.base_offset for b in self.log if b.base_offset <= o <= b.last_offset), o)

    def truncate(self, cut: int) -> None:
        self.log = [b for b in self.log if b.base_offset < cut]

    def lowest(self) -> int | None:
        return self.log[0].base_offset if self.log else None


def _answer(n: MetaNode, cache: list[Entry], leo: int, epoch: int) -> tuple[int, int]:
    """A node's end offset for ``epoch`` as SPEC 4.7 has it (snapshot and undefined cases)."""
    e, o = EpochCache(cache).end_offset_for(epoch, leo)
    if n.snapshots and (e, o) == (epoch, n.log_start):
        first = min(n.snapshots)
        return first[1], first[0]
    if (e, o) == (-1, -1):
        return epoch, leo
    return e, o


@dataclass
class Exchange:
    truncation: int | None
    rounds: int
    fetch_snapshot: SnapshotId | None
    leo: int  # the follower's log end after the exchange


def exchange(leader: MetaNode, f: MetaNode, apply: bool = False, max_rounds: int = 64) -> Exchange:
    """The follower's fetches until the leader accepts one (SPEC 4.7 ``kraft``); ``apply``
    changes ``f`` as Kafka would (truncation, or the leader's snapshot loaded)."""
    cache, leo, t, rounds = f.cache(), f.leo, None, 0
    lowest, local_start = f.lowest(), f.log_start
    for _ in range(max_rounds):
        holds = lowest is not None and lowest < leo
        e = (cache[-1][0] if cache else -1) if holds else (
            max(f.snapshots)[1] if f.snapshots else (cache[-1][0] if cache else -1))
        if leader.snapshots:
            first = min(leader.snapshots)
            if leo < leader.log_start or (leo == leader.log_start and e != first[1]) or e < first[1] or leo == 0:
                latest = max(leader.snapshots)
                if apply:
                    f.log, f.log_start = [], latest[0]
                    f.snapshots[latest] = "dump"
                return Exchange(local_start if holds else t, rounds + 1, latest, latest[0])
        el, ol = _answer(leader, leader.cache(), leader.leo, e)
        if el == e and ol >= leo:
            break
        rounds += 1
        if el == 0:
            o, final = min(ol, leo), True
        else:
            ef, of = _answer(f, cache, leo, el)
            o, final = (min(of, ol), True) if ef == el else (of, False)
        cut = f.floor(o)
        if cut < leo:
            t, leo = cut, cut
            if apply:
                f.truncate(cut)
        cache = [x for x in cache if x[1] < cut]
        if final:
            break
    return Exchange(t, rounds, None, leo)


class Quorum:
    """The controllers and observers of one cluster, and the history of its metadata log."""

    def __init__(self, controllers: list[int], brokers: list[int], rng: random.Random) -> None:
        self.rng = rng
        self.voters = controllers
        self.nodes = {n: MetaNode(n, True) for n in controllers} | {b: MetaNode(b, False) for b in brokers}
        self.leader = -1
        self.epoch = 0
        self.epoch_start = 0
        self.hw = 0
        self.unreachable: set[int] = set()
        self.applied: list[str] = []

    # --- the protocol ------------------------------------------------------------------------

    def elect(self, candidate: int) -> None:
        """``candidate`` wins the next epoch: ``quorum-state`` first, then LeaderChange."""
        self.epoch += 1
        self.leader = candidate
        for n in self.nodes.values():
            if n.id in self.unreachable:
                continue
            n.q_leader, n.q_epoch, n.q_voted, n.q_missing = candidate, self.epoch, -1, False
        lead = self.nodes[candidate]
        self.epoch_start = lead.leo
        lead.log.append(MetaBatch(lead.leo, self.epoch, ("LeaderChange",),
                                  content_crc("leader-change", self.epoch, candidate, lead.leo),
                                  leader_id=candidate, voters=tuple(self.voters)))

    def append(self, batches: int, salt: str = "") -> None:
        lead = self.nodes[self.leader]
        for _ in range(batches):
            n = self.rng.randint(1, 4)
            base = lead.leo
            lead.log.append(MetaBatch(base, self.epoch, ("data",) * n,
                                      content_crc("metadata", self.leader, self.epoch, base, n, salt)))

    def fetch(self, node: int, max_batches: int | None = None) -> None:
        """One follower's fetch: truncation or a snapshot if the leader says so, then copies."""
        lead, f = self.nodes[self.leader], self.nodes[node]
        exchange(lead, f, apply=True)
        copied = 0
        for b in lead.log:
            if b.base_offset >= f.leo and (max_batches is None or copied < max_batches):
                f.log.append(b)
                copied += 1

    def advance_hw(self) -> None:
        """The voters' majority offset, once one record of the leader's epoch is in it."""
        ends = sorted((self.nodes[v].leo for v in self.voters if v not in self.unreachable), reverse=True)
        majority = len(self.voters) // 2 + 1
        if len(ends) >= majority:
            candidate = ends[majority - 1]
            if candidate > self.epoch_start:
                self.hw = max(self.hw, candidate)

    def take_snapshot(self, node: int) -> None:
        """The node's snapshot at its last batch end at or below the high watermark."""
        n = self.nodes[node]
        done = max((s[0] for s in n.snapshots), default=0)
        ends = [(b.last_offset + 1, b.epoch) for b in n.log if done < b.last_offset + 1 <= self.hw]
        if ends:
            n.snapshots[max(ends)] = "dump"

    def retain(self, node: int) -> None:
        """Delete the segments wholly below the node's latest snapshot (the active one stays)."""
        n = self.nodes[node]
        if not n.snapshots or not n.log:
            return
        latest = max(n.snapshots)[0]
        groups = sorted({b.base_offset // SEGMENT_OFFSETS for b in n.log})
        for g in groups[:-1]:
            batches = [b for b in n.log if b.base_offset // SEGMENT_OFFSETS == g]
            if max(b.last_offset for b in batches) + 1 <= latest:
                n.log = [b for b in n.log if b.base_offset // SEGMENT_OFFSETS != g]
            else:
                break
        if n.log:
            n.log_start = n.log[0].base_offset

    # --- the history -------------------------------------------------------------------------

    def run(self, steps: int, start: int = 0) -> None:
        """A healthy history: appends, fetches (observers sometimes behind), a leader change
        now and then, snapshots and retention. Ends with every node caught up but one
        observer a little behind. ``start``: the steps already run (a continued history)."""
        if start == 0:
            self.elect(self.voters[0])
        for step in range(start, start + steps):
            self.append(self.rng.randint(1, 3))
            for node in sorted(self.nodes):
                if node != self.leader:
                    partial = not self.nodes[node].voter and self.rng.random() < 0.3
                    self.fetch(node, self.rng.randint(0, 2) if partial else None)
            self.advance_hw()
            if step % 7 == 6:
                for node in sorted(self.nodes):
                    if self.rng.random() < 0.7:
                        self.take_snapshot(node)
                        self.retain(node)
            if step % 11 == 10 and len(self.voters) > 1:
                self.catch_up()
                others = [v for v in self.voters if v != self.leader]
                self.elect(self.rng.choice(others))
                self.catch_up()
        self.catch_up()
        observers = [n for n in sorted(self.nodes) if not self.nodes[n].voter]
        if observers:
            self.append(2)
            for node in sorted(self.nodes):
                if node != self.leader and node != observers[-1]:
                    self.fetch(node)
            self.advance_hw()

    def catch_up(self) -> None:
        for node in sorted(self.nodes):
            if node != self.leader and node not in self.unreachable:
                self.fetch(node)
        self.advance_hw()

    # --- faults ------------------------------------------------------------------------------

    def inject(self, fault: str) -> bool:
        handler = {
            "kraft-corrupt-batch": self._corrupt_batch,
            "kraft-zero-length-snapshot": self._zero_length_snapshot,
            "kraft-retention-past-snapshot": self._retention_past_snapshot,
            "kraft-voter-reformatted": self._voter_reformatted,
            "kraft-lost-unflushed": self._lost_unflushed,
            "kraft-partitioned-leader": self._partitioned_leader,
            "kraft-truncated-below-hwm": self._truncated_below_hwm,
        }[fault]
        done = handler()
        if done:
            self.applied.append(fault)
        return done

    def _followers(self, voters: bool | None = None) -> list[MetaNode]:
        return [n for i, n in sorted(self.nodes.items()) if i != self.leader and i not in self.unreachable
                and (voters is None or n.voter == voters)]

    def _corrupt_batch(self) -> bool:
        for n in self._followers():
            groups = sorted({b.base_offset // SEGMENT_OFFSETS for b in n.log})
            if len(groups) > 1:
                old = [b for b in n.log if b.base_offset // SEGMENT_OFFSETS == groups[0]]
                n.corrupt.add(old[len(old) // 2].base_offset)
                return True
        return False

    def _zero_length_snapshot(self) -> bool:
        for n in self._followers():
            if n.snapshots:
                n.snapshots[max(n.snapshots)] = "empty"
                return True
        return False

    def _retention_past_snapshot(self) -> bool:
        # an observer first: later faults rewrite voters' disks
        for n in [*reversed(self._followers(voters=False)), *self._followers(voters=True)]:
            groups = sorted({b.base_offset // SEGMENT_OFFSETS for b in n.log})
            latest = max((s[0] for s in n.snapshots), default=0)
            beyond = [g for g in groups[:-1] if min(b.base_offset for b in n.log
                                                    if b.base_offset // SEGMENT_OFFSETS == g + 1) > latest]
            if beyond:
                g = beyond[0]
                n.log = [b for b in n.log if b.base_offset // SEGMENT_OFFSETS > g]
                n.log_start = n.log[0].base_offset
                return True
        return False

    def _voter_reformatted(self) -> bool:
        for n in self._followers(voters=True):
            n.log, n.log_start, n.snapshots, n.corrupt = [], 0, {}, set()
            self.fetch(n.id)
            n.q_missing = True
            return True
        return False

    def _lost_unflushed(self) -> bool:
        lead = self.nodes[self.leader]
        followers = self._followers(voters=True)
        if not followers:
            return False
        self.append(3, salt="before-crash")
        lost = lead.log[-2:]
        self.fetch(followers[0].id)  # it replicated the tail the leader is about to lose
        lead.truncate(lost[0].base_offset)
        # restarted as leader in the same epoch (the bug): other records at the same offsets
        for b in lost:
            lead.log.append(MetaBatch(b.base_offset, self.epoch, b.records,
                                      content_crc("after-restart", self.leader, b.base_offset)))
        self.append(2)
        for n in followers[1:]:
            self.fetch(n.id)
        self.fetch(followers[0].id)  # its fetch in the same epoch is accepted: nothing truncated
        return True

    def _partitioned_leader(self) -> bool:
        others = [v for v in self.voters if v != self.leader]
        if len(others) < 2:
            return False
        old = self.leader
        self.unreachable.add(old)
        self.append(0)
        reachable = [self.nodes[v] for v in others]
        best = max(reachable, key=lambda n: (n.cache()[-1][0] if n.cache() else -1, n.leo, -n.id))
        self.elect(best.id)
        self.append(2)
        for node in sorted(self.nodes):
            if node not in (self.leader, old):
                self.fetch(node)
        self.advance_hw()
        # the old leader, cut off, still appends in its old epoch
        prev = self.nodes[old]
        for i in range(2):
            base = prev.leo
            prev.log.append(MetaBatch(base, prev.q_epoch, ("data",) * 2,
                                      content_crc("partitioned", old, prev.q_epoch, base, i)))
        return True

    def _truncated_below_hwm(self) -> bool:
        lead = self.nodes[self.leader]
        committed = max([self.hw] + [s[0] for n in self.nodes.values() for s in n.snapshots])
        cands = [b.base_offset for b in lead.log if lead.log_start < b.base_offset < committed
                 and b.base_offset > self.epoch_start]
        if not cands:
            return False
        lead.truncate(cands[len(cands) // 2])
        return True


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

def write_quorum(root: Path, q: Quorum, style: KRaftStyle) -> int:
    """Write every node's metadata log folder and the status file; returns the files written."""
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
            (folder / f"{base:020d}.log.txt").write_text(log_dump(LOG_DIR, base, shown, style), encoding="utf-8")
            files += 1
        (folder / "leader-epoch-checkpoint").write_text(checkpoint_text(n.cache()), encoding="utf-8")
        files += 1
        for (end, epoch), kind in sorted(n.snapshots.items()):
            content = snapshot_batches(epoch, 3, content_crc("snapshot", end, epoch)) if kind == "dump" else []
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
                    style: KRaftStyle, more_steps: Sequence[int] = ()) -> tuple[
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
    return q, claims, followers, write_quorum(root, q, style)
