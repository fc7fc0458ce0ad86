"""KRaft's metadata log inputs (SPEC 4.7): what the ``__cluster_metadata-0`` folders hold
beyond an ordinary partition's.

- The batches of the metadata log with their control facts: whether the batch is a control
  batch, the control type of its first and last record where the dump prints record lines
  (``LeaderChange``, ``SnapshotHeader``, ``SnapshotFooter``, ``KRaftVersion``,
  ``KRaftVoters``, another ``controlType``, or ``data``), and the leader id a 4.1+ dump
  prints in ``LeaderChange: {...}``. Nothing else of a record is kept: metadata payloads are
  dropped like every payload.
- The snapshots (``<end offset>-<epoch>.checkpoint``) of each node: from dumps of snapshot
  files (their batches, with offsets local to the snapshot, never enter the log) and from bare
  copies (the name alone). The bootstrap id (0, 0) is never a snapshot here.
- ``quorum-state`` and the root's ``metadata-quorum-status.txt`` are read by
  :mod:`auditor.ingest.quorum`.

The main scan reads the same dump files for the log itself (a ``.checkpoint`` section is
not a ``.log`` section there, so snapshot batches never reach it); this module reads only the
files of metadata log folders, which are few and small next to a cluster's data, and the
metadata log's sections of dump files above the folders (:func:`read_section_groups`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession, Window

from auditor import columns as F
from auditor.columns import col, lit
from auditor.frames import local_frame
from auditor.ingest import discovery as d
from auditor.ingest import dump_grammar as g
from auditor.ingest.batches import section_filter
from auditor.ingest.lines import number_lines, read_text_lines
from auditor.ingest.wholefile import read_dump_lines

REPLICA = ["snapshot", "topic", "partition", "replica"]

#: Columns of :attr:`KRaft.batches`.
BATCHES_DDL = ("snapshot timestamp, topic string, partition int, replica int, file string, line_number bigint, "
               "base_offset bigint, last_offset bigint, epoch int, crc bigint, is_control boolean, "
               "first_type string, last_type string, leader_id int")
#: Columns of :attr:`KRaft.snapshots`: one row per node and snapshot id. ``dumped``: a dump
#: of the snapshot file was read (its content can be judged); the other columns describe
#: that content (null when not dumped).
SNAPSHOTS_DDL = ("snapshot timestamp, topic string, partition int, replica int, end_offset bigint, epoch int, "
                 "file string, dumped boolean, batch_count bigint, first_control boolean, last_control boolean, "
                 "first_type string, last_type string, records_printed boolean, other_epochs bigint, damage string")


def is_kraft(topic: Column | None = None, partition: Column | None = None) -> Column:
    """Whether a row's partition is KRaft's metadata log (SPEC 4.7)."""
    t = topic if topic is not None else col("topic")
    p = partition if partition is not None else col("partition")
    return t.isin(*d.KRAFT_TOPICS) & (p == 0)


@dataclass(frozen=True)
class KRaft:
    """The KRaft inputs of one input (all small: one metadata log per node)."""

    batches: DataFrame  # BATCHES_DDL: the metadata log's batches, repeated dumps merged
    snapshots: DataFrame  # SNAPSHOTS_DDL
    quorum_state: DataFrame  # auditor.ingest.quorum.QUORUM_DDL: usable quorum-state files
    status: DataFrame  # auditor.ingest.quorum.STATUS_DDL: metadata-quorum-status.txt per snapshot


def record_type(t: Column) -> Column:
    """The control type of a ``| offset:`` record line (see the module docstring), from the
    words before any key or payload; null when the line prints none."""
    pre = F.regexp_replace(t, r"\s(payload|key): .*$", "")
    named = F.regexp_extract(pre, r"\scontrolType: ([A-Za-z_]+)", 1)
    return (
        F.when(pre.rlike(r"\sLeaderChange: ") | (named == "LEADER_CHANGE"), lit("LeaderChange"))
        .when(pre.rlike(r"\sSnapshotHeader\b"), lit("SnapshotHeader"))
        .when(pre.rlike(r"\sSnapshotFooter\b"), lit("SnapshotFooter"))
        .when(pre.rlike(r"\sKRaftVersion\b"), lit("KRaftVersion"))
        .when(pre.rlike(r"\sKRaftVoters\b"), lit("KRaftVoters"))
        .when(named != "", F.concat(lit("controlType:"), named))
        .when(t.rlike(r"\s(payload|key): "), lit("data"))
    )


def _leader_id(t: Column) -> Column:
    value = F.regexp_extract(t, r"\sLeaderChange: \{.*?\"leaderId\":\s*(-?\d+)", 1)
    return F.when(value != "", value.try_cast("int"))


def line_facts(lines: DataFrame) -> DataFrame:
    """Per dump line (``file_id, block_start, mono, text``, or ``file_id, line_number, text``
    of lines numbered already): what this module reads of it, as
    plain columns (``path`` of a header, ``snap_o``/``snap_e`` of a ``Snapshot end offset:``
    line, ``boot``, the fields of a v2 batch line, and ``off``/``rtype``/``leader`` of a
    record line), with its ``line_number`` in its file, and ``sec_line`` and ``batch_line``:
    the last ``Dumping`` header and the last batch line at or before it. One window per file
    over the metadata log's lines only (a few thousand per node): a far smaller plan than the
    whole-file reader's, planned in a fraction of the time."""
    def facts(text: Column) -> Column:
        t = g.stripped(text)
        toks = g.tokens(g.metadata_part(t))
        batch = t.startswith("baseOffset: ")
        record = t.rlike(r"^\|\s*offset: ")
        snap = t.rlike(r"^Snapshot end offset: \d+, epoch: -?\d+$")
        return F.struct(
            F.when(t.startswith("Dumping "), g.header_path(t)).alias("path"),
            F.when(snap, F.regexp_extract(t, r"offset: (\d+),", 1).try_cast("bigint")).alias("snap_o"),
            F.when(snap, F.regexp_extract(t, r"epoch: (-?\d+)$", 1).try_cast("int")).alias("snap_e"),
            (t == "KRaft bootstrap snapshot").alias("boot"),
            batch.alias("is_batch"), record.alias("is_record"),
            F.when(batch, g.field_long(toks, "baseOffset")).alias("base_offset"),
            F.when(batch, g.field_long(toks, "lastOffset")).alias("last_offset"),
            F.when(batch, g.field_int(toks, "partitionLeaderEpoch")).alias("epoch"),
            F.when(batch, g.field_long(toks, "crc")).alias("crc"),
            F.when(batch, g.field_bool(toks, "isControl")).alias("is_control"),
            F.when(record, F.regexp_extract(t, r"^\|\s*offset: (-?\d+)", 1).try_cast("bigint")).alias("off"),
            F.when(record, record_type(t)).alias("rtype"),
            F.when(record, _leader_id(t)).alias("leader"))

    # lines read by the dump reader are numbered already (and may be some sections only)
    place = ["file_id", "line_number"] if "line_number" in lines.columns else ["file_id", "block_start", "mono"]
    x = lines.select(*place, facts(col("text")).alias("x")).select(*place, "x.*")
    numbered = x if "line_number" in place else number_lines(x)
    in_file = Window.partitionBy("file_id").orderBy("line_number").rowsBetween(
        Window.unboundedPreceding, Window.currentRow)
    return numbered.select(
        "*", F.last(F.when(col("path").isNotNull(), col("line_number")), ignorenulls=True).over(in_file)
        .alias("sec_line"),
        F.last(F.when(col("is_batch"), col("line_number")), ignorenulls=True).over(in_file).alias("batch_line"))


