"""Small KRaft metadata-log snapshots for the tests (SPEC 4.7), written as Kafka prints them.

A node is described by its log (segments of :class:`MetaBatch`), its epoch cache, its
snapshots and its ``quorum-state``; :func:`write_kraft` lays the nodes out in the SPEC 3.1
layout (``broker=N/meta/__cluster_metadata-0/``).
"""

from __future__ import annotations

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

LOG_DIR = "/var/lib/kafka/meta"


def leader_change(base: int, epoch: int, leader: int, voters: tuple[int, ...] = (1, 2, 3), salt: str = "") -> MetaBatch:
    """The control batch a new leader writes first in its epoch."""
    return MetaBatch(base, epoch, ("LeaderChange",), content_crc("lc", base, epoch, leader, salt), leader_id=leader,
                     voters=voters)


def data(base: int, epoch: int, n: int = 3, salt: str = "") -> MetaBatch:
    """A batch of ``n`` metadata records."""
    return MetaBatch(base, epoch, ("data",) * n, content_crc("data", base, epoch, n, salt))


def epoch_log(spans: list[tuple[int, int, int]], leaders: dict[int, int] | None = None, step: int = 3,
              salt: str = "") -> list[MetaBatch]:
    """A log from ``(epoch, start, end)`` spans: each epoch opens with a LeaderChange batch
    at ``start`` (leader ``leaders[epoch]``, default 1), then data batches of ``step``
    records up to ``end`` (exclusive)."""
    out: list[MetaBatch] = []
    for epoch, start, end in spans:
        out.append(leader_change(start, epoch, (leaders or {}).get(epoch, 1), salt=salt))
        o = start + 1
        while o < end:
            n = min(step, end - o)
            out.append(data(o, epoch, n, salt))
            o += n
    return out


def cache_of(batches: list[MetaBatch]) -> list[tuple[int, int]]:
    """The epoch cache Kafka keeps for a log: the first offset of each epoch."""
    cache: list[tuple[int, int]] = []
    for b in sorted(batches, key=lambda x: x.base_offset):
        if not cache or cache[-1][0] != b.epoch:
            cache.append((b.epoch, b.base_offset))
    return cache


@dataclass
class Node:
    """One controller or broker's copy of the metadata log."""

    segments: list[list[MetaBatch]]
    cache: list[tuple[int, int]] | None = None  # None: from the log (cache_of)
    snapshots: list[tuple[int, int, str]] = field(default_factory=list)  # (end, epoch, "dump"|"bare"|"empty"|"bad")
    quorum: QuorumState | None = None
    style: KRaftStyle = field(default_factory=KRaftStyle)


def write_kraft(root: Path, nodes: dict[int, Node], status: tuple[int, int, int] | None = None) -> Path:
    """Write ``nodes`` under ``root``; ``status`` = (leader id, leader epoch, high watermark)
    of a ``metadata-quorum-status.txt``."""
    for node_id, node in nodes.items():
        folder = root / f"broker={node_id}" / "meta" / node.style.folder
        folder.mkdir(parents=True, exist_ok=True)
        batches = [b for seg in node.segments for b in seg]
        for seg in node.segments:
            if seg:
                base = seg[0].base_offset
                (folder / f"{base:020d}.log.txt").write_text(log_dump(LOG_DIR, base, seg, node.style))
        cache = node.cache if node.cache is not None else cache_of(batches)
        (folder / "leader-epoch-checkpoint").write_text(checkpoint_text(cache))
        for end, epoch, how in node.snapshots:
            name = snapshot_name(end, epoch)
            if how == "bare":
                (folder / name).write_bytes(b"")  # a bare copy: zero-length (a non-empty one is read)
                continue
            content = {"dump": snapshot_batches(epoch, 4, content_crc("snap", end, epoch)), "empty": [],
                       "bad": [MetaBatch(0, epoch, ("data",) * 2, 7)]}[how]
            (folder / f"{name}.txt").write_text(snapshot_dump(LOG_DIR, end, epoch, content, node.style))
        if node.quorum is not None:
            (folder / "quorum-state").write_text(node.quorum.text())
    if status is not None:
        leader, epoch, hw = status
        (root / "metadata-quorum-status.txt").write_text(quorum_status_text(leader, epoch, hw, sorted(nodes)))
    return root


def into_per_broker_files(snapshot: Path) -> None:
    """Move each node's metadata log dumps out of its folder into a per-broker file: the
    brokers' data log dir's file (after its data partitions' sections) on even nodes, a file
    of its own in the metadata log dir on the others. ``quorum-state``, the epoch checkpoint
    and bare snapshot copies stay in the folder."""
    for folder in sorted(snapshot.glob("broker=*/meta/*")):
        node = folder.parent.parent
        dumps = sorted(f for f in folder.iterdir() if f.name.endswith(".txt"))
        assert dumps, folder
        mixed = node / "data" / "kafka-dump-log.txt"
        target = mixed if mixed.exists() and int(node.name.split("=")[1]) % 2 == 0 else node / "meta" / "kafka-dump-log.txt"
        with target.open("a", encoding="utf-8") as out:
            for f in dumps:
                out.write(f.read_text(encoding="utf-8"))
                f.unlink()
