"""The simulated cluster's plan: its topics, which faults go to which partitions, and the
summary a simulation reports."""

from __future__ import annotations

import random
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from auditor.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib
from auditor.simulator.history import (
    FAULTS,
    SHAPED_FAULTS,
)
from auditor.simulator.kraft import KRAFT_FAULTS

LOG_DIR = "/var/lib/kafka/data"
TOPIC_NAMES = ("orders", "payments", "clicks", "inventory", "shipments", "invoices", "sessions", "audit-log")
BASE_TIMESTAMP = 1_763_000_000_000


#: The partition faults and the KRaft quorum's (``--kraft-controllers``).
ALL_FAULTS = FAULTS + KRAFT_FAULTS


def parse_faults(spec: str | None) -> Counter[str]:
    """``all``, ``none``, ``NAME[=COUNT],...`` or ``@FILE.toml`` (a ``[faults]`` table of
    name = count) into a count per fault kind."""
    if spec is None or spec.strip() in ("", "none"):
        return Counter()
    spec = spec.strip()
    if spec == "all":
        return Counter({f: 1 for f in ALL_FAULTS})
    items: dict[str, object]
    if spec.startswith("@"):
        path = spec[1:]
        try:
            with open(path, "rb") as fh:
                doc = tomllib.load(fh)
        except OSError as exc:
            raise InputError(f"cannot read fault file {path}: {exc.strerror}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise InputError(f"fault file {path} is not valid TOML: {exc}") from exc
        unknown_tables = set(doc) - {"faults"}
        if unknown_tables:
            raise InputError(f"fault file {path}: unknown table(s) {', '.join(sorted(unknown_tables))}; expected [faults]")
        items = dict(doc.get("faults", {}))
    else:
        items = {}
        for part in spec.split(","):
            name, _, count = part.strip().partition("=")
            items[name.strip()] = count.strip() or 1
    counts: Counter[str] = Counter()
    for name, count in items.items():
        if name == "all":
            for f in ALL_FAULTS:
                counts[f] += _count(name, count)
            continue
        if name not in ALL_FAULTS:
            raise InputError(f"unknown fault {name!r}; known: all, {', '.join(ALL_FAULTS)}")
        counts[name] += _count(name, count)
    return counts


def _count(name: str, value: object) -> int:
    try:
        n = int(str(value))
    except ValueError:
        raise InputError(f"fault {name}: count {value!r} is not an integer") from None
    if n < 0:
        raise InputError(f"fault {name}: count must be >= 0")
    return n


@dataclass
class SimulationSummary:
    """What ``simulate`` wrote."""

    path: Path
    brokers: int
    topics: int
    partitions: int
    replicas: int = 0
    batches: int = 0
    files: int = 0
    bytes: int = 0
    seconds: float = 0.0
    faults: Counter[str] = field(default_factory=Counter)
    faults_skipped: Counter[str] = field(default_factory=Counter)
    expected_findings: Counter[str] = field(default_factory=Counter)
    shapes: Counter[str] = field(default_factory=Counter)

    def format(self) -> str:
        lines = [
            f"snapshot written to {self.path}",
            f"  brokers {self.brokers}, topics {self.topics}, partitions {self.partitions}, replicas {self.replicas}",
            f"  batches {self.batches:,}, files {self.files:,}, {self.bytes / 1e6:,.1f} MB in {self.seconds:.1f}s",
        ]
        if self.faults:
            lines.append("  faults injected: " + ", ".join(f"{k} x{v}" for k, v in sorted(self.faults.items())))
        if self.faults_skipped:
            lines.append("  faults that found no place: " + ", ".join(
                f"{k} x{v}" for k, v in sorted(self.faults_skipped.items())))
        if self.shapes:
            lines.append("  shapes: " + ", ".join(f"{k} x{v}" for k, v in sorted(self.shapes.items())))
        if self.expected_findings:
            lines.append("  expected findings: " + ", ".join(
                f"{k} {v}" for k, v in sorted(self.expected_findings.items())))
        lines.append(f"  ground truth: {self.path / 'expected_findings.json'}")
        return "\n".join(lines)


def topic_names(count: int, prefix: str = "") -> list[str]:
    if count <= len(TOPIC_NAMES):
        return [prefix + t for t in TOPIC_NAMES[:count]]
    return [f"{prefix}{TOPIC_NAMES[i % len(TOPIC_NAMES)]}-{i // len(TOPIC_NAMES)}" for i in range(count)]


def plan_faults(counts: Counter[str], partitions: int, seed: int, salt: str = "",
                hosts: dict[str, list[int]] | None = None) -> dict[int, list[str]]:
    """Which partitions (global index) carry which faults: spread over distinct partitions
    as long as there are enough, in an order fixed by the seed (and ``salt``: each
    continuation has its own plan).

    The faults of a real cluster's shapes (:data:`SHAPED_FAULTS`) go only to the partitions
    ``hosts`` lists for their shape (``transactional``, ``compacted``), the most
    constrained fault first and each on a partition of its own while there are enough;
    with no host they are not planned (the caller counts them as skipped)."""
    hosts = hosts or {}
    rng = random.Random(f"{seed}/plan{salt}")
    order = list(range(partitions))
    rng.shuffle(order)
    plan: dict[int, list[str]] = {}
    instances = [f for f in FAULTS if f not in SHAPED_FAULTS for _ in range(counts.get(f, 0))]
    for i, fault in enumerate(instances):
        plan.setdefault(order[i % partitions], []).append(fault)
    taken: set[int] = set()
    for fault in sorted(SHAPED_FAULTS, key=lambda f: len(hosts.get(SHAPED_FAULTS[f], []))):
        where = list(hosts.get(SHAPED_FAULTS[fault], []))
        if not where:
            continue
        random.Random(f"{seed}/plan{salt}/{fault}").shuffle(where)
        where.sort(key=lambda i: i in taken)  # (stable) free partitions first
        for i in range(counts.get(fault, 0)):
            plan.setdefault(where[i % len(where)], []).append(fault)
            taken.add(where[i % len(where)])
    return plan


def unplaced(counts: Counter[str], hosts: dict[str, list[int]]) -> Counter[str]:
    """The shaped faults :func:`plan_faults` could not place (no partition of their shape)."""
    return Counter({f: counts[f] for f in SHAPED_FAULTS if counts.get(f, 0) and not hosts.get(SHAPED_FAULTS[f])})


#: How dumps are laid out on disk (SPEC 3.1 reads both).
