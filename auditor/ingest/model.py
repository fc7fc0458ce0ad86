"""The shape every input format is loaded into: :class:`Snapshot`, a dataclass of DataFrames.

A replica is ``(snapshot, topic, partition, replica)`` where ``replica`` is the broker id.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame
from pyspark.sql.types import (
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from auditor.policy import Plans, SizePolicy

ERRORS_SCHEMA = StructType([
    StructField("snapshot", TimestampType()), StructField("broker", IntegerType()),
    StructField("file", StringType(), False), StructField("line_number", LongType()),
    StructField("byte_offset", LongType()), StructField("line", StringType()),
    StructField("error", StringType(), False),
])

if TYPE_CHECKING:
    from auditor.ingest.batches import BatchSource

REPLICA = ("snapshot", "topic", "partition", "replica")

#: Spark DDL of the frames an input format may have nothing for (empty frames of these).
SEGMENTS_DDL = ("snapshot timestamp, replica int, topic string, partition int, file string, "
                "line_number bigint, segment_base_offset bigint, invalid_bytes bigint")
TOPICS_DDL = "snapshot timestamp, topic string, cleanup_policy string"


def offsets_ddl(column: str) -> str:
    """DDL of a per-replica offset frame (``log_start_offset``, ``recovery_point``)."""
    return f"snapshot timestamp, topic string, partition int, replica int, {column} bigint"


@dataclass
class Snapshot:
    """Parsed inputs of one audit: DataFrames plus what the file walk found.

    Attributes:
        summaries: one row per file, section, window and epoch of each replica's batches
            (:mod:`auditor.summarise`): what the audit compares first. None only between a
            reader of batch rows and :func:`auditor.load.summarised`.
        source: where the batches themselves are read when they are needed
            (:class:`auditor.ingest.batches.BatchSource`); :attr:`batches` reads them all.
        epoch_cache: entries of usable ``leader-epoch-checkpoint`` files.
        hwm: each replica's ``replication-offset-checkpoint`` entry, as written.
        metadata: partition lines of ``topics-describe.txt``.
        parse_errors: quarantined lines and unusable files.
        segments: dumped ``.log`` segments per replica (base offset, invalid trailing bytes).
        log_start: ``log-start-offset-checkpoint`` entries per replica.
        recovery_point: ``recovery-point-offset-checkpoint`` entries per replica.
        topics: per-topic ``cleanup.policy`` from ``topics-describe.txt``.
        replicas: every replica holding data, with what inputs it has.
        accounting: per input file, lines read / parsed / skipped / quarantined.
    """

    format: str
    root: str
    snapshots: list[datetime]
    summaries: DataFrame | None
    source: BatchSource
    epoch_cache: DataFrame
    hwm: DataFrame
    metadata: DataFrame
    parse_errors: DataFrame
    segments: DataFrame
    log_start: DataFrame
    recovery_point: DataFrame
    topics: DataFrame
    replicas: DataFrame
    accounting: DataFrame
    work_dir: str = ""
    files_read: int = 0
    files_parsed: int | None = None  # None: every file read was parsed (not an incremental run)
    files_skipped: Counter[str] = field(default_factory=Counter)
    #: ``*.swap`` files found (compaction results not yet swapped in), relative paths
    swap_files: list[str] = field(default_factory=list)
    #: Collected log dirs read (SPEC 3.4) and how many of them hold verified CRCs.
    collected_log_dirs: int = 0
    collected_verified: int = 0
    #: ``--format etcd``: where each member's WAL stops being readable (``CORRUPT_BATCH``),
    #: and member name -> replica id.
    wal_problems: DataFrame | None = None
    members: dict[str, int] | None = None
    #: an incremental run: which dump files it read from the store and which it parsed
    #: (:class:`auditor.load.reuse.Reuse`).
    store: Any = None
    #: dumps: each file section's segment (``file_id, sec, file, segment_base_offset``).
    sections: DataFrame | None = None
    #: about how many replicas the input holds (partition folders per broker), for sizing
    #: the work after the scan; 0 when unknown.
    replica_estimate: int = 0
    #: how many summary rows the scan made (stored), for sizing the comparisons over them;
    #: 0 when unknown.
    summary_rows: int = 0
    #: KRaft's metadata log inputs (:class:`auditor.ingest.kraft.KRaft`); None when the input
    #: has no metadata log folder.
    kraft: Any = None
    #: how large the input is (measured before it was read), and the plans that follow.
    policy: SizePolicy = field(default_factory=SizePolicy)
    plans: Plans = field(default_factory=Plans.as_session)

    def with_frames(self, change: Callable[[DataFrame], DataFrame]) -> Snapshot:
        """This snapshot with ``change`` applied to each of its DataFrame fields."""
        frames = {f.name: change(getattr(self, f.name)) for f in fields(self)
                  if isinstance(getattr(self, f.name), DataFrame)}
        return replace(self, **frames)

    @property
    def batches(self) -> DataFrame:
        """One row per batch of each replica's log (``replica`` = broker id), repeated
        batches merged (SPEC 7). For dumps this reads every dump file again: the audit
        itself reads batches only where summaries differ."""
        return self.source.all_batches()
