"""``simulate --format collected``: what ``auditor collect --verify-crc`` writes for each
simulated node (SPEC 3.4), the data partitions' rows made directly from the simulated
batches (no segment file is written first: a million partitions take minutes), the metadata
log's folder written in binary and collected by :class:`auditor.collect.Collector`.

A batch's row is what the walk reads from :func:`auditor.simulator.kafka_binary.encode_batch`'s
bytes (``tests/test_collect.py`` checks both give the same rows): its header fields, its size
and position, its CRC verdict; a torn tail is encoded and walked, as it is a few bytes.
"""

from __future__ import annotations

import base64
import shutil
import time
from pathlib import Path
from typing import Any

from auditor import collect as c
from auditor.simulator.kafka_binary import encode_segment
from auditor.simulator.kafka_text import Batch


def batch_entry(b: Batch, position: int) -> tuple[Any, ...]:
    """The walk's ``B`` row (:data:`auditor.collect.ENTRY_FIELDS`) of ``b`` at ``position``,
    its CRC checked."""
    p = b.producer
    control = p is not None and p.control is not None
    producer_id, producer_epoch = (p.producer_id, p.producer_epoch) if p is not None else (-1, -1)
    base_sequence = -1 if p is None or control else p.base_sequence
    kind = p.control if p is not None and control else None
    return ("B", position, b.size, 2, b.base_offset, b.last_offset, b.epoch, b.crc, b.count, 0,
            p is not None and p.transactional, control, producer_id, producer_epoch, base_sequence, kind, None,
            b.valid, None, kind)


def segment_rows(batches: list[Batch], torn_bytes: int, newest: bool) -> tuple[list[tuple[Any, ...]], dict[str, Any]]:
    """A segment's ``B`` rows and ``F`` row as the walk with ``verify_crc`` gives them."""
    entries, position = [], 0
    for b in batches:
        entries.append(batch_entry(b, position))
        position += b.size
    facts = {"row_kind": "F", "file_bytes": position, "batch_bytes": position, "quarantined_bytes": 0,
             "tail_position": None, "tail_bytes": 0, "tail_zero": None, "vanished_bytes": 0, "bytes_read": position,
             "stop": c.END, "crc_verified": len(batches), "crc_unverified": 0, "unreadable": None}
    if torn_bytes:
        whole = encode_segment(batches[-1:], torn_bytes)  # the last batch and the torn bytes after it
        tail = whole[len(whole) - torn_bytes:]
        walked = c.walk_entries(lambda at, n: tail[at:at + n], len(tail), [], newest=newest, segment_base=0,
                                verify_crc=True)
        facts.update(file_bytes=position + torn_bytes, tail_position=position + (walked["tail_position"] or 0),
                     tail_bytes=walked["tail_bytes"], tail_zero=walked["tail_zero"], stop=walked["stop"],
                     bytes_read=position + walked["bytes_read"])
    return entries, facts


