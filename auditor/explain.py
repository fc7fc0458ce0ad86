"""``auditor explain OUT TOPIC-PARTITION``: one partition of a run, in the terminal.

Read from the Delta tables alone (no Spark). Colour on a terminal, plain text otherwise
(``rich`` decides). Shows the leader and why it is the leader (SPEC 4.6), each replica's
offsets, log lineage and epoch cache, each follower's ground-truth divergence and its
truncation round by round under the run's protocol (the EOE answers the findings carry),
and every finding with where docs/contract.md defines its check.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import replace
from typing import IO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from auditor.config import Config
from auditor.errors import UsageError
from auditor.ingest.discovery import is_kraft_folder
from auditor.registry import REGISTRY
from auditor.sinks.runview import PartitionView, RunView, load_run, snapshot_ids

DOC_OF = {c.name: c.doc for c in REGISTRY}
SEVERITY_STYLE = {"CRITICAL": "bold red", "ERROR": "red", "WARNING": "yellow", "INFO": "dim"}

LEADER_REASON = {
    "metadata": "topics-describe.txt names it as the leader",
    "inferred": ("no metadata names a leader: the replica with the highest latest epoch of its epoch cache, "
                 "ties to the higher LEO, then the higher HWM, then the lower broker id"),
    "unknown": "no metadata names a leader and no replica has an epoch: no leader-against-follower check ran",
    "quorum-state": ("the quorum-state files of the highest epoch (or metadata-quorum-status.txt) name it: "
                     "KRaft's metadata log"),
}


def is_output_folder(path: str) -> bool:
    """True for an audit's OUT (it holds a ``runs`` table), False for anything else."""
    return os.path.isdir(os.path.join(path, "runs", "_delta_log"))


def explain_snapshot(snapshot: str, topic: str, partition: int, config: Config,
                     progress: Callable[[str], None] = lambda _: None, file: IO[str] | None = None) -> PartitionView:
    """Audit ``snapshot`` into a temporary OUT (in this process), then explain the partition."""
    from auditor.run import prepare, run_audit
    from auditor.spark import build_session

    progress(f"auditing {snapshot} first (the tables go to a temporary folder)")
    prepared = prepare(snapshot, config)
    spark = build_session(config.master, conf=config.spark_conf, small_input=prepared.policy.small_input,
                          work_parent=config.work_dir)
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory(prefix="auditor-explain-") as out:
        result = run_audit(spark, snapshot, out, replace(config, fail_on="never"), progress=progress,
                           prepared=prepared)
        return explain(out, topic, partition, run_id=result.run_id, file=file)


def parse_topic_partition(text: str) -> tuple[str, int]:
    """``orders-12`` -> ("orders", 12); topic names may hold dashes."""
    m = re.fullmatch(r"(.+)-(\d+)", text)
    if not m:
        raise UsageError(f"{text!r} is not TOPIC-PARTITION (e.g. orders-3)")
    return m.group(1), int(m.group(2))


def explain(out: str, topic: str, partition: int, cluster: str | None = None, run_id: str | None = None,
            file: IO[str] | None = None) -> PartitionView:
    """Print the explanation of ``topic-partition`` in a run of OUT; returns what it shows."""
    view = load_run(out, cluster, run_id)
    p = view.partition(topic, partition)
    render(view, p, Console(file=file, highlight=False, markup=False, emoji=False, soft_wrap=True))
    return p


