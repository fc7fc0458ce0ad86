"""Read many text files as one DataFrame of lines with exact per-file line numbers.

Spark's text source splits big files across tasks and does not number lines. Within one
split, ``monotonically_increasing_id`` is contiguous and ordered (all rows of a split sit in
one task, in file order), and ``_metadata.file_block_start`` orders the splits of a file. So
a line's position in its file is the pair ``(block_start, mono)``; its line number is the
number of lines in the file's earlier splits plus its rank inside its own split. Both come
from one small aggregate per split, broadcast back: no task ever has to hold a whole file.

Values that must flow forward in file order (the current ``Dumping`` section, the batch a
record line belongs to) are filled the same way: a window per split, plus a carry-in from
the earlier splits of the same file taken from that small per-split table.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from auditor.discovery import InputFile

SPLIT_KEY = ("file_id", "block_start")


def read_text_lines(spark: SparkSession, files: Sequence[tuple[int, InputFile]]) -> DataFrame:
    """Read ``files`` as lines: ``file_id, block_start, mono, text``.

    Args:
        spark: the session.
        files: ``(file_id, file)`` pairs; ``file_id`` identifies the file in the result.

    The pair ``(block_start, mono)`` orders the lines of one file; :func:`number_lines`
    turns it into line numbers.
    """
    schema = StructType([StructField("value", StringType())])
    if not files:
        return spark.createDataFrame([], "file_id int, block_start bigint, mono bigint, text string")
    raw = spark.read.schema(schema).text([f.path for _, f in files])
    file_ids = spark.createDataFrame(
        [(f.path, i) for i, f in files],
        StructType([StructField("path", StringType(), False), StructField("file_id", IntegerType(), False)]),
    )
    return (
        raw.select(
            local_path(F.col("_metadata.file_path")).alias("path"),
            F.col("_metadata.file_block_start").alias("block_start"),
            F.monotonically_increasing_id().alias("mono"),
            F.col("value").alias("text"),
        )
        .join(F.broadcast(file_ids), "path")
        .select("file_id", "block_start", "mono", "text")
    )


def local_path(uri: Column) -> Column:
    """Turn Spark's ``file:/a%20b/c`` file URI into the local path ``/a b/c``."""
    stripped = F.regexp_replace(uri, r"^file:(//)?", "")
    # url_decode is form decoding ('+' means space); a literal '+' in a path stays '+'.
    return F.url_decode(F.regexp_replace(stripped, r"\+", "%2B"))


def position() -> Column:
    """The comparable in-file position of the current line: ``struct(block_start, mono)``."""
    return F.struct(F.col("block_start"), F.col("mono"))


def number_lines(df: DataFrame, fill: Sequence[str] = ()) -> DataFrame:
    """Add ``line_number`` (1-based, per file) and forward-filled copies of ``fill`` columns.

    Args:
        df: lines with ``file_id, block_start, mono``; cache it first, it is read twice.
        fill: nullable columns; for each ``c`` the result has ``c_ff``, the last non-null
            value of ``c`` at or before the line, in file order.

    Returns:
        ``df``'s columns plus ``line_number`` and one ``<c>_ff`` per filled column.
    """
    in_split = (
        Window.partitionBy(*SPLIT_KEY).orderBy("mono")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    filled = df.select("*", *[F.last(c, ignorenulls=True).over(in_split).alias(f"_in_{c}") for c in fill])
    splits = df.groupBy(*SPLIT_KEY).agg(
        F.min("mono").alias("_min_mono"),
        F.count(F.lit(1)).alias("_n"),
        *[F.max_by(F.col(c), F.when(F.col(c).isNotNull(), F.col("mono"))).alias(f"_last_{c}") for c in fill],
    )
    earlier = (
        Window.partitionBy("file_id").orderBy("block_start")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    splits = splits.select(
        *SPLIT_KEY,
        "_min_mono",
        F.coalesce(F.sum("_n").over(earlier), F.lit(0)).cast(LongType()).alias("_before"),
        *[F.last(f"_last_{c}", ignorenulls=True).over(earlier).alias(f"_carry_{c}") for c in fill],
    )
    return filled.join(F.broadcast(splits), list(SPLIT_KEY)).select(
        *df.columns,
        (F.col("_before") + F.col("mono") - F.col("_min_mono") + 1).alias("line_number"),
        *[F.coalesce(F.col(f"_in_{c}"), F.col(f"_carry_{c}")).alias(f"{c}_ff") for c in fill],
    )
