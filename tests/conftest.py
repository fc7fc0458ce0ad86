"""Shared test fixtures: one session-scoped SparkSession (local[2], 2 shuffle partitions,
UI off, UTC, the settings production gives a small input), and helpers that lay out
snapshot directories."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
DUMPS = FIXTURES / "dumps"


#: The test files, longest first (their time in `scripts/test.sh --durations=60`, setup and
#: calls, 2026-11-27, sixteenth session: 115 s down to 9 s; the rest take a few seconds).
#: They are collected in this order: pytest-xdist's `--dist loadfile` hands files to its
#: two workers in collection order, first a few each, then one to whichever worker is free,
#: so the long ones start early and the workers end within a short file of each other
#: (longest first is the classic greedy schedule; in alphabetical order the last long
#: file ran ~50 s after the other worker had finished).
SLOW_FIRST = ("test_cluster.py", "test_incremental.py", "test_concurrency.py", "test_dump_formats.py",
              "test_snapshot_layout.py", "test_run.py", "test_drill_model.py", "test_checks.py",
              "test_simulator_precision.py", "test_secrets.py", "test_overtime.py", "test_kraft.py",
              "test_report.py", "test_fuzz.py", "test_etcd_rehearsal.py", "test_commit.py", "test_run_end.py",
              "test_seed_cases.py", "test_engine_model.py", "test_large_files.py", "test_tiered.py",
              "test_kraft_simulation.py", "test_etcd.py", "test_classarchive.py", "test_simulator.py",
              "test_bad_values.py", "test_materialise.py", "test_lineage_model.py", "test_checkpoints_describe.py",
              "test_tabular.py", "test_localjar.py", "test_eoe.py")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from auditor.materialise import COLLECT_CONF
    from auditor.spark import SMALL_TABLE_CONF, build_session

    session = build_session("local[2]", app_name="auditor-tests", conf={
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": "2g",
        "spark.sql.adaptive.enabled": "false",  # as in production (auditor.spark)
        # Every test input is small, and `auditor audit` runs a small input without code
        # generation or broadcasts (auditor.run.SMALL_INPUT_CONF): tests that call
        # load_snapshot and audit directly run the same way (and a third faster: compiling
        # each query's generated code was most of their time). Two shuffle partitions
        # instead of production's one keep results that depended on partitioning visible.
        # The large-input path has its own tests, under `large_input`.
        **{k: v for k, v in SMALL_TABLE_CONF.items() if v is not None},
        # ... and its cut points collected by the driver, not written by Spark (as there)
        COLLECT_CONF: "true",
    })
    yield session


@contextlib.contextmanager
def large_input(spark: object) -> Iterator[None]:
    """Run the block with the settings a large input runs with (the session's base settings,
    else Spark's own: code generation on, the broadcasts the code asks for, cut points
    written by Spark), instead of the session's small-input ones; and every stored frame
    read back by a Parquet scan, as a large input's frames are (none is small enough to
    become a local relation)."""
    from auditor import materialise
    from auditor.spark import BASE_CONF, SMALL_TABLE_CONF, session_conf

    rows = materialise.SMALL_FRAME_ROWS
    materialise.SMALL_FRAME_ROWS = -1
    wanted = {**{key: BASE_CONF.get(key) for key in SMALL_TABLE_CONF}, materialise.COLLECT_CONF: None}
    try:
        with session_conf(spark, wanted):  # type: ignore[arg-type]
            yield
    finally:
        materialise.SMALL_FRAME_ROWS = rows


def production_audit(snap, *args, **kwargs):  # type: ignore[no-untyped-def]
    """``auditor.audit`` of a loaded snapshot as ``auditor audit`` runs it: the work after the
    scan with the replica-sized settings (``auditor.spark.replica_sized``: one partition, its
    shuffles coalesces). Tests of fixed cases use it (a third faster than the session's two
    partitions); the model tests (``test_engine_model``, ``test_drill_model``'s small-input
    way) call ``audit`` in the session's two-partition settings, so results that would
    depend on partitioning stay visible there."""
    from auditor import audit
    from auditor.spark import replica_sized

    with replica_sized(snap.summaries.sparkSession, snap.replica_estimate):
        return audit(snap, *args, **kwargs)


def write(path: Path, text: str) -> Path:
    """Write ``text`` to ``path``, creating folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def checkpoint(entries: list[tuple[object, ...]], version: int = 0, count: int | None = None) -> str:
    """Text of a Kafka checkpoint file with ``entries`` (one tuple per line)."""
    n = len(entries) if count is None else count
    return "\n".join([str(version), str(n), *(" ".join(str(x) for x in e) for e in entries)]) + "\n"


def copy_fixture(name: str, dest: Path) -> Path:
    """Copy a dump fixture into ``dest`` (a folder), keeping its name."""
    dest.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(DUMPS / name, dest / name))


def physical_lines(path: Path) -> int:
    """Number of lines as a text reader sees them (a last line without newline counts)."""
    data = path.read_bytes()
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


@pytest.fixture()
def chdir_tmp(tmp_path: Path) -> Iterator[Path]:
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(old)
