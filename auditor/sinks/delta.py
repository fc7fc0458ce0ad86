"""All reads and writes of the output tables: one module, two Delta backends.

Spark's Delta writer when the session has Delta's classes (a cluster started with the
Delta jars), else the ``deltalake`` package from Arrow, so the embedded default works with
no access to Maven. Both declare the schemas of :mod:`auditor.sinks.schemas` explicitly and
write UTC-aware timestamps; both replace exactly one run's rows (``run_id = ...``).
"""

from __future__ import annotations

import logging
import os
from datetime import date
from typing import Protocol

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from auditor.columns import col, lit
from auditor.errors import OutputError
from auditor.sinks.schemas import PARTITION_COLUMNS
from auditor.spark import has_delta_classes

logger = logging.getLogger(__name__)


def arrow_type(dtype: T.DataType) -> pa.DataType:
    """The Arrow type both writers use for a Spark type (timestamps are UTC-aware)."""
    mapping: dict[type[T.DataType], pa.DataType] = {
        T.StringType: pa.string(), T.IntegerType: pa.int32(), T.LongType: pa.int64(),
        T.BooleanType: pa.bool_(), T.DateType: pa.date32(), T.DoubleType: pa.float64(),
        T.TimestampType: pa.timestamp("us", tz="UTC"),
    }
    for spark_type, arrow in mapping.items():
        if isinstance(dtype, spark_type):
            return arrow
    raise TypeError(f"no Arrow mapping for {dtype}")


def arrow_schema(schema: T.StructType) -> pa.Schema:
    """``schema`` as an Arrow schema, nullability included."""
    return pa.schema([pa.field(f.name, arrow_type(f.dataType), f.nullable) for f in schema.fields])


def run_predicate(run_id: str) -> str:
    """SQL predicate selecting one run's rows (run ids are validated to be quote-free)."""
    if "'" in run_id:
        raise ValueError("run_id must not contain quotes")
    return f"run_id = '{run_id}'"


def missing_columns(existing: set[str], schema: T.StructType) -> list[T.StructField]:
    """The columns of ``schema`` a table written by an earlier version lacks (SPEC 6: "more
    may follow"). Both writers add them, nullable, before they write: the table's earlier rows
    read them as null, and every earlier reader ignores them. Only primitive types, which is
    all the output schemas hold."""
    added = [f for f in schema.fields if f.name not in existing]
    for f in added:
        if f.name in PARTITION_COLUMNS or not f.nullable:
            raise OutputError(f"the table lacks column {f.name}, which cannot be added to existing rows")
    return added


Rows = DataFrame | pa.Table


class TableWriter(Protocol):
    """Writes one output table; ``name`` is ``delta-spark`` or ``deltalake``.

    Rows come as a DataFrame or as an Arrow table (the run's stored output, read without
    Spark); each writer takes whichever form it writes from without another Spark job.
    """

    name: str

    def replace_run(self, path: str, rows: Rows, schema: T.StructType, run_id: str) -> None:
        """Replace the rows of ``run_id`` in the table at ``path`` with ``rows``."""

    def append(self, path: str, rows: Rows, schema: T.StructType) -> None:
        """Append ``rows`` to the table at ``path``."""

    def prepare(self, path: str, schema: T.StructType) -> int:
        """Create the table if needed; return its current version (to restore on failure)."""

    def restore(self, path: str, version: int) -> None:
        """Put the table back as it was at ``version``."""


class DeltaRsWriter:
    """``deltalake`` (delta-rs) writer: the output DataFrame goes to the driver as Arrow.

    Output tables are per replica, per finding or per quarantined line, never per batch.
    """

    name = "deltalake"

    def __init__(self) -> None:
        self.rows_written: dict[str, int] = {}

    def _arrow(self, rows: Rows, schema: T.StructType, later: list[pa.Field]) -> pa.Table:
        """``rows`` in ``schema``, then a null column for each of ``later``'s (the columns a
        later version added to the table)."""
        target = arrow_schema(schema)
        table = rows if isinstance(rows, pa.Table) else rows.toArrow()
        columns = [table.column(f.name).cast(f.type) for f in target]
        columns += [pa.nulls(table.num_rows, f.type) for f in later]
        return pa.Table.from_arrays(columns, schema=pa.schema(list(target) + later))

    def _ensure(self, path: str, schema: T.StructType) -> list[pa.Field]:
        """Create the table, or add the columns it lacks; returns the columns it has that
        ``schema`` does not (a later version's, nullable: written as null here)."""
        from deltalake import DeltaTable
        from deltalake.schema import Field, PrimitiveType

        if not DeltaTable.is_deltatable(path):
            os.makedirs(path, exist_ok=True)
            DeltaTable.create(path, schema=arrow_schema(schema), partition_by=list(PARTITION_COLUMNS),
                              mode="ignore")
            return []
        table = DeltaTable(path)
        have = pa.schema(table.schema().to_arrow())
        added = missing_columns(set(have.names), schema)
        if added:
            table.alter.add_columns([Field(f.name, PrimitiveType(f.dataType.typeName()), nullable=True)
                                     for f in added])
        later = [f for f in have if f.name not in schema.fieldNames()]
        for f in later:
            if not f.nullable:
                raise OutputError(f"{path} has column {f.name}, which this version does not write and which "
                                  "cannot be null: it was written by a later version of the auditor")
        return later

    def replace_run(self, path: str, rows: Rows, schema: T.StructType, run_id: str) -> None:
        from deltalake import write_deltalake

        data = self._arrow(rows, schema, self._ensure(path, schema))
        write_deltalake(path, data, mode="overwrite", predicate=run_predicate(run_id),
                        partition_by=list(PARTITION_COLUMNS))
        self.rows_written[path] = data.num_rows

    def append(self, path: str, rows: Rows, schema: T.StructType) -> None:
        from deltalake import write_deltalake

        data = self._arrow(rows, schema, self._ensure(path, schema))
        write_deltalake(path, data, mode="append", partition_by=list(PARTITION_COLUMNS))

    def prepare(self, path: str, schema: T.StructType) -> int:
        from deltalake import DeltaTable

        self._ensure(path, schema)
        return int(DeltaTable(path).version())

    def restore(self, path: str, version: int) -> None:
        from deltalake import DeltaTable

        table = DeltaTable(path)
        if table.version() != version:
            table.restore(version)


