"""Where a simulated cluster is written: the SPEC 3.1 layout of dumps and checkpoint files,
broker by broker, streamed partition by partition."""

from __future__ import annotations

import json
import os
import shutil
import sys
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from auditor.simulator.kafka_binary import encode_segment
from auditor.simulator.kafka_text import (
    Batch,
    DumpStyle,
    PartitionMeta,
    checkpoint_text,
    describe_partition_line,
    describe_topic_line,
    dump_lines,
    segment_file_name,
)

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover - exercised on 3.10 only
    pass
from auditor.simulator.history import (
    PartitionHistory,
)
from auditor.simulator.plan import BASE_TIMESTAMP, LOG_DIR
from auditor.simulator.shapes import (
    cleaned,
    retained_log_start,
    transactional_producer,
    truncate_from_start,
    zombie_producer,
)
from auditor.simulator.collected import CollectedNode, finish_kraft_only_nodes
from auditor.simulator.truth import checkpoint_entries, partition_truth

DUMP_LAYOUTS = ("per-segment", "per-broker")
#: How a replica's log is written: Kafka's dumps (SPEC 3.1), its segment files (3.3) or what
#: ``auditor collect`` writes of them (3.4).
LOG_FORMATS = ("dumps", "segments", "collected")
#: The per-broker file's name under ``broker=N/data/``.
PER_BROKER_DUMP = "kafka-dump-log.txt"
#: Where a simulated snapshot records how it was made (read by ``--continue-from``).
SETTINGS_FILE = "simulation.json"


class _Writer:
    """Streams one snapshot to disk."""

    def __init__(self, root: Path, brokers: int, style: DumpStyle, records: bool, segment_batches: int,
                 dump_layout: str = "per-segment", log_format: str = "dumps", record_bytes: int = 18) -> None:
        self.root, self.style, self.records = root, style, records
        self.dump_layout, self.log_format = dump_layout, log_format
        self.broker_dumps: dict[int, IO[str]] = {}
        self.segment_batches = max(1, segment_batches)
        self.record_bytes = record_bytes
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
        #: ``--format collected``: each node's collected data log dir
        self.nodes: dict[int, CollectedNode] = {}

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
            if self.log_format != "collected":
                folder.mkdir(parents=True, exist_ok=True)
            self._dump(folder, h, broker, remote_below=committed if shape == "tiered" else None,
                       clean_below=r.hwm if shape == "compacted" else None)
            entries = checkpoint_entries(r)
            if shape == "tiered" or log_start is not None:
                self.lso_parts[broker].write(f"{h.topic} {h.partition} {log_start or 0}\n")
                self.lso_counts[broker] += 1
            if entries is not None and log_start is not None:
                entries = truncate_from_start(entries, log_start)
            if self.log_format == "collected":
                if entries is not None:
                    self._node(broker).small_file(h.topic, h.partition, "leader-epoch-checkpoint",
                                                  checkpoint_text(entries).encode())
                self.summary_files += 1
            else:
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
                               valid=b.base not in r.corrupt, bytes_per_record=self.record_bytes, producer=producer))
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
            if self.log_format == "collected":
                self._node(broker).segment(h.topic, h.partition, seg_base, batches,
                                           r.torn_bytes if i == newest else 0, newest=i == segments[-1][0])
                self.batches += len(batches)
                continue
            if self.log_format == "segments":
                data = encode_segment(batches, torn_bytes=r.torn_bytes if i == newest else 0)
                with open(folder / segment_file_name(seg_base), "wb") as out:
                    out.write(data)
                self.bytes += len(data)
                self.summary_files += 1
                self.batches += len(batches)
                continue
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

    def _node(self, broker: int) -> CollectedNode:
        if broker not in self.nodes:
            self.nodes[broker] = CollectedNode(self.root, broker)
        return self.nodes[broker]

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
        if self.log_format == "collected":
            for node in self.nodes.values():
                node.close()
            finish_kraft_only_nodes(self.root, set(self.nodes))
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