#: Columns of :func:`line_groups` (what the scan job stores for the metadata log's dumps).
GROUPS_DDL = ("file_id int, sec int, grp bigint, h struct<line_number:bigint,p:string>, "
              "s struct<line_number:bigint,o:bigint,e:int>, boot boolean, "
              "b struct<base_offset:bigint,last_offset:bigint,epoch:int,crc:bigint,is_control:boolean>, "
              "first struct<off:bigint,rline:bigint,rtype:string,leader:int>, "
              "last struct<off:bigint,rline:bigint,rtype:string>")


def line_groups(lines: DataFrame) -> DataFrame:
    """One aggregate over the metadata log's dump lines (as :func:`line_facts` takes them),
    per ``(file_id, sec, grp)``: ``sec`` is the section's header line (0 before any),
    ``grp`` a batch's line (the batch line and its record lines) or -1 (the section's
    header and ``Snapshot end offset:`` lines). One read of the files, a handful of rows per
    batch: what :func:`parse_kraft_dumps` works from."""
    sec = F.coalesce(col("sec_line"), lit(0))
    owned = col("is_record") & col("batch_line").isNotNull() & (col("batch_line") > sec)
    x = line_facts(lines).filter(
        col("path").isNotNull() | col("snap_o").isNotNull() | col("boot") | col("is_batch") | owned)
    grp = F.when(col("is_batch"), col("line_number")).when(owned, col("batch_line")).otherwise(lit(-1))
    return x.groupBy("file_id", sec.cast("int").alias("sec"), grp.cast("bigint").alias("grp")).agg(
        F.min(F.when(col("path").isNotNull(), F.struct(col("line_number"), col("path").alias("p")))).alias("h"),
        F.min(F.when(col("snap_o").isNotNull(), F.struct(
            col("line_number"), col("snap_o").alias("o"), col("snap_e").alias("e")))).alias("s"),
        F.max("boot").alias("boot"),
        F.max(F.when(col("is_batch"), F.struct("base_offset", "last_offset", "epoch", "crc", "is_control")))
        .alias("b"),
        F.min(F.when(col("is_record"), F.struct("off", col("line_number").alias("rline"), "rtype", "leader")))
        .alias("first"),
        F.max(F.when(col("is_record"), F.struct("off", col("line_number").alias("rline"), "rtype"))).alias("last"))


