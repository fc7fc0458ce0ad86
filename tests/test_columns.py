"""The auditor's own column functions (auditor.columns): the same expressions as PySpark's,
their JVM lookups made once, and PySpark itself left as it is."""

from __future__ import annotations

import collections

import py4j.clientserver
import pytest
from pyspark.sql import functions as PF

from auditor import columns as F

pytestmark = pytest.mark.spark


def test_the_kept_functions_build_what_pysparks_build(spark) -> None:  # type: ignore[no-untyped-def]
    df = spark.createDataFrame([(1, "a", None), (2, None, 3.5)], "x int, s string, d double")
    ours = df.select(
        F.col("x"), F.lit(7).alias("seven"), F.lit(None).alias("nothing"), F.lit("t").alias("t"),
        F.when(F.col("x") == 1, "one").when(F.col("x") == 2, F.col("s")).alias("w"),
        F.coalesce("s", F.lit("none")).alias("c"), F.struct("x", F.col("s")).alias("st"),
        F.array([F.col("x"), F.lit(9)]).alias("a"), F.greatest("x", F.lit(0)).alias("g"),
        F.least("x", F.lit(0)).alias("l"), F.concat(F.col("s"), F.lit("!")).alias("cc"),
        F.size(F.array("x")).alias("n"), F.upper("s").alias("u"))
    theirs = df.select(
        PF.col("x"), PF.lit(7).alias("seven"), PF.lit(None).alias("nothing"), PF.lit("t").alias("t"),
        PF.when(PF.col("x") == 1, "one").when(PF.col("x") == 2, PF.col("s")).alias("w"),
        PF.coalesce("s", PF.lit("none")).alias("c"), PF.struct("x", PF.col("s")).alias("st"),
        PF.array([PF.col("x"), PF.lit(9)]).alias("a"), PF.greatest("x", PF.lit(0)).alias("g"),
        PF.least("x", PF.lit(0)).alias("l"), PF.concat(PF.col("s"), PF.lit("!")).alias("cc"),
        PF.size(PF.array("x")).alias("n"), PF.upper("s").alias("u"))
    assert ours.schema == theirs.schema
    assert sorted(ours.collect()) == sorted(theirs.collect())
    aggs = [F.max("x"), F.min("x"), F.sum("x"), F.count(F.lit(1))]
    assert df.agg(*aggs).collect() == df.agg(PF.max("x"), PF.min("x"), PF.sum("x"), PF.count(PF.lit(1))).collect()
    assert F.col("x") is F.col("x") and F.lit(1) is F.lit(1) and F.lit(1) is not F.lit(True)
    assert F.upper is PF.upper  # every other name is PySpark's own function


def test_a_kept_lookup_costs_no_round_trip(spark, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    sent: collections.Counter[str] = collections.Counter()
    send = py4j.clientserver.ClientServerConnection.send_command

    def counting(self, command, *args, **kwargs):  # type: ignore[no-untyped-def]
        sent[command.split("\n", 1)[0]] += 1
        return send(self, command, *args, **kwargs)

    F.when(F.col("k") > 0, 1)  # every lookup made once
    monkeypatch.setattr(py4j.clientserver.ClientServerConnection, "send_command", counting)
    F.col("k"), F.lit(1)
    assert sum(sent.values()) == 0
    F.when(F.col("k") > 0, 1)
    assert sent["r"] == 0 and sent["c"] > 0, sent  # no reflection: only the calls themselves


def test_a_long_seq_is_made_in_few_round_trips_and_in_order(spark, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    names = [f"c{i}" for i in range(23)]
    df = spark.createDataFrame([tuple(range(23))], ", ".join(f"{n} int" for n in names))
    cols = [F.col(n) for n in names]
    F.struct(*cols[:2])  # every lookup made once
    sent: collections.Counter[str] = collections.Counter()
    send = py4j.clientserver.ClientServerConnection.send_command

    def counting(self, command, *args, **kwargs):  # type: ignore[no-untyped-def]
        sent[command.split("\n", 1)[0]] += 1
        return send(self, command, *args, **kwargs)

    monkeypatch.setattr(py4j.clientserver.ClientServerConnection, "send_command", counting)
    made = F.struct(*cols).alias("s")
    assert sum(sent.values()) <= 12, sent  # py4j's own list conversion: one per element, 23
    monkeypatch.undo()
    assert df.select(made).schema == df.select(PF.struct(*names).alias("s")).schema
    assert df.select(made).first()[0] == tuple(range(23))
    assert df.select(F.struct().alias("e")).schema == df.select(PF.struct().alias("e")).schema