class CollectedNode:
    """One simulated node's collected data log dir (``broker=N/logdir=0``), written as the
    simulation streams its partitions."""

    def __init__(self, root: Path, node: int) -> None:
        self.root, self.node = root, node
        self.target = root / f"broker={node}" / "logdir=0"
        self.target.mkdir(parents=True, exist_ok=True)
        self.pa = c._arrow()  # noqa: SLF001 - the collector's own choice of table format
        ext = c.PARQUET if self.pa is not None else c.CSV_GZ
        self.ext = ext
        self.batches = c.TableWriter(str(self.target / (c.BATCHES + ext)), c.BATCH_COLUMNS, self.pa)
        self.segments: list[tuple[Any, ...]] = []
        self.small: list[tuple[Any, ...]] = []
        self.partitions: set[tuple[str, int]] = set()
        self.counts = {"partitions": 0, "segments": 0, "segments_reused": 0, "batches": 0, "bytes_read": 0,
                       "segment_bytes": 0, "metadata_log": False}
        self.skipped = 0

    def segment(self, topic: str, partition: int, base: int, batches: list[Batch], torn_bytes: int,
                newest: bool) -> None:
        entries, facts = segment_rows(batches, torn_bytes, newest)
        name = f"{base:020d}.log"
        n = len(entries)
        if n:
            self.batches.write_columns([[topic] * n, [partition] * n, [name] * n, *map(list, zip(*entries)),
                                        [base] * n, [None] * n])
        self.segments.append((topic, partition, name, "segment", newest, *(facts[k] for k in c.FILE_FIELDS),
                              None, None, facts["file_bytes"], None, None, n, None, None, None, False))
        self.partitions.add((topic, partition))
        self.counts["segments"] += 1
        self.counts["batches"] += n
        self.counts["bytes_read"] += facts["bytes_read"]
        self.counts["segment_bytes"] += facts["file_bytes"]

    def small_file(self, topic: str, partition: int, name: str, data: bytes) -> None:
        self.small.append((topic, partition, name, len(data), None, base64.b64encode(data).decode()))
        self.partitions.add((topic, partition))

    def close(self) -> None:
        """The node's tables, its log dirs' checkpoint files moved in, its metadata log
        folder collected, and its manifest (the simulated ``data`` and ``meta`` folders are
        removed)."""
        self.batches.close()
        for name, rows, columns in ((c.SEGMENTS, self.segments, c.SEGMENT_COLUMNS),
                                    (c.SMALL_FILES, self.small, c.SMALL_FILE_COLUMNS)):
            table = c.TableWriter(str(self.target / (name + self.ext)), columns, self.pa)
            table.write(rows)
            table.close()
        node_root = self.root / f"broker={self.node}"
        data = node_root / "data"
        for name in (c.HWM, *c.LATE_LOG_DIR_FILES):
            if (data / name).exists():
                shutil.move(str(data / name), str(self.target / name))
        collector = c.Collector(self.node, [], str(self.root), verify_crc=True, use_pyarrow=self.pa is not None)
        self.counts["partitions"] = len(self.partitions)
        entries = [{"label": "logdir=0", "path": str(data), **self.counts}]
        meta = node_root / "meta"
        if meta.exists():
            entries.append(collector.log_dir(1, str(meta), str(node_root / "logdir=1")))
            shutil.rmtree(meta)
        shutil.rmtree(data, ignore_errors=True)
        collector.counts["segments_read"] += self.counts["segments"]
        collector.counts["batches_read"] += self.counts["batches"]
        collector.counts["partitions"] += self.counts["partitions"]
        manifest = collector.manifest(entries, c._now(), 0.0)  # noqa: SLF001
        manifest["crc_implementation"] = "simulated"
        c.write_manifest(str(node_root), manifest)


def collected_node_folders(root: Path) -> list[int]:
    """The node ids of a simulated snapshot's ``broker=N`` folders."""
    return sorted(int(p.name.split("=", 1)[1]) for p in root.iterdir() if p.is_dir() and p.name.startswith("broker="))


def finish_kraft_only_nodes(root: Path, done: set[int]) -> None:
    """Nodes with no data log dir (KRaft controllers): their metadata log folder collected."""
    for node in collected_node_folders(root):
        if node in done:
            continue
        node_root = root / f"broker={node}"
        meta = node_root / "meta"
        if not meta.exists():
            continue
        collector = c.Collector(node, [], str(root), verify_crc=True)
        started = c._now()  # noqa: SLF001
        clock = time.monotonic()
        entries = [collector.log_dir(0, str(meta), str(node_root / "logdir=0"))]
        shutil.rmtree(meta)
        for leftover in node_root.iterdir():
            if leftover.is_dir() and not leftover.name.startswith("logdir="):
                shutil.rmtree(leftover)
        c.write_manifest(str(node_root), collector.manifest(entries, started, time.monotonic() - clock))