def render(view: RunView, p: PartitionView, console: Console) -> None:
    s = p.status
    run = view.run
    console.print(Text.assemble((p.name, "bold"), f" in run {view.run_id} of cluster {run['cluster']} "
                                f"(protocol {run['protocol']}, input {run['input']})"))
    kraft = is_kraft_folder(p.topic, p.partition)
    bound = ("committed bound (snapshots, status file's HighWatermark; no file holds this log's HWM) "
             if kraft else "max HWM ")
    console.print(f"snapshot {s['snapshot']}; {s['replica_count']} replica folders; {bound}{s['max_high_watermark']}")
    leader, source = s["leader"], s["leader_source"] or "unknown"
    console.print(Text.assemble(("leader: ", "bold"), (
        f"broker {leader}, epoch {s['leader_epoch']}, LEO {s['leader_log_end_offset']}: " if leader is not None
        else "none: "), LEADER_REASON.get(source, source)))

    table = Table(title="replicas", title_justify="left", show_lines=False)
    for column in ("broker", "role", "ISR", "log start", "LEO", "HWM", "latest epoch", "batches", "status"):
        table.add_column(column)
    for r in p.replicas:
        table.add_row(str(r["replica"]), str(r["role"]), _isr(r["in_isr"]), _n(r["log_start_offset"]),
                      _n(r["log_end_offset"]), _n(r["high_watermark"]), _n(r["latest_epoch"]), _n(r["batch_count"]),
                      str(r["status"]))
    console.print(table)

    console.print(Text("lineage (log: runs of batches of one epoch; cache: leader-epoch-checkpoint"
                       + ("; snapshots: the node's own, as end offset-epoch)" if kraft else ")"), style="bold"))
    for r in p.replicas:
        rows = [x for x in p.lineage if x["replica"] == r["replica"]]
        log = ", ".join(f"e{x['epoch']} [{x['start_offset']}, {x['end_offset']})" for x in rows if x["source"] == "log")
        cache = ", ".join(f"e{x['epoch']}@{x['start_offset']}" for x in rows if x["source"] == "checkpoint")
        console.print(f"  broker {r['replica']}: log {log or 'empty'}")
        console.print(f"  {'':>{len(str(r['replica'])) + 7}} cache {cache or 'none'}")
        if kraft:
            ids = ", ".join(f"{end}-{epoch}" for end, epoch in snapshot_ids(r))
            console.print(f"  {'':>{len(str(r['replica'])) + 7}} snapshots {ids or 'none'}")

    # (KRaft's metadata log is truncated by its own protocol whatever the run's: SPEC 4.7)
    protocol = "kraft" if kraft else run["protocol"]
    console.print(Text(f"followers against the leader (protocol {protocol})", style="bold"))
    followers = [r for r in p.replicas if r["role"] == "follower"]
    if not followers:
        console.print("  none")
    for r in followers:
        div = r["divergence_offset"]
        line = (f"  broker {r['replica']}: ground truth: "
                + (f"diverges from the leader at offset {div}" if div is not None else "no divergence from the leader")
                + "; truncation: "
                + (f"to offset {r['truncation_offset']}, removing {r['records_to_truncate']} records"
                   if r["truncation_offset"] is not None else "removes nothing")
                + f" ({r['truncation_rounds']} rounds with divergence); status {r['status']}")
        console.print(line)
        for x in p.rounds(r["replica"]):
            console.print(f"    round {x.get('round')}: follower asks for epoch {x.get('requested_epoch')}; leader answers "
                          f"(epoch {x.get('leader_epoch')}, end offset {x.get('leader_offset')}); follower's own "
                          f"(epoch {x.get('follower_epoch')}, end offset {x.get('follower_offset')}); truncates to "
                          f"{x.get('effective_offset', x.get('offset'))}")

    console.print(Text(f"findings ({len(p.findings)})", style="bold"))
    if not p.findings:
        console.print("  none")
    for f in p.findings:
        where = f"replica {f['replica']}" if f["replica"] is not None else "partition"
        offsets = "" if f["offset_start"] is None else f", offsets {f['offset_start']}..{f['offset_end']}"
        console.print(Text.assemble(
            (f"  {f['severity']:<8}", SEVERITY_STYLE.get(f["severity"], "")),
            f" {f['check']} ({where}{offsets}){' [suppressed]' if f['suppressed'] else ''}: {f['message']}"
            f"{_place(f)}",
            (f" [{DOC_OF.get(f['check'], 'docs/contract.md#checks')}]", "dim")))


def _place(finding: dict) -> str:
    """Where a damaged batch or tail lies (``CORRUPT_BATCH``: its file and line, or byte
    position in a segment file), from the finding's details; empty for other findings."""
    if finding["check"] != "CORRUPT_BATCH" or not finding.get("details"):
        return ""
    import json

    d = json.loads(finding["details"])
    if not d.get("file"):
        return ""
    at = f" byte {d['byte_offset']}" if d.get("byte_offset") is not None else \
        f" line {d['line_number']}" if d.get("line_number") is not None else ""
    return f" [{d['file']}{at}]"


def _n(value: object) -> str:
    return "-" if value is None else str(value)


def _isr(value: object) -> str:
    return "-" if value is None else ("yes" if value else "no")
