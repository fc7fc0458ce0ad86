"""The faults a simulated partition can suffer (``auditor simulate --faults``), as a mixin of
:class:`auditor.simulator.history.PartitionHistory`: each ``_<fault>`` method changes the
partition's state the way the incident does, or returns False when this partition's state
cannot host it."""

from __future__ import annotations

import random

from auditor.simulator.model import BatchRef, Replica


class Incidents:
    """The faults of one partition's history (its state is the history's)."""

    rng: random.Random
    replicas: dict[int, Replica]
    leader: int
    applied: list[str]

    def inject(self, fault: str) -> bool:
        """Apply one fault; False when this partition's state cannot host it."""
        ok = getattr(self, "_" + fault.replace("-", "_"))()
        if ok:
            self.applied.append(fault)
        return bool(ok)

    def _ensure_two_epochs(self) -> bool:
        """Make sure some follower holds batches of two epochs (a leader change it followed)."""
        cands = self.clean_candidates()
        if not cands:
            return False
        self.elect(self.rng.choice(cands))
        self.produce(self.rng.randint(1, 3))
        for b in self.followers():
            self.fetch(b, 10**9)
        return True

    def _kip_101(self) -> bool:
        for r in self.replicas.values():
            r.protocol = "kip-101"
        # a fast fail-over whose deposed leader then fetches: KIP-279's silent divergence
        a = self.leader
        cands = [b for b in self.clean_candidates() if self.replicas[b].log.leo == self.lead.log.leo]
        if not cands:
            return False
        b = self.rng.choice(cands)
        k = self.rng.randint(2, 4)
        self.produce(k, size=1)                            # A's tail, not replicated
        self.elect(b)                                      # B leads (preferred election)
        self.produce(self.rng.randint(1, k), size=1)       # B's tail, not replicated
        self.elect(a)                                      # and A leads again at once
        self.produce(self.rng.randint(1, 3), size=1)
        self.fetch(b, 10**9)                               # kip-101: B keeps its tail
        for f in self.followers():
            self.fetch(f, 10**9)
        return True

    def _stop_a_follower(self) -> int | None:
        """A follower stops fetching and drops out of the ISR while the others go on; returns it."""
        followers = self.followers()
        if not followers:
            return None
        f = self.rng.choice(followers)
        self.replicas[f].frozen = True
        self.shrink(f)
        self.produce(self.rng.randint(1, 4))
        for b in self.followers():
            self.fetch(b, 10**9)
        return f

    def _stopped_follower(self) -> bool:
        if self._stop_a_follower() is None:
            return False
        # half the time a second follower stops too while the ISR is at min ISR: the ISR
        # falls below it, and that follower joins the ELR (KIP-966; the HWM stops)
        rest = self.followers()
        if rest and len(self.isr) == self.min_isr and self.rng.random() < 0.5:
            g = self.rng.choice(rest)
            if g in self.isr:
                self.replicas[g].frozen = True
                self.shrink(g)
                self.produce(self.rng.randint(1, 3))
        return True

    def _zombie_leader(self) -> bool:
        if not self._ensure_two_epochs():
            return False
        zs = [b for b in self.followers() if len({e for e, _ in self.replicas[b].cache.entries}) >= 2]
        if not zs:
            return False
        z = self.replicas[self.rng.choice(zs)]
        old_epoch = z.cache.entries[-2][0]
        self.produce(self.rng.randint(1, 3), writer=z.broker, epoch=old_epoch)  # a stale produce request
        z.frozen = True
        self.produce(self.rng.randint(0, 3) or 1)
        for b in self.followers():
            self.fetch(b, 10**9)
        return True

    def _fast_failover(self) -> bool:
        a = self.leader
        cands = self.clean_candidates()
        if not cands:
            return False
        b = self.rng.choice(cands)
        self.produce(self.rng.randint(1, 3))   # A's tail, not replicated to B
        self.elect(b)
        self.produce(self.rng.randint(1, 3))   # B's tail, never replicated
        self.elect(a)                          # B fails at once; A leads again
        self.replicas[b].frozen = True         # snapshot taken before B fetched again
        self.produce(self.rng.randint(1, 3))
        for f in self.followers():
            self.fetch(f, 10**9)
        return True

    def _unclean_election(self) -> bool:
        x = self._stop_a_follower()
        if x is None:
            return False
        old = self.leader
        # the leader and the ISR go down; x is the only live replica and unclean election is on
        for b in self.assignment:
            if b != x:
                self.replicas[b].frozen = True
        self.replicas[x].frozen = False
        self.elect(x, clean=False)
        self.produce(self.rng.randint(1, 3))
        # the others come back as followers; the snapshot is taken before the old leader fetches
        for b in self.assignment:
            if b not in (x, old):
                self.replicas[b].frozen = self.rng.random() < 0.5
        return True

    def _lossy_shutdown(self) -> bool:
        if self.lead.hwm == 0:
            self.produce(self.rng.randint(1, 3))
            for b in self.followers():
                self.fetch(b, 10**9)
        victim = self.leader if self.rng.random() < 0.5 else None
        if victim is not None:
            cands = self.clean_candidates()
            if not cands:
                victim = None
            else:
                self.elect(self.rng.choice(cands))
                for b in self.followers():
                    if b != victim:
                        self.fetch(b, 10**9)
        if victim is None:
            cands = [b for b in self.followers() if self.replicas[b].hwm > 0]
            if not cands:
                return False
            victim = self.rng.choice(cands)
        r = self.replicas[victim]
        if r.hwm <= 0:
            return False
        # unflushed data is lost: the restarted log ends at a batch base below the checkpointed HWM
        bases = [b.base for b in r.log.batches() if b.base < r.hwm]
        if not bases:
            return False
        r.log.truncate(self.rng.choice(bases))
        # the epoch checkpoint keeps what was assigned before the crash (entries may lie past the new end)
        r.frozen = True
        r.needs_truncation = True
        self.unclean_restart(victim)
        return True

    def _zombie_transaction(self) -> bool:
        """The leader is deposed in a clean election; before it learns so, it appends a
        zombie transactional producer's batches in its old epoch (a fenced producer still
        talking to it). They never reach the HWM and no marker ends their transaction; the
        snapshot is taken before the deposed leader fetches (and truncates them away)."""
        for b in self.followers():
            self.fetch(b, 10**9)
        a = self.leader
        cands = [b for b in self.clean_candidates() if self.replicas[b].log.leo == self.lead.log.leo]
        if not cands:
            return False
        old_epoch = self.epoch
        self.elect(self.rng.choice(cands))
        self.produce(self.rng.randint(1, 4), size=self.rng.randint(1, 3), epoch=old_epoch, writer=a)
        self.zombie_tags.add(self.tag)
        self.replicas[a].frozen = True
        return True

    def _cleaner_bug(self) -> bool:
        """The leader's log cleaner removes a batch above its limit: a batch every replica
        holds (committed, acknowledged to the producer) but above every replica's HWM
        checkpoint, which is written every few seconds (so the cleaner, bounded by the
        checkpointed HWM, should not have touched it). The followers keep it."""
        if any(r.frozen for r in self.replicas.values()) or len(self.isr) < len(self.assignment):
            return False
        checkpointed = {b: r.hwm for b, r in self.replicas.items()}
        self.produce(self.rng.randint(3, 5))
        for b in self.followers():
            self.fetch(b, 10**9)
        for b, hwm in checkpointed.items():
            self.replicas[b].hwm = hwm
        lead = self.lead.log
        above = max(checkpointed.values())

        def same_epoch_before(b: BatchRef) -> bool:
            prev = lead.batch_at(b.base - 1)
            return prev is not None and prev.epoch == b.epoch

        # above every checkpointed HWM, not the log's last batch (the gap shows), not the
        # first of its epoch (the epoch cache keeps its start)
        cands = [b.base for b in lead.batches() if b.base >= above and b.last + 1 < lead.leo and same_epoch_before(b)]
        if not cands:
            return False
        lead.remove(self.rng.choice(cands))
        return True

    def _corrupt_batch(self) -> bool:
        r = self.replicas[self.rng.choice(self.assignment)]
        bases = [b.base for b in r.log.batches()]
        if not bases:
            return False
        r.corrupt.add(self.rng.choice(bases))
        return True

    def _torn_tail(self) -> bool:
        r = self.replicas[self.rng.choice(self.assignment)]
        r.torn_bytes = self.rng.randint(1, 200)
        return True

    def _lost_epoch_checkpoint(self) -> bool:
        r = self.replicas[self.rng.choice(self.assignment)]
        r.checkpoint_lost = True
        return True

    def _stale_epoch_checkpoint(self) -> bool:
        cands = [r for r in self.replicas.values() if len(r.cache.entries) >= 2 and not r.checkpoint_lost]
        if not cands:
            if not self._ensure_two_epochs():
                return False
            cands = [r for r in self.replicas.values() if len(r.cache.entries) >= 2 and not r.checkpoint_lost]
            if not cands:
                return False
        r = self.rng.choice(cands)
        r.checkpoint_file = r.cache.entries[:-1]
        return True
