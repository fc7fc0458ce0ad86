"""The small files of a Kafka snapshot (checkpoints, the describe file, KRaft's quorum
files): what the scan's job stores of them, and their line counts and quarantined lines."""

from __future__ import annotations

from pyspark.sql import DataFrame

from auditor import columns as F
from auditor.columns import col, lit
from auditor.frames import local_frame
from auditor.ingest import discovery as d
from auditor.ingest.checkpoints import ParsedCheckpoints, judge_checkpoints
from auditor.ingest.describe import judge_describe
from auditor.ingest.lines import file_contents, line_counts, read_small_files
from auditor.load import kraft as k
from auditor.load.inputs import Inputs
from auditor.policy import Plan


def small_frames(inputs: Inputs, plan: Plan) -> dict[str, DataFrame]:
    """The scan job's frames of the small files: checkpoints, the describe file and the
    KRaft inputs, each kind read by its own reader (a filter on file_id after one read of
    them all would read every checkpoint file again for each kind: thousands of files for
    the one describe file).

    What is stored of them is each file or line judged, every regular expression applied
    once; their tables are derived in the snapshot cut (at 300,000 checkpoint files and a
    describe line per partition, each table derived here would apply them again). Each
    checkpoint's place is read beside its bytes: no join with the file list; the describe
    file's as a local relation, which joins by broadcast, not a filter over every listed file.
    """
    spark, work_dir, other_files = inputs.spark, inputs.work_dir, inputs.other_files
    collected = inputs.binary.collected
    describes = [(i, f) for i, f in other_files if f.kind == d.DESCRIBE]
    packed = collected.contents if collected is not None else None
    kraft_scan, kraft_lines = k.kraft_scan(spark, inputs.kraft_files, plan, work_dir,
                                           packed if inputs.binary.collected_kraft else None) \
        if inputs.has_kraft else ({}, None)
    contents = file_contents(
        spark, [(i, f) for i, f in other_files if f.kind not in (d.DESCRIBE, *k.KRAFT_KINDS)], placed=True,
        narrow=plan.narrow, spill=work_dir)
    if packed is not None:
        contents = contents.unionByName(packed.filter(col("kind") == d.LEADER_EPOCH))
    return inputs.few({
        "checkpoints": judge_checkpoints(contents),
        "describe": judge_describe(read_small_files(spark, describes, narrow=plan.narrow, spill=work_dir), local_frame(
            spark, [(i, f.rel, f.snapshot, f.broker) for i, f in describes],
            "file_id int, rel string, snapshot timestamp, broker int", narrow=plan.narrow)),
        **({"kraft_lines": kraft_lines} if kraft_lines is not None else {}),
        **kraft_scan,
    })


def small_lines(cps: ParsedCheckpoints, lines: DataFrame) -> dict[str, DataFrame]:
    """``small_counts`` (:func:`line_counts` per file) and ``small_errors`` (the
    ``parse_errors`` rows of quarantined lines) of the checkpoints ``cps`` and the other
    small files' judged lines (``file_id, line_number, disposition, error, shown, snapshot,
    broker, rel``)."""
    return {
        # (a file-level problem of an empty file has no line: it is an error, not a line read)
        "small_counts": cps.counts.unionByName(line_counts(lines.filter(col("line_number").isNotNull()))),
        "small_errors": cps.quarantined.unionByName(lines.filter(col("disposition") == "quarantined")).select(
            "snapshot", "broker", col("rel").alias("file"), "line_number",
            F.when(col("line_number").isNull(), lit(0)).cast("bigint").alias("byte_offset"),
            col("shown").alias("line"), "error"),
    }
