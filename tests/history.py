"""A Hypothesis strategy that simulates one partition's replication history: appends,
partial replication (followers truncate by the epoch protocol before fetching), clean and
unclean elections, fast fail-overs, lossy restarts and zombie writes."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from tests import reference as ref


@dataclass
class Rep:
    log: list[tuple[int, int, int, str]] = field(default_factory=list)  # base, last, epoch, content id
    cache: list[tuple[int, int]] = field(default_factory=list)
    hwm: int | None = 0

    @property
    def leo(self) -> int:
        return self.log[-1][1] + 1 if self.log else 0

    def spans(self) -> list[tuple[int, int, int]]:
        return [(b, last, e) for b, last, e, _ in self.log]


@dataclass
class History:
    replicas: dict[int, Rep]
    leader: int


def _is_prefix(f: Rep, l: Rep) -> bool:
    return f.log == l.log[: len(f.log)]


def _truncate(r: Rep, offset: int) -> None:
    r.log = [b for b in r.log if b[1] < offset]
    r.cache = [e for e in r.cache if e[1] < offset]


@st.composite
def histories(draw: st.DrawFn) -> History:
    n = draw(st.integers(2, 3))
    reps = {i: Rep() for i in range(1, n + 1)}
    leader, epoch, serial = 1, 1, 0
    reps[1].cache = [(1, 0)]
    for _ in range(draw(st.integers(2, 14))):
        action = draw(st.sampled_from(
            ["append", "append", "replicate", "replicate", "replicate", "elect", "unclean", "lossy", "zombie"]))
        lead = reps[leader]
        others = [i for i in reps if i != leader]
        if action == "append":
            size = draw(st.integers(1, 3))
            serial += 1
            lead.log.append((lead.leo, lead.leo + size - 1, epoch, f"c{serial}"))
            lead.cache = ref.assign(lead.cache, epoch, lead.log[-1][0])
        elif action == "replicate":
            f = reps[draw(st.sampled_from(others))]
            if not _is_prefix(f, lead):
                cache_l = ref.effective_cache(lead.cache, lead.leo)
                cut = ref.truncate_epoch(cache_l, lead.leo, ref.effective_cache(f.cache, f.leo), f.leo, f.hwm,
                                         f.spans()).offset
                if cut is not None:
                    _truncate(f, cut)
                if not _is_prefix(f, lead):  # still different (the protocol stopped short): give up
                    continue
            count = draw(st.integers(1, max(1, len(lead.log) - len(f.log))))
            for b in lead.log[len(f.log): len(f.log) + count]:
                f.log.append(b)
                f.cache = ref.assign(f.cache, b[2], b[0])
            in_sync = [r.leo for r in reps.values() if _is_prefix(r, lead)]
            lead.hwm = max(lead.hwm or 0, min(in_sync))
            f.hwm = min(lead.hwm, f.leo)
        elif action in ("elect", "unclean"):
            candidates = [i for i in others if action == "unclean" or _is_prefix(reps[i], lead)
                          and reps[i].leo >= (lead.hwm or 0)]
            if not candidates:
                continue
            leader = draw(st.sampled_from(candidates))
            epoch += 1
            new = reps[leader]
            new.cache = ref.assign(new.cache, epoch, new.leo)
        elif action == "lossy":
            r = reps[draw(st.sampled_from(list(reps)))]
            keep = draw(st.integers(0, len(r.log)))
            r.log = r.log[:keep]
            if draw(st.booleans()):  # the checkpoint was flushed after the truncation, or not (3.7+)
                r.cache = [e for e in r.cache if e[1] <= r.leo]
        elif action == "zombie" and others:
            z = reps[draw(st.sampled_from(others))]
            if z.cache:
                serial += 1
                size = draw(st.integers(1, 2))
                z.log.append((z.leo, z.leo + size - 1, z.cache[-1][0], f"z{serial}"))
    for r in reps.values():
        if draw(st.integers(0, 9)) == 0:
            r.hwm = None
    return History(reps, leader)