def read_kraft_groups(spark: SparkSession, dump_files: Sequence[tuple[int, d.InputFile]], *,
                      spill: str | None = None, narrow: bool = False) -> DataFrame:
    """:func:`line_groups` of the metadata log folders' dump files (``spill``: as
    :func:`auditor.ingest.lines.with_file_ids` says)."""
    if not dump_files:
        return local_frame(spark, [], GROUPS_DDL)
    return line_groups(read_text_lines(spark, dump_files, spill=spill, narrow=narrow))


def read_section_groups(spark: SparkSession, dump_files: Sequence[tuple[int, d.InputFile]],
                        sections: Mapping[int, Collection[int]], *, spill: str | None = None,
                        narrow: bool = False) -> DataFrame:
    """:func:`line_groups` of some sections of dump files above the partition folders (a
    per-broker file that also holds the metadata log: SPEC 3.1). ``sections``: file id -> the
    sections (numbered as the scan numbers them) whose header names the metadata log. Each
    file is read whole, as the drill-down reads one, but only those sections' lines reach
    the window: such a file may hold a broker's whole data log besides."""
    chosen = [(i, f) for i, f in dump_files if i in sections]
    if not chosen:
        return local_frame(spark, [], GROUPS_DDL)
    lines = read_dump_lines(spark, chosen, spill=spill, narrow=narrow)
    keep = section_filter(sections)
    return line_groups((lines if keep is None else lines.filter(keep)).select("file_id", "line_number", "text"))


def section_facts(groups: DataFrame, files: DataFrame) -> DataFrame:
    """Per dump file section: what it holds (``log``, ``snapshot``, ``bootstrap`` or
    ``other``), its place and, for a snapshot, its id. ``groups``: :func:`line_groups` rows;
    ``files``: ``file_id, rel, snapshot, broker, topic, partition``."""
    per_sec = groups.groupBy("file_id", "sec").agg(
        F.min("h").alias("_h"), F.min("s").alias("_s"), F.max("boot").alias("_boot"))
    p = col("_h.p")
    name_id = F.regexp_extract(p, r"(?:^|[/\\])(\d{20})-(\d{10})\.checkpoint$", 0)
    file_id_text = F.regexp_extract(col("rel"), r"(?:^|[/\\])(\d{20})-(\d{10})\.checkpoint\.[^/\\]+$", 0)
    boot = F.coalesce(col("_boot"), lit(False)) | p.rlike(r"(^|[/\\])bootstrap\.checkpoint$")
    snapshot_like = p.rlike(r"\.checkpoint$") | col("_s").isNotNull() | (p.isNull() & (file_id_text != ""))

    def part(text: Column, i: int, cast: str) -> Column:
        return F.regexp_extract(text, r"(\d{20})-(\d{10})", i).try_cast(cast)

    h_topic, h_part = g.header_topic_partition(F.coalesce(p, lit("")))
    return per_sec.join(files, "file_id").select(
        "file_id", "sec", "snapshot", col("broker").alias("replica"),
        F.coalesce(h_topic, col("topic")).alias("topic"), F.coalesce(h_part, col("partition")).alias("partition"),
        col("rel").alias("file"),
        F.when(boot, "bootstrap").when(snapshot_like, "snapshot")
        .when(p.isNull() | p.rlike(r"\.log$"), "log").otherwise("other").alias("what"),
        F.coalesce(col("_s.o"), F.when(name_id != "", part(name_id, 1, "bigint")),
                   F.when(file_id_text != "", part(file_id_text, 1, "bigint"))).alias("end_offset"),
        F.coalesce(col("_s.e"), F.when(name_id != "", part(name_id, 2, "int")),
                   F.when(file_id_text != "", part(file_id_text, 2, "int"))).alias("snap_epoch"),
    )


