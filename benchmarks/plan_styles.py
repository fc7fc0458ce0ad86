"""Benchmark: what writing the engine's logic in wider steps would save (issue 21's fixed cost).

    .venv/bin/python benchmarks/plan_styles.py [--columns 30] [--reps 6]

One computation over two small stored tables (1,000 and 100 rows), written three ways in one
warm session with the small-input settings (:data:`auditor.policy.SMALL_INPUT_CONF`):

- ``steps``: DataFrame steps one at a time, as most of the engine is written (a
  ``withColumn`` per derived column, a join every five);
- ``wide``: the same with one ``select`` per five columns;
- ``sql``: one SQL statement over temporary views.

Each repetition prints, per style, the seconds to build the DataFrame (analysis, step by
step) and to write it as Parquet (optimizer, physical planning, the job). The first
repetition is cold; compare the later ones. The three results must be equal.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402


def steps(spark: SparkSession, a: str, b: str, n: int) -> DataFrame:
    left, right = spark.read.parquet(a), spark.read.parquet(b)
    d = left.join(right, "k", "left")
    for i in range(n):
        d = d.withColumn(f"c{i}", F.when(F.col("v") > i, F.col("v") + F.col("w") * i).otherwise(F.lit(i)))
        if i % 5 == 4:
            d = d.join(right.select("k", F.col("w").alias(f"w{i}")), "k", "left").filter(F.col(f"c{i}") >= 0)
    return d.groupBy("k").agg(*[F.sum(f"c{i}").alias(f"s{i}") for i in range(n)])


def wide(spark: SparkSession, a: str, b: str, n: int) -> DataFrame:
    left, right = spark.read.parquet(a), spark.read.parquet(b)
    d = left.join(right, "k", "left")
    cols = []
    for i in range(n):
        cols.append(F.when(F.col("v") > i, F.col("v") + F.col("w") * i).otherwise(F.lit(i)).alias(f"c{i}"))
        if i % 5 == 4:
            d = d.select("*", *cols).join(right.select("k", F.col("w").alias(f"w{i}")), "k", "left").filter(
                F.col(f"c{i}") >= 0)
            cols = []
    if cols:
        d = d.select("*", *cols)
    return d.groupBy("k").agg(*[F.sum(f"c{i}").alias(f"s{i}") for i in range(n)])


def sql(spark: SparkSession, a: str, b: str, n: int) -> DataFrame:
    spark.read.parquet(a).createOrReplaceTempView("plan_styles_a")
    spark.read.parquet(b).createOrReplaceTempView("plan_styles_b")
    q = "SELECT plan_styles_a.*, plan_styles_b.w FROM plan_styles_a LEFT JOIN plan_styles_b USING (k)"
    cols: list[str] = []
    for i in range(n):
        cols.append(f"CASE WHEN v > {i} THEN v + w * {i} ELSE {i} END AS c{i}")
        if i % 5 == 4:
            q = f"SELECT q.*, {', '.join(cols)} FROM ({q}) q"
            q = (f"SELECT q.*, bb.w AS w{i} FROM ({q}) q LEFT JOIN (SELECT k, w FROM plan_styles_b) bb USING (k) "
                 f"WHERE c{i} >= 0")
            cols = []
    if cols:
        q = f"SELECT q.*, {', '.join(cols)} FROM ({q}) q"
    return spark.sql(f"SELECT k, {', '.join(f'sum(c{i}) AS s{i}' for i in range(n))} FROM ({q}) GROUP BY k")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--columns", type=int, default=30)
    parser.add_argument("--reps", type=int, default=6)
    args = parser.parse_args()
    from auditor.policy import SMALL_INPUT_CONF, session_conf
    from auditor.spark import build_session

    spark = build_session(quiet=True, small_input=True)
    with tempfile.TemporaryDirectory() as work, session_conf(spark, SMALL_INPUT_CONF):
        a, b = f"{work}/a", f"{work}/b"
        spark.range(1000).selectExpr("id", "id % 7 AS k", "id * 3 AS v").write.parquet(a)
        spark.range(100).selectExpr("id AS k", "id * 2 AS w").write.parquet(b)
        styles = {"steps": steps, "wide": wide, "sql": sql}
        for rep in range(args.reps):
            row: dict[str, object] = {"rep": rep}
            for name, build in styles.items():
                t0 = time.perf_counter()
                df = build(spark, a, b, args.columns)
                t1 = time.perf_counter()
                df.write.mode("overwrite").parquet(f"{work}/out-{name}")
                t2 = time.perf_counter()
                row[f"{name}_build_s"], row[f"{name}_write_s"] = round(t1 - t0, 3), round(t2 - t1, 3)
            print(json.dumps(row), flush=True)
        results = [spark.read.parquet(f"{work}/out-{name}").orderBy("k").collect() for name in styles]
        if any(r != results[0] for r in results[1:]):
            raise SystemExit("the three styles gave different results")


if __name__ == "__main__":
    main()
