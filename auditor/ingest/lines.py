"""Read many text files as one DataFrame of lines with exact per-file line numbers.

Spark's text source splits big files across tasks and does not number lines. Within one
split, ``monotonically_increasing_id`` is increasing in file order (all rows of a split sit
in one task, in file order), and ``_metadata.file_block_start`` orders the splits of a
file. So a line's position in its file is the pair ``(block_start, mono)``, and one window
per file ordered by that pair gives line numbers and carries values forward (the current
``Dumping`` section, the batch a record line belongs to). Lines are classified and cut to
a few fields before that window, so the one shuffle moves narrow rows; a very large file
is numbered by one task, which sorts (and, if it must, spills) its narrow rows.
"""

from __future__ import annotations

import os
import re
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
from py4j.protocol import Py4JError
from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession, Window
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from auditor import columns as F
from auditor.columns import col, lit
from auditor.errors import InputError
from auditor.frames import LOCAL_BYTES, LOCAL_ROWS, arrow_frame, arrow_schema, local_frame, union_all
from auditor.ingest.discovery import InputFile


def read_text_lines(spark: SparkSession, files: Sequence[tuple[int, InputFile]], *, folders: bool = False,
                    broadcast: bool = True, tails: AbstractSet[int] | None = None,
                    spill: str | None = None, narrow: bool = False) -> DataFrame:
    """Read ``files`` as lines: ``file_id, block_start, mono, text`` (and ``topic,
    partition`` of each file's folder with ``folders``).

    Args:
        spark: the session.
        files: ``(file_id, file)`` pairs; ``file_id`` identifies the file in the result.
        folders, broadcast, tails, spill, narrow: as :func:`with_file_ids` says.

    The pair ``(block_start, mono)`` orders the lines of one file; :func:`number_lines`
    turns it into line numbers. Each line's file is found as :func:`with_file_ids` says.
    """
    if not files:
        return local_frame(spark, [], "file_id int, block_start bigint, mono bigint, text string"
                           + (", topic string, partition int" if folders else "")
                           + (", tails boolean" if tails is not None else ""))
    raw = text_source(spark, files)
    # (block_start, mono) are taken in the scan itself, before any join can move a row.
    return with_file_ids(spark, raw, files, raw.select(
        col("_metadata.file_path").alias("uri"),
        col("_metadata.file_block_start").alias("block_start"),
        F.monotonically_increasing_id().alias("mono"),
        col("value").alias("text"),
    ), folders=folders, broadcast=broadcast, tails=tails, spill=spill, narrow=narrow)


#: Small files up to this size (checkpoints, ``quorum-state``, a small describe output) are
#: read by the driver, which has just listed them; larger ones by Spark's binary file source.
DRIVER_READ_BYTES = 64 << 10

#: What :func:`file_contents` gives.
CONTENTS = StructType([StructField("file_id", IntegerType(), False), StructField("content", BinaryType())])
#: What :func:`file_contents` gives with ``placed``: each file's place beside its bytes.
PLACED_CONTENTS = StructType([
    *CONTENTS.fields, StructField("kind", StringType(), False), StructField("rel", StringType(), False),
    StructField("snapshot", TimestampType(), False), StructField("broker", IntegerType()),
    StructField("log_dir", StringType()), StructField("topic", StringType()), StructField("partition", IntegerType()),
])
#: The place columns of :data:`PLACED_CONTENTS`.
PLACE = tuple(f.name for f in PLACED_CONTENTS.fields[2:])


def read_small_files(spark: SparkSession, files: Sequence[tuple[int, InputFile]], *,
                     narrow: bool = False, spill: str | None = None) -> DataFrame:
    """Read small ``files`` (checkpoints, describe output) as numbered lines:
    ``file_id, line_number, text``.

    Each file is one row of its whole text (:func:`file_contents`), split into lines where
    it is read, so line numbers need no shuffle and no window (the checkpoint files of a
    large cluster number in the hundreds of thousands). Lines end at ``\n``, ``\r\n`` or
    ``\r``, as Spark's text source splits them; a final line terminator does not start an
    empty line, and an empty file has no line. ``narrow``: the frames made on the driver
    are in one partition (:attr:`auditor.policy.Plan.narrow`).
    """
    if not files:
        return local_frame(spark, [], "file_id int, line_number bigint, text string", narrow=narrow)
    return split_lines(file_contents(spark, files, narrow=narrow, spill=spill))