class SparkDeltaWriter:
    """Delta Lake's own Spark writer; needs Delta's jars and SQL extension in the session."""

    name = "delta-spark"

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def _ensure(self, path: str, schema: T.StructType) -> None:
        from delta.tables import DeltaTable

        (DeltaTable.createIfNotExists(self.spark).location(path).addColumns(schema)
         .partitionedBy(*PARTITION_COLUMNS).execute())
        existing = set(DeltaTable.forPath(self.spark, path).toDF().columns)
        added = missing_columns(existing, schema)
        if added:
            columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in added)
            quoted = path.replace("`", "``")
            self.spark.sql(f"ALTER TABLE delta.`{quoted}` ADD COLUMNS ({columns})")

    def _frame(self, rows: Rows, schema: T.StructType) -> DataFrame:
        if isinstance(rows, pa.Table):  # the runs row: one row, never log-sized
            return self.spark.createDataFrame(rows.to_pylist(), schema)
        return rows

    def replace_run(self, path: str, rows: Rows, schema: T.StructType, run_id: str) -> None:
        self._ensure(path, schema)
        (self._frame(rows, schema).write.format("delta").mode("overwrite")
         .option("replaceWhere", run_predicate(run_id)).save(path))

    def append(self, path: str, rows: Rows, schema: T.StructType) -> None:
        self._ensure(path, schema)
        self._frame(rows, schema).write.format("delta").mode("append").save(path)

    def prepare(self, path: str, schema: T.StructType) -> int:
        from delta.tables import DeltaTable

        self._ensure(path, schema)
        return int(DeltaTable.forPath(self.spark, path).history(1).select("version").first()[0])

    def restore(self, path: str, version: int) -> None:
        from delta.tables import DeltaTable

        table = DeltaTable.forPath(self.spark, path)
        if int(table.history(1).select("version").first()[0]) != version:
            table.restoreToVersion(version)


def choose_writer(spark: SparkSession) -> TableWriter:
    """Spark's Delta writer when its classes are loaded, else ``deltalake``."""
    if has_delta_classes(spark):
        return SparkDeltaWriter(spark)
    return DeltaRsWriter()


def table_path(out: str, name: str) -> str:
    """Where table ``name`` lives under OUT."""
    return os.path.join(out, name)


def check_writable(out: str) -> None:
    """Create OUT if needed and make sure files can be written there."""
    try:
        os.makedirs(out, exist_ok=True)
        probe = os.path.join(out, ".auditor-write-probe")
        with open(probe, "w", encoding="utf-8") as fh:
            fh.write("ok")
        os.remove(probe)
    except OSError as exc:
        raise OutputError(f"output {out} is not writable: {exc.strerror or exc}") from exc


def read_rows(spark: SparkSession, path: str, schema: T.StructType, cluster: str,
              days: list[date] | None = None) -> DataFrame | None:
    """One cluster's rows of the Delta table at ``path`` (only ``days``' partitions when
    given), or None when there is no such table or no such rows.

    With Delta's classes in the session this is Spark's Delta reader. Without them it asks
    ``deltalake`` for the table's live files in those partitions and reads that Parquet
    with Spark, so history is read by executors and never passes through the driver.
    ``day`` is not returned.
    """

    data_fields = [f for f in schema.fields if f.name not in PARTITION_COLUMNS]
    if has_delta_classes(spark):
        from delta.tables import DeltaTable as SparkDeltaTable

        if not SparkDeltaTable.isDeltaTable(spark, path):
            return None
        df = spark.read.format("delta").load(path).filter(col("cluster") == cluster)
        if days is not None:
            df = df.filter(col("day").isin(*days))
        # a column an earlier version did not write reads as null (the deltalake branch's
        # Parquet read with the declared schema does the same)
        return df.select(*[col(f.name) if f.name in df.columns else lit(None).cast(f.dataType).alias(f.name)
                           for f in data_fields], "cluster")
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(path):
        return None
    filters: list[tuple[str, str, object]] = [("cluster", "=", cluster)]
    if days is not None:
        if not days:
            return None
        filters.append(("day", "in", [d.isoformat() for d in days]))
    files = DeltaTable(path).file_uris(partition_filters=filters)
    if not files:
        return None
    return spark.read.schema(T.StructType(data_fields)).parquet(*files).withColumn("cluster", lit(cluster))