def dump_batches(groups: DataFrame) -> DataFrame:
    """Per v2 batch line of :func:`line_groups` rows: its fields and its records' control facts."""
    return groups.filter(col("b").isNotNull()).select(
        "file_id", "sec", col("grp").alias("line_number"), "b.*",
        col("first.rtype").alias("first_type"), col("last.rtype").alias("last_type"),
        col("first.leader").alias("leader_id"))


def parse_kraft_dumps(groups: DataFrame, files: DataFrame, read: DataFrame | None = None
                      ) -> tuple[DataFrame, DataFrame]:
    """The log batches and the dumped snapshots of the metadata log folders' dump files.

    Args:
        groups: the stored :func:`line_groups` of those files.
        files: ``file_id, rel, snapshot, broker, topic, partition``.
        read: the log's batches read from its segment files (:func:`segment_log`), merged
            with the dumped ones.

    Returns:
        ``(batches, dumped_snapshots)``: :data:`BATCHES_DDL` rows (repeated dumps of a batch
        merged) and :data:`SNAPSHOTS_DDL` rows of the snapshot dumps.
    """
    sections = section_facts(groups, files)
    batches = dump_batches(groups).join(sections, ["file_id", "sec"]).filter(
        col("base_offset").isNotNull() & col("last_offset").isNotNull())
    dumped_log = batches.filter((col("what") == "log") & is_kraft()).select(*LOG_COLUMNS)
    log = merged_log(dumped_log if read is None else dumped_log.unionByName(read))
    snaps = sections.filter((col("what") == "snapshot") & is_kraft() & col("end_offset").isNotNull()
                            & col("snap_epoch").isNotNull())
    in_snap = batches.filter(col("what") == "snapshot").select(
        "file_id", "sec", "base_offset", "line_number", "epoch", "is_control", "first_type", "last_type")
    per_sec = snaps.join(in_snap, ["file_id", "sec"], "left").groupBy(
        *REPLICA, "file_id", "sec", "file", "end_offset", "snap_epoch").agg(
        F.count("base_offset").alias("batch_count"),
        F.min(F.when(col("base_offset").isNotNull(),
                     F.struct("base_offset", "line_number", "is_control", "first_type"))).alias("_first"),
        F.max(F.when(col("base_offset").isNotNull(),
                     F.struct("base_offset", "line_number", "is_control", "last_type"))).alias("_last"),
        F.max(col("first_type").isNotNull() | col("last_type").isNotNull()).alias("records_printed"),
        F.count(F.when(col("epoch") != col("snap_epoch"), 1)).alias("other_epochs"))
    # Two dumps of one snapshot on one node: the one with the most batches, then the first file.
    dumped = per_sec.groupBy(*REPLICA, "end_offset", "snap_epoch").agg(
        F.max(F.struct(col("batch_count"), lit(0) - col("file_id"), lit(0) - col("sec"),
                       "file", "_first", "_last", "records_printed", "other_epochs")).alias("_b")).select(
        *REPLICA, "end_offset", col("snap_epoch").alias("epoch"), col("_b.file").alias("file"),
        lit(True).alias("dumped"), col("_b.batch_count").alias("batch_count"),
        col("_b._first.is_control").alias("first_control"), col("_b._last.is_control").alias("last_control"),
        col("_b._first.first_type").alias("first_type"), col("_b._last.last_type").alias("last_type"),
        F.coalesce(col("_b.records_printed"), lit(False)).alias("records_printed"),
        col("_b.other_epochs").alias("other_epochs"), lit(None).cast("string").alias("damage"))
    return log, dumped


