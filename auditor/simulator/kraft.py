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

The ground truth (:func:`auditor.simulator.kraft_truth.kraft_truth`) is computed from the nodes' final state with the rules
of SPEC 4.4, 4.7 and 5, written here without Spark.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from auditor.simulator.kafka_text import content_crc
from auditor.simulator.kraft_text import (
    MetaBatch,
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
