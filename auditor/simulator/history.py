"""One partition's replication history: producers append, followers fetch (truncating first
after a leader change, by their protocol), the leader advances the high watermark over
its ISR (SPEC seed 6.5: every ISR member has fetched in the current epoch and the ISR has
at least min ISR members), the controller elects leaders, and faults are injected.

Each partition is simulated on its own, from its own random stream, so a snapshot of any
size is written one partition at a time.
"""

from __future__ import annotations

import random

from auditor.simulator.incidents import Incidents
from auditor.simulator.model import (
    Replica,
    Truncation,
    epoch_truncation,
    kip101_truncation,
)

# fault kinds, in the order they are applied inside one partition
FAULTS = (
    "kip-101",                 # the partition's replicas truncate by Kafka 0.11-1.1 rules (with a fast fail-over)
    "stopped-follower",        # a follower stops fetching and drops out of the ISR (lag)
    "zombie-leader",           # a deposed leader appends in its old epoch after holding a newer one
    "fast-failover",           # KIP-279 scenario 1: two leader changes before the follower truncates
    "unclean-election",        # an out-of-sync replica becomes leader; the old leader's tail diverges
    "lossy-shutdown",          # a replica restarts with a prefix of its log and a stale HWM checkpoint
    "cleaner-bug",             # the leader's log cleaner drops a committed batch above its limit
    "zombie-transaction",      # a deposed leader takes a zombie transaction's batches in its old epoch
    "corrupt-batch",           # a batch printed isvalid: false
    "torn-tail",               # invalid bytes at the end of the newest segment
    "lost-epoch-checkpoint",   # leader-epoch-checkpoint missing from the snapshot
    "stale-epoch-checkpoint",  # leader-epoch-checkpoint an older version, lacking its newest entry
)
CHECKPOINT_FAULTS = ("corrupt-batch", "torn-tail", "lost-epoch-checkpoint", "stale-epoch-checkpoint")
#: Incidents of the moment the snapshot is taken: applied after the partition settles.
FINAL_FAULTS = ("cleaner-bug", "zombie-transaction")
#: Faults that belong to a shape of real clusters, and the partitions that can host them:
#: transactional topics (and ``__consumer_offsets``, where transactional offset commits
#: land) for the zombie transaction, compacted topics for the cleaner.
SHAPED_FAULTS = {"zombie-transaction": "transactional", "cleaner-bug": "compacted"}


