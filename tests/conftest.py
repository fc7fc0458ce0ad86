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


#: The test files, longest first (their time in `pytest -n 2 --dist loadfile -q
#: --durations=0`, setup, calls and teardown, 2026-12-02: 186 s down to 10 s; the rest take
#: a few seconds). They are collected in this order, and :func:`pytest_configure` sets what
#: pytest-xdist's `--no-loadscope-reorder` sets: its `--dist loadfile` then hands files to its
#: two workers in collection order, first a few each, then one to whichever worker is nearly
#: done, so the long ones start early and the workers end within a short file of each other
#: (longest first is the classic greedy schedule). Without that flag xdist orders files by
#: their number of tests and the longest file started late (a replay of the measured
#: durations through xdist's scheduler: the workers ending 175 s apart).
SLOW_FIRST = ("test_incremental.py", "test_segments_audit.py", "test_drill_model.py", "test_cluster.py",
              "test_concurrency.py", "test_snapshot_layout.py", "test_checks.py", "test_run.py",
              "test_secrets.py", "test_dump_formats.py", "test_report.py", "test_overtime.py",
              "test_kraft.py", "test_fuzz.py", "test_simulator_precision.py", "test_engine_model.py",
              "test_materialise.py", "test_run_end.py", "test_commit.py", "test_etcd_rehearsal.py",
              "test_seed_cases.py", "test_kraft_simulation.py", "test_large_files.py",
              "test_checkpoints_describe.py", "test_tiered.py", "test_simulator.py", "test_bad_values.py",
              "test_etcd.py", "test_jvm.py", "test_collect_rehearsal.py")


def pytest_configure(config: pytest.Config) -> None:
    # (As an option here, not in pyproject.toml's addopts: there a run without xdist,
    # `pytest -p no:xdist`, would stop at an option it does not know.)
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from auditor.policy import SMALL_TABLE_CONF
    from auditor.spark import build_session

    session = build_session("local[2]", app_name="auditor-tests", conf={
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": "2g",
        "spark.sql.adaptive.enabled": "false",  # as in production (auditor.spark)
        # Every test input is small: `load_snapshot` and `audit` plan it as a small input
        # (auditor.policy: no code generation, no broadcasts, one shuffle partition, cut
        # points collected), as `auditor audit` does. The session's own settings, two
        # shuffle partitions, are what a test of results that must not depend on
        # partitioning asks for (AS_SESSION); the large-input path has its own tests, under
        # `large_input`.
        **{k: v for k, v in SMALL_TABLE_CONF.items() if v is not None},
    })
    yield session


def as_session() -> object:
    """The size policy of a test whose load and audit keep the session's own settings
    (two shuffle partitions, frames as Spark makes them), so that results that would depend
    on partitioning stay visible (the model tests)."""
    from auditor.policy import SizePolicy

    return SizePolicy(planned=False)


@contextlib.contextmanager
def large_input(spark: object, **limits: int) -> Iterator[object]:
    """Run the block with the settings a large input runs with (the session's base settings,
    else Spark's own: code generation on, the broadcasts the code asks for), and yield the
    size policy that plans a load as a large input's (cut points written by Spark, every
    stored frame read back by a Parquet scan, the scan not keeping every batch): pass it to
    ``load_snapshot(..., policy=...)``. ``limits``: more :class:`auditor.policy.Limits`."""
    from auditor.policy import SMALL_TABLE_CONF, Limits, SizePolicy, session_conf
    from auditor.spark import BASE_CONF

    policy = SizePolicy(limits=Limits(**{"small_input_bytes": -1, "local_frame_rows": -1, **limits}))
    with session_conf(spark, {key: BASE_CONF.get(key) for key in SMALL_TABLE_CONF}):  # type: ignore[arg-type]
        yield policy


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