def split_lines(contents: DataFrame) -> DataFrame:
    """``file_id, line_number, text`` of :func:`file_contents` rows (``file_id, content``),
    split as :func:`read_small_files` says."""
    value = col("content").cast("string")
    body = F.regexp_replace(value, r"(\r\n|\r|\n)\z", "")
    split = F.when(value == "", F.array().cast("array<string>")).otherwise(F.split(body, r"\r\n|\r|\n", -1))
    # (posexplode_outer and a filter: for posexplode Spark infers a filter on the array's
    # size and pushes it below the split, which splits every file again for the test)
    return contents.select("file_id", F.posexplode_outer(split).alias("pos", "text")).filter(
        col("pos").isNotNull()).select("file_id", (col("pos") + 1).cast("bigint").alias("line_number"), "text")


def file_contents(spark: SparkSession, files: Sequence[tuple[int, InputFile]], placed: bool = False, *,
                  narrow: bool = False, spill: str | None = None) -> DataFrame:
    """``file_id, content``: each of ``files`` whole, as bytes; with ``placed``, also each
    file's place (:data:`PLACED_CONTENTS`: what discovery says of it), so no join with the
    file list is needed to use it (at 300,000 checkpoint files, each such join sorted them
    all in every frame that used it).

    Files up to :data:`DRIVER_READ_BYTES` are read by the driver and reach Spark as one
    local relation or one Parquet file under ``spill`` (:func:`auditor.frames.arrow_frame`): a cluster's
    300,000 checkpoint files cost Spark's file source ~0.25 ms of task time each (an open
    through Hadoop's checksummed file system, a task slot per ~500 files) and the driver's
    JVM a status call each to list them, where the driver reads them in ~7 us each. Larger
    files are read by Spark's binary file source. Either way the bytes are the file's and
    Spark decodes them, so both give the same lines. ``narrow``: the frames made on the
    driver are in one partition.

    Raises:
        InputError: a file listed by discovery can no longer be read.
    """
    if not files:
        return local_frame(spark, [], PLACED_CONTENTS if placed else CONTENTS, narrow=narrow)
    near = [(i, f) for i, f in files if f.size <= DRIVER_READ_BYTES]
    far = [(i, f) for i, f in files if f.size > DRIVER_READ_BYTES]
    parts = []
    if near:
        parts.append(arrow_frame(spark, _read_by_driver(near, placed), PLACED_CONTENTS if placed else CONTENTS,
                                 narrow=narrow, spill=spill))
    if far:
        # The binary file source: one row per file, without the per-file Hadoop job
        # configuration the text source clones (measured on 10,000 checkpoint files: 3.5 s
        # against 6.5 s for the text source's whole-file mode, 4 ms per file for its lines).
        raw = load_paths(spark.read.format("binaryFile"), [f.path for _, f in far])
        # (each file is a row of its own text: a small file's few lines are cheap to move, and
        # a shuffle join is a stage of the cut's job where a broadcast is a job of its own)
        read = with_file_ids(spark, raw, far, raw.select(col("_metadata.file_path").alias("uri"), "content"),
                             broadcast=False, spill=spill, narrow=narrow)
        if placed:  # (a row per large file: few; a shuffle join, for the reason above)
            read = read.join(local_frame(spark, [(i, *_place(f)) for i, f in far], StructType(
                [PLACED_CONTENTS.fields[0], *PLACED_CONTENTS.fields[2:]]), narrow=narrow, spill=spill), "file_id")
        parts.append(read)
    return union_all(parts, narrow=narrow) if len(parts) > 1 else parts[0]


