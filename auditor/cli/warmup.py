"""``auditor warm-up``: record the class-data-sharing archive of the classes an audit's
JVM loads (:mod:`auditor.jvm`), by auditing a tiny simulated snapshot once in a JVM that
writes the archive when it exits."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import auditor.jvm as jvm
from auditor.config import Config
from auditor.run import run_audit
from auditor.simulator import simulate
from auditor.spark import build_session


def build_archive(progress: Callable[[str], None] = print) -> Path | None:
    """Build the archive; returns its path (None when disabled).

    Written to a temporary name and renamed when the JVM has exited, so a reader never
    maps a half-written archive and two concurrent builds cannot mix.

    Raises:
        RuntimeError: a Spark session is already running in this process, or the JVM
            wrote no archive.
    """
    from pyspark import SparkContext

    path = jvm.archive_path()
    if path is None:
        return None
    if SparkContext._active_spark_context is not None:  # noqa: SLF001 - the JVM must be ours to stop
        raise RuntimeError("warm-up needs a fresh process: a Spark session is already running")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    with tempfile.TemporaryDirectory(prefix="auditor-warm-up-") as tmp:
        simulate(os.path.join(tmp, "snapshot"), topics=1, partitions=2, batches=20, faults="unclean-election",
                 seed=1, kraft_controllers=3)
        spark = build_session(quiet=True, small_input=True,
                              extra_java_options=[f"-XX:ArchiveClassesAtExit={partial}", *jvm.QUIET])
        progress("auditing a tiny simulated snapshot to record the classes Spark loads")
        run_audit(spark, os.path.join(tmp, "snapshot"), os.path.join(tmp, "out"),
                  Config(cluster="warm-up", fail_on="never"))
        gateway = SparkContext._gateway  # noqa: SLF001 - the JVM writes the archive as it exits
        spark.stop()
        proc = getattr(gateway, "proc", None)
        gateway.shutdown()
        if proc is not None:
            if proc.stdin is not None:
                proc.stdin.close()  # spark-submit's JVM exits when its stdin closes
            proc.wait(timeout=300)
    if not partial.is_file():
        raise RuntimeError(f"the JVM did not write {partial}")
    os.replace(partial, path)
    return path


def warm_up(force: bool, echo: Callable[[str], None], error: Callable[[str], None]) -> int:
    """What ``auditor warm-up`` does: prune other builds' stale archives, then build this
    build's unless it exists (or ``force``). Returns the exit status."""
    path = jvm.archive_path()
    if path is None:
        echo(f"warm-up: the class archive is off ({jvm.ENV}=0)")
        return 0
    for stale in jvm.prune_stale(path, time.time()):
        echo(f"warm-up: removed another build's class archive, written over {jvm.STALE_ARCHIVE_DAYS} days ago: "
             f"{stale}")
    if path.is_file() and not force:
        echo(f"warm-up: class archive already built: {path}")
        return 0
    started = time.monotonic()
    try:
        built = build_archive(progress=lambda msg: error(f"warm-up: {msg}"))
    except Exception as exc:  # audits still work without the archive
        error(f"warm-up: could not build the class archive ({exc}); audits will start slower")
        return 1
    echo(f"warm-up: class archive written in {time.monotonic() - started:.0f}s: {built}")
    return 0
