"""``load_snapshot``: one input read into the DataFrames of a
:class:`auditor.ingest.model.Snapshot` (SPEC section 7).

Every input kind ends as the same shape: batch summaries to compare first, and a
:class:`auditor.ingest.batches.BatchSource` to read batch rows from where summaries differ.
Kafka dumps are summarised by the scan as they are read (:mod:`auditor.load.kafka`); the
inputs read as batch rows (``--format table``, etcd's WAL) are summarised from those rows
(:func:`summarised`).
"""

from __future__ import annotations

import dataclasses
import os
from datetime import datetime, timezone

from pyspark.sql import SparkSession

from auditor.errors import UsageError
from auditor.ingest import discovery as d
from auditor.ingest.model import Snapshot
from auditor.load.kafka import load_kafka
from auditor.load.reuse import Reuse
from auditor.materialise import materialise
from auditor.policy import Plan, SizePolicy
from auditor.summarise.scan import summarise_batches
from auditor.workdir import new_work_dir

__all__ = ["Reuse", "load_snapshot", "measure", "summarised"]


def measure(path: str, format: str = "kafka", found: d.Discovery | None = None,  # noqa: A002
            incremental: bool = False, template: SizePolicy | None = None) -> SizePolicy:
    """The size policy of the input at ``path`` (no Spark): from its discovery (Kafka's
    format: the input files' bytes, their dumps' bytes, replicas as partition folders per
    broker), else from the bytes of the files under it. ``template``: the limits and
    planning to use (default: :class:`auditor.policy.SizePolicy`'s)."""
    policy = template or SizePolicy()
    if format == "kafka" and found is not None:
        # (segment files as dumps: a batch row each, whichever the kind; collected log dirs
        # by the segment bytes and partitions their manifests give)
        collected_bytes = sum(cd.segment_bytes for cd in found.collected)
        return policy.with_sizes(
            input_bytes=sum(f.size for f in found.files) + collected_bytes,
            dump_bytes=sum(f.size for f in found.files if f.kind in (d.DUMP, d.SEGMENT)) + collected_bytes,
            replicas=len({(f.snapshot, f.broker, f.topic, f.partition) for f in found.files})
            + sum(cd.partitions for cd in found.collected),
            incremental=incremental)
    total, stack = 0, [path]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue
    return policy.with_sizes(input_bytes=total, dump_bytes=0, replicas=0, incremental=incremental)


def load_snapshot(
    spark: SparkSession,
    path: str,
    format: str = "kafka",  # noqa: A002 - the SPEC's name for it
    snapshot: str | None = None,
    default_snapshot: datetime | None = None,
    work_dir: str | None = None,
    store: tuple[str, str] | None = None,
    found: d.Discovery | None = None,
    reuse: Reuse | None = None,
    policy: SizePolicy | None = None,
    verify_crc: bool = False,
) -> Snapshot:
    """Parse the snapshot (or tables) at ``path`` into DataFrames.

    Args:
        spark: the session.
        path: the SNAPSHOT directory (``--format kafka``) or the tables' directory.
        format: ``kafka`` or ``table``.
        snapshot: the ``--snapshot`` label, if given.
        default_snapshot: label of an unlabelled input (default: now, UTC).
        work_dir: where parsed rows are stored (default: a new temporary directory,
            removed when the process exits).
        store: ``(OUT, cluster)`` of an incremental audit (``--format kafka``): dump files
            whose fingerprint the store knows are read from it, not parsed
            (:mod:`auditor.sinks.store`); what the run parsed is in ``store``.
        found: ``path`` already discovered (``--format kafka``), with ``reuse``, the store's
            answer for its dump files, when ``store`` is given.
        policy: the limits and planning (:class:`auditor.policy.SizePolicy`; its sizes are
            measured here: :func:`measure`). The snapshot keeps the measured policy and the
            plans that follow from it; it is loaded with the parse plan.
        verify_crc: read segment files' batches whole and check their CRCs (SPEC 3.3);
            else v2 batches are read no further than their headers.

    Raises:
        InputError: ``path`` is missing, unreadable, or has no input of the format.
        UsageError: bad or conflicting snapshot labels.
    """
    now = default_snapshot or datetime.now(timezone.utc)
    if format not in ("kafka", "table", "etcd"):
        raise UsageError(f"unknown format {format!r}")
    if format == "kafka":
        found = found or d.discover(path, now, snapshot)
    measured = measure(path, format, found, incremental=store is not None or reuse is not None, template=policy)
    plans = measured.plans(spark)
    work_dir = work_dir or new_work_dir()
    with plans.parse.applied(spark):
        if format == "table":
            from auditor.ingest.tabular import read_tables

            loaded = summarised(read_tables(spark, path, snapshot=snapshot, default_snapshot=now, work_dir=work_dir),
                                plans.parse)
        elif format == "etcd":
            from auditor.ingest.etcd import read_etcd

            loaded = summarised(read_etcd(spark, path, snapshot=snapshot, default_snapshot=now, work_dir=work_dir),
                                plans.parse)
        else:
            assert found is not None
            loaded = load_kafka(spark, found, work_dir, measured, plans, store, reuse, verify_crc=verify_crc)
    return dataclasses.replace(loaded, policy=measured, plans=plans)


def summarised(snapshot: Snapshot, plan: Plan) -> Snapshot:
    """``snapshot``, whose batches are stored batch rows, with their summaries (one cut
    point): the one way from batch rows to what the audit compares first."""
    rows = snapshot.source.stored
    assert rows is not None, "only inputs read as batch rows are summarised from them"
    summaries = materialise({"summaries": summarise_batches(rows)}, snapshot.work_dir, "summaries", plan)["summaries"]
    return dataclasses.replace(snapshot, summaries=summaries)
