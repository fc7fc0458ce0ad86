"""Command line: ``auditor audit ...``. A thin click group; pyspark is imported lazily
inside commands so ``auditor --help`` is instant."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import click

from auditor.cli.audit import audit_options, run_from_options
from auditor.errors import AuditorError, InputError, UsageError
from auditor.simulator import ALL_FAULTS
from auditor.simulator.kafka_text import DEFAULT_STYLE, DUMP_STYLES

logger = logging.getLogger("auditor")


@click.group(context_settings={"auto_envvar_prefix": "AUDITOR", "help_option_names": ["-h", "--help"]})
@click.version_option(package_name="log-auditor")
def main() -> None:
    """Audit replicated logs (Kafka, Raft) for divergence, truncation and data loss."""


@main.command("audit")
@audit_options
def audit_command(**kwargs: Any) -> None:
    """Audit SNAPSHOT and write the findings as Delta tables under --out.

    Exit status: 0 clean, 1 when a finding reaches --fail-on, 2 on bad usage or input.
    """
    sys.exit(run_from_options(**kwargs))


@main.command("simulate")
@click.argument("snapshot", type=click.Path(file_okay=False, path_type=str))
@click.option("--brokers", default=3, show_default=True, type=click.IntRange(1), help="Brokers in the cluster.")
@click.option("--topics", default=2, show_default=True, type=click.IntRange(1), help="Topics.")
@click.option("--partitions", default=3, show_default=True, type=click.IntRange(1), help="Partitions per topic.")
@click.option("--batches", default=40, show_default=True, type=click.IntRange(1),
              help="Batches per partition (on the leader, before incidents).")
@click.option("--faults", default="all", show_default=True,
              help="all, none, NAME[=COUNT],... or @FILE.toml with a [faults] table of name = count. "
                   "Names: " + ", ".join(ALL_FAULTS) + ".")
@click.option("--seed", default=1, show_default=True, type=int, help="Random seed: same seed, same snapshot.")
@click.option("--replication-factor", default=3, show_default=True, type=click.IntRange(1))
@click.option("--min-isr", default=2, show_default=True, type=click.IntRange(1), help="min.insync.replicas.")
@click.option("--kafka-version", "dump_style", default=DEFAULT_STYLE, show_default=True,
              type=click.Choice(list(DUMP_STYLES)),
              help="Print dumps as this Kafka release's kafka-dump-log.sh does.")
@click.option("--records", is_flag=True, help="Also print record lines (--deep-iteration; 2.2+ styles).")
@click.option("--segment-batches", default=500, show_default=True, type=click.IntRange(1),
              help="Batches per log segment (one dump file each).")
@click.option("--topic-prefix", default="", help="Prepended to every topic name.")
@click.option("--dump-layout", type=click.Choice(["per-segment", "per-broker"]), default="per-segment",
              show_default=True,
              help="One dump file per segment (in its partition folder), or one multi-section file per "
                   "broker (fewer files: use it from about 10,000 partitions).")
@click.option("--shapes/--no-shapes", default=True, show_default=True,
              help="Give the cluster real clusters' shapes: tiered storage (the second of every three "
                   "topics: old segments remote, not dumped), DeleteRecords (a log start inside the first "
                   "segment, every fourth partition of the others), transactional producers with "
                   "COMMIT/ABORT markers (the third of every three topics) and a compacted "
                   "__consumer_offsets topic.")
@click.option("--kraft-controllers", default=None, type=click.IntRange(0),
              help="Also simulate a KRaft controller quorum of N voters (node ids after the brokers'; every "
                   "broker an observer) and write its __cluster_metadata-0 log, snapshots and quorum-state, "
                   "with the kraft-* faults; 0: none [default: 3 for Kafka 2.8 and later, else 0].")
@click.option("--format", "log_format", type=click.Choice(["dumps", "segments", "collected"]), default="dumps",
              show_default=True,
              help="Write each replica's log as kafka-dump-log.sh text, as Kafka's own segment files "
                   "(<base>.log: the same batches, read by `auditor audit` with no dump step), or as what "
                   "`auditor collect --verify-crc` writes for each node (no segment file written first).")
@click.option("--record-bytes", default=18, show_default=True, type=click.IntRange(12),
              help="Bytes per record on disk (a dump's size: adds it per record; a segment file holds it).")
@click.option("--continue-from", "previous", default=None, type=click.Path(file_okay=False, path_type=str),
              help="Write the next snapshot of the cluster simulated in this earlier snapshot: the same "
                   "history, then --steps more batches per partition and --faults (default: none). The "
                   "cluster's settings come from its simulation.json.")
@click.option("--steps", default=None, type=click.IntRange(0),
              help="With --continue-from: about this many more batches per partition [default: 20].")
@click.pass_context
def simulate_command(ctx: click.Context, snapshot: str, previous: str | None, steps: int | None,
                     **kwargs: Any) -> None:
    """Simulate replication with injected faults and write a snapshot to SNAPSHOT.

    Writes kafka-dump-log.sh text, checkpoint files and topics-describe.txt in the layout
    `auditor audit` reads, plus expected_findings.json: the findings (WARNING and above)
    and follower offsets the simulator knows to be true, and simulation.json: how it was
    made (what --continue-from reads). With --continue-from, files that did not change keep
    the earlier snapshot's modification time, as a broker's rolled segments do.
    """
    from auditor.simulator import continue_simulation, simulate
    from auditor.simulator.kraft_truth import kraft_style_for

    source = click.core.ParameterSource
    given = [name for name in kwargs if ctx.get_parameter_source(name) == source.COMMANDLINE]
    flags = {p.name: max(p.opts, key=len) for p in ctx.command.params}
    try:
        if previous is None:
            if steps is not None:
                raise InputError("--steps needs --continue-from")
            if kwargs["kraft_controllers"] is None:
                kwargs["kraft_controllers"] = 3 if kraft_style_for(kwargs["dump_style"]) is not None else 0
            with click.progressbar(length=kwargs["topics"] * kwargs["partitions"], label="simulating partitions",
                                   file=sys.stderr, show_pos=True) as bar:
                summary = simulate(snapshot, progress=bar.update, **kwargs)
        else:
            fixed = [n for n in given if n != "faults"]
            if fixed:
                raise InputError("with --continue-from the cluster's settings come from its simulation.json: "
                                 + ", ".join(flags[n] for n in fixed) + " cannot be given")
            faults = kwargs["faults"] if "faults" in given else "none"
            summary = continue_simulation(previous, snapshot, 20 if steps is None else steps, faults)
    except (InputError, ValueError) as exc:
        click.echo(f"auditor: error: {exc}", err=True)
        sys.exit(2)
    click.echo(summary.format())


@main.command("collect", context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                          "help_option_names": []}, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def collect_command(args: tuple[str, ...]) -> None:
    """Collect this node's part of a snapshot from its log dirs, read-only (SPEC 3.4).

    auditor collect --broker-id N --log-dirs DIR[,DIR...] --out OUT [--verify-crc]
    [--previous PREV] [--max-read-mb-per-s M] [--bootstrap-server HOST:PORT |
    --bootstrap-controller HOST:PORT]. The same as python3 -m auditor.collect (standard
    library only: its one module runs on a node by itself). --help for the options.
    """
    from auditor import collect

    sys.exit(collect.main(list(args)))


@main.command("report")
@click.argument("out", type=click.Path(exists=True, file_okay=False, path_type=str))
@click.option("--cluster", default=None, help="Cluster to report on [default: the only one in OUT].")
@click.option("--run-id", default=None, help="Run to report on [default: the cluster's latest SUCCEEDED run].")
@click.option("--output", "output", default="report.html", show_default=True,
              type=click.Path(dir_okay=False, path_type=str), help="HTML file to write.")
@click.option("--max-diagrams", default=200, show_default=True, type=click.IntRange(0),
              help="Draw the worst N flagged partitions; list the others.")
def report_command(out: str, cluster: str | None, run_id: str | None, output: str, max_diagrams: int) -> None:
    """Write one self-contained HTML report of a run, read from the Delta tables in OUT.

    Overview, findings by check, the trend over earlier runs, the flagged partitions (an
    unsuppressed finding of WARNING or worse), and a diagram of each: one lane per replica
    along the offset axis, epochs, HWM, LEO, divergence and truncation offsets.
    """
    from auditor.report import write_report

    try:
        view = write_report(output, out, cluster=cluster, run_id=run_id, max_diagrams=max_diagrams)
    except AuditorError as exc:
        click.echo(f"auditor: error: {exc}", err=True)
        sys.exit(2)
    click.echo(f"report of run {view.run_id} ({view.run['cluster']}): {output}")


@main.command("explain")
@click.argument("source", metavar="OUT|SNAPSHOT", type=click.Path(exists=True, file_okay=False, path_type=str))
@click.argument("topic_partition", metavar="[TOPIC-PARTITION]", required=False)
@click.option("--topic", default=None, help="The topic (with --partition; SPEC 7's spelling).")
@click.option("--partition", default=None, type=click.IntRange(0), help="The partition number (with --topic).")
@click.option("--cluster", default=None, help="Cluster [default: the only one in OUT].")
@click.option("--run-id", default=None, help="Run [default: the cluster's latest SUCCEEDED run].")
@click.option("--conf", "conf_file", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="TOML config for auditing a SNAPSHOT (protocol, severities, allowlist).")
def explain_command(source: str, topic_partition: str | None, topic: str | None, partition: int | None,
                    cluster: str | None, run_id: str | None, conf_file: str | None) -> None:
    """Explain one partition in the terminal: its leader and why, each replica's lineage
    and epoch cache, each follower's truncation round by round, and its findings.

    SOURCE is an audit's OUT (a run's tables are read, no Spark) or a SNAPSHOT folder (it
    is audited first, in this process, into a temporary OUT). Name the partition as
    TOPIC-PARTITION (orders-3) or with --topic orders --partition 3.
    """
    from auditor.explain import explain, explain_snapshot, is_output_folder, parse_topic_partition

    try:
        options = topic is not None or partition is not None
        if (topic_partition is not None) == options or (options and (topic is None or partition is None)):
            raise UsageError("name the partition once: TOPIC-PARTITION, or --topic and --partition")
        if topic_partition is not None:
            topic, partition = parse_topic_partition(topic_partition)
        assert topic is not None and partition is not None
        if is_output_folder(source):
            explain(source, topic, partition, cluster=cluster, run_id=run_id)
        else:
            from auditor.config import load_config

            config = load_config(conf_file)
            explain_snapshot(source, topic, partition, config.with_overrides(cluster=cluster),
                             progress=lambda msg: click.echo(msg, err=True))
    except AuditorError as exc:
        click.echo(f"auditor: error: {exc}", err=True)
        sys.exit(2)


@main.command("recover")
@click.argument("out", type=click.Path(exists=True, file_okay=False, path_type=str))
def recover_command(out: str) -> None:
    """Undo the writes of an audit that was killed while writing to OUT.

    Every audit into OUT does this itself before it writes; run it by hand when no audit
    will follow soon, e.g. after a killed re-run of an existing --run-id (whose earlier
    rows stay visible, half replaced, until then). Exit 0 also when there was nothing to do.
    """
    from auditor.errors import OutputError
    from auditor.sinks import commit
    from auditor.sinks.delta import DeltaRsWriter

    try:
        with commit.out_lock(out, holder=f"auditor recover, pid {os.getpid()}",
                             waiting=lambda msg: click.echo(msg, err=True)):
            done = commit.recover(out, DeltaRsWriter(), by="auditor recover")
    except OutputError as exc:
        click.echo(f"auditor: error: {exc}", err=True)
        sys.exit(2)
    click.echo(done or f"{out}: no interrupted run to recover")


@main.command("warm-up")
@click.option("--force", is_flag=True, help="Build the archive again even when it exists.")
def warm_up_command(force: bool) -> None:
    """Record the archive of the classes Spark's JVM loads, so later audits start faster.

    Audits a tiny simulated snapshot once and keeps the JVM's class-data-sharing archive
    in ~/.cache/log-auditor/ (scripts/setup.sh runs this). Audits work without it, only
    slower. AUDITOR_CLASS_ARCHIVE=0 turns it off.
    """
    from auditor.cli.warmup import warm_up

    status = warm_up(force, click.echo, lambda msg: click.echo(msg, err=True))
    if status:
        sys.exit(status)