def _place(f: InputFile) -> tuple[object, ...]:
    return (f.kind, f.rel, f.snapshot, f.broker, f.log_dir, f.topic, f.partition)


#: The driver reads small files in blocks of this many: the first :data:`PROBE_FILES` of
#: a block one after another, the rest by :data:`READ_THREADS` threads when those took
#: more than :data:`SLOW_READ_SECONDS` each (:func:`_read_block`).
READ_BLOCK = 2048
PROBE_FILES = 64
READ_THREADS = 4
#: A read from the page cache takes ~7 us here; one from the disk ~60-140 us.
SLOW_READ_SECONDS = 25e-6


def _read_by_driver(files: Sequence[tuple[int, InputFile]], placed: bool = False) -> Iterator[pa.Table]:
    """The bytes of ``files`` as :data:`CONTENTS` tables (:data:`PLACED_CONTENTS` with
    ``placed``) of at most :data:`LOCAL_ROWS` rows or about :data:`LOCAL_BYTES` each."""
    ids: list[int] = []
    bodies: list[bytes] = []
    size = 0
    chunk: list[InputFile] = []
    with ThreadPoolExecutor(READ_THREADS, thread_name_prefix="auditor-read") as pool:
        for lo in range(0, len(files), READ_BLOCK):
            block = files[lo:lo + READ_BLOCK]
            for (i, f), body in zip(block, _read_block([f for _, f in block], pool), strict=True):
                ids.append(i)
                bodies.append(body)
                chunk.append(f)
                size += len(body)
                if len(ids) >= LOCAL_ROWS or size >= LOCAL_BYTES:
                    yield _contents_table(ids, bodies, chunk if placed else None)
                    ids, bodies, chunk, size = [], [], [], 0
    if ids:
        yield _contents_table(ids, bodies, chunk if placed else None)


