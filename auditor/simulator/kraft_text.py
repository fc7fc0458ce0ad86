"""Write KRaft's metadata log as Kafka prints and stores it (KRAFT.md sections 1 and 2):
``kafka-dump-log.sh --cluster-metadata-decoder`` text of log segments and snapshots,
``quorum-state`` and ``kafka-metadata-quorum.sh describe --status``.

Calibrated on the real samples KRAFT.md cites: the 3.3+ control batch line (``isControl:
true`` with producer id -1), record lines with ``controlType: LEADER_CHANGE(2)`` (2.8 to
4.0) or ``LeaderChange: {...}`` (4.1+), ``SnapshotHeader``/``SnapshotFooter`` records, the
``Snapshot end offset: O, epoch: E`` header of a snapshot dump. Used by the tests and the
simulator; the parsers never import it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

#: The metadata log's folder (3.0+).
METADATA_FOLDER = "__cluster_metadata-0"


@dataclass(frozen=True)
class MetaBatch:
    """One batch of the metadata log or of a snapshot.

    ``records``: the kind of each record, in order: ``data`` (a metadata record, e.g.
    ``NO_OP_RECORD``) or a control type (``LeaderChange``, ``KRaftVersion``, ``KRaftVoters``,
    ``SnapshotHeader``, ``SnapshotFooter``). A batch is a control batch when its first
    record is not ``data``.
    """

    base_offset: int
    epoch: int
    records: tuple[str, ...]
    crc: int
    leader_id: int | None = None  # a LeaderChange record's leader
    voters: tuple[int, ...] = ()
    timestamp: int = 1_763_000_000_000
    valid: bool = True

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1

    @property
    def is_control(self) -> bool:
        return self.records[0] != "data"

    @property
    def size(self) -> int:
        return 61 + sum(30 if r == "data" else 20 for r in self.records)


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


@dataclass(frozen=True)
class KRaftStyle:
    """How one Kafka release prints the metadata log: ``2.8`` (``@metadata-0``,
    ``Starting offset:``), ``3.3`` (3.3 to 4.0: ``controlType: LEADER_CHANGE(2)``), ``4.1``
    (``LeaderChange: {...}`` with the leader id)."""

    version: str = "3.3"

    def __post_init__(self) -> None:
        if self.version not in ("2.8", "3.3", "4.1"):
            raise ValueError(f"unknown KRaft dump style {self.version!r}")

    @property
    def folder(self) -> str:
        return "@metadata-0" if self.version == "2.8" else METADATA_FOLDER

    @property
    def topic(self) -> str:
        """The metadata log's topic as its folder names it (what the tables call it)."""
        return self.folder.rsplit("-", 1)[0]

    def batch_line(self, b: MetaBatch, position: int) -> str:
        codec = "NONE" if self.version == "2.8" else "none"
        horizon = "" if self.version == "2.8" else " deleteHorizonMs: OptionalLong.empty"
        return (f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {len(b.records)} "
                f"baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
                f"partitionLeaderEpoch: {b.epoch} isTransactional: false isControl: {str(b.is_control).lower()}"
                f"{horizon} position: {position} CreateTime: {b.timestamp} size: {b.size} magic: 2 "
                f"compresscodec: {codec} crc: {b.crc} isvalid: {str(b.valid).lower()}")

    def record_content(self, b: MetaBatch, kind: str) -> str:
        voters = [{"voterId": v} for v in (b.voters or ((b.leader_id,) if b.leader_id is not None else ()))]
        if kind == "data":
            return "payload: " + _json({"type": "NO_OP_RECORD", "version": 0, "data": {}})
        if kind == "LeaderChange":
            if self.version == "4.1":
                return "LeaderChange: " + _json({"version": 0, "leaderId": b.leader_id, "voters": voters,
                                                 "grantingVoters": voters})
            return "controlType: LEADER_CHANGE(2)"
        if kind == "SnapshotHeader":
            return "SnapshotHeader " + _json({"version": 0, "lastContainedLogTimestamp": b.timestamp})
        if kind == "SnapshotFooter":
            return "SnapshotFooter " + _json({"version": 0})
        if kind == "KRaftVersion":
            return "KRaftVersion " + _json({"version": 0, "kRaftVersion": 1})
        if kind == "KRaftVoters":
            return "KRaftVoters " + _json({"version": 0, "voters": [{"voterId": v["voterId"]} for v in voters]})
        raise ValueError(f"unknown record kind {kind!r}")

    def batch_lines(self, b: MetaBatch, position: int) -> list[str]:
        lines = [self.batch_line(b, position)]
        for i, kind in enumerate(b.records):
            if self.version == "2.8":  # --skip-record-metadata: control records print nothing
                lines.append(" " + self.record_content(b, kind) if kind == "data" else "")
                continue
            key, value = (-1, 20) if kind == "data" else (4, 19)
            lines.append(f"| offset: {b.base_offset + i} CreateTime: {b.timestamp} keySize: {key} "
                         f"valueSize: {value} sequence: -1 headerKeys: [] {self.record_content(b, kind)}")
        return lines