class PartitionHistory(Incidents):
    """The state of one partition and the events that change it (its faults:
    :class:`auditor.simulator.incidents.Incidents`)."""

    def __init__(self, topic: str, partition: int, brokers: list[int], rng: random.Random,
                 min_isr: int, first_epoch: int) -> None:
        self.topic, self.partition, self.rng = topic, partition, rng
        self.assignment = brokers
        self.replicas = {b: Replica(b) for b in brokers}
        self.min_isr = min_isr
        self.leader = brokers[0]
        self.epoch = first_epoch
        self.isr = list(brokers)
        self.elr: list[int] = []  # KIP-966's eligible leader replicas (3.7+)
        self.compacted = False  # the topic's cleanup.policy compacts (SPEC 4.5; set by the writer)
        self.zombie_tags: set[int] = set()  # appends of a zombie transactional producer
        self.view: dict[int, int | None] = {b: None for b in brokers}  # the leader's view of follower LEOs
        self.tag = 0
        self.applied: list[str] = []
        self.replicas[self.leader].cache.assign(self.epoch, 0)

    # -- primitive events -------------------------------------------------------------

    @property
    def lead(self) -> Replica:
        return self.replicas[self.leader]

    def followers(self, fetching_only: bool = True) -> list[int]:
        return [b for b in self.assignment if b != self.leader and not (fetching_only and self.replicas[b].frozen)]

    def produce(self, batches: int, size: int | None = None, epoch: int | None = None,
                writer: int | None = None) -> None:
        """``writer`` (default: the leader) appends ``batches`` batches in ``epoch``."""
        r = self.replicas[self.leader if writer is None else writer]
        size = size if size is not None else self.rng.randint(1, 5)
        self.tag += 1
        run = r.log.append(batches, size, self.epoch if epoch is None else epoch, self.tag)
        r.cache.assign(run.epoch, run.base)
        self._advance_hwm()

    def truncate_follower(self, f: Replica) -> Truncation:
        """The follower's first fetch after a leader change: its protocol's truncation."""
        fn = epoch_truncation if f.protocol == "epoch" else kip101_truncation
        result = fn(f.log, f.cache, f.hwm, self.lead.cache.without_entries_above(self.lead.log.leo),
                    self.lead.log.leo, apply=True)
        f.hwm = min(f.hwm, f.log.leo)
        f.needs_truncation = False
        return result

    def fetch(self, broker: int, max_batches: int) -> None:
        """Follower ``broker`` fetches up to ``max_batches`` batches from the leader."""
        f, lead = self.replicas[broker], self.lead
        if f.needs_truncation:
            self.truncate_follower(f)
        # the leader returns whole batches: a follower ending inside a leader batch drops back to its base
        while f.log.leo < lead.log.leo:
            b = lead.log.batch_at(f.log.leo)
            if b is None or b.base == f.log.leo:
                break
            f.log.truncate(b.base)
            f.cache.truncate_from_end(f.log.leo)
        before = len(f.log.runs)
        if f.log.leo < lead.log.leo:
            f.log.copy_from(lead.log, f.log.leo, max_batches)
        for run in f.log.runs[before:]:
            f.cache.assign(run.epoch, run.base)
        self.view[broker] = f.log.leo
        leso = next((s for e, s in lead.cache.entries if e == self.epoch), lead.log.leo)
        if broker not in self.isr and f.log.leo >= max(lead.hwm, leso) and f.log.leo == lead.log.leo:
            self.isr.append(broker)  # caught up: back in sync
            self._update_elr()
        self._advance_hwm()
        f.hwm = min(lead.hwm, f.log.leo)

    def _advance_hwm(self) -> None:
        if len(self.isr) < self.min_isr:
            return
        offsets = [self.lead.log.leo if b == self.leader else self.view.get(b) for b in self.isr]
        if any(o is None for o in offsets):
            return  # an ISR member has not fetched in this epoch yet
        self.lead.hwm = max(self.lead.hwm, min(o for o in offsets if o is not None))

    def elect(self, broker: int, clean: bool = True) -> None:
        """The controller makes ``broker`` leader in a new epoch."""
        self.epoch += 1
        self.leader = broker
        new = self.replicas[broker]
        new.cache.assign(self.epoch, new.log.leo)
        new.needs_truncation = False
        for b in self.followers(fetching_only=False):
            self.replicas[b].needs_truncation = True
        self.view = {b: None for b in self.assignment}  # followers must fetch in the new epoch
        if not clean:
            self.isr = [broker]
            self.elr = []  # an unclean election gives up the ELR's guarantee (KIP-966)
        elif broker not in self.isr:
            raise ValueError("a clean election picks an ISR member")

    def shrink(self, broker: int) -> None:
        """The controller removes ``broker`` from the ISR. KIP-966 (3.7+): a member removed
        while the ISR falls below min ISR joins the ELR; it holds every committed record,
        and the HWM cannot advance past it while the ISR stays below min ISR."""
        if broker in self.isr and broker != self.leader:
            self.isr.remove(broker)
            if len(self.isr) < self.min_isr and broker not in self.elr:
                self.elr.append(broker)

    def _update_elr(self) -> None:
        """A member back in the ISR leaves the ELR; an ISR at min ISR clears it (KIP-966)."""
        self.elr = [] if len(self.isr) >= self.min_isr else [b for b in self.elr if b not in self.isr]

    def unclean_restart(self, broker: int) -> None:
        """A broker that restarts after an unclean shutdown is no longer eligible (KIP-966)."""
        self.shrink(broker)
        if broker in self.elr:
            self.elr.remove(broker)

    def clean_candidates(self) -> list[int]:
        return [b for b in self.isr if b != self.leader and not self.replicas[b].frozen
                and self.replicas[b].log.leo >= self.lead.hwm]

    # -- phases ---------------------------------------------------------------------------

    def normal(self, batches: int, elections: bool) -> None:
        """Steady traffic until the leader holds about ``batches`` batches."""
        per_append = max(1, batches // 6)
        while self.lead.log.batch_count < batches:
            roll = self.rng.random()
            followers = self.followers()
            if roll < 0.35 or not followers:
                self.produce(min(batches - self.lead.log.batch_count, self.rng.randint(1, 2 * per_append)))
            elif roll < 0.94:
                self.fetch(self.rng.choice(followers), self.rng.randint(1, 3 * per_append))
            elif elections and self.clean_candidates():
                self.elect(self.rng.choice(self.clean_candidates()))  # preferred leader election
        for b in self.followers():
            self.fetch(b, self.rng.randint(0, 4 * per_append) if self.rng.random() < 0.3 else 10**9)

    def settle(self) -> None:
        """After the incidents: a little more traffic, the still-fetching followers fetch."""
        if self.rng.random() < 0.7:
            self.produce(self.rng.randint(1, 3))
        for b in self.followers():
            if self.rng.random() < 0.8:
                self.fetch(b, 10**9)


def continue_partition(h: PartitionHistory, step: int, batches: int, faults: list[str], seed: int) -> None:
    """Continue a simulated partition for one later snapshot (``simulate --continue-from``):
    about ``batches`` more batches of steady traffic, then ``faults``, deterministic for the
    seed, the partition and the step's number."""
    h.rng = random.Random(f"{seed}/{h.topic}/{h.partition}/continue/{step}")
    ordered = sorted(faults, key=FAULTS.index)
    if batches > 0:
        h.normal(h.lead.log.batch_count + batches, elections=h.rng.random() < 0.5)
    incidents = [f for f in ordered if f not in CHECKPOINT_FAULTS and f not in FINAL_FAULTS]
    for fault in incidents:
        h.inject(fault)
    if incidents and h.rng.random() < 0.5:
        h.settle()
    _final(h, ordered)


def simulate_partition(topic: str, partition: int, brokers: list[int], batches: int, faults: list[str],
                       seed: int, min_isr: int = 2) -> PartitionHistory:
    """The whole history of one partition, deterministic for its seed, topic and number."""
    rng = random.Random(f"{seed}/{topic}/{partition}")
    h = PartitionHistory(topic, partition, brokers, rng, min(min_isr, len(brokers)), rng.randint(0, 5))
    ordered = sorted(faults, key=FAULTS.index)
    if "kip-101" in ordered:
        for r in h.replicas.values():
            r.protocol = "kip-101"
    h.normal(max(1, batches), elections=rng.random() < 0.5)
    incidents = [f for f in ordered if f not in CHECKPOINT_FAULTS and f not in FINAL_FAULTS]
    for fault in incidents:
        h.inject(fault)
    if not incidents or rng.random() < 0.5:
        h.settle()
    _final(h, ordered)
    return h


def _final(h: PartitionHistory, ordered: list[str]) -> None:
    """The incidents of the snapshot's moment, then the faults of the files on disk."""
    for fault in ordered:
        if fault in FINAL_FAULTS:
            h.inject(fault)
    for fault in ordered:
        if fault in CHECKPOINT_FAULTS:
            h.inject(fault)
