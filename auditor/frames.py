"""DataFrames made on the driver and DataFrame helpers every stage uses.

Nothing here starts a job: :func:`local_frame` and :func:`arrow_frame` turn driver-side
rows into a plan, :func:`union_all` and :func:`union_tree` combine frames, and
:func:`aggregate_specs` groups with aggregates over plain columns.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame

from auditor.columns import col

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

#: An aggregate as (result name, aggregate function, its input per row).
Spec = tuple[str, Callable[[Column], Column], Column]


def aggregate_specs(df: DataFrame, keys: Sequence[str], specs: Sequence[Spec]) -> DataFrame:
    """``df`` grouped by ``keys`` with the aggregates of ``specs``. Each input is computed in
    a projection of its own first, so the aggregate reads plain columns: its generated code
    stays small enough for the JIT to compile."""
    inputs = df.select(*keys, *[expr.alias(f"_in_{name}") for name, _, expr in specs])
    return inputs.groupBy(*keys).agg(*[fn(col(f"_in_{name}")).alias(name) for name, fn, _ in specs])


#: Above this many rows, or :data:`LOCAL_BYTES` of Arrow data, driver-side rows are stored
#: as a Parquet file instead of a local relation (:func:`arrow_frame`).
LOCAL_ROWS = 10_000
LOCAL_BYTES = 4 << 20


@functools.cache
def _arrow_schema_takes_timezone() -> bool:
    import inspect

    from pyspark.sql.pandas.types import to_arrow_schema

    return "timezone" in inspect.signature(to_arrow_schema).parameters


def arrow_schema(struct: StructType) -> pa.Schema:
    """The Arrow schema PySpark gives ``struct``, timestamps in UTC, on every PySpark this
    package allows (4.0's ``to_arrow_schema`` makes them UTC by itself, later releases take
    the ``timezone``)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    if _arrow_schema_takes_timezone():
        return to_arrow_schema(struct, timezone="UTC")
    return to_arrow_schema(struct)


def local_frame(spark: SparkSession, rows: Sequence[Sequence[object]], schema: StructType | str, *,
                narrow: bool = False, spill: str | None = None) -> DataFrame:
    """A DataFrame of driver-side rows (file lists, lookup tables), as :func:`arrow_frame`
    makes it."""
    import pyarrow as pa
    from pyspark.sql.types import StructType, _parse_datatype_string

    struct = schema if isinstance(schema, StructType) else _parse_datatype_string(schema)
    assert isinstance(struct, StructType)
    schema_of = arrow_schema(struct)
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in struct.fields]
    table = pa.Table.from_arrays(
        [pa.array(list(col), type=field.type) for col, field in zip(columns, schema_of, strict=True)],
        schema=schema_of)
    return arrow_frame(spark, [table], struct, narrow=narrow, spill=spill)


def arrow_frame(spark: SparkSession, chunks: Iterable[pa.Table], struct: StructType, *,
                narrow: bool = False, spill: str | None = None) -> DataFrame:
    """A DataFrame of driver-side Arrow rows, given as tables of ``struct``'s columns in
    turn (only one chunk is held at a time).

    Up to :data:`LOCAL_ROWS` rows and :data:`LOCAL_BYTES` in one chunk: a local relation
    built through Arrow. The plan holds the rows themselves (``LocalTableScan``), so reading
    or broadcasting them starts no Python worker and no Spark job, where
    ``createDataFrame`` over a Python list is a Python RDD (about a second per use on a cold
    JVM).

    More rows (the file list of a 100,000-partition cluster, its checkpoint files' text) are
    written by pyarrow to a Parquet file in a folder of this process under ``spill`` (the
    run's work dir: on a cluster, a folder the executors see; None: the system's temporary
    folder, which only a local-mode run may use), and read from there: every plan that
    filters or projects a local relation keeps its own copy of the rows as boxed JVM
    objects (Catalyst's ``ConvertToLocalRelation``), which was ~1.3 GB of a 2 GB heap for
    300,000 files.

    Either way in one partition when ``narrow`` (:attr:`auditor.policy.Plan.narrow`).
    """
    import pyarrow.parquet as pq

    schema_of = arrow_schema(struct)
    tables = iter(chunks)
    first = next(tables, None)
    second = next(tables, None) if first is not None else None
    def shaped(df: DataFrame) -> DataFrame:
        return df.coalesce(1) if narrow else df

    if first is None:
        return shaped(spark.createDataFrame(schema_of.empty_table(), struct))
    if second is None and first.num_rows <= LOCAL_ROWS and first.nbytes <= LOCAL_BYTES:
        return shaped(spark.createDataFrame(first.cast(schema_of), struct))
    path = os.path.join(_spill_dir(spill), f"{uuid.uuid4().hex}.parquet")
    with pq.ParquetWriter(path, schema_of) as writer:
        for table in (first, *([second] if second is not None else []), *tables):
            writer.write_table(table.cast(schema_of))
    return shaped(spark.read.schema(struct).parquet(path))


@functools.cache
def _spill_dir(root: str | None) -> str:
    """This process's folder for :func:`arrow_frame`'s Parquet files under ``root``: a work
    dir (:mod:`auditor.workdir`), removed at exit, or by the next audit's sweep when this
    process is killed."""
    from auditor.workdir import new_work_dir

    return new_work_dir(root)


def union_all(frames: Sequence[DataFrame], *, narrow: bool = False) -> DataFrame:
    """The rows of ``frames`` (matched by column name), in one partition when ``narrow``: a
    union of one-partition frames is not one partition to Spark's planner, so every join
    after it would shuffle again."""
    union = union_tree(frames, lambda a, b: a.unionByName(b))
    return union.coalesce(1) if narrow else union


def union_tree(frames: Sequence[DataFrame], union: Callable[[DataFrame, DataFrame], DataFrame]) -> DataFrame:
    """``frames`` (at least one) combined by ``union`` pairwise, level by level, in their
    order: a balanced tree, not a chain.

    Spark analyses every new DataFrame as a whole, and some of its rules
    (``DeduplicateRelations``) walk the whole plan each time. Unioning n frames left to
    right analyses plans of 2, 3, ... n frames; a tree analyses each frame's plan about
    log2(n) times. The rows are the same, in the same order (the optimizer flattens nested
    unions: ``CombineUnions``). Measured 2026-11-28, warm one-partition audits alternating
    in one process: the py4j time of their union calls 1.19-1.46 s as chains, 1.04-1.52 s
    (median 1.10 s) as trees."""
    level = list(frames)
    while len(level) > 1:
        paired = [union(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        level = [*paired, level[-1]] if len(level) % 2 else paired
    return level[0]