def _kraft_type(control: Column, name: Column) -> Column:
    """A segment file's record type (:func:`auditor.ingest.segments.control_record`) as the
    dumps name it (:func:`record_type`): ``data`` in a data batch; null when unknown."""
    named = {"LEADER_CHANGE": "LeaderChange", "SNAPSHOT_HEADER": "SnapshotHeader", "SNAPSHOT_FOOTER": "SnapshotFooter",
             "KRAFT_VERSION": "KRaftVersion", "KRAFT_VOTERS": "KRaftVoters"}
    mapped = F.when(~control, lit("data"))
    for key, value in named.items():
        mapped = mapped.when(name == key, lit(value))
    return mapped.when(name.isNotNull(), F.concat(lit("controlType:"), name))


def segment_log(rows: DataFrame, place: DataFrame) -> DataFrame:
    """:data:`BATCHES_DDL` rows of the metadata log's segment files (SPEC 3.3, 4.7): their
    decoded ``B`` rows (``rows``, of every segment file) in the metadata log folders
    (``place``: ``file_id, rel, snapshot, broker, topic, partition``)."""
    return rows.filter(col("row_kind") == "B").join(place, "file_id").filter(is_kraft()).select(
        "snapshot", "topic", "partition", col("broker").alias("replica"), col("rel").alias("file"),
        lit(None).cast("bigint").alias("line_number"), "base_offset", "last_offset", "epoch", "crc", "is_control",
        _kraft_type(col("is_control"), col("control_type")).alias("first_type"),
        _kraft_type(col("is_control"), F.coalesce(col("last_control_type"), col("control_type"))).alias("last_type"),
        "leader_id")


#: The columns of a metadata log batch before repeated ones are merged.
LOG_COLUMNS = (*REPLICA, "file", "line_number", "base_offset", "last_offset", "epoch", "crc", "is_control",
               "first_type", "last_type", "leader_id")


def merged_log(rows: DataFrame) -> DataFrame:
    """:data:`BATCHES_DDL` rows of the metadata log's batches (:data:`LOG_COLUMNS`), one per
    batch of a node: repeated dumps of a batch, or a dump and its segment file, merged (the
    first place that holds it, by file then line)."""
    return rows.groupBy(*REPLICA, "base_offset", "last_offset", "epoch", "crc").agg(
        F.min(F.struct("file", "line_number")).alias("_at"), F.max("is_control").alias("is_control"),
        F.max("first_type").alias("first_type"), F.max("last_type").alias("last_type"),
        F.max("leader_id").alias("leader_id")).select(
        *REPLICA, col("_at.file").alias("file"), col("_at.line_number").alias("line_number"),
        "base_offset", "last_offset", "epoch", "crc", "is_control", "first_type", "last_type", "leader_id")


#: A binary snapshot file's place: ``file_id, rel, snapshot, broker, topic, partition,
#: end_offset, epoch``.
SNAPSHOT_PLACE_DDL = ("file_id int, rel string, snapshot timestamp, broker int, topic string, partition int, "
                      "end_offset bigint, epoch int")


