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


def _counting(monkeypatch, sent: list[str]) -> None:  # type: ignore[no-untyped-def]
    real = py4j.clientserver.ClientServerConnection.send_command

    def counting(self, command):  # type: ignore[no-untyped-def]
        sent.append(command)
        return real(self, command)

    monkeypatch.setattr(py4j.clientserver.ClientServerConnection, "send_command", counting)


def test_lists_become_the_same_sequences_in_one_call_per_eight(spark, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from auditor import localjar

    if localjar.built_jar() is None:
        pytest.skip("the jar is not built (no javac, or AUDITOR_LOCAL_JAR=0)")
    sc = spark.sparkContext
    assert jvmlookups._has_seqs(sc._jvm), "the session's JVM has the auditor's jar"
    to_seq = jvmlookups.static_member(sc._jvm, jvmlookups.PYTHON_UTILS, "toSeq")
    for n in (0, 1, 7, 8, 9, 16, 17, 30):
        elements = [F.col(f"c{i}")._jc if i % 3 else (None if i % 2 else f"s{i}") for i in range(n)]
        ours = jvmlookups._to_seq(sc, elements)
        assert ours.equals(to_seq(elements)) and ours.size() == n, n
    df = spark.createDataFrame([(1, "x", 2.0)], "a long, b string, c double")
    names = [f"k{i}" for i in range(20)]
    sent: list[str] = []
    _counting(monkeypatch, sent)
    picked = df.select(*[F.col("a").alias(n) for n in names])
    monkeypatch.undo()
    assert picked.columns == names and picked.collect()[0] == tuple([1] * 20)
    calls = [c.split("\n")[2] for c in sent if c.startswith("c\n")]
    # 20 aliases, 3 calls for the sequence (8 + 8 + 4), the select; no ArrayList, no add
    assert calls.count("of") == 1 and calls.count("plus") == 2 and "add" not in calls, calls
    assert not [c for c in sent if c.startswith("i\n")]


def test_a_column_by_name_is_made_once(spark, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    df = spark.createDataFrame([(1, "x"), (2, "y")], "a long, b string")
    other = spark.createDataFrame([(3, "z")], "a long, c string")
    first = F.col("a")
    F.col("b"), F.col("c")  # noqa: B018 (made before counting)
    sent: list[str] = []
    _counting(monkeypatch, sent)
    second = F.col("a")
    rows = df.select("a", F.col("b")).union(other.select(second, "c")).orderBy(first).collect()
    monkeypatch.undo()
    assert first._jc is second._jc  # one JVM column, shared by every query
    assert [tuple(r) for r in rows] == [(1, "x"), (2, "y"), (3, "z")]
    calls = [c.split("\n")[2] for c in sent if c.startswith("c\n")]
    assert "col" not in calls, calls  # a, b and c were made before


def test_a_cast_to_a_type_sends_the_type_made_once(spark, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql.classic.column import Column
    from pyspark.sql.types import (
        ArrayType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    assert Column.cast.__module__ == Column.try_cast.__module__ == "auditor.jvmlookups"
    df = spark.createDataFrame([(1, "7", [1, 2]), (2, "8", None)], "a int, b string, c array<int>")
    pair = StructType([StructField("n", LongType()), StructField("s", StringType())])

    def build() -> tuple[list[str], list[tuple[object, ...]]]:
        cols = [F.col("a").cast(LongType()).alias("a"), F.col("b").try_cast(IntegerType()).alias("b"),
                F.concat("b", F.lit("x")).try_cast(IntegerType()).alias("x"),
                F.col("c").cast(ArrayType(LongType())).alias("c"),
                F.struct("a", "b").cast(pair).alias("p"), F.col("b").cast("int").alias("t")]
        picked = df.select(*cols)
        return [f.simpleString() for f in picked.schema.fields], [tuple(r) for r in picked.orderBy("a").collect()]

    first = build()
    sent: list[str] = []
    _counting(monkeypatch, sent)
    again = build()
    monkeypatch.undo()
    assert again == first
    assert first[0] == ["a:bigint", "b:int", "x:int", "c:array<bigint>", "p:struct<n:bigint,s:string>", "t:int"]
    assert first[1] == [(1, 7, None, [1, 2], (1, "7"), 7), (2, 8, None, None, (2, "8"), 8)]
    calls = [c.split("\n")[2] for c in sent if c.startswith("c\n")]
    # the casts and the select: no session looked up, no type parsed again
    assert "getActiveSession" not in calls and "parseDataType" not in calls and "fromJson" not in calls, calls
    assert calls.count("cast") == 4 and calls.count("try_cast") == 2, calls


def test_a_class_named_through_the_view_is_found_once(spark, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from py4j.java_gateway import JavaClass, JavaPackage

    view = spark.sparkContext._jvm
    first = view.PythonSQLUtils  # through the view's imports (org.apache.spark.sql.api.python.*)
    sent: list[str] = []
    _counting(monkeypatch, sent)
    again = view.PythonSQLUtils
    grouped = spark.createDataFrame([(1, "x"), (1, "y")], "a long, b string").groupBy("a").agg(
        F.to_json(F.struct(F.max("b").alias("m"))).alias("j"))
    package = view.java
    misses = [view.NoSuchClassAnywhere, view.NoSuchClassAnywhere]  # (py4j takes them for packages)
    monkeypatch.undo()
    assert isinstance(first, JavaClass) and again is first
    assert first._fqn == "org.apache.spark.sql.api.python.PythonSQLUtils"
    assert [tuple(r) for r in grouped.collect()] == [(1, '{"m":"y"}')]
    # the class, and every class PySpark names when it builds that query, were found before
    # or are found once; a package and a miss are asked each time
    asked = [c.split("\n")[2] for c in sent if c.startswith("r\nu\n")]
    assert asked.count("PythonSQLUtils") == 0 and asked.count("functions") <= 1, asked
    assert isinstance(package, JavaPackage) and all(isinstance(m, JavaPackage) for m in misses)
    assert "java" in asked and asked.count("NoSuchClassAnywhere") == 2, asked
    assert view.__dict__["PythonSQLUtils"] is first
    assert "java" not in view.__dict__ and "NoSuchClassAnywhere" not in view.__dict__
