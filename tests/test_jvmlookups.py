"""PySpark's JVM lookups made once per gateway (auditor.jvmlookups): installed in every
session the auditor builds, the same columns and plans, no reflection round trip per call."""

from __future__ import annotations

import py4j.clientserver
import pytest
from pyspark.sql import functions as F

from auditor import jvmlookups

pytestmark = pytest.mark.spark


def test_installed_by_the_session(spark) -> None:  # type: ignore[no-untyped-def]
    import pyspark.sql.classic.column as column
    import pyspark.sql.functions.builtin as builtin

    assert jvmlookups.install() is True, "this PySpark's helpers still have the signatures checked"
    assert builtin._get_jvm_function is jvmlookups._get_jvm_function
    assert column._create_column_from_name is jvmlookups._create_column_from_name
    assert column._to_seq is jvmlookups._to_seq


def test_the_same_columns_with_one_round_trip_per_call(spark, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    sent: list[str] = []
    real = py4j.clientserver.ClientServerConnection.send_command

    def counting(self, command):  # type: ignore[no-untyped-def]
        sent.append(command)
        return real(self, command)

    df = spark.createDataFrame([(1, "x"), (2, "y"), (2, "z")], "a long, b string")

    def build() -> list[tuple[object, ...]]:
        cols = [F.col("a"), F.max("b").alias("m"), F.when(F.col("a") > 1, F.lit("big")).otherwise("small").alias("w")]
        grouped = df.groupBy("a", F.col("a").alias("k")).agg(F.max("b").alias("m"), F.count("*").alias("n"))
        picked = df.select(*cols[:1], F.struct("a", "b").alias("s"), cols[2])
        return [tuple(grouped.columns), tuple(picked.columns), (str(cols[2]),),
                tuple(tuple(r) for r in grouped.orderBy("a").collect())]

    first = build()  # every method looked up once
    monkeypatch.setattr(py4j.clientserver.ClientServerConnection, "send_command", counting)
    again = build()
    monkeypatch.undo()
    assert again == first
    assert first[0] == ("a", "k", "m", "n") and first[3] == ((1, 1, "x", 1), (2, 2, "z", 2))
    assert "CASE WHEN >(a, 1) THEN 'big' ELSE 'small' END AS w" in first[2][0]
    # the JVM's methods are called; no class or member is looked up by reflection again
    reflections = [c.split("\n")[:3] for c in sent if c.startswith("r\n")]
    calls = [c for c in sent if c.startswith("c\n")]
    assert len(calls) > 20 and reflections == [], reflections


def test_keys_keep_their_view() -> None:
    class View:
        """A stand-in for a gateway's JVM view: attribute lookups give nested views."""

        def __init__(self) -> None:
            self.lookups = 0

        def __getattr__(self, name: str) -> object:
            if name.startswith("__"):
                raise AttributeError(name)
            self.lookups += 1
            return self

    view = View()
    a = jvmlookups.static_member(view, "some.Class", "m")
    b = jvmlookups.static_member(view, "some.Class", "m")
    assert a is b is view and view.lookups == 2  # the class, then its member: once
    assert any(v[0] is view for v in jvmlookups._MEMBERS.values())  # kept alive with its entry