def log_dump(log_dir: str, segment_base: int, batches: Iterable[MetaBatch], style: KRaftStyle = KRaftStyle()) -> str:
    """``kafka-dump-log.sh --cluster-metadata-decoder --files <segment>`` of one segment."""
    label = "Starting offset" if style.version == "2.8" else "Log starting offset"
    lines = [f"Dumping {log_dir}/{style.folder}/{segment_base:020d}.log", f"{label}: {segment_base}"]
    position = 0
    for b in batches:
        lines += style.batch_lines(b, position)
        position += b.size
    return "\n".join(lines) + "\n"


def snapshot_name(end_offset: int, epoch: int) -> str:
    """``<20-digit end offset>-<10-digit epoch>.checkpoint``."""
    return f"{end_offset:020d}-{epoch:010d}.checkpoint"


def snapshot_dump(log_dir: str, end_offset: int, epoch: int, batches: Iterable[MetaBatch],
                  style: KRaftStyle = KRaftStyle()) -> str:
    """The dump of a snapshot file (3.3+): header, ``Snapshot end offset:``, its batches
    (offsets local to the snapshot). No batch: a zero-length file (KAFKA-15312)."""
    lines = [f"Dumping {log_dir}/{style.folder}/{snapshot_name(end_offset, epoch)}",
             f"Snapshot end offset: {end_offset}, epoch: {epoch}"]
    position = 0
    for b in batches:
        lines += style.batch_lines(b, position)
        position += b.size
    return "\n".join(lines) + "\n"


def snapshot_batches(epoch: int, data_records: int, crc: int, timestamp: int = 1_763_000_000_000) -> list[MetaBatch]:
    """A well-formed snapshot's batches: SnapshotHeader, the data, SnapshotFooter."""
    out = [MetaBatch(0, epoch, ("SnapshotHeader",), crc, timestamp=timestamp)]
    if data_records:
        out.append(MetaBatch(1, epoch, ("data",) * data_records, crc ^ 0x5A5A, timestamp=timestamp))
    out.append(MetaBatch(data_records + 1, epoch, ("SnapshotFooter",), crc ^ 0xA5A5, timestamp=timestamp))
    return out


@dataclass(frozen=True)
class QuorumState:
    """One ``quorum-state`` file (KRAFT.md 1.1)."""

    leader_id: int
    leader_epoch: int
    voted_id: int = -1
    voters: Sequence[int] = field(default_factory=tuple)
    data_version: int = 0

    def text(self) -> str:
        """One line of compact JSON, no newline, as Kafka writes it."""
        if self.data_version == 0:
            doc: dict[str, object] = {
                "clusterId": "", "leaderId": self.leader_id, "leaderEpoch": self.leader_epoch,
                "votedId": self.voted_id, "appliedOffset": 0,
                "currentVoters": [{"voterId": v} for v in self.voters], "data_version": 0}
        else:
            doc = {"leaderId": self.leader_id, "leaderEpoch": self.leader_epoch, "votedId": self.voted_id,
                   "votedDirectoryId": "AAAAAAAAAAAAAAAAAAAAAA", "data_version": self.data_version}
        return _json(doc)


def quorum_status_text(leader_id: int, leader_epoch: int, high_watermark: int, voters: Sequence[int],
                       observers: Sequence[int] = ()) -> str:
    """``kafka-metadata-quorum.sh describe --status`` (3.3 to 3.8 layout)."""
    return "\n".join([
        "ClusterId:              MkU3OEVBNTcwNTJENDM2Qg",
        f"LeaderId:               {leader_id}",
        f"LeaderEpoch:            {leader_epoch}",
        f"HighWatermark:          {high_watermark}",
        "MaxFollowerLag:         0",
        "MaxFollowerLagTimeMs:   0",
        f"CurrentVoters:          [{','.join(str(v) for v in voters)}]",
        f"CurrentObservers:       [{','.join(str(o) for o in observers)}]",
    ]) + "\n"
