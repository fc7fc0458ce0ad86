"""A whole simulated cluster: every partition simulated and written one at a time, the
KRaft quorum, the checkpoints and the ground truth (``simulate``), or the next snapshot of
an earlier simulation (``continue_simulation``)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from auditor.errors import InputError
from auditor.simulator.kafka_text import (
    DEFAULT_STYLE,
    DumpStyle,
)

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover - exercised on 3.10 only
    pass
from auditor.simulator.history import (
    PartitionHistory,
    continue_partition,
    simulate_partition,
)
from auditor.simulator.kraft import KRAFT_FAULTS
from auditor.simulator.kraft_truth import kraft_style_for, simulate_quorum
from auditor.simulator.plan import (
    SimulationSummary,
    parse_faults,
    plan_faults,
    topic_names,
    unplaced,
)
from auditor.simulator.shapes import (
    OFFSETS_PARTITIONS,
    OFFSETS_TOPIC,
    is_tiered_topic,
    is_transactional_topic,
    partition_shape,
)
from auditor.simulator.writer import DUMP_LAYOUTS, LOG_FORMATS, SETTINGS_FILE, _Writer


def simulate(root: str | Path, brokers: int = 3, topics: int = 2, partitions: int = 3, batches: int = 40,
             faults: str | None = "all", seed: int = 1, replication_factor: int = 3, min_isr: int = 2,
             dump_style: str = DEFAULT_STYLE, records: bool = False, segment_batches: int = 500,
             topic_prefix: str = "", progress: Callable[[int], None] | None = None,
             dump_layout: str = "per-segment",
             continuations: list[dict[str, object]] | None = None, shapes: bool = True,
             kraft_controllers: int = 0, log_format: str = "dumps", record_bytes: int = 18) -> SimulationSummary:
    """Simulate and write a snapshot under ``root`` (which must not hold one already).

    Args:
        brokers, topics: cluster size; ``partitions`` per topic; ``batches`` per partition
            (on the leader, before incidents).
        faults: fault spec (:func:`parse_faults`).
        topic_prefix: prepended to every topic name (to merge several simulations into one input).
        progress: called with the number of partitions just finished.
        dump_layout: ``per-segment`` (one dump file per segment in its partition folder, as
            ``kafka-dump-log.sh --files <segment>`` prints it) or ``per-broker`` (one
            multi-section file per broker and log dir, holding every segment's dump: far
            fewer files for clusters of 10^4 partitions and more).
        shapes: give fault-free partitions the shapes of a real cluster
            (:func:`partition_shape`): tiered storage on the second of every three topics, a
            log start inside the first segment on every fourth partition of the others; and
            transactional producers, with COMMIT and ABORT markers, on the third of every
            three topics (:func:`transactional_producer`); and a compacted
            ``__consumer_offsets`` topic (:func:`cleaned`).
        log_format: ``dumps`` (``kafka-dump-log.sh`` text, SPEC 3.1) or ``segments`` (Kafka's
            own ``.log`` segment files, 3.3: the same batches, CRCs, sizes and positions,
            a torn write as the bytes of an unfinished batch; the metadata log's segments and
            snapshots too).
        record_bytes: each record's bytes on disk (what a dump's ``size:`` adds per record, and
            what a segment file holds; at least 12).
        kraft_controllers: also simulate a KRaft controller quorum of this many voters (node
            ids after the brokers'; every broker an observer) and write its metadata log
            (:mod:`auditor.simulator.kraft`), with the ``kraft-*`` faults; 0: none.
        continuations: later snapshots of the same cluster, in order: each
            ``{"batches": N, "faults": SPEC}`` adds about N batches per partition and then
            its faults (:func:`continue_simulation` builds them from an earlier snapshot).
    """
    started = time.monotonic()
    if brokers < 1 or topics < 1 or partitions < 1 or batches < 1:
        raise InputError("--brokers, --topics, --partitions and --batches must be at least 1")
    style = DumpStyle(dump_style)
    if records and not style.prints_records:
        raise InputError(f"--records needs a dump style of 2.2 or later (Kafka {dump_style} prints records "
                         "instead of batch lines, without leader epochs)")
    base = Path(root)
    if base.exists() and any(base.iterdir()):
        raise InputError(f"{base} exists and is not empty; simulate writes a fresh snapshot")
    base.mkdir(parents=True, exist_ok=True)
    counts = parse_faults(faults)
    kraft_faults = [f for f in KRAFT_FAULTS if counts.pop(f, 0) > 0]
    kraft_style = kraft_style_for(dump_style)
    if kraft_controllers and kraft_style is None:
        raise InputError(f"--kraft-controllers needs Kafka 2.8 or later (--kafka-version {dump_style} has no KRaft)")
    if kraft_controllers < 0:
        raise InputError("--kraft-controllers must be at least 0")
    rf = min(replication_factor, brokers)
    if topic_prefix and not all(c.isalnum() or c in "._-" for c in topic_prefix):
        raise InputError(f"--topic-prefix {topic_prefix!r}: only letters, digits, '.', '_' and '-' are allowed in topic names")
    names = topic_names(topics, topic_prefix)
    total = topics * partitions
    summary = SimulationSummary(base, brokers, topics, total)
    # where the faults of real clusters' shapes can happen: transactional topics and the
    # consumer offsets topic (transactional offset commits land there) for a zombie
    # transaction, the compacted consumer offsets topic for a cleaner bug
    offsets = list(range(total, total + OFFSETS_PARTITIONS)) if shapes else []
    hosts = {"transactional": [t * partitions + p for t in range(topics) if shapes and is_transactional_topic(t)
                               for p in range(partitions)] + offsets,
             "compacted": offsets}
    plan = plan_faults(counts, total, seed, hosts=hosts)
    later_counts = [parse_faults(str(c["faults"])) for c in continuations or []]
    # the quorum's faults of each later snapshot (the partitions' are planned below)
    later_kraft = [f for more in later_counts for f in KRAFT_FAULTS if more.pop(f, 0) > 0]
    later = [(int(c["batches"]), plan_faults(more, total, seed, f"/continue/{k}", hosts=hosts))  # type: ignore[call-overload]
             for k, (c, more) in enumerate(zip(continuations or [], later_counts))]
    for wanted_counts in (counts, *later_counts):
        summary.faults_skipped.update(unplaced(wanted_counts, hosts))
    if dump_layout not in DUMP_LAYOUTS:
        raise InputError(f"--dump-layout {dump_layout!r}: one of {', '.join(DUMP_LAYOUTS)}")
    if log_format not in LOG_FORMATS:
        raise InputError(f"--format {log_format!r}: one of {', '.join(LOG_FORMATS)}")
    if log_format != "dumps" and records:
        raise InputError(f"--records prints record lines in dumps: it does not apply to --format {log_format}")
    if record_bytes < 12:
        raise InputError("--record-bytes must be at least 12 (a record's fields and four bytes of value)")
    writer = _Writer(base, brokers, style, records, segment_batches, dump_layout, log_format, record_bytes)
    applied: list[dict[str, object]] = []
    index = 0

    def history_of(topic: str, p: int, at: int, compacted: bool = False) -> PartitionHistory:
        """Simulate partition ``p`` of ``topic`` (global index ``at``) through every snapshot,
        and count its faults: applied, or skipped where its state could not host them."""
        replicas = [(at + j) % brokers + 1 for j in range(rf)]
        wanted = plan.get(at, [])
        h = simulate_partition(topic, p, replicas, batches, wanted, seed, min_isr)
        h.compacted = compacted
        for step, (more, later_plan) in enumerate(later):
            continue_partition(h, step, more, later_plan.get(at, []), seed)
            wanted = wanted + later_plan.get(at, [])
        summary.replicas += len(replicas)
        for fault in h.applied:
            summary.faults[fault] += 1
            applied.append({"fault": fault, "topic": topic, "partition": p})
        summary.faults_skipped.update(Counter(wanted) - Counter(h.applied))
        return h

    for t, name in enumerate(names):
        unclean = any("unclean-election" in pl.get(t * partitions + p, [])
                      for pl in [plan, *(lp for _, lp in later)] for p in range(partitions))
        configs = {"min.insync.replicas": str(min(min_isr, rf))}
        if unclean:
            configs["unclean.leader.election.enable"] = "true"
        if shapes and is_tiered_topic(t):
            configs["remote.storage.enable"] = "true"
        if shapes and is_transactional_topic(t):
            writer.transactional_topics.add(name)
        writer.topic(name, partitions, rf, configs)
        for p in range(partitions):
            h = history_of(name, p, index)
            writer.partition(h, partition_shape(t, p, h.applied) if shapes else None)
            index += 1
            if progress:
                progress(1)
    if shapes:
        # every cluster has its consumer offsets topic: compacted, each replica's cleaner on
        # its own below its HWM; the shaped faults' hosts (a cleaner bug, a zombie
        # transaction's offset commits)
        # (with --topic-prefix it is prefixed too, so merged simulations stay apart; its
        # cleanup.policy says it is compacted either way)
        offsets_topic = topic_prefix + OFFSETS_TOPIC
        writer.topic(offsets_topic, OFFSETS_PARTITIONS, rf, {"cleanup.policy": "compact",
                                                             "min.insync.replicas": str(min(min_isr, rf))})
        for p in range(OFFSETS_PARTITIONS):
            writer.partition(history_of(offsets_topic, p, index, compacted=True), "compacted")
            summary.partitions += 1
            index += 1
    if kraft_controllers and kraft_style is not None:
        # a later snapshot continues the quorum's history as the partitions' (about half as
        # many metadata batches as each partition gets)
        quorum, claims, followers, files = simulate_quorum(
            base, kraft_controllers, brokers, batches // 2, [*kraft_faults, *later_kraft], seed, kraft_style,
            more_steps=[int(c["batches"]) // 2 for c in continuations or []], binary=log_format != "dumps")
        writer.kraft(claims, followers, files)
        for fault in quorum.applied:
            summary.faults[fault] += 1
            applied.append({"fault": fault, "topic": kraft_style.topic, "partition": 0})
        summary.faults_skipped.update(Counter([*kraft_faults, *later_kraft]) - Counter(quorum.applied))
        summary.partitions += 1
        summary.replicas += len(quorum.nodes)
    else:
        summary.faults_skipped.update(Counter([*kraft_faults, *later_kraft]))
    writer.close(seed, applied)
    settings = {"brokers": brokers, "topics": topics, "partitions": partitions, "batches": batches,
                "faults": faults, "seed": seed, "replication_factor": replication_factor, "min_isr": min_isr,
                "dump_style": dump_style, "records": records, "segment_batches": segment_batches,
                "topic_prefix": topic_prefix, "dump_layout": dump_layout, "continuations": continuations or [],
                "shapes": shapes, "kraft_controllers": kraft_controllers,
                "log_format": log_format, "record_bytes": record_bytes}
    with open(base / SETTINGS_FILE, "w", encoding="utf-8") as out:
        json.dump({"generator": "auditor simulate", **settings}, out, indent=1)
        out.write("\n")
    summary.batches, summary.files, summary.bytes = writer.batches, writer.summary_files, writer.bytes
    summary.expected_findings = writer.claims_seen
    summary.shapes = writer.shapes_seen
    summary.seconds = time.monotonic() - started
    return summary


def continue_simulation(previous: str | Path, root: str | Path, steps: int, faults: str | None = "none",
                        progress: Callable[[int], None] | None = None) -> SimulationSummary:
    """Write the next snapshot of the cluster simulated in ``previous`` to ``root``: the
    same history, then about ``steps`` more batches per partition and ``faults``.

    Files whose bytes did not change since ``previous`` (rolled segments, untouched
    checkpoints) keep ``previous``'s modification time, as a broker's unchanged files do
    between two collections.

    Raises:
        InputError: ``previous`` is not a snapshot written by ``auditor simulate``.
    """
    prev = Path(previous)
    try:
        settings = json.loads((prev / SETTINGS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{prev} is not a snapshot written by auditor simulate (no readable {SETTINGS_FILE})") from exc
    settings.pop("generator", None)
    parse_faults(faults)  # a bad spec fails before anything is written
    continuations = [*settings.pop("continuations", []), {"batches": steps, "faults": faults or "none"}]
    summary = simulate(root, progress=progress, continuations=continuations, **settings)
    base = Path(root)
    for path in base.rglob("*"):
        old = prev / path.relative_to(base)
        if path.is_file() and old.is_file() and path.name != SETTINGS_FILE:
            st = old.stat()
            if st.st_size == path.stat().st_size and old.read_bytes() == path.read_bytes():
                os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    return summary