def _read_block(block: Sequence[InputFile], pool: ThreadPoolExecutor) -> list[bytes]:
    """The bytes of ``block``'s files, in order. When the first :data:`PROBE_FILES` come
    from the disk (slower than :data:`SLOW_READ_SECONDS` each), the rest are read by the
    pool's threads in contiguous slices: a read waiting on the disk releases the GIL, and
    the 300,000 checkpoint files of a 100,000-partition cluster read from a cold page cache
    took 17.8-19.6 s one by one, 10.2-10.4 s this way. From the page cache one by one is
    faster: threads contending for the GIL over such short calls took twice as long."""
    started = time.perf_counter()
    probe = [_read_file(f) for f in block[:PROBE_FILES]]
    rest = block[PROBE_FILES:]
    if not rest or time.perf_counter() - started <= SLOW_READ_SECONDS * len(probe):
        return probe + [_read_file(f) for f in rest]
    step = -(-len(rest) // READ_THREADS)
    slices = pool.map(lambda k: [_read_file(f) for f in rest[k:k + step]], range(0, len(rest), step))
    return probe + [body for part in slices for body in part]


def _read_file(f: InputFile) -> bytes:
    try:
        with open(f.path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise InputError(f"{f.rel}: listed, then could not be read: {exc.strerror or exc}") from exc


def _contents_table(ids: list[int], bodies: list[bytes], placed: list[InputFile] | None = None) -> pa.Table:
    columns = {"file_id": pa.array(ids, pa.int32()), "content": pa.array(bodies, pa.binary())}
    if placed is not None:
        schema = arrow_schema(PLACED_CONTENTS)
        for name, values in zip(PLACE, zip(*(_place(f) for f in placed), strict=True), strict=True):
            columns[name] = pa.array(values, schema.field(name).type)
    return pa.table(columns)


_VALUE = StructType([StructField("value", StringType())])


def text_source(spark: SparkSession, files: Sequence[tuple[int, InputFile]]) -> DataFrame:
    """Spark's text source over ``files`` (one ``value`` column, a row per line), the path
    list handed to the JVM in one call (:func:`load_paths`)."""
    return load_paths(spark.read.schema(_VALUE).format("text"), [f.path for _, f in files])


def load_paths(reader: DataFrameReader, paths: Sequence[str]) -> DataFrame:
    """``reader.load(paths)``, the path list handed to the JVM in one call.

    PySpark builds the JVM's list of paths one element at a time, a py4j round trip per
    path (with :func:`input_files`, ~3.4 s of the 18.5 s a 10M-line audit of 60,000 files
    spent before its first Spark job). Here the paths travel as one string, split in the
    JVM. (PySpark's own conversion is used when a path holds a line break.)
    """
    if not paths or any("\n" in p for p in paths):
        return reader.load(list(paths))
    try:
        jvm = reader._spark._jvm  # noqa: SLF001 - the JVM's array built in one call
        array = jvm.java.util.regex.Pattern.compile("\n").split("\n".join(paths))
        jdf = reader._jreader.load(array)  # noqa: SLF001 - the JVM reader's load(String...)
    except Py4JError:  # a JVM without those methods: PySpark's own way
        return reader.load(list(paths))
    return reader._df(jdf)  # noqa: SLF001


def input_files(df: DataFrame) -> list[str]:
    """``df.inputFiles()`` in one py4j call: PySpark reads the JVM's array of file URIs one
    element at a time (two round trips per file). A URI holds no line break (it would be
    ``%0A``)."""
    try:
        jvm = df.sparkSession._jvm  # noqa: SLF001
        # (Hadoop's join takes a String[] as it is; py4j matches no varargs of Object)
        joined = jvm.org.apache.hadoop.util.StringUtils.join("\n", df._jdf.inputFiles())  # noqa: SLF001
    except Py4JError:  # a JVM without Hadoop's helper: PySpark's own way
        return list(df.inputFiles())
    return joined.split("\n") if joined else []


def with_file_ids(spark: SparkSession, raw: DataFrame, files: Sequence[tuple[int, InputFile]],
                  rows: DataFrame, *, folders: bool = False, broadcast: bool = True,
                  tails: AbstractSet[int] | None = None, spill: str | None = None,
                  narrow: bool = False) -> DataFrame:
    """``rows`` (read by the scan ``raw`` of ``files``, with its ``_metadata.file_path`` as
    ``uri``) with ``file_id`` in place of ``uri``.

    The URI is looked up as Spark spells it (taken from the scan's own file list, so no
    per-line decoding). A row whose URI is not in that list fails the run with a clear
    error: it is never dropped.

    Args:
        folders: also add ``topic, partition``, the file's folder (the same lookup).
        broadcast: the file list is broadcast (a Spark job of its own), so ``rows`` stay in
            the tasks that read them: for rows that are lines or whole dump files. Without
            it (rows that are small files), the lookup is a shuffle join, a stage of the
            job that needs it.
        tails: also add ``tails``, whether the file's id is in this set (the same lookup).
        spill: where the lookup is stored when it is too large to be rows of the plan (the
            run's work dir: :func:`auditor.frames.arrow_frame`).
        narrow: the lookup is in one partition (:attr:`auditor.policy.Plan.narrow`).
    """
    uri_ids = uri_table(spark, raw, files, folders=folders, tails=tails, spill=spill, narrow=narrow)
    return rows.join(F.broadcast(uri_ids) if broadcast else uri_ids, "uri", "left").select(
        listed_file_id().alias("file_id"), *[c for c in rows.columns if c != "uri"],
        *(["topic", "partition"] if folders else []), *(["tails"] if tails is not None else []))


def uri_table(spark: SparkSession, raw: DataFrame, files: Sequence[tuple[int, InputFile]], *,
              folders: bool = False, tails: AbstractSet[int] | None = None, spill: str | None = None,
              narrow: bool = False) -> DataFrame:
    """``uri, file_id`` (and ``topic, partition``, ``tails``: see :func:`with_file_ids`) of
    each file the scan ``raw`` lists, its URI spelt as ``_metadata.file_path`` spells it: a
    local relation."""
    by_path = {os.path.abspath(f.path): (i, f) for i, f in files}
    by_uri = {}
    for uri in input_files(raw):
        found = by_path.get(uri_to_path(uri))
        if found is not None:
            i, f = found
            by_uri[_metadata_spelling(uri)] = ((i, f.topic, f.partition) if folders else (i,)) + (
                (i in tails,) if tails is not None else ())
    fields = [StructField("uri", StringType(), False), StructField("file_id", IntegerType(), False)]
    if folders:
        fields += [StructField("topic", StringType()), StructField("partition", IntegerType())]
    if tails is not None:
        fields += [StructField("tails", BooleanType(), False)]
    return local_frame(spark, [(uri, *rest) for uri, rest in sorted(by_uri.items())], StructType(fields),
                       spill=spill, narrow=narrow)


def listed_file_id() -> Column:
    """``file_id`` after a left join on :func:`uri_table`; a row of a file the table does not
    list fails the run with a clear error instead of being dropped."""
    return F.coalesce(col("file_id"), F.raise_error(F.concat(
        lit("internal error: Spark read a line of a file it did not list: "), col("uri"))).cast("int"))


def uri_to_path(uri: str) -> str:
    """``file:/a%20b`` or ``file:///a%20b`` -> ``/a b`` (as :func:`local_path` does in Spark)."""
    rest = re.sub(r"^file:(//)?", "", uri)
    return os.path.abspath(urllib.parse.unquote(rest))


def _metadata_spelling(uri: str) -> str:
    """How ``_metadata.file_path`` spells a file the scan lists as ``uri``: the scan lists
    ``file:///p``, the metadata column says ``file:/p``."""
    return re.sub(r"^file:///", "file:/", uri)


def local_path(uri: Column) -> Column:
    """Turn Spark's ``file:/a%20b/c`` file URI into the local path ``/a b/c``."""
    stripped = F.regexp_replace(uri, r"^file:(//)?", "")
    # url_decode is form decoding ('+' means space); a literal '+' in a path stays '+'.
    return F.url_decode(F.regexp_replace(stripped, r"\+", "%2B"))


def position() -> Column:
    """The comparable in-file position of the current line: ``struct(block_start, mono)``."""
    return F.struct(col("block_start"), col("mono"))


def number_lines(df: DataFrame, fill: Sequence[str] = ()) -> DataFrame:
    """Add ``line_number`` (1-based, per file) and forward-filled copies of ``fill`` columns.

    One window per file, ordered by ``(block_start, mono)``: a single shuffle of the
    (already narrow) rows, no second pass over the input. The order is total: ``mono`` is
    unique within a split and ``block_start`` orders the splits of a file.

    Args:
        df: lines with ``file_id, block_start, mono``.
        fill: nullable columns; for each ``c`` the result has ``c_ff``, the last non-null
            value of ``c`` at or before the line, in file order.

    Returns:
        ``df``'s columns plus ``line_number`` and one ``<c>_ff`` per filled column.
    """
    in_file = Window.partitionBy("file_id").orderBy("block_start", "mono")
    running = in_file.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    return df.select(
        *df.columns,
        F.row_number().over(in_file).cast("bigint").alias("line_number"),
        *[F.last(c, ignorenulls=True).over(running).alias(f"{c}_ff") for c in fill],
    )


#: What :func:`line_counts` counts per file.
LINE_COUNTS = ("lines", "lines_parsed", "lines_skipped", "lines_quarantined")


def line_counts(lines: DataFrame) -> DataFrame:
    """Per ``file_id`` of rows with a ``disposition`` (``parsed``, ``skipped`` or
    ``quarantined``): lines read, parsed, skipped and quarantined (:data:`LINE_COUNTS`)."""
    return lines.groupBy("file_id").agg(
        F.count(lit(1)).alias("lines"),
        F.count(F.when(col("disposition") == "parsed", 1)).alias("lines_parsed"),
        F.count(F.when(col("disposition") == "skipped", 1)).alias("lines_skipped"),
        F.count(F.when(col("disposition") == "quarantined", 1)).alias("lines_quarantined"),
    )