def binary_snapshots(rows: DataFrame, place: DataFrame) -> DataFrame:
    """:data:`SNAPSHOTS_DDL` rows of the non-empty ``*.checkpoint`` files read in Kafka's
    binary format (SPEC 3.3, 4.7): their batches (offsets local to the snapshot) judged as
    a dump's are, and ``damage`` where the walk stopped early, a header was quarantined or
    a CRC did not match (``--verify-crc``)."""
    entries = rows.filter(col("row_kind").isin("B", "Q")).join(place.select("file_id", col("epoch").alias("_se")),
                                                            "file_id")
    per_file = entries.groupBy("file_id").agg(
        F.count(F.when(col("row_kind") == "B", 1)).alias("batch_count"),
        F.min(F.when(col("row_kind") == "B", F.struct("base_offset", "is_control", "control_type"))).alias("_first"),
        F.max(F.when(col("row_kind") == "B", F.struct(
            "base_offset", "is_control", F.coalesce(col("last_control_type"), col("control_type")).alias("t"))))
        .alias("_last"),
        F.count(F.when((col("row_kind") == "B") & (col("epoch") != col("_se")), 1)).alias("other_epochs"),
        F.min(F.when(col("row_kind") == "Q", col("position"))).alias("_quarantined"),
        F.min(F.when(col("is_valid") == lit(False), col("position"))).alias("_invalid"))
    files = rows.filter(col("row_kind") == "F").select(
        "file_id", "tail_position", "tail_bytes", "stop", "unreadable")
    damage = F.concat_ws("; ", F.filter(F.array(
        F.when(col("unreadable").isNotNull(), F.concat(lit("the file cannot be read: "), col("unreadable"))),
        F.when(col("tail_bytes") > 0, F.format_string("its walk stops at byte %d (%s): %d bytes not read as batches",
                                                      col("tail_position"), col("stop"), col("tail_bytes"))),
        F.when(col("_quarantined").isNotNull(),
               F.format_string("a batch header at byte %d holds a value Kafka never writes", col("_quarantined"))),
        F.when(col("_invalid").isNotNull(),
               F.format_string("the batch at byte %d does not match its CRC", col("_invalid"))),
    ), lambda x: x.isNotNull()))
    joined = place.join(files, "file_id", "left").join(per_file, "file_id", "left")
    return joined.select(
        "snapshot", "topic", "partition", col("broker").alias("replica"), "end_offset", "epoch",
        col("rel").alias("file"), lit(True).alias("dumped"), F.coalesce(col("batch_count"), lit(0)).alias("batch_count"),
        col("_first.is_control").alias("first_control"), col("_last.is_control").alias("last_control"),
        _kraft_type(col("_first.is_control"), col("_first.control_type")).alias("first_type"),
        _kraft_type(col("_last.is_control"), col("_last.t")).alias("last_type"),
        lit(True).alias("records_printed"), F.coalesce(col("other_epochs"), lit(0)).alias("other_epochs"),
        F.when(damage != "", damage).alias("damage"))


def snapshot_id(f: d.InputFile) -> tuple[int, int] | None:
    """A ``*.checkpoint`` file's snapshot id ``(end offset, epoch)``, from its name."""
    m = d.KRAFT_SNAPSHOT_NAME.match(f.rel.replace("\\", "/").rsplit("/", 1)[-1])
    return None if m is None else (int(m.group("end")), int(m.group("epoch")))


def snapshot_files(spark: SparkSession, files: Sequence[tuple[int, d.InputFile]], *, narrow: bool = False,
                   empty_snapshots: Collection[int] = ()) -> DataFrame:
    """:data:`SNAPSHOTS_DDL` rows of the zero-length ``*.checkpoint`` files: bare copies (the
    name is the id), except those in ``empty_snapshots`` (file ids): KAFKA-15312's empty
    snapshot, a header and no batch (SPEC 3.3: a zero-length file of a node that has segment
    files, with no dump of its id)."""
    rows = []
    for i, f in files:
        found = snapshot_id(f)
        if found is None:
            continue
        empty = i in empty_snapshots
        rows.append((f.snapshot, f.topic, f.partition, f.broker, found[0], found[1], f.rel,
                     empty, 0 if empty else None, None, None, None, None, None, None, None))
    return local_frame(spark, rows, SNAPSHOTS_DDL, narrow=narrow)


def all_snapshots(dumped: DataFrame, bare: DataFrame) -> DataFrame:
    """One row per node and snapshot id, a dump's content preferred to a bare copy's name;
    the bootstrap id (0, 0) left out."""
    both = dumped.unionByName(bare).filter(~((col("end_offset") == 0) & (col("epoch") == 0)))
    cols = [c for c in both.columns if c not in (*REPLICA, "end_offset", "epoch", "dumped", "file")]
    # a snapshot file read in binary comes before a dump of it (SPEC 3.3), a dump before a
    # bare copy; then the first file by name
    binary = col("file").endswith(".checkpoint") & col("dumped") & col("batch_count").isNotNull()
    best = both.groupBy(*REPLICA, "end_offset", "epoch").agg(
        F.max(F.struct(col("dumped"), binary, lit("") == col("file"), col("file"), *cols)).alias("_b"))
    return best.select(*REPLICA, "end_offset", "epoch", col("_b.file").alias("file"),
                       col("_b.dumped").alias("dumped"), *[col(f"_b.{c}").alias(c) for c in cols])
