"""The ``KRAFT_*`` checks of SPEC 4.7, on KRaft's metadata log (small tables: one log per node)."""

from __future__ import annotations

from pyspark.sql import DataFrame

from auditor import columns as F
from auditor.checks.rows import Kind, finding, findings
from auditor.columns import col, lit
from auditor.frames import union_all
from auditor.ingest.kraft import KRaft

KEY = ["snapshot", "topic", "partition", "replica"]
PARTITION = ["snapshot", "topic", "partition"]


def election_safety(k: KRaft) -> DataFrame:
    """``KRAFT_ELECTION_SAFETY`` CRITICAL (partition): in some epoch two nodes name different
    leaders (``quorum-state`` files, or LeaderChange records whose leader id the dump prints).
    One finding per partition, for the lowest such epoch."""
    claims = k.quorum_state.filter(col("leader_id") >= 0).select(
        *KEY, col("leader_epoch").alias("epoch"), "leader_id", lit("quorum-state").alias("source")).unionByName(
        k.batches.filter((col("first_type") == "LeaderChange") & col("leader_id").isNotNull()).select(
            *KEY, "epoch", "leader_id", lit("LeaderChange").alias("source")))
    per_epoch = claims.groupBy(*PARTITION, "epoch").agg(
        F.array_sort(F.collect_set("leader_id")).alias("leaders"),
        F.array_sort(F.collect_set(F.struct(col("replica").alias("node"), col("leader_id").alias("leader"),
                                            "source"))).alias("claims"))
    split = per_epoch.filter(F.size("leaders") > 1)
    lowest = split.groupBy(*PARTITION).agg(F.min("epoch").alias("epoch")).join(split, [*PARTITION, "epoch"])
    return finding(
        lowest, "KRAFT_ELECTION_SAFETY", "CRITICAL", None, None, col("epoch"),
        F.format_string("In epoch %d the nodes name different leaders (%s): two leaders in one epoch break Raft's "
                        "election safety.", col("epoch"), F.array_join(col("leaders").cast("array<string>"), ", ")),
        F.struct("epoch", "leaders", "claims"), replica=lit(None))


def epoch_starts(k: KRaft, facts: DataFrame) -> DataFrame:
    """``KRAFT_EPOCH_START`` ERROR (replica): among a node's batches at or above its local
    log start, the first batch of an epoch (but the first batch's epoch) is not a control
    batch or, where its first record is printed, not LeaderChange; or a batch has epoch 0.
    One finding per epoch; range the batch."""
    lso = facts.select(*KEY, col("local_log_start_offset").alias("lso"))
    held = k.batches.join(lso, KEY).filter(
        (col("base_offset") >= F.coalesce(col("lso"), lit(0))) & (col("epoch") >= 0))
    first = held.groupBy(*KEY).agg(F.min(F.struct("base_offset", "line_number", "file", "epoch")).alias("_f"))
    per_epoch = held.groupBy(*KEY, "epoch").agg(
        F.min(F.struct("base_offset", "line_number", "file", "last_offset", "is_control", "first_type")).alias("_b"))
    b = col("_b")
    not_control = b["is_control"] == lit(False)
    not_leader_change = b["first_type"].isNotNull() & (b["first_type"] != "LeaderChange")
    opens = col("epoch") != col("_f.epoch")
    bad = per_epoch.join(first, KEY).select(
        "*", F.filter(F.array(
            F.when(col("epoch") == 0, lit("a batch in epoch 0, which never has a leader or records")),
            F.when(opens & not_control, lit("the epoch's first batch is not a control batch")),
            F.when(opens & ~not_control & not_leader_change,
                   F.concat(lit("the epoch's first record is "), b["first_type"], lit(", not LeaderChange"))),
        ), lambda x: x.isNotNull()).alias("reasons")).filter(F.size("reasons") > 0)
    return finding(
        bad, "KRAFT_EPOCH_START", "ERROR", b["base_offset"], b["last_offset"] + 1, col("epoch"),
        F.format_string("Node %d's metadata log starts epoch %d at offset %d without a LeaderChange control batch: "
                        "%s.", col("replica"), col("epoch"), b["base_offset"], F.array_join("reasons", "; ")),
        F.struct("reasons", b["file"].alias("file"), b["line_number"].alias("line_number"),
                 b["is_control"].alias("is_control"), b["first_type"].alias("first_record")))


