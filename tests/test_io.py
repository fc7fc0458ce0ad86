"""Writer selection and the Spark Delta writer's calls (Delta's jars are not on this machine,
so the Spark branch is checked through the calls it makes)."""

from __future__ import annotations

import sys
import types

import pytest

from auditor.sinks import delta as io
from auditor.sinks import schemas

pytestmark = pytest.mark.spark


def test_without_delta_classes_the_deltalake_writer_is_chosen(spark) -> None:  # type: ignore[no-untyped-def]
    from auditor.spark import has_delta_classes

    assert has_delta_classes(spark) is False
    assert io.choose_writer(spark).name == "deltalake"


def test_with_delta_classes_the_spark_writer_is_chosen(spark, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(io, "has_delta_classes", lambda s: True)
    assert io.choose_writer(spark).name == "delta-spark"


class _Recorder:
    def __init__(self, log: list) -> None:  # type: ignore[type-arg]
        self.log = log

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        def call(*args, **kwargs):  # type: ignore[no-untyped-def]
            self.log.append((name, args))
            return self
        return call


def test_spark_writer_declares_schema_and_replaces_one_run(spark, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    created: list = []  # type: ignore[type-arg]
    fake_tables = types.ModuleType("delta.tables")
    # the columns each table has: all of them, but replica_status as an earlier version wrote it
    have = {"/out/findings": schemas.FINDINGS.fieldNames(), "/out/runs": schemas.RUNS.fieldNames(),
            "/out/replica_status": [n for n in schemas.REPLICA_STATUS.fieldNames() if n != "kraft_snapshots"]}

    class DeltaTable:
        @staticmethod
        def createIfNotExists(session):  # type: ignore[no-untyped-def]
            assert session is spark
            return _Recorder(created)

        @staticmethod
        def forPath(session, path):  # type: ignore[no-untyped-def]
            assert session is spark
            return types.SimpleNamespace(toDF=lambda: types.SimpleNamespace(columns=have[path]))

    fake_tables.DeltaTable = DeltaTable  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "delta.tables", fake_tables)
    written: list = []  # type: ignore[type-arg]

    class FakeDF:
        write = _Recorder(written)

    statements: list[str] = []
    monkeypatch.setattr(spark, "sql", statements.append)
    writer = io.SparkDeltaWriter(spark)
    writer.replace_run("/out/findings", FakeDF(), schemas.FINDINGS, "run-7")  # type: ignore[arg-type]
    assert ("location", ("/out/findings",)) in created
    assert ("addColumns", (schemas.FINDINGS,)) in created
    assert ("partitionedBy", ("cluster", "day")) in created and created[-1][0] == "execute"
    assert written == [("format", ("delta",)), ("mode", ("overwrite",)),
                       ("option", ("replaceWhere", "run_id = 'run-7'")), ("save", ("/out/findings",))]
    written.clear()
    writer.append("/out/runs", FakeDF(), schemas.RUNS)  # type: ignore[arg-type]
    assert written == [("format", ("delta",)), ("mode", ("append",)), ("save", ("/out/runs",))]
    assert statements == []
    # a table an earlier version wrote gains the column it lacks before the write
    writer.replace_run("/out/replica_status", FakeDF(), schemas.REPLICA_STATUS, "run-7")  # type: ignore[arg-type]
    assert statements == ["ALTER TABLE delta.`/out/replica_status` ADD COLUMNS (`kraft_snapshots` string)"]


def test_run_predicate_refuses_quotes() -> None:
    assert io.run_predicate("abc-1") == "run_id = 'abc-1'"
    with pytest.raises(ValueError):
        io.run_predicate("x' or '1'='1")


def test_unwritable_output_is_an_output_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from auditor.errors import OutputError

    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OutputError):
        io.check_writable(str(blocker / "out"))
