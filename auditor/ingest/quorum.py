"""KRaft's quorum files (SPEC 4.7): ``quorum-state`` (JSON, ``data_version`` 0 or 1) in a
node's metadata log folder and the root's ``metadata-quorum-status.txt``
(``kafka-metadata-quorum.sh describe --status``), each judged line by line as the
checkpoint files are.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql.types import IntegerType, LongType

from auditor import columns as F
from auditor.columns import col, lit

#: Columns of :attr:`auditor.ingest.kraft.KRaft.quorum_state`.
QUORUM_DDL = ("snapshot timestamp, topic string, partition int, replica int, file string, leader_id int, "
              "leader_epoch int, voted_id int, data_version int, current_voters array<int>")
#: Columns of :attr:`auditor.ingest.kraft.KRaft.status`.
STATUS_DDL = "snapshot timestamp, file string, high_watermark bigint, leader_id int, leader_epoch int"


_QUORUM_JSON = ("leaderId int, leaderEpoch int, votedId int, data_version int, "
                "currentVoters array<struct<voterId:int>>")


def parse_quorum_state(lines: DataFrame, files: DataFrame) -> tuple[DataFrame, DataFrame]:
    """``quorum-state`` files: one line of compact JSON (KRAFT.md 1.1). A file is usable when
    its one non-blank line is a JSON object with an integer ``leaderEpoch`` and a
    ``data_version`` of 0 or 1 (Kafka's reader refuses others); else every line of it is
    quarantined with the reason.

    Args:
        lines: ``file_id, line_number, text`` of those files.
        files: ``file_id, rel, snapshot, broker, topic, partition`` of those files.

    Returns:
        ``(rows, line dispositions)``: :data:`QUORUM_DDL` rows and the per-line
        ``file_id, line_number, disposition, error, shown, snapshot, broker, rel`` of
        :class:`auditor.ingest.checkpoints.ParsedCheckpoints`.
    """
    t = F.trim(col("text"))
    parsed = F.from_json(t, _QUORUM_JSON, {"mode": "PERMISSIVE"})
    per_line = lines.select("file_id", "line_number", t.alias("t"), F.when(t != "", parsed).alias("j"),
                            (t.startswith("{") & t.endswith("}")).alias("obj"))
    per_file = per_line.groupBy("file_id").agg(
        F.count(F.when(col("t") != "", 1)).alias("n"),
        F.max(F.when(col("t") != "", F.struct(col("line_number"), col("j"), col("obj")))).alias("_l"))
    j = col("_l.j")
    reason = (
        F.when(col("n").isNull() | (col("n") == 0), lit("empty quorum-state file"))
        .when(col("n") > 1, lit("quorum-state holds more than one line of JSON"))
        .when(~col("_l.obj") | col("_l.j").isNull(), lit("quorum-state is not a JSON object"))
        .when(j["leaderEpoch"].isNull(), lit("quorum-state has no integer leaderEpoch"))
        .when(j["data_version"].isNull() | ~j["data_version"].isin(0, 1),
              lit("quorum-state data_version is not within the supported versions 0 to 1"))
    )
    verdict = per_file.select("file_id", col("_l.j").alias("j"), reason.alias("reason"))
    f = files
    rows = verdict.filter(col("reason").isNull()).join(f, "file_id").select(
        "snapshot", "topic", "partition", col("broker").alias("replica"), col("rel").alias("file"),
        col("j.leaderId").alias("leader_id"), col("j.leaderEpoch").alias("leader_epoch"),
        col("j.votedId").alias("voted_id"), col("j.data_version").alias("data_version"),
        F.when(col("j.data_version") == 0, F.array_sort(F.transform(
            col("j.currentVoters"), lambda v: v["voterId"]))).alias("current_voters"))
    dispositions = per_line.join(verdict.select("file_id", "reason"), "file_id", "left").join(f, "file_id").select(
        "file_id", "line_number",
        F.when(col("reason").isNotNull() & (col("t") != ""), "quarantined")
        .when(col("t") == "", "skipped").otherwise("parsed").alias("disposition"),
        F.when(col("t") != "", col("reason")).alias("error"),
        F.concat(lit("<quorum-state line of "), F.length("t").cast("string"), lit(" characters>")).alias("shown"),
        "snapshot", "broker", "rel")
    # an empty file has no line to quarantine: it is a parse error of the file itself
    empty = verdict.filter(col("reason") == "empty quorum-state file").join(f, "file_id").select(
        "file_id", lit(None).cast("bigint").alias("line_number"), lit("quarantined").alias("disposition"),
        col("reason").alias("error"), lit("").alias("shown"), "snapshot", "broker", "rel")
    return rows, dispositions.unionByName(empty)


_STATUS_KEYS = {"HighWatermark": ("high_watermark", LongType()), "LeaderId": ("leader_id", IntegerType()),
                "LeaderEpoch": ("leader_epoch", IntegerType())}


def parse_quorum_status(lines: DataFrame, files: DataFrame) -> tuple[DataFrame, DataFrame]:
    """``metadata-quorum-status.txt``: ``Key: value`` lines of ``kafka-metadata-quorum.sh
    describe --status``. ``HighWatermark``, ``LeaderId`` and ``LeaderEpoch`` are read (an
    integer each); other keys are accepted and unused; any other non-blank line, or a
    non-integer value of those three, is quarantined.

    Returns:
        ``(rows, line dispositions)`` as :func:`parse_quorum_state`.
    """
    t = F.trim(col("text"))
    key = F.regexp_extract(t, r"^([A-Za-z][A-Za-z0-9]*):\s*(.*)$", 1)
    value = F.regexp_extract(t, r"^([A-Za-z][A-Za-z0-9]*):\s*(.*)$", 2)
    numeric = key.isin(*_STATUS_KEYS)
    error = (F.when(t == "", lit(None))
             .when(key == "", lit("not a 'Key: value' line of kafka-metadata-quorum.sh describe --status"))
             .when(numeric & value.try_cast("bigint").isNull(), F.format_string("%s is not an integer", key)))
    per_line = lines.select("file_id", "line_number", t.alias("t"), key.alias("key"), value.alias("value"),
                            error.alias("error"))
    f = files
    good = per_line.filter(col("error").isNull() & col("key").isin(*_STATUS_KEYS))
    rows = good.groupBy("file_id").agg(*[
        F.max(F.when(col("key") == k, F.struct(col("line_number"), col("value").try_cast(typ).alias("v"))))["v"]
        .alias(name) for k, (name, typ) in _STATUS_KEYS.items()]).join(f, "file_id").select(
        "snapshot", col("rel").alias("file"), "high_watermark", "leader_id", "leader_epoch")
    dispositions = per_line.join(f, "file_id").select(
        "file_id", "line_number",
        F.when(col("error").isNotNull(), "quarantined").when(col("t") == "", "skipped")
        .otherwise("parsed").alias("disposition"), "error",
        F.when(col("key") != "", F.concat(col("key"), lit(": <value not shown>")))
        .otherwise(lit("<line not shown>")).alias("shown"), "snapshot", "broker", "rel")
    return rows, dispositions
