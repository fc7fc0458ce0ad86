"""The per-replica checks of SPEC section 5: those that need only one replica's log and
checkpoints."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window

from auditor import columns as F
from auditor.checks.rows import (
    KEY,
    PARTITION,
    Kind,
    finding,
    findings,
    s,
)
from auditor.columns import col, lit
from auditor.frames import union_all
from auditor.semantics.lineage import BATCH_ORDER


def batch_sequence_checks(batches: DataFrame, scope: DataFrame) -> DataFrame:
    """``OFFSET_GAP``, ``OFFSET_OVERLAP`` and ``EPOCH_REGRESSION`` along each replica's log.

    Args:
        batches: all batches.
        scope: ``PARTITION + [compacted, hmax]`` (``hmax`` = the highest HWM of the partition).
    """
    order = Window.partitionBy(*KEY).orderBy(*BATCH_ORDER)
    before = order.rowsBetween(Window.unboundedPreceding, -1)
    b = batches.join(scope, PARTITION, "left").select(
        *KEY, "base_offset", "last_offset", "epoch", "crc", "file", "line_number",
        F.coalesce(col("compacted"), lit(False)).alias("compacted"), "hmax",
        # the highest offset any earlier batch reached (an overlapping batch can end lower)
        F.max("last_offset").over(before).alias("prev_last"),
        F.max(F.when(col("epoch") >= 0, col("epoch"))).over(before).alias("max_before"),
    )
    below_hmax = col("compacted") & col("hmax").isNotNull() & (col("base_offset") < col("hmax"))
    # a gap is [prev_last + 1, base_offset): on a compacted topic it is the cleaner's (INFO,
    # SPEC 4.5) when it lies wholly below the higher HWM, i.e. it ends at or below it
    gap_below_hmax = col("compacted") & col("hmax").isNotNull() & (col("base_offset") <= col("hmax"))
    gap = Kind(
        col("base_offset") > col("prev_last") + 1, "OFFSET_GAP",
        F.when(gap_below_hmax, "INFO").otherwise("WARNING"),
        col("prev_last") + 1, col("base_offset"), col("epoch"),
        F.format_string("Replica %d has no batch for offsets %d to %d: its log jumps from %d to %d%s.",
                        col("replica"), col("prev_last") + 1, col("base_offset") - 1, col("prev_last"),
                        col("base_offset"),
                        F.when(col("compacted"), lit(" (compacted topic)")).otherwise(lit(""))),
        F.struct("file", "line_number", col("prev_last").alias("previous_last_offset"), "base_offset",
                 "compacted"))
    overlap = Kind(
        (col("base_offset") <= col("prev_last")) & ~below_hmax, "OFFSET_OVERLAP", "ERROR", col("base_offset"),
        col("last_offset") + 1, col("epoch"),
        F.format_string("Replica %d holds a batch at offsets %d-%d that overlaps the previous batch ending at %d.",
                        col("replica"), col("base_offset"), col("last_offset"), col("prev_last")),
        F.struct("file", "line_number", "base_offset", "last_offset", col("prev_last").alias("previous_last_offset")))
    # one finding per batch whose epoch is below an earlier batch's (SPEC 5: per occurrence,
    # the range the batch)
    regression = Kind(
        (col("epoch") >= 0) & (col("epoch") < col("max_before")), "EPOCH_REGRESSION", "ERROR", col("base_offset"),
        col("last_offset") + 1, col("epoch"),
        F.format_string("Replica %d wrote offsets %d to %d in epoch %d after already holding epoch %d.",
                        col("replica"), col("base_offset"), col("last_offset"), col("epoch"), col("max_before")),
        F.struct(col("max_before").alias("earlier_epoch"), "file", "line_number"))
    return findings(b, [gap, overlap, regression])


def corrupt_batches(batches: DataFrame, segments: DataFrame, seg_end: DataFrame) -> DataFrame:
    """``CORRUPT_BATCH``: batches printed ``isvalid: false`` (CRITICAL) and invalid trailing
    bytes (WARNING in the newest segment, a torn read of the active one; else CRITICAL).

    Args:
        batches: the batches of the replicas read whole (every invalid batch is among them).
        segments: the dumped segments.
        seg_end: ``KEY, segment_base_offset, after_last`` (the offset after the segment's last batch).
    """
    bad = batches.filter(col("is_valid") == lit(False))
    invalid = finding(
        bad, "CORRUPT_BATCH", "CRITICAL", col("base_offset"), col("last_offset") + 1, col("epoch"),
        F.format_string("Replica %d holds a batch at offsets %d-%d whose CRC does not match its content (isvalid: false).",
                        col("replica"), col("base_offset"), col("last_offset")),
        # (a segment file's batch is named by its byte position, SPEC 3.3)
        F.struct("file", "line_number", *(["byte_offset"] if "byte_offset" in batches.columns else []), "crc"))
    newest = segments.groupBy(*KEY).agg(F.max("segment_base_offset").alias("newest"))
    torn = (segments.filter(col("invalid_bytes") > 0).join(newest, KEY, "left")
            .join(seg_end, [*KEY, "segment_base_offset"], "left"))
    is_newest = col("segment_base_offset").eqNullSafe(col("newest"))
    trailing = finding(
        torn, "CORRUPT_BATCH", F.when(is_newest, "WARNING").otherwise("CRITICAL"),
        F.coalesce(col("after_last"), col("segment_base_offset")), None, None,
        F.format_string("Replica %d's segment %s ends with %d invalid bytes%s.", col("replica"),
                        s("segment_base_offset"), col("invalid_bytes"),
                        F.when(is_newest, lit(" (the active segment: probably a torn read)"))
                        .otherwise(lit(" in a segment that is no longer written"))),
        F.struct("file", "line_number", *(["byte_offset"] if "byte_offset" in segments.columns else []),
                 "invalid_bytes", "segment_base_offset", is_newest.alias("newest_segment")))
    return union_all([invalid, trailing])


def unreadable_wal(problems: DataFrame) -> DataFrame:
    """``CORRUPT_BATCH`` where a member's etcd WAL stops being readable (``--format etcd``:
    :mod:`auditor.ingest.etcd`), from the index the unread part starts at: INFO for a torn
    final record of the member's last WAL file (etcd truncates it on start, ``wal.Repair``),
    CRITICAL for anything else (a CRC mismatch, bytes that are not a record, a broken CRC
    chain or a missing file between two WAL files: etcd refuses to start on it)."""
    where = F.when(col("record_no") >= 0, F.format_string(
        " at record %d (byte %d)", col("record_no") + 1, col("byte_offset"))).otherwise(lit(""))
    return finding(
        problems, "CORRUPT_BATCH", F.when(col("repairable"), "INFO").otherwise("CRITICAL"),
        col("offset"), None, None,
        F.format_string("Replica %d (etcd member %s): its WAL %s stops being readable%s: %s; %s",
                        col("replica"), col("member"), col("file"), where, col("problem"),
                        F.when(col("repairable"), F.format_string(
                            "a torn final write, which etcd drops when the member starts (its log ends at index %d)",
                            col("offset") - 1))
                        .otherwise(F.format_string(
                            "etcd refuses to start on this WAL, and nothing from index %d on can be read",
                            col("offset")))),
        F.struct("member", "file", F.when(col("record_no") >= 0, col("record_no") + 1).alias("record"),
                 "byte_offset", "problem", "torn", col("last_file").alias("last_wal_file")))


def epoch_cache_mismatches(checkpoint: DataFrame, rebuilt: DataFrame, facts: DataFrame,
                           scope: DataFrame) -> DataFrame:
    """``EPOCH_CACHE_MISMATCH`` of a usable ``leader-epoch-checkpoint`` against the cache
    rebuilt from the replica's own log (SPEC 5), one finding per mismatching entry.

    Args:
        checkpoint: the file's entries (``KEY, epoch, start_offset, file``), usable files only.
        rebuilt: the cache rebuilt from the log (``KEY, epoch, start_offset``).
        facts: per replica ``log_start_offset``, ``local_log_start_offset``, ``log_end_offset``.
        scope: ``PARTITION + [compacted, hmax]``.
    """
    # (SPEC 2: the log is compared from its local log start offset, ``lso``; entries below it
    # describe remote or removed offsets)
    f = facts.select(*KEY, col("local_log_start_offset").alias("lso"), col("log_end_offset").alias("leo"),
                     "log_start_offset")
    nxt = Window.partitionBy(*KEY).orderBy("epoch", "start_offset")
    cp = checkpoint.join(f, KEY).select(
        *KEY, "epoch", "start_offset", "file", "lso", "leo", "log_start_offset",
        F.lead("start_offset").over(nxt).alias("next_start"),
        (F.lead("epoch").over(nxt).isNull()).alias("is_latest"))
    log = rebuilt.select(*KEY, "epoch", col("start_offset").alias("log_start"))
    log_next = Window.partitionBy(*KEY).orderBy("epoch", "start_offset")
    log_first = rebuilt.groupBy(*KEY).agg(
        F.min_by("epoch", F.struct("start_offset", "epoch")).alias("first_log_epoch"))
    joined = cp.join(log, [*KEY, "epoch"], "left").join(log_first, KEY, "left").join(scope, PARTITION, "left")
    compacted_below = F.coalesce(col("compacted"), lit(False)) & col("hmax").isNotNull() & (
        col("start_offset") < col("hmax"))
    at_lso = col("start_offset") == col("lso")
    matches = col("log_start").isNotNull() & (
        (col("log_start") == col("start_offset")) | (at_lso & (col("log_start") <= col("start_offset"))))
    in_log_range = (col("start_offset") >= F.coalesce(col("lso"), lit(0))) & (col("start_offset") < col("leo"))
    above = (col("start_offset") >= col("leo")) & ~(col("is_latest") & (col("start_offset") == col("leo")))
    # the last entry below the local log start is in force there: the log's first epoch
    # (>= 0) must not be lower than that entry's
    in_force = (col("start_offset") < F.coalesce(col("lso"), lit(0))) & (
        col("next_start").isNull() | (col("next_start") > col("lso")))
    end = F.coalesce(col("next_start"), F.greatest(col("leo"), col("start_offset")))
    details = F.struct("file", "epoch", col("start_offset").alias("checkpoint_start"),
                       col("log_start").alias("log_start"), col("leo").alias("log_end_offset"),
                       "log_start_offset", col("lso").alias("local_log_start_offset"))
    wrong = Kind(
        in_log_range & ~matches & ~compacted_below, "EPOCH_CACHE_MISMATCH", "ERROR", col("start_offset"), end,
        col("epoch"),
        F.format_string("Replica %d's leader-epoch-checkpoint says epoch %d starts at %d but its log %s.",
                        col("replica"), col("epoch"), col("start_offset"),
                        F.when(col("log_start").isNull(), lit("has no batch in that epoch"))
                        .otherwise(F.format_string("starts it at %d", col("log_start")))), details)
    stale = Kind(
        in_force & (col("first_log_epoch") < col("epoch")) & ~compacted_below, "EPOCH_CACHE_MISMATCH", "ERROR",
        col("start_offset"), end, col("epoch"),
        F.format_string("Replica %d's leader-epoch-checkpoint says epoch %d is in force at its local log start "
                        "offset %d, but its log's first batch there is in the lower epoch %d.",
                        col("replica"), col("epoch"), col("lso"), col("first_log_epoch")), details)
    beyond = Kind(
        above, "EPOCH_CACHE_MISMATCH", "INFO", col("start_offset"), end, col("epoch"),
        F.format_string("Replica %d's leader-epoch-checkpoint has epoch %d starting at %d, at or past its "
                        "log end offset %d (Kafka drops such entries on load).",
                        col("replica"), col("epoch"), col("start_offset"), col("leo")), details)
    # epochs the log has (at or above the log start offset) that the checkpoint lacks
    cp_epochs = checkpoint.select(*KEY, "epoch").withColumn("_in_cp", lit(True))
    usable = checkpoint.select(*KEY).distinct()
    lacking = (rebuilt.join(usable, KEY).join(cp_epochs, [*KEY, "epoch"], "left").filter(col("_in_cp").isNull())
               .join(f, KEY).join(scope, PARTITION, "left")
               .withColumn("next_start", F.lead("start_offset").over(log_next))
               .filter(col("start_offset") >= F.coalesce(col("lso"), lit(0)))
               .filter(~(F.coalesce(col("compacted"), lit(False)) & col("hmax").isNotNull()
                         & (col("start_offset") < col("hmax")))))
    lacking_f = finding(
        lacking, "EPOCH_CACHE_MISMATCH", "ERROR", col("start_offset"),
        F.coalesce(col("next_start"), col("leo")), col("epoch"),
        F.format_string("Replica %d's log has epoch %d from offset %d but its leader-epoch-checkpoint lacks it.",
                        col("replica"), col("epoch"), col("start_offset")),
        F.struct("epoch", col("start_offset").alias("log_start"), col("leo").alias("log_end_offset"),
                 "log_start_offset", col("lso").alias("local_log_start_offset")))
    return union_all([findings(joined, [wrong, stale, beyond]), lacking_f])


def fact_findings(facts: DataFrame, cache_from_log: bool) -> DataFrame:
    """``HWM_ABOVE_LEO`` and the per-replica ``MISSING_INPUT``, both read off a replica's
    facts, in one projection (:func:`auditor.checks.rows.findings`).

    ``HWM_ABOVE_LEO``: ERROR, CRITICAL on the leader or an ISR/ELR member; not evaluated on
    KRaft's metadata log (SPEC 4.7). ``MISSING_INPUT`` per replica: no dumps, no usable
    epoch checkpoint, no HWM entry, or dumps without epochs (``facts.epochless``); one
    finding per replica naming every gap and the checks it skips.
    """
    kraft = col("kraft") if "kraft" in facts.columns else lit(False)
    reasons = F.filter(F.array(
        F.when(~col("has_dump"), lit("no dump files: every log check skipped")),
        F.when(col("has_dump") & ~col("epoch_file_usable") & (lit(not cache_from_log) | col("has_epoch_file")),
               F.when(col("has_epoch_file"), lit("leader-epoch-checkpoint unusable (see parse_errors): cache rebuilt from the log"))
               .otherwise(lit("no leader-epoch-checkpoint: cache rebuilt from the log"))),
        F.when(col("high_watermark").isNull() & ~kraft,
               lit("no high watermark entry: HWM checks skipped (HWM_ABOVE_LEO, LOG_MATCHING_VIOLATION, "
                     "COMMITTED_DATA_LOSS, ISR_INCOMPLETE)")),
        F.when(F.coalesce(col("epochless"), lit(False)), lit("no epochs in dump: epoch-based checks skipped")),
    ), lambda x: x.isNotNull())
    important = (col("role") == "leader") | F.coalesce(col("in_isr"), lit(False)) | F.coalesce(
        col("in_elr"), lit(False))
    above = Kind(
        (col("high_watermark") > col("log_end_offset")) & ~kraft,
        "HWM_ABOVE_LEO", F.when(important, "CRITICAL").otherwise("ERROR"),
        col("log_end_offset"), col("high_watermark"), None,
        F.format_string("Replica %d's high watermark %d is above its log end offset %d: records it saw "
                        "committed are gone from its log (often a lossy unclean shutdown).",
                        col("replica"), col("high_watermark"), col("log_end_offset")),
        F.struct("high_watermark", "log_end_offset", "role", "in_isr"))
    missing = Kind(
        F.size("reasons") > 0, "MISSING_INPUT", "WARNING", None, None, None,
        F.format_string("Replica %d is missing input: %s.", col("replica"), F.array_join("reasons", "; ")),
        F.struct("reasons", "has_dump", "has_epoch_file", "epoch_file_usable", "high_watermark"))
    return findings(facts.select("*", reasons.alias("reasons")), [above, missing])


def compacted_cache_disagreements(pairs: DataFrame, cache: DataFrame) -> DataFrame:
    """SPEC 4.5: on a compacted topic, below the higher HWM of follower and leader, their
    epoch caches must agree on every entry at or above both log start offsets. Each entry
    only one side has is an ``EPOCH_CACHE_MISMATCH`` of the follower naming the leader.

    Args:
        pairs: from :func:`auditor.checks.pairs.build_pairs` (``replica`` = the follower).
        cache: effective caches (``KEY, epoch, start_offset, log_end_offset``).
    """
    p = pairs.filter(col("compacted") & col("hmax").isNotNull()).select(
        *PARTITION, col("replica").alias("follower"), "leader", "lso", "hmax")
    nxt = Window.partitionBy(*KEY).orderBy("epoch", "start_offset")
    entries = cache.select(
        *KEY, "epoch", "start_offset",
        F.coalesce(F.lead("start_offset").over(nxt), col("log_end_offset")).alias("end_offset"))
    follower = entries.select(*PARTITION, col("replica").alias("follower"), "epoch", "start_offset",
                              col("end_offset").alias("f_end"))
    leader = entries.select(*PARTITION, col("replica").alias("leader"), "epoch", "start_offset",
                            col("end_offset").alias("l_end"))
    f_side = p.join(follower, [*PARTITION, "follower"])
    l_side = p.join(leader, [*PARTITION, "leader"])
    keys = [*PARTITION, "follower", "leader", "lso", "hmax", "epoch", "start_offset"]
    both = f_side.join(l_side, keys, "full")
    scoped = both.filter(
        (col("f_end").isNull() | col("l_end").isNull())
        & (col("start_offset") >= F.coalesce(col("lso"), lit(0))) & (col("start_offset") < col("hmax")))
    only_leader = col("f_end").isNull()
    return finding(
        scoped.withColumn("replica", col("follower")), "EPOCH_CACHE_MISMATCH", "ERROR", col("start_offset"),
        F.coalesce(col("l_end"), col("f_end")), col("epoch"),
        F.format_string("On compacted topic %s, replica %d's epoch cache %s epoch %d at offset %d, unlike leader "
                        "%d's, below their high watermark %d.", col("topic"), col("follower"),
                        F.when(only_leader, lit("lacks")).otherwise(lit("has")), col("epoch"),
                        col("start_offset"), col("leader"), col("hmax")),
        F.struct(col("leader").alias("other_replica"), "epoch", "start_offset",
                 only_leader.alias("only_in_leader_cache"), col("hmax").alias("higher_high_watermark")))
