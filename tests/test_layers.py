"""The package's structure: no import cycle among its modules (imports inside functions
counted), and the auditor leaves the process it runs in as it found it."""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _cycles(graph: grimp.ImportGraph, modules: set[str]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root) & modules)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child) & modules))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_module_of_the_package_is_in_an_import_cycle() -> None:
    graph = grimp.build_graph("auditor", cache_dir=None)
    modules = set(graph.modules)
    assert len(modules) > 50 and "auditor.engine.stages" in modules
    assert _cycles(graph, modules) == []
    # (the check finds a cycle made of an import inside a function)
    graph.add_import(importer="auditor.ingest.dumps", imported="auditor.engine.stages")
    assert any("auditor.ingest.dumps" in c for c in _cycles(graph, modules))


def _watched() -> dict[str, object]:
    """The functions of PySpark and py4j that a patch of the host would replace."""
    import py4j.clientserver
    import py4j.java_gateway
    import pyspark.sql.classic.column as classic_column
    import pyspark.sql.column as column
    import pyspark.sql.functions as functions
    import pyspark.sql.functions.builtin as builtin
    import pyspark.sql.utils as utils
    from pyspark.sql import DataFrame

    found = {}
    for owner, names in ((builtin, ["_get_jvm_function", "_invoke_function", "col", "lit"]),
                         (classic_column, ["_to_seq", "_create_column_from_name", "_to_java_column"]),
                         (classic_column.Column, ["cast", "try_cast", "__getattr__", "alias"]),
                         (column.Column, ["cast", "try_cast"]),
                         (functions, ["col", "when", "max"]),
                         (utils, ["get_active_spark_context"]),
                         (py4j.java_gateway.JVMView, ["__getattr__"]),
                         (py4j.java_gateway.JavaClass, ["__getattr__"]),
                         (py4j.clientserver.ClientServerConnection, ["send_command"]),
                         (DataFrame, ["select", "join"])):
        for name in names:
            found[f"{owner.__name__}.{name}"] = owner.__dict__.get(name, getattr(owner, name, None))
    missing = sorted(k for k, v in found.items() if v is None)
    assert not missing, missing
    return found


def _code_file(fn: object) -> str:
    fn = getattr(fn, "__wrapped__", fn)
    code = getattr(fn, "__code__", None)
    return code.co_filename if code is not None else ""


@pytest.mark.spark
def test_the_python_api_patches_nothing_in_the_process(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A notebook that already has a session follows the README's Python API: every
    function of PySpark and py4j it used before is the same object after, and none of them
    was replaced when the auditor was imported (each is defined in PySpark's or py4j's own
    files, not in the auditor's)."""
    import auditor
    from auditor.simulator import simulate
    from auditor.spark import build_session

    simulate(str(tmp_path / "snap"), topics=1, partitions=1, batches=5, seed=3, faults="unclean-election")
    before = _watched()
    assert len(before) >= 20
    package = str(ROOT / "auditor")
    for name, fn in before.items():
        assert not _code_file(fn).startswith(package), name
    assert build_session() is spark
    tables = auditor.audit(auditor.load_snapshot(spark, str(tmp_path / "snap")))
    assert tables["findings"].count() > 0
    after = _watched()
    assert sorted(k for k in before if before[k] is not after[k]) == []
    # (the check sees a replaced function)
    import pyspark.sql.classic.column as classic_column
    original = classic_column._to_seq  # noqa: SLF001
    try:
        classic_column._to_seq = lambda *a: original(*a)  # noqa: SLF001
        assert [k for k, v in _watched().items() if v is not before[k]] == ["pyspark.sql.classic.column._to_seq"]
    finally:
        classic_column._to_seq = original  # noqa: SLF001


#: The one module allowed past 400 lines: ``auditor collect`` is copied to a node and run
#: as one file with the standard library alone (SPEC 3.4), so it cannot be split.
ONE_FILE = {"auditor/collect.py"}


def test_no_module_is_over_400_lines() -> None:
    lengths = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
               for p in (ROOT / "auditor").rglob("*.py")}
    assert len(lengths) > 50
    assert {p: n for p, n in lengths.items() if n > 400 and p not in ONE_FILE} == {}
    assert all(lengths[p] > 400 for p in ONE_FILE), "the exception is still needed"
