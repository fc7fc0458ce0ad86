"""``auditor simulate``: simulate Kafka partition replication with injected faults and write
a snapshot in the SPEC 3.1 layout, plus ``expected_findings.json`` (the ground truth).

Partitions are simulated and written one at a time, so memory stays flat whatever the
size of the cluster; per-broker checkpoint entries and the expected findings are streamed
to side files and assembled at the end.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import sys
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from auditor.errors import InputError
from auditor.simulator.kafka_text import (
    DEFAULT_STYLE,
    Batch,
    DumpStyle,
    PartitionMeta,
    Producer,
    checkpoint_text,
    describe_partition_line,
    describe_topic_line,
    dump_lines,
    segment_file_name,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib
from auditor.simulator.history import (
    FAULTS,
    SHAPED_FAULTS,
    PartitionHistory,
    continue_partition,
    simulate_partition,
)
from auditor.simulator.kraft import KRAFT_FAULTS, kraft_style_for, simulate_quorum
from auditor.simulator.model import BatchRef
from auditor.simulator.truth import checkpoint_entries, partition_truth

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
DUMP_LAYOUTS = ("per-segment", "per-broker")
#: The per-broker file's name under ``broker=N/data/``.
PER_BROKER_DUMP = "kafka-dump-log.txt"
#: Where a simulated snapshot records how it was made (read by ``--continue-from``).
SETTINGS_FILE = "simulation.json"


class _Writer:
    """Streams one snapshot to disk."""

    def __init__(self, root: Path, brokers: int, style: DumpStyle, records: bool, segment_batches: int,
                 dump_layout: str = "per-segment") -> None:
        self.root, self.style, self.records = root, style, records
        self.dump_layout = dump_layout
        self.broker_dumps: dict[int, IO[str]] = {}
        self.segment_batches = max(1, segment_batches)
        self.summary_files = 0
        self.bytes = 0
        self.batches = 0
        self.hwm_counts = Counter[int]()
        self.hwm_parts: dict[int, IO[str]] = {}
        self.lso_counts = Counter[int]()
        self.lso_parts: dict[int, IO[str]] = {}
        self.shapes_seen: Counter[str] = Counter()
        self.transactional_topics: set[str] = set()
        for b in range(1, brokers + 1):
            d = root / f"broker={b}" / "data"
            d.mkdir(parents=True, exist_ok=True)
            self.hwm_parts[b] = open(d / ".replication-offset-checkpoint.part", "w", encoding="utf-8")  # noqa: SIM115
            self._write(d / "meta.properties", f"version=1\nbroker.id={b}\nnode.id={b}\ncluster.id=simulated\n")
            self.lso_parts[b] = open(d / ".log-start-offset-checkpoint.part", "w", encoding="utf-8")  # noqa: SIM115
        self.describe = open(root / "topics-describe.txt", "w", encoding="utf-8")  # noqa: SIM115
        self.findings = open(root / ".expected-findings.part", "w", encoding="utf-8")  # noqa: SIM115
        self.followers = open(root / ".expected-replicas.part", "w", encoding="utf-8")  # noqa: SIM115
        self.claims_seen: Counter[str] = Counter()

    def _write(self, path: Path, text: str) -> None:
        path.write_text(text, encoding="utf-8")
        self.summary_files += 1
        self.bytes += len(text)

    def topic(self, name: str, partitions: int, rf: int, configs: dict[str, str]) -> None:
        self.describe.write(describe_topic_line(name, configs, partitions, rf))

    def partition(self, h: PartitionHistory, shape: str | None = None) -> None:
        """Write ``h``. ``shape``: ``tiered`` (KIP-405: each replica's oldest committed
        segments are remote, not dumped, at a replica's own point; the log start stays 0 in
        ``log-start-offset-checkpoint``; the epoch checkpoint keeps the remote entries) or
        ``retention`` (DeleteRecords: a log start inside the first segment, the epoch
        checkpoint truncated from the start as Kafka's ``truncateFromStart`` does) or
        ``compacted`` (each replica's cleaner, :func:`cleaned`). Shapes are given only to
        partitions without faults: the ground truth is unchanged."""
        self.describe.write(describe_partition_line(
            h.topic, PartitionMeta(h.partition, h.leader, tuple(h.assignment), tuple(h.isr), tuple(h.elr))))
        committed = min(r.hwm for r in h.replicas.values())
        log_start = retained_log_start(h, committed, self.segment_batches) if shape == "retention" else None
        if shape is not None and (shape in ("tiered", "compacted") or log_start is not None):
            self.shapes_seen[shape] += 1
        if h.elr:
            self.shapes_seen["elr"] += 1
        for broker in h.assignment:
            r = h.replicas[broker]
            folder = self.root / f"broker={broker}" / "data" / f"{h.topic}-{h.partition}"
            folder.mkdir(parents=True, exist_ok=True)
            self._dump(folder, h, broker, remote_below=committed if shape == "tiered" else None,
                       clean_below=r.hwm if shape == "compacted" else None)
            entries = checkpoint_entries(r)
            if shape == "tiered" or log_start is not None:
                self.lso_parts[broker].write(f"{h.topic} {h.partition} {log_start or 0}\n")
                self.lso_counts[broker] += 1
            if entries is not None and log_start is not None:
                entries = truncate_from_start(entries, log_start)
            if entries is not None:
                self._write(folder / "leader-epoch-checkpoint", checkpoint_text(entries))
            self._write(folder / "partition.metadata", "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA")
            self.hwm_parts[broker].write(f"{h.topic} {h.partition} {r.hwm}\n")
            self.hwm_counts[broker] += 1
        claims, followers = partition_truth(h)
        for c in claims:
            self.findings.write(json.dumps(c.as_json()) + "\n")
        for f in followers:
            self.followers.write(json.dumps(f.as_json()) + "\n")
        self.claims_seen.update(c.check for c in claims)

    def kraft(self, claims: list[dict[str, object]], followers: list[dict[str, object]], files: int) -> None:
        """The ground truth of the KRaft metadata log (written by :mod:`auditor.simulator.kraft`)."""
        for c in claims:
            self.findings.write(json.dumps(c) + "\n")
        for f in followers:
            self.followers.write(json.dumps(f) + "\n")
        self.claims_seen.update(str(c["check"]) for c in claims)
        self.summary_files += files

    def _segments(self, h: PartitionHistory, broker: int) -> Iterator[tuple[int, list[Batch]]]:
        """The replica's batches as dump batches, ``segment_batches`` per segment."""
        r = h.replicas[broker]
        transactional = h.topic in self.transactional_topics
        batch: list[Batch] = []
        for b in r.log.batches():
            crc = zlib.crc32(f"{h.topic}/{h.partition}/{b.tag}/{b.base}".encode()) & 0xFFFFFFFF
            producer = zombie_producer(b) if b.tag in h.zombie_tags else \
                transactional_producer(b, crc) if transactional else None
            batch.append(Batch(b.base, b.last, b.epoch, crc, timestamp=BASE_TIMESTAMP + b.base * 3,
                               valid=b.base not in r.corrupt, bytes_per_record=18, producer=producer))
            if len(batch) == self.segment_batches:
                yield batch[0].base_offset, batch
                batch = []
        if batch or not r.log.runs:
            yield (batch[0].base_offset if batch else r.log.leo), batch

    def _dump(self, folder: Path, h: PartitionHistory, broker: int, remote_below: int | None = None,
              clean_below: int | None = None) -> None:
        """Dump the replica's segments; with ``remote_below``, a leading run of segments that
        end below it (at least one segment always stays local) is left out, as tiered
        storage moves them to remote storage and deletes them locally; with
        ``clean_below`` (the replica's own HWM), the log cleaner has compacted the
        segments before the active one below it (:func:`cleaned`)."""
        r = h.replicas[broker]
        newest = max(0, -(-r.log.batch_count // self.segment_batches) - 1)
        segments = list(enumerate(self._segments(h, broker)))
        if clean_below is not None:
            segments = [(i, (base, cleaned(batches, clean_below, f"{h.topic}/{h.partition}/{broker}")
                             if i < len(segments) - 1 else batches))
                        for i, (base, batches) in segments]
        if remote_below is not None:
            movable = 0
            while movable < len(segments) - 1 and segments[movable][1][1] \
                    and segments[movable][1][1][-1].last_offset < remote_below:
                movable += 1
            # each replica tiers its own number of segments (1 to 3, a stable choice per
            # replica, never fewer in a later snapshot: remote segments do not come back)
            k = min(movable, 1 + zlib.crc32(f"{h.topic}/{h.partition}/{broker}/remote".encode()) % 3)
            segments = segments[k:]
        for i, (seg_base, batches) in segments:
            lines = dump_lines(LOG_DIR, h.topic, h.partition, seg_base, batches,
                               invalid_bytes=r.torn_bytes if i == newest else 0, style=self.style,
                               records=self.records)
            if self.dump_layout == "per-broker":
                self.bytes += sum(self._broker_dump(broker).write(line) for line in lines)
            else:
                with open(folder / f"{segment_file_name(seg_base)}.txt", "w", encoding="utf-8",
                          buffering=1 << 20) as out:
                    self.bytes += sum(out.write(line) for line in lines)
                self.summary_files += 1
            self.batches += len(batches)

    def _broker_dump(self, broker: int) -> IO[str]:
        """The broker's one multi-section dump file (``--dump-layout per-broker``), which sits
        above the partition folders, as a collector's per-broker file does (SPEC 3.1)."""
        if broker not in self.broker_dumps:
            path = self.root / f"broker={broker}" / "data" / PER_BROKER_DUMP
            self.broker_dumps[broker] = open(path, "w", encoding="utf-8", buffering=1 << 20)  # noqa: SIM115
            self.summary_files += 1
        return self.broker_dumps[broker]

    def _finish_checkpoints(self, name: str, parts: dict[int, IO[str]], counts: Counter[int]) -> None:
        """Each broker's offset checkpoint ``name``: its version and entry count, then the
        entries streamed to its part file."""
        for b, part in parts.items():
            part.close()
            final = self.root / f"broker={b}" / "data" / name
            with open(final, "w", encoding="utf-8") as out, open(part.name, encoding="utf-8") as src:
                out.write(f"0\n{counts[b]}\n")
                shutil.copyfileobj(src, out)
            os.remove(part.name)
            self.summary_files += 1

    def close(self, seed: int, plan: list[dict[str, object]]) -> None:
        for dump in self.broker_dumps.values():
            dump.close()
        self._finish_checkpoints("log-start-offset-checkpoint", self.lso_parts, self.lso_counts)
        self._finish_checkpoints("replication-offset-checkpoint", self.hwm_parts, self.hwm_counts)
        self.describe.close()
        self.findings.close()
        self.followers.close()
        with open(self.root / "expected_findings.json", "w", encoding="utf-8") as out:
            out.write(f'{{"generator": "auditor simulate", "seed": {seed}, "protocol": "epoch",\n')
            out.write(' "faults": ' + json.dumps(plan) + ",\n")
            for key, part_name in (("findings", self.findings.name), ("replicas", self.followers.name)):
                out.write(f' "{key}": [\n')
                with open(part_name, encoding="utf-8") as src:
                    first = True
                    for line in src:
                        out.write(("  " if first else ", ") + line)
                        first = False
                out.write(" ]" + (",\n" if key == "findings" else "\n"))
                os.remove(part_name)
            out.write("}\n")


def cleaned(batches: list[Batch], below: int, replica: str) -> list[Batch]:
    """One replica's log cleaner over a segment: below ``below`` (its HWM), about a quarter
    of the batches lose every record (dropped: a gap) and a quarter lose their first
    records (a later base offset, the same last offset, a new CRC), as Kafka's cleaner
    keeps each batch's last offset. Decided per replica and batch, so every replica cleans
    on its own, and the same batch the same way in a later snapshot."""
    out = []
    for b in batches:
        if b.last_offset >= below:
            out.append(b)
            continue
        pick = zlib.crc32(f"{replica}/{b.base_offset}/clean".encode())
        if pick % 4 == 0:
            continue
        if pick % 4 == 1 and b.count > 1:
            base = b.base_offset + 1 + (pick >> 8) % (b.count - 1)
            out.append(dataclasses.replace(b, base_offset=base, crc=(b.crc ^ pick) & 0xFFFFFFFF))
        else:
            out.append(b)
    return out


#: Always compacted (SPEC 4.5): the simulated cluster's consumer offsets topic.
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 2


def retained_log_start(h: PartitionHistory, committed: int, segment_batches: int) -> int | None:
    """A log start inside the partition's first segment, below every replica's HWM, as
    DeleteRecords leaves it; None while there is no such offset. A stable offset 1 to 8
    above the first base offset, so a later snapshot of the cluster keeps it."""
    first = [next(r.log.batches(), None) for r in h.replicas.values()]
    if any(b is None for b in first):
        return None
    base = max(b.base for b in first)  # type: ignore[union-attr]
    offset = base + 1 + zlib.crc32(f"{h.topic}/{h.partition}/log-start".encode()) % 8
    ends = [_first_segment_end(r.log.batches(), segment_batches) for r in h.replicas.values()]
    inside = all(end is not None and end >= offset for end in ends)
    return offset if inside and offset < committed else None


def _first_segment_end(batches: Iterator[BatchRef], segment_batches: int) -> int | None:
    """The last offset of the first segment (its first ``segment_batches`` batches)."""
    last = None
    for _, b in zip(range(segment_batches), batches):
        last = b.last
    return last


def truncate_from_start(entries: list[tuple[int, int]], log_start: int) -> list[tuple[int, int]]:
    """Kafka's ``LeaderEpochFileCache.truncateFromStart``: entries that start below the new
    log start are removed, except the latest of them, which now starts at the log start."""
    below = [(e, s) for e, s in entries if s < log_start]
    kept = [(e, s) for e, s in entries if s >= log_start]
    if below and not any(s == log_start for _, s in kept):
        kept.insert(0, (below[-1][0], log_start))
    return kept


#: How often each shape of a real cluster appears (``shapes=True``, the default): of every
#: TOPIC_CYCLE topics the second has tiered storage and the third transactional producers;
#: every RETENTION_EVERY-th partition of the others has had DeleteRecords. Only partitions
#: without faults are tiered or retained.
TOPIC_CYCLE = 3
RETENTION_EVERY = 4


def is_tiered_topic(topic_index: int) -> bool:
    return topic_index % TOPIC_CYCLE == 1


def is_transactional_topic(topic_index: int) -> bool:
    """The third of every three topics is written by transactional producers."""
    return topic_index % TOPIC_CYCLE == 2


def transactional_producer(b: BatchRef, crc: int) -> Producer:
    """Who wrote batch ``b`` of a transactional topic, a pure function of the batch (so
    every replica prints the same): one of four transactional producers, or, for about
    half of the one-record batches, the broker's COMMIT or (one in four) ABORT marker for
    that producer's transaction."""
    producer_id = 4000 + b.tag % 4
    if b.last == b.base and (b.tag + b.base) % 2 == 0:
        return Producer(producer_id, producer_epoch=b.tag % 2, control="ABORT" if crc % 4 == 0 else "COMMIT")
    return Producer(producer_id, producer_epoch=b.tag % 2, base_sequence=b.base % (1 << 31))


def zombie_producer(b: BatchRef) -> Producer:
    """The writer of a zombie transaction's batch (the ``zombie-transaction`` fault): a
    transactional producer that another instance has fenced, still writing to a deposed
    leader; no marker ever ends its transaction."""
    return Producer(4900 + b.tag % 4, producer_epoch=7, base_sequence=b.base % (1 << 31))


def partition_shape(topic_index: int, partition: int, faults: list[str]) -> str | None:
    """The shape of one partition (None: a plain log from offset 0)."""
    if faults:
        return None
    if is_tiered_topic(topic_index):
        return "tiered"
    if partition % RETENTION_EVERY == RETENTION_EVERY - 1:
        return "retention"
    return None


def simulate(root: str | Path, brokers: int = 3, topics: int = 2, partitions: int = 3, batches: int = 40,
             faults: str | None = "all", seed: int = 1, replication_factor: int = 3, min_isr: int = 2,
             dump_style: str = DEFAULT_STYLE, records: bool = False, segment_batches: int = 500,
             topic_prefix: str = "", progress: Callable[[int], None] | None = None,
             dump_layout: str = "per-segment",
             continuations: list[dict[str, object]] | None = None, shapes: bool = True,
             kraft_controllers: int = 0) -> SimulationSummary:
    """Simulate and write a snapshot under ``root`` (which must not hold one already).

    Args:
        brokers, topics: cluster size; ``partitions`` per topic; ``batches`` per partition
            (on the leader, before incidents).
        faults: fault spec (:func:`parse_faults`).
        topic_prefix: prepended to every topic name (to merge several simulations into one input).
        progress: called with the number of partitions just finished.
        dump_layout: ``per-segment`` (one dump file per segment in its partition folder, as
            ``kafka-dump-log.sh --files <segment>`` prints it) or ``per-broker`` (one
            multi-section file per broker and log dir, holding every segment's dump: far
            fewer files for clusters of 10^4 partitions and more).
        shapes: give fault-free partitions the shapes of a real cluster
            (:func:`partition_shape`): tiered storage on the second of every three topics, a
            log start inside the first segment on every fourth partition of the others; and
            transactional producers, with COMMIT and ABORT markers, on the third of every
            three topics (:func:`transactional_producer`); and a compacted
            ``__consumer_offsets`` topic (:func:`cleaned`).
        kraft_controllers: also simulate a KRaft controller quorum of this many voters (node
            ids after the brokers'; every broker an observer) and write its metadata log
            (:mod:`auditor.simulator.kraft`), with the ``kraft-*`` faults; 0: none.
        continuations: later snapshots of the same cluster, in order: each
            ``{"batches": N, "faults": SPEC}`` adds about N batches per partition and then
            its faults (:func:`continue_simulation` builds them from an earlier snapshot).
    """
    started = time.monotonic()
    if brokers < 1 or topics < 1 or partitions < 1 or batches < 1:
        raise InputError("--brokers, --topics, --partitions and --batches must be at least 1")
    style = DumpStyle(dump_style)
    if records and not style.prints_records:
        raise InputError(f"--records needs a dump style of 2.2 or later (Kafka {dump_style} prints records "
                         "instead of batch lines, without leader epochs)")
    base = Path(root)
    if base.exists() and any(base.iterdir()):
        raise InputError(f"{base} exists and is not empty; simulate writes a fresh snapshot")
    base.mkdir(parents=True, exist_ok=True)
    counts = parse_faults(faults)
    kraft_faults = [f for f in KRAFT_FAULTS if counts.pop(f, 0) > 0]
    kraft_style = kraft_style_for(dump_style)
    if kraft_controllers and kraft_style is None:
        raise InputError(f"--kraft-controllers needs Kafka 2.8 or later (--kafka-version {dump_style} has no KRaft)")
    if kraft_controllers < 0:
        raise InputError("--kraft-controllers must be at least 0")
    rf = min(replication_factor, brokers)
    if topic_prefix and not all(c.isalnum() or c in "._-" for c in topic_prefix):
        raise InputError(f"--topic-prefix {topic_prefix!r}: only letters, digits, '.', '_' and '-' are allowed in topic names")
    names = topic_names(topics, topic_prefix)
    total = topics * partitions
    summary = SimulationSummary(base, brokers, topics, total)
    # where the faults of real clusters' shapes can happen: transactional topics and the
    # consumer offsets topic (transactional offset commits land there) for a zombie
    # transaction, the compacted consumer offsets topic for a cleaner bug
    offsets = list(range(total, total + OFFSETS_PARTITIONS)) if shapes else []
    hosts = {"transactional": [t * partitions + p for t in range(topics) if shapes and is_transactional_topic(t)
                               for p in range(partitions)] + offsets,
             "compacted": offsets}
    plan = plan_faults(counts, total, seed, hosts=hosts)
    later_counts = [parse_faults(str(c["faults"])) for c in continuations or []]
    # the quorum's faults of each later snapshot (the partitions' are planned below)
    later_kraft = [f for more in later_counts for f in KRAFT_FAULTS if more.pop(f, 0) > 0]
    later = [(int(c["batches"]), plan_faults(more, total, seed, f"/continue/{k}", hosts=hosts))  # type: ignore[call-overload]
             for k, (c, more) in enumerate(zip(continuations or [], later_counts))]
    for wanted_counts in (counts, *later_counts):
        summary.faults_skipped.update(unplaced(wanted_counts, hosts))
    if dump_layout not in DUMP_LAYOUTS:
        raise InputError(f"--dump-layout {dump_layout!r}: one of {', '.join(DUMP_LAYOUTS)}")
    writer = _Writer(base, brokers, style, records, segment_batches, dump_layout)
    applied: list[dict[str, object]] = []
    index = 0

    def history_of(topic: str, p: int, at: int, compacted: bool = False) -> PartitionHistory:
        """Simulate partition ``p`` of ``topic`` (global index ``at``) through every snapshot,
        and count its faults: applied, or skipped where its state could not host them."""
        replicas = [(at + j) % brokers + 1 for j in range(rf)]
        wanted = plan.get(at, [])
        h = simulate_partition(topic, p, replicas, batches, wanted, seed, min_isr)
        h.compacted = compacted
        for step, (more, later_plan) in enumerate(later):
            continue_partition(h, step, more, later_plan.get(at, []), seed)
            wanted = wanted + later_plan.get(at, [])
        summary.replicas += len(replicas)
        for fault in h.applied:
            summary.faults[fault] += 1
            applied.append({"fault": fault, "topic": topic, "partition": p})
        summary.faults_skipped.update(Counter(wanted) - Counter(h.applied))
        return h

    for t, name in enumerate(names):
        unclean = any("unclean-election" in pl.get(t * partitions + p, [])
                      for pl in [plan, *(lp for _, lp in later)] for p in range(partitions))
        configs = {"min.insync.replicas": str(min(min_isr, rf))}
        if unclean:
            configs["unclean.leader.election.enable"] = "true"
        if shapes and is_tiered_topic(t):
            configs["remote.storage.enable"] = "true"
        if shapes and is_transactional_topic(t):
            writer.transactional_topics.add(name)
        writer.topic(name, partitions, rf, configs)
        for p in range(partitions):
            h = history_of(name, p, index)
            writer.partition(h, partition_shape(t, p, h.applied) if shapes else None)
            index += 1
            if progress:
                progress(1)
    if shapes:
        # every cluster has its consumer offsets topic: compacted, each replica's cleaner on
        # its own below its HWM; the shaped faults' hosts (a cleaner bug, a zombie
        # transaction's offset commits)
        # (with --topic-prefix it is prefixed too, so merged simulations stay apart; its
        # cleanup.policy says it is compacted either way)
        offsets_topic = topic_prefix + OFFSETS_TOPIC
        writer.topic(offsets_topic, OFFSETS_PARTITIONS, rf, {"cleanup.policy": "compact",
                                                             "min.insync.replicas": str(min(min_isr, rf))})
        for p in range(OFFSETS_PARTITIONS):
            writer.partition(history_of(offsets_topic, p, index, compacted=True), "compacted")
            summary.partitions += 1
            index += 1
    if kraft_controllers and kraft_style is not None:
        # a later snapshot continues the quorum's history as the partitions' (about half as
        # many metadata batches as each partition gets)
        quorum, claims, followers, files = simulate_quorum(
            base, kraft_controllers, brokers, batches // 2, [*kraft_faults, *later_kraft], seed, kraft_style,
            more_steps=[int(c["batches"]) // 2 for c in continuations or []])
        writer.kraft(claims, followers, files)
        for fault in quorum.applied:
            summary.faults[fault] += 1
            applied.append({"fault": fault, "topic": kraft_style.topic, "partition": 0})
        summary.faults_skipped.update(Counter([*kraft_faults, *later_kraft]) - Counter(quorum.applied))
        summary.partitions += 1
        summary.replicas += len(quorum.nodes)
    else:
        summary.faults_skipped.update(Counter([*kraft_faults, *later_kraft]))
    writer.close(seed, applied)
    settings = {"brokers": brokers, "topics": topics, "partitions": partitions, "batches": batches,
                "faults": faults, "seed": seed, "replication_factor": replication_factor, "min_isr": min_isr,
                "dump_style": dump_style, "records": records, "segment_batches": segment_batches,
                "topic_prefix": topic_prefix, "dump_layout": dump_layout, "continuations": continuations or [],
                "shapes": shapes, "kraft_controllers": kraft_controllers}
    with open(base / SETTINGS_FILE, "w", encoding="utf-8") as out:
        json.dump({"generator": "auditor simulate", **settings}, out, indent=1)
        out.write("\n")
    summary.batches, summary.files, summary.bytes = writer.batches, writer.summary_files, writer.bytes
    summary.expected_findings = writer.claims_seen
    summary.shapes = writer.shapes_seen
    summary.seconds = time.monotonic() - started
    return summary


def continue_simulation(previous: str | Path, root: str | Path, steps: int, faults: str | None = "none",
                        progress: Callable[[int], None] | None = None) -> SimulationSummary:
    """Write the next snapshot of the cluster simulated in ``previous`` to ``root``: the
    same history, then about ``steps`` more batches per partition and ``faults``.

    Files whose bytes did not change since ``previous`` (rolled segments, untouched
    checkpoints) keep ``previous``'s modification time, as a broker's unchanged files do
    between two collections.

    Raises:
        InputError: ``previous`` is not a snapshot written by ``auditor simulate``.
    """
    prev = Path(previous)
    try:
        settings = json.loads((prev / SETTINGS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{prev} is not a snapshot written by auditor simulate (no readable {SETTINGS_FILE})") from exc
    settings.pop("generator", None)
    parse_faults(faults)  # a bad spec fails before anything is written
    continuations = [*settings.pop("continuations", []), {"batches": steps, "faults": faults or "none"}]
    summary = simulate(root, progress=progress, continuations=continuations, **settings)
    base = Path(root)
    for path in base.rglob("*"):
        old = prev / path.relative_to(base)
        if path.is_file() and old.is_file() and path.name != SETTINGS_FILE:
            st = old.stat()
            if st.st_size == path.stat().st_size and old.read_bytes() == path.read_bytes():
                os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    return summary