def invalid_snapshots(k: KRaft) -> DataFrame:
    """``KRAFT_SNAPSHOT_INVALID`` ERROR (replica): one finding per invalid snapshot; range
    [O - 1, O), epoch E. A bare copy gives only its id, checked against the node's log."""
    s = k.snapshots
    log = k.batches.select(*KEY, "base_offset", "last_offset", col("epoch").alias("log_epoch"))
    at_end = s.select(*KEY, "end_offset", "epoch").join(log, KEY).filter(
        (col("base_offset") <= col("end_offset") - 1) & (col("last_offset") >= col("end_offset") - 1)
        & (col("log_epoch") != col("epoch"))).groupBy(*KEY, "end_offset", "epoch").agg(
        F.min("log_epoch").alias("log_epoch"))
    dumped = F.coalesce(col("dumped"), lit(False))
    reasons = F.filter(F.array(
        F.when(dumped & (col("batch_count") == 0),
               lit("the snapshot file holds no batch (a zero-length file: KAFKA-15312)")),
        F.when(dumped & (col("batch_count") > 0)
               & ((col("first_control") == lit(False)) | (col("last_control") == lit(False))),
               lit("its first or last batch is not a control batch")),
        F.when(dumped & col("first_type").isNotNull() & (col("first_type") != "SnapshotHeader"),
               F.concat(lit("its first record is "), col("first_type"), lit(", not SnapshotHeader"))),
        F.when(dumped & col("last_type").isNotNull() & (col("last_type") != "SnapshotFooter"),
               F.concat(lit("its last record is "), col("last_type"), lit(", not SnapshotFooter"))),
        F.when(dumped & col("damage").isNotNull(), F.concat(lit("the file is damaged: "), col("damage"))),
        F.when(dumped & (col("other_epochs") > 0),
               F.format_string("%d of its batches are not in the snapshot's epoch", col("other_epochs"))),
        F.when(col("log_epoch").isNotNull(), F.format_string(
            "the node's log holds offset %d in epoch %d, not in the snapshot's epoch", col("end_offset") - 1,
            col("log_epoch"))),
    ), lambda x: x.isNotNull())
    bad = s.join(at_end, [*KEY, "end_offset", "epoch"], "left").select("*", reasons.alias("reasons")).filter(
        F.size("reasons") > 0)
    return finding(
        bad, "KRAFT_SNAPSHOT_INVALID", "ERROR", col("end_offset") - 1, col("end_offset"), col("epoch"),
        F.format_string("Node %d's snapshot %s (end offset %d, epoch %d) is invalid: %s.", col("replica"),
                        col("file"), col("end_offset"), col("epoch"), F.array_join("reasons", "; ")),
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
        "*", F.coalesce(col("quorum_epoch"), lit(0)).alias("state_epoch"))
    missing = Kind(
        (col("local_log_start_offset") > 0)
        & (col("latest_snapshot_end").isNull() | (col("latest_snapshot_end") < col("local_log_start_offset"))),
        "KRAFT_SNAPSHOT_MISSING", "CRITICAL", lit(0), col("local_log_start_offset"), None,
        F.format_string("Node %d's metadata log starts at %d but none of its snapshots ends at or above it: "
                        "offsets below %d exist nowhere on the node (Kafka refuses to start: KAFKA-14240).",
                        col("replica"), col("local_log_start_offset"), col("local_log_start_offset")),
        F.struct("local_log_start_offset", "latest_snapshot_end"))
    behind = Kind(
        col("latest_epoch").isNotNull() & (col("state_epoch") < col("latest_epoch")),
        "KRAFT_QUORUM_STATE_BEHIND", "WARNING", None, None, col("latest_epoch"),
        F.format_string("Node %d's quorum-state is at epoch %d, below epoch %d of its metadata log: Kafka starts it "
                        "unattached, and the file was not written before the log moved on.", col("replica"),
                        col("state_epoch"), col("latest_epoch")),
        F.struct(col("quorum_epoch").alias("quorum_state_epoch"), col("latest_epoch").alias("log_epoch"),
                 col("quorum_epoch").isNull().alias("quorum_state_missing")))
    return findings(rows, [missing, behind])


def voters_differ(k: KRaft) -> DataFrame:
    """``KRAFT_VOTERS_DIFFER`` ERROR (partition): the ``currentVoters`` of ``data_version`` 0
    files differ, compared as sets."""
    v0 = k.quorum_state.filter((col("data_version") == 0) & col("current_voters").isNotNull()).select(
        *KEY, F.array_distinct(F.array_sort("current_voters")).alias("voters"))
    per = v0.groupBy(*PARTITION).agg(
        F.array_sort(F.collect_set("voters")).alias("voter_sets"),
        F.array_sort(F.collect_list(F.struct(col("replica").alias("node"), "voters"))).alias("by_node"))
    rows = per.filter(F.size("voter_sets") > 1)
    return finding(
        rows, "KRAFT_VOTERS_DIFFER", "ERROR", None, None, None,
        F.format_string("The quorum-state files name %d different voter sets: the controllers disagree on who "
                        "votes.", F.size("voter_sets")),
        F.struct("voter_sets", "by_node"), replica=lit(None))


def kraft_findings(k: KRaft, facts: DataFrame) -> DataFrame:
    """Every ``KRAFT_*`` finding; ``facts``: the metadata log replicas' facts (local log
    start, latest epoch of the epoch cache)."""
    return union_all([election_safety(k), epoch_starts(k, facts), invalid_snapshots(k), node_findings(k, facts),
                      voters_differ(k)])

