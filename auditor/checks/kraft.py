"""The ``KRAFT_*`` checks of SPEC 4.7, on KRaft's metadata log (small tables: one log per node)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from auditor.checks.rows import Kind, finding, findings
from auditor.ingest.kraft import KRaft
from auditor.spark import union_all

KEY = ["snapshot", "topic", "partition", "replica"]
PARTITION = ["snapshot", "topic", "partition"]


def election_safety(k: KRaft) -> DataFrame:
    """``KRAFT_ELECTION_SAFETY`` CRITICAL (partition): in some epoch two nodes name different
    leaders (``quorum-state`` files, or LeaderChange records whose leader id the dump prints).
    One finding per partition, for the lowest such epoch."""
    claims = k.quorum_state.filter(F.col("leader_id") >= 0).select(
        *KEY, F.col("leader_epoch").alias("epoch"), "leader_id", F.lit("quorum-state").alias("source")).unionByName(
        k.batches.filter((F.col("first_type") == "LeaderChange") & F.col("leader_id").isNotNull()).select(
            *KEY, "epoch", "leader_id", F.lit("LeaderChange").alias("source")))
    per_epoch = claims.groupBy(*PARTITION, "epoch").agg(
        F.array_sort(F.collect_set("leader_id")).alias("leaders"),
        F.array_sort(F.collect_set(F.struct(F.col("replica").alias("node"), F.col("leader_id").alias("leader"),
                                            "source"))).alias("claims"))
    split = per_epoch.filter(F.size("leaders") > 1)
    lowest = split.groupBy(*PARTITION).agg(F.min("epoch").alias("epoch")).join(split, [*PARTITION, "epoch"])
    return finding(
        lowest, "KRAFT_ELECTION_SAFETY", "CRITICAL", None, None, F.col("epoch"),
        F.format_string("In epoch %d the nodes name different leaders (%s): two leaders in one epoch break Raft's "
                        "election safety.", F.col("epoch"), F.array_join(F.col("leaders").cast("array<string>"), ", ")),
        F.struct("epoch", "leaders", "claims"), replica=F.lit(None))


def epoch_starts(k: KRaft, facts: DataFrame) -> DataFrame:
    """``KRAFT_EPOCH_START`` ERROR (replica): among a node's batches at or above its local
    log start, the first batch of an epoch (but the first batch's epoch) is not a control
    batch or, where its first record is printed, not LeaderChange; or a batch has epoch 0.
    One finding per epoch; range the batch."""
    lso = facts.select(*KEY, F.col("local_log_start_offset").alias("lso"))
    held = k.batches.join(lso, KEY).filter(
        (F.col("base_offset") >= F.coalesce(F.col("lso"), F.lit(0))) & (F.col("epoch") >= 0))
    first = held.groupBy(*KEY).agg(F.min(F.struct("base_offset", "line_number", "file", "epoch")).alias("_f"))
    per_epoch = held.groupBy(*KEY, "epoch").agg(
        F.min(F.struct("base_offset", "line_number", "file", "last_offset", "is_control", "first_type")).alias("_b"))
    b = F.col("_b")
    not_control = b["is_control"] == F.lit(False)
    not_leader_change = b["first_type"].isNotNull() & (b["first_type"] != "LeaderChange")
    opens = F.col("epoch") != F.col("_f.epoch")
    bad = per_epoch.join(first, KEY).select(
        "*", F.filter(F.array(
            F.when(F.col("epoch") == 0, F.lit("a batch in epoch 0, which never has a leader or records")),
            F.when(opens & not_control, F.lit("the epoch's first batch is not a control batch")),
            F.when(opens & ~not_control & not_leader_change,
                   F.concat(F.lit("the epoch's first record is "), b["first_type"], F.lit(", not LeaderChange"))),
        ), lambda x: x.isNotNull()).alias("reasons")).filter(F.size("reasons") > 0)
    return finding(
        bad, "KRAFT_EPOCH_START", "ERROR", b["base_offset"], b["last_offset"] + 1, F.col("epoch"),
        F.format_string("Node %d's metadata log starts epoch %d at offset %d without a LeaderChange control batch: "
                        "%s.", F.col("replica"), F.col("epoch"), b["base_offset"], F.array_join("reasons", "; ")),
        F.struct("reasons", b["file"].alias("file"), b["line_number"].alias("line_number"),
                 b["is_control"].alias("is_control"), b["first_type"].alias("first_record")))


def invalid_snapshots(k: KRaft) -> DataFrame:
    """``KRAFT_SNAPSHOT_INVALID`` ERROR (replica): one finding per invalid snapshot; range
    [O - 1, O), epoch E. A bare copy gives only its id, checked against the node's log."""
    s = k.snapshots
    log = k.batches.select(*KEY, "base_offset", "last_offset", F.col("epoch").alias("log_epoch"))
    at_end = s.select(*KEY, "end_offset", "epoch").join(log, KEY).filter(
        (F.col("base_offset") <= F.col("end_offset") - 1) & (F.col("last_offset") >= F.col("end_offset") - 1)
        & (F.col("log_epoch") != F.col("epoch"))).groupBy(*KEY, "end_offset", "epoch").agg(
        F.min("log_epoch").alias("log_epoch"))
    dumped = F.coalesce(F.col("dumped"), F.lit(False))
    reasons = F.filter(F.array(
        F.when(dumped & (F.col("batch_count") == 0),
               F.lit("the snapshot file holds no batch (a zero-length file: KAFKA-15312)")),
        F.when(dumped & (F.col("batch_count") > 0)
               & ((F.col("first_control") == F.lit(False)) | (F.col("last_control") == F.lit(False))),
               F.lit("its first or last batch is not a control batch")),
        F.when(dumped & F.col("first_type").isNotNull() & (F.col("first_type") != "SnapshotHeader"),
               F.concat(F.lit("its first record is "), F.col("first_type"), F.lit(", not SnapshotHeader"))),
        F.when(dumped & F.col("last_type").isNotNull() & (F.col("last_type") != "SnapshotFooter"),
               F.concat(F.lit("its last record is "), F.col("last_type"), F.lit(", not SnapshotFooter"))),
        F.when(dumped & (F.col("other_epochs") > 0),
               F.format_string("%d of its batches are not in the snapshot's epoch", F.col("other_epochs"))),
        F.when(F.col("log_epoch").isNotNull(), F.format_string(
            "the node's log holds offset %d in epoch %d, not in the snapshot's epoch", F.col("end_offset") - 1,
            F.col("log_epoch"))),
    ), lambda x: x.isNotNull())
    bad = s.join(at_end, [*KEY, "end_offset", "epoch"], "left").select("*", reasons.alias("reasons")).filter(
        F.size("reasons") > 0)
    return finding(
        bad, "KRAFT_SNAPSHOT_INVALID", "ERROR", F.col("end_offset") - 1, F.col("end_offset"), F.col("epoch"),
        F.format_string("Node %d's snapshot %s (end offset %d, epoch %d) is invalid: %s.", F.col("replica"),
                        F.col("file"), F.col("end_offset"), F.col("epoch"), F.array_join("reasons", "; ")),
        F.struct("file", "end_offset", "epoch", "reasons", "dumped"))


def node_findings(k: KRaft, facts: DataFrame) -> DataFrame:
    """``KRAFT_SNAPSHOT_MISSING`` and ``KRAFT_QUORUM_STATE_BEHIND``, both per node and read
    off its facts, in one projection (:func:`auditor.checks.rows.findings`).

    ``KRAFT_SNAPSHOT_MISSING`` CRITICAL (replica): the local log start is above 0 and no
    snapshot of the node ends at or above it (KAFKA-14240: the node cannot start).
    ``KRAFT_QUORUM_STATE_BEHIND`` WARNING (replica): the node's ``quorum-state``
    ``leaderEpoch`` (0 when the file is missing) is below its epoch cache's latest epoch.
    """
    latest = k.snapshots.groupBy(*KEY).agg(F.max("end_offset").alias("latest_snapshot_end"))
    qs = k.quorum_state.groupBy(*KEY).agg(F.max("leader_epoch").alias("quorum_epoch"))
    rows = facts.join(latest, KEY, "left").join(qs, KEY, "left").select(
        "*", F.coalesce(F.col("quorum_epoch"), F.lit(0)).alias("state_epoch"))
    missing = Kind(
        (F.col("local_log_start_offset") > 0)
        & (F.col("latest_snapshot_end").isNull() | (F.col("latest_snapshot_end") < F.col("local_log_start_offset"))),
        "KRAFT_SNAPSHOT_MISSING", "CRITICAL", F.lit(0), F.col("local_log_start_offset"), None,
        F.format_string("Node %d's metadata log starts at %d but none of its snapshots ends at or above it: "
                        "offsets below %d exist nowhere on the node (Kafka refuses to start: KAFKA-14240).",
                        F.col("replica"), F.col("local_log_start_offset"), F.col("local_log_start_offset")),
        F.struct("local_log_start_offset", "latest_snapshot_end"))
    behind = Kind(
        F.col("latest_epoch").isNotNull() & (F.col("state_epoch") < F.col("latest_epoch")),
        "KRAFT_QUORUM_STATE_BEHIND", "WARNING", None, None, F.col("latest_epoch"),
        F.format_string("Node %d's quorum-state is at epoch %d, below epoch %d of its metadata log: Kafka starts it "
                        "unattached, and the file was not written before the log moved on.", F.col("replica"),
                        F.col("state_epoch"), F.col("latest_epoch")),
        F.struct(F.col("quorum_epoch").alias("quorum_state_epoch"), F.col("latest_epoch").alias("log_epoch"),
                 F.col("quorum_epoch").isNull().alias("quorum_state_missing")))
    return findings(rows, [missing, behind])


def voters_differ(k: KRaft) -> DataFrame:
    """``KRAFT_VOTERS_DIFFER`` ERROR (partition): the ``currentVoters`` of ``data_version`` 0
    files differ, compared as sets."""
    v0 = k.quorum_state.filter((F.col("data_version") == 0) & F.col("current_voters").isNotNull()).select(
        *KEY, F.array_distinct(F.array_sort("current_voters")).alias("voters"))
    per = v0.groupBy(*PARTITION).agg(
        F.array_sort(F.collect_set("voters")).alias("voter_sets"),
        F.array_sort(F.collect_list(F.struct(F.col("replica").alias("node"), "voters"))).alias("by_node"))
    rows = per.filter(F.size("voter_sets") > 1)
    return finding(
        rows, "KRAFT_VOTERS_DIFFER", "ERROR", None, None, None,
        F.format_string("The quorum-state files name %d different voter sets: the controllers disagree on who "
                        "votes.", F.size("voter_sets")),
        F.struct("voter_sets", "by_node"), replica=F.lit(None))


def kraft_findings(k: KRaft, facts: DataFrame) -> DataFrame:
    """Every ``KRAFT_*`` finding; ``facts``: the metadata log replicas' facts (local log
    start, latest epoch of the epoch cache)."""
    return union_all([election_safety(k), epoch_starts(k, facts), invalid_snapshots(k), node_findings(k, facts),
                      voters_differ(k)])

