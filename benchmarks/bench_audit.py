"""Benchmark: the audit end to end against a Spark floor job over the same files and against
a plain single-threaded Python script, at several input sizes. One JSON line per size.

    .venv/bin/python benchmarks/bench_audit.py [--sizes 1M,3M,10M] [--workdir DIR]
        [--layout per-segment|per-broker] [--no-healthy] [--fixed] [--mix] [--no-kraft] [--keep]
        [--event-log DIR] [--driver-memory 2g]

Each size is a number of batch lines in an ``auditor simulate`` snapshot: 3 replicas per
partition, 333 batches per replica, one partition in 20 diverged by an unclean election
(3.3 dump style). A size may also be given as partitions, e.g. ``10kp`` (10,000 partitions
x 3 replicas, 3 batches each). Every measurement of one line runs on the same files, one
after the other:

- ``wc_s``: ``wc -l`` over every dump file (the floor of reading the text);
- ``spark_floor_s``: the Spark floor job (issue 21), a fresh Spark process with the
  audit's session settings (``auditor.spark.build_session``: the same small-file packing)
  that reads the same files from a driver-built file list, splits each batch line, and
  computes per file: count, min base offset, max last offset and an ``xxhash64`` sum of
  (base, last, epoch, CRC), kept modulo 2^64 as the sums of its 32-bit halves. The answer
  reads every one of those values, so Spark's optimizer cannot prune them (until
  2026-11-28 it read only the counts, and the job measured counted the lines that start
  like a batch line: nothing split, nothing hashed). Process start to answer. Less than
  the audit must do: no line numbers, no sections, no checkpoints, nothing compared;
- ``scan_only_s``: the grammar's floor at this size (:data:`SCAN_ONLY`, as ``--fixed``
  measures it on one partition): a fresh process with the audit's session that discovers
  the snapshot and runs the scan alone (the dump grammar judging every line and the scan's
  aggregate, one job writing to Spark's ``noop`` sink). What the audit does besides that
  (the checkpoint, describe and KRaft files, the comparisons, the drill-downs, the tables)
  is the difference between ``audit_s`` and this; ``scan_only_over_floor`` is about the
  least ``audit_over_floor`` the present grammar allows (an audit runs this scan and more);
- ``python_s``: this script's plain parser, single-threaded: one regular expression per batch
  line, the leader from ``topics-describe.txt``, each follower's divergence from its leader
  (first base offset where their batches differ) and Kafka's epoch truncation
  (``tests/reference.py``);
- ``audit_s``: ``auditor audit`` as a user runs it, process start to tables written;
  ``audit_jobs``: Spark jobs the audit ran; ``audit_peak_rss_mb``: the driver JVM's peak
  resident set (``VmHWM``; in local mode the executors live in it);
- ``healthy_audit_s`` (unless ``--no-healthy``): the audit of the same cluster simulated
  with no fault (same seed and sizes), and ``diverged_over_healthy``;
- ``mix_audit_s`` (with ``--mix``): the audit of the same size simulated with real clusters'
  shapes (``auditor simulate``'s default: tiered storage, DeleteRecords, transactional
  producers, a compacted ``__consumer_offsets``; the plain snapshots use ``--no-shapes``,
  which the plain Python script can follow), checked against its ``expected_findings.json``,
  and ``mix_over_plain``;
- ``no_kraft_audit_s`` (with ``--no-kraft``): the audit of the same cluster simulated with
  no KRaft quorum (``--kraft-controllers 0``; the other snapshots have ``simulate``'s
  3-controller quorum, whose metadata log every broker holds too), and ``kraft_over_none``;
- ``segments_audit_s`` (with ``--segments``): the audit of the same cluster written as Kafka's
  own segment files (``simulate --format segments``: the same batches, no dump step), run
  right after the dumps' audit; ``segments_over_dumps`` and ``segments_over_python``, its
  ``segment_bytes``, ``segments_bytes_read`` (``runs.counts.bytes_read``: headers only) and
  ``segments_bytes_read_per_batch``; the segments' audit must find the followers the
  dumps' audit finds;
- ratios: ``audit_over_floor``, ``audit_over_python`` (below 1: the audit is faster),
  ``audit_over_scan_only``.

With ``--driver-memory SIZE`` each size's floor job, scan alone and audits run with that
driver heap (``spark.driver.memory``; in local mode the executors share it), as issue 21's
100,000 partitions in a 2 GB heap: ``--sizes 100kp --layout per-broker --driver-memory 2g``
(the fixed costs keep the audit's default heap).

With ``--event-log DIR`` every audit also writes Spark's event log (uncompressed) to
``DIR/<label>`` (``1M``, ``1M-healthy``, ``1M-per-broker`` with ``--layout per-broker``, ...):
``benchmarks/event_log.py DIR/1M`` shows its jobs on a timeline, the driver's time between
them and the busiest stages. Writing the log costs the audit a little: compare timings of
runs made the same way.

The Python script and the audit must agree on how many followers diverged.

``--fixed`` first prints one line of fixed costs, measured in the same run: ``bare_spark_s``
(a default SparkSession's start, one job and stop, in a fresh process), ``fixed_floor_s``
(:data:`FIXED_FLOOR`: the audit's session, one job reading every file of the one-partition
snapshot, the output tables written with ``deltalake``; what any audit must pay),
``one_partition_scan_only_s`` (:data:`SCAN_ONLY`: the audit's session and its scan of the
one-partition snapshot's dumps, the grammar's floor), ``one_partition_audit_s``
(``auditor audit`` of a one-partition snapshot, CLI start to exit),
``demo_audit_s`` (the demo's snapshot, as ``scripts/demo.sh`` simulates it),
``one_partition_warm_audit_s`` (:data:`WARM_AUDIT`: the same audit a third time in the
process that ran it twice: without the JVM's start and warm-up) and the ratios
``one_partition_over_bare`` and ``one_partition_over_fixed_floor``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests/reference.py: the plain script's model

from tests import reference as ref  # noqa: E402

PY = sys.executable
BATCHES = 333
LINE = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) .*?partitionLeaderEpoch: (-?\d+) .*? crc: (\d+)")
HEADER = re.compile(r"^Dumping .*/([^/]+)-(\d+)/\d+\.log$")
LEADER = re.compile(r"Topic: ?(\S+)\s+Partition: ?(\d+)\s+Leader: ?(-?\d+)")


def parse_size(text: str) -> tuple[str, list[str]]:
    """``1M`` -> simulate arguments for about 1M batch lines; ``10kp`` -> 10,000 partitions."""
    t = text.lower()
    if t.endswith("kp"):
        partitions = int(float(t[:-2]) * 1000)
        return text, ["--topics", "100", "--partitions", str(partitions // 100), "--batches", "3",
                      "--brokers", "6", "--faults", f"unclean-election={max(1, partitions // 20)}"]
    lines = int(float(t[:-1]) * {"k": 1e3, "m": 1e6}[t[-1]]) if t[-1] in "km" else int(t)
    partitions = max(20, lines // (3 * BATCHES))
    topics = 10 if partitions >= 100 else 1
    return text, ["--topics", str(topics), "--partitions", str(partitions // topics), "--batches", str(BATCHES),
                  "--brokers", "3", "--faults", f"unclean-election={max(1, partitions // 20)}"]


def timed(cmd: list[str], **kw: object) -> tuple[float, str]:
    """Run ``cmd``; return (seconds, stdout)."""
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload]
    seconds = time.perf_counter() - t0
    if done.returncode not in (0, 1):
        raise SystemExit(f"{cmd[:3]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def dump_files(root: Path) -> list[str]:
    """Every dump file: the ``*.txt`` files in the broker folders (the root's
    ``topics-describe.txt`` and ``metadata-quorum-status.txt`` are not dumps)."""
    return sorted(str(p) for p in root.glob("broker=*/**/*.txt"))


FLOOR = """
import os, sys, json
from pyspark.sql import functions as F
from auditor.spark import build_session
spark = build_session(None, quiet=True, conf=json.loads(os.environ.get("BENCH_SPARK_CONF", "{}")) or None)
paths = [l.rstrip("\\n") for l in open(sys.argv[1])]
lines = spark.read.text(paths).filter(F.col("value").startswith("baseOffset: "))
tok = F.split(F.col("value"), " ")
# 3.3+ batch lines: baseOffset: B lastOffset: L count: C ... partitionLeaderEpoch: E ... crc: R
e = F.array_position(tok, "partitionLeaderEpoch:").cast("int")
c = F.array_position(tok, "crc:").cast("int")
base, last = F.get(tok, 1).cast("long"), F.get(tok, 3).cast("long")
epoch, crc = F.get(tok, e).cast("int"), F.get(tok, c).cast("long")
# the xxhash64 sum modulo 2^64, kept exactly as the sums of its 32-bit halves (as the audit's
# digests are: ANSI mode raises on a BIGINT sum's overflow)
h = F.xxhash64(base, last, epoch, crc)
per_file = lines.groupBy(F.col("_metadata.file_path").alias("file")).agg(
    F.count(F.lit(1)).alias("n"), F.min(base).alias("lo"), F.max(last).alias("hi"),
    F.sum(h.bitwiseAND(F.lit(0xFFFFFFFF))).alias("h_lo"), F.sum(F.shiftrightunsigned(h, 32)).alias("h_hi"))
# every per-file value is read by the answer: a value nothing reads is pruned by Spark's
# optimizer (then the job would only count lines that start like a batch line)
row = per_file.agg(
    F.sum("n").alias("n"), F.count(F.lit(1)).alias("files"), F.min("lo").alias("lo"), F.max("hi").alias("hi"),
    F.sum("h_lo").alias("h_lo"), F.sum("h_hi").alias("h_hi")).first()
print(json.dumps({"batch_lines": row["n"], "files": row["files"], "min_base": row["lo"], "max_last": row["hi"],
                  "hash_sum": ((row["h_hi"] << 32) + row["h_lo"]) % (1 << 64)}))
"""

BARE = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
spark.range(1).count()
spark.stop()
"""

#: The fixed-cost floor (``--fixed``): what any audit of a snapshot must do at least, in a
#: fresh process, with the audit's own session and writer: start the session, read every
#: file of the snapshot (one Spark job: lines per file), and write the output tables and
#: the ``runs`` row (one row each: its keys, a value where a column is not nullable, nulls
#: elsewhere) with ``deltalake``. No
#: parsing, nothing compared: the cost of Spark and Delta themselves.
FIXED_FLOOR = """
import sys, datetime, uuid
import pyarrow as pa
from pyspark.sql import functions as F
from auditor.sinks import schemas
from auditor.sinks.delta import DeltaRsWriter, arrow_schema, table_path
from auditor.spark import build_session
root, out = sys.argv[1], sys.argv[2]
spark = build_session(None, quiet=True, small_input=True)
per_file = spark.read.option("recursiveFileLookup", "true").text(root).groupBy(
    F.col("_metadata.file_path")).agg(F.count(F.lit(1)).alias("n"))
files = per_file.agg(F.count(F.lit(1)).alias("files"), F.sum("n").alias("lines")).first()
writer, run_id = DeltaRsWriter(), str(uuid.uuid4())
now = datetime.datetime.now(datetime.timezone.utc)
keys = {"run_id": run_id, "cluster": "bench", "day": now.date()}

def value(f):
    if f.name in keys or f.nullable:
        return keys.get(f.name)
    t = f.type
    return (now if pa.types.is_timestamp(t) else now.date() if pa.types.is_date(t)
            else "" if pa.types.is_string(t) else False if pa.types.is_boolean(t) else 0)

for name, schema in schemas.OUTPUT_TABLES.items():
    target = arrow_schema(schema)
    row = {f.name: [value(f)] for f in target}
    writer.append(table_path(out, name), pa.Table.from_pydict(row, schema=target), schema)
print(files["files"], files["lines"])
"""

#: The grammar's floor (``--fixed``): the audit's session, as the CLI builds it, and its
#: scan alone (the dump grammar judging every line and the scan's aggregate, with a small
#: input's settings when the audit would use them) as one Spark job that writes nothing,
#: in a fresh process. No checkpoint, no engine, no table written: what parsing the dumps
#: by SPEC section 3 costs a cold JVM before anything is compared.
SCAN_ONLY = """
import json, os, sys
from datetime import datetime, timezone
from auditor.config import Config
from auditor.load.inputs import listed_files
from auditor.run import prepare
from auditor.spark import build_session
from auditor.summarise.scan import scan_dumps
root = sys.argv[1]
prepared = prepare(root, Config())
policy = prepared.policy
spark = build_session(None, quiet=True, small_input=policy.small_input,
                      conf=json.loads(os.environ.get("BENCH_SPARK_CONF", "{}")) or None)
parse = policy.plans(spark).parse
with parse.applied(spark):
    listed = listed_files(spark, prepared.found, parse)
    scan_dumps(spark, listed.dump_files, listed.dump_frame, per_batch=policy.per_batch).write.format("noop").mode(
        "overwrite").save()
spark.stop()
"""

#: The same audit three times in one process (``--fixed``): the third one's seconds, from
#: ``run_audit``'s call to its return, are the audit on a JVM whose JIT has warmed up on it.
WARM_AUDIT = """
import sys, time
from auditor.config import Config
from auditor.run import prepare, run_audit
from auditor.spark import build_session
snapshot, out = sys.argv[1], sys.argv[2]
config = Config(cluster="bench", fail_on="never")
spark = build_session(None, quiet=True, small_input=prepare(snapshot, config).policy.small_input)
for k in range(3):
    t0 = time.perf_counter()
    run_audit(spark, snapshot, f"{out}-{k}", config)
print(time.perf_counter() - t0)
"""

AUDIT = """
import json, os, sys, time
t0 = time.perf_counter()
from auditor.config import Config
from auditor.run import prepare, run_audit
from auditor.spark import build_session
snapshot, out = sys.argv[1], sys.argv[2]
conf = json.loads(os.environ.get("BENCH_SPARK_CONF", "{}"))
if len(sys.argv) > 3:
    conf.update({"spark.eventLog.enabled": "true", "spark.eventLog.dir": sys.argv[3],
                 "spark.eventLog.compress": "false"})
config = Config(cluster="bench", fail_on="never")
prepared = prepare(snapshot, config)
spark = build_session(None, quiet=True, small_input=prepared.policy.small_input, conf=conf or None)
spark.sparkContext.setJobGroup("audit", "audit")
result = run_audit(spark, snapshot, out, config, prepared=prepared)
seconds = time.perf_counter() - t0
jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup("audit"))
jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
status = open(f"/proc/{jvm_pid}/status").read()
jvm_peak_kb = int(next(l.split()[1] for l in status.splitlines() if l.startswith("VmHWM:")))
print(json.dumps({"audit_s": seconds, "jobs": jobs, "run_id": result.run_id, "jvm_peak_mb": jvm_peak_kb // 1024}))
"""


def python_script(root: Path) -> tuple[int, int]:
    """The plain script: parse, then each follower against its leader. Returns
    (batch lines parsed, followers diverged)."""
    leaders: dict[tuple[str, int], int] = {}
    with open(root / "topics-describe.txt", encoding="utf-8") as fh:
        for line in fh:
            m = LEADER.search(line)
            if m:
                leaders[(m.group(1), int(m.group(2)))] = int(m.group(3))
    logs: dict[tuple[str, int, int], list[tuple[int, int, int, int]]] = {}
    hwm: dict[tuple[str, int, int], int] = {}
    parsed = 0
    for path in dump_files(root):
        broker = int(next(p for p in Path(path).parts if p.startswith("broker=")).split("=")[1])
        key: tuple[str, int, int] | None = None
        folder = Path(path).parent.name
        if "-" in folder and folder.rsplit("-", 1)[1].isdigit():
            t, p = folder.rsplit("-", 1)
            key = (t, int(p), broker)
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("Dumping "):
                    h = HEADER.match(line.rstrip("\n"))
                    if h:
                        key = (h.group(1), int(h.group(2)), broker)
                    continue
                m = LINE.match(line)
                if m and key is not None:
                    logs.setdefault(key, []).append(tuple(int(x) for x in m.groups()))  # type: ignore[arg-type]
                    parsed += 1
    for cp in root.rglob("replication-offset-checkpoint"):
        broker = int(next(p for p in cp.parts if p.startswith("broker=")).split("=")[1])
        for line in cp.read_text().splitlines()[2:]:
            t, p, h = line.split()
            hwm[(t, int(p), broker)] = int(h)
    diverged = 0
    for (topic, part, broker), batches in logs.items():
        leader = leaders.get((topic, part))
        if leader is None or broker == leader or (topic, part, leader) not in logs:
            continue
        theirs = sorted(set(logs[(topic, part, leader)]))
        mine = sorted(set(batches))
        spans_l = [(b, last, e) for b, last, e, _ in theirs]
        spans_f = [(b, last, e) for b, last, e, _ in mine]
        ref.truncate_epoch(ref.rebuild_cache(spans_l), theirs[-1][1] + 1, ref.rebuild_cache(spans_f),
                           mine[-1][1] + 1, hwm.get((topic, part, broker)), spans_f)
        diverged += ref.divergence_offset(mine, theirs, 0) is not None
    return parsed, diverged


def audited_divergence(out: Path, run_id: str) -> int:
    """Followers with a divergence offset in the audit's replica_status table."""
    from auditor.sinks.arrow_read import read_delta

    table = read_delta(str(out / "replica_status"), columns=["run_id", "role", "divergence_offset"])
    rows = table.to_pylist()
    return sum(1 for r in rows if r["run_id"] == run_id and r["role"] == "follower"
               and r["divergence_offset"] is not None)


def run_counts(out: Path, run_id: str) -> dict[str, object]:
    """The run's ``runs.counts``."""
    from auditor.sinks.arrow_read import read_delta

    rows = read_delta(str(out / "runs"), columns=["run_id", "status", "counts"]).to_pylist()
    return next(json.loads(r["counts"]) for r in rows if r["run_id"] == run_id and r["status"] == "SUCCEEDED")


def healthy_args(sim_args: list[str]) -> list[str]:
    """The same simulate arguments with no fault."""
    i = sim_args.index("--faults")
    return [*sim_args[:i], "--faults", "none", *sim_args[i + 2:]]


def run_audit(work: Path, label: str, root: Path, events: Path | None = None) -> tuple[float, dict[str, object]]:
    """``auditor audit``'s run in a fresh process: (seconds, its jobs, peak RSS, diverged
    followers). With ``events``, Spark's event log of the run goes to ``events/label``
    (read it with ``benchmarks/event_log.py``)."""
    out_dir = work / f"out-{label}"
    shutil.rmtree(out_dir, ignore_errors=True)
    extra: list[str] = []
    if events is not None:
        log_dir = events / label
        shutil.rmtree(log_dir, ignore_errors=True)
        log_dir.mkdir(parents=True)
        extra = [log_dir.resolve().as_uri()]
    seconds, out = timed([PY, "-c", AUDIT, str(root), str(out_dir), *extra], cwd=str(REPO))
    info = json.loads(out.strip().splitlines()[-1])
    info["diverged"] = audited_divergence(out_dir, info["run_id"])
    info["counts"] = run_counts(out_dir, info["run_id"])
    shutil.rmtree(out_dir, ignore_errors=True)
    return seconds, info


def fixed_costs(work: Path, auditor: str) -> dict[str, object]:
    """The fixed-cost line of ``--fixed`` (see the module's docstring)."""
    one, demo = work / "snap-one-partition", work / "snap-demo"
    for root, args in ((one, ["--brokers", "3", "--topics", "1", "--partitions", "1", "--batches", "20",
                              "--no-shapes"]),
                       (demo, ["--brokers", "3", "--topics", "2", "--partitions", "4", "--faults",
                                "unclean-election,lossy-shutdown,fast-failover,stopped-follower,zombie-transaction,cleaner-bug"])):
        if not (root / "topics-describe.txt").exists():
            shutil.rmtree(root, ignore_errors=True)
            subprocess.run([auditor, "simulate", str(root), "--seed", "7", *args], check=True, capture_output=True)
    bare_s, _ = timed([PY, "-c", BARE], cwd=str(work))
    row: dict[str, object] = {"size": "fixed", "bare_spark_s": round(bare_s, 2)}
    floor_out = work / "out-fixed-floor"
    shutil.rmtree(floor_out, ignore_errors=True)
    floor_s, _ = timed([PY, "-c", FIXED_FLOOR, str(one), str(floor_out)], cwd=str(work))
    shutil.rmtree(floor_out, ignore_errors=True)
    row["fixed_floor_s"] = round(floor_s, 2)
    scan_s, _ = timed([PY, "-c", SCAN_ONLY, str(one)], cwd=str(work))
    row["one_partition_scan_only_s"] = round(scan_s, 2)
    for name, root in (("one_partition", one), ("demo", demo)):
        out_dir = work / f"out-{name}"
        shutil.rmtree(out_dir, ignore_errors=True)
        seconds, _ = timed([auditor, "audit", str(root), "--out", str(out_dir), "--fail-on", "never"], cwd=str(work))
        row[f"{name}_audit_s"] = round(seconds, 2)
        shutil.rmtree(out_dir, ignore_errors=True)
    warm_out = work / "out-warm"
    _, printed = timed([PY, "-c", WARM_AUDIT, str(one), str(warm_out)], cwd=str(work))
    for k in range(3):
        shutil.rmtree(f"{warm_out}-{k}", ignore_errors=True)
    row["one_partition_warm_audit_s"] = round(float(printed.split()[-1]), 2)
    row["one_partition_over_bare"] = round(float(row["one_partition_audit_s"]) / bare_s, 2)  # type: ignore[arg-type]
    row["one_partition_over_fixed_floor"] = round(float(row["one_partition_audit_s"]) / floor_s, 2)  # type: ignore[arg-type]
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1M,3M,10M")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--layout", default="per-segment", choices=["per-segment", "per-broker"])
    parser.add_argument("--keep", action="store_true", help="keep the generated snapshots")
    parser.add_argument("--no-healthy", dest="healthy", action="store_false",
                        help="skip the audit of the same cluster simulated with no fault")
    parser.add_argument("--fixed", action="store_true", help="first measure the fixed costs (one partition, demo)")
    parser.add_argument("--mix", action="store_true",
                        help="also audit the same size simulated with real clusters' shapes (tiered storage, "
                             "DeleteRecords, transactions, a compacted __consumer_offsets)")
    parser.add_argument("--segments", action="store_true",
                        help="also audit the same cluster written as segment files (simulate --format segments)")
    parser.add_argument("--no-kraft", dest="no_kraft", action="store_true",
                        help="also audit the same cluster simulated without a KRaft quorum")
    parser.add_argument("--driver-memory", dest="driver_memory", default=None,
                        help="each size's driver heap for the floor job, the scan alone and the audits "
                             "(e.g. 2g, as issue 21's 100,000 partitions; default: the audit's own)")
    parser.add_argument("--event-log", dest="event_log", type=Path, default=None,
                        help="write each audit's Spark event log under this directory, one folder per "
                             "audit (benchmarks/event_log.py reads them)")
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="auditor-bench-"))
    auditor = str(Path(PY).with_name("auditor"))
    if args.fixed:
        print(json.dumps(fixed_costs(work, auditor)), flush=True)
    if args.driver_memory:  # (read by the sizes' FLOOR, SCAN_ONLY and AUDIT processes; not the fixed costs)
        os.environ["BENCH_SPARK_CONF"] = json.dumps({"spark.driver.memory": args.driver_memory})
    for size in filter(None, args.sizes.split(",")):  # (--sizes "": the fixed costs alone)
        label, sim_args = parse_size(size)
        # (a kept snapshot is reused: its name says its layout, or --layout would be ignored)
        name = label if args.layout == "per-segment" else f"{label}-{args.layout}"
        root = work / f"snap-{name}"
        if not (root / "topics-describe.txt").exists():
            shutil.rmtree(root, ignore_errors=True)
            subprocess.run([auditor, "simulate", str(root), "--seed", "3", "--dump-layout", args.layout,
                            "--no-shapes", *sim_args], check=True, capture_output=True)
        files = dump_files(root)
        listing = work / f"files-{name}.txt"
        listing.write_text("\n".join(files) + "\n")
        row: dict[str, object] = {"size": label, "layout": args.layout, "driver_memory": args.driver_memory,
                                  "dump_files": len(files),
                                  "input_bytes": sum(os.path.getsize(f) for f in files)}
        wc_s, _ = timed(["bash", "-c", f"xargs -a {listing} -d '\\n' cat | wc -l"])
        row["wc_s"] = round(wc_s, 2)
        floor_s, out = timed([PY, "-c", FLOOR, str(listing)], cwd=str(REPO))
        row["batch_lines"] = json.loads(out.strip().splitlines()[-1])["batch_lines"]
        row["spark_floor_s"] = round(floor_s, 2)
        scan_s, _ = timed([PY, "-c", SCAN_ONLY, str(root)], cwd=str(REPO))
        row.update(scan_only_s=round(scan_s, 2), scan_only_over_floor=round(scan_s / floor_s, 2))
        t0 = time.perf_counter()
        parsed, py_diverged = python_script(root)
        row["python_s"] = round(time.perf_counter() - t0, 2)
        assert parsed == row["batch_lines"], (parsed, row["batch_lines"])
        audit_s, info = run_audit(work, name, root, args.event_log)
        row.update(audit_s=round(audit_s, 2), audit_jobs=info["jobs"], audit_peak_rss_mb=info["jvm_peak_mb"])
        diverged = info["diverged"]
        assert diverged == py_diverged, ("audit and script disagree on diverged followers", diverged, py_diverged)
        row.update(diverged_followers=diverged,
                   audit_over_floor=round(audit_s / floor_s, 2),
                   audit_over_python=round(audit_s / float(row["python_s"]), 2),  # type: ignore[arg-type]
                   audit_over_scan_only=round(audit_s / scan_s, 2))
        if args.healthy:
            healthy = work / f"snap-{name}-healthy"
            if not (healthy / "topics-describe.txt").exists():
                shutil.rmtree(healthy, ignore_errors=True)
                subprocess.run([auditor, "simulate", str(healthy), "--seed", "3", "--dump-layout", args.layout,
                                "--no-shapes", *healthy_args(sim_args)], check=True, capture_output=True)
            healthy_s, hinfo = run_audit(work, name + "-healthy", healthy, args.event_log)
            assert hinfo["diverged"] == 0, hinfo
            row.update(healthy_audit_s=round(healthy_s, 2), healthy_audit_jobs=hinfo["jobs"],
                       diverged_over_healthy=round(audit_s / healthy_s, 2))
            if not args.keep:
                shutil.rmtree(healthy, ignore_errors=True)
        if args.mix:
            mix = work / f"snap-{name}-mix"
            if not (mix / "topics-describe.txt").exists():
                shutil.rmtree(mix, ignore_errors=True)
                subprocess.run([auditor, "simulate", str(mix), "--seed", "3", "--dump-layout", args.layout,
                                *sim_args], check=True, capture_output=True)
            mix_s, minfo = run_audit(work, name + "-mix", mix, args.event_log)
            truth = json.loads((mix / "expected_findings.json").read_text())
            want = sum(1 for r in truth["replicas"] if r["divergence_offset"] is not None)
            assert minfo["diverged"] == want, ("audit and ground truth disagree on the mix", minfo["diverged"], want)
            row.update(mix_audit_s=round(mix_s, 2), mix_audit_jobs=minfo["jobs"],
                       mix_over_plain=round(mix_s / audit_s, 2))
            if not args.keep:
                shutil.rmtree(mix, ignore_errors=True)
        if args.segments:
            segs = work / f"snap-{name}-segments"
            if not (segs / "topics-describe.txt").exists():
                shutil.rmtree(segs, ignore_errors=True)
                subprocess.run([auditor, "simulate", str(segs), "--seed", "3", "--format", "segments",
                                "--no-shapes", *sim_args], check=True, capture_output=True)
            seg_s, sinfo = run_audit(work, name + "-segments", segs, args.event_log)
            assert sinfo["diverged"] == diverged, ("segments and dumps disagree on diverged followers", sinfo, diverged)
            c = sinfo["counts"]
            row.update(segments_audit_s=round(seg_s, 2), segments_audit_jobs=sinfo["jobs"],
                       segment_bytes=c["segment_bytes"], segments_bytes_read=c["bytes_read"],
                       segments_bytes_read_per_batch=round(c["bytes_read"] / max(1, c["batches"]), 1),
                       segments_over_dumps=round(seg_s / audit_s, 3),
                       segments_over_python=round(seg_s / float(row["python_s"]), 3))  # type: ignore[arg-type]
            if not args.keep:
                shutil.rmtree(segs, ignore_errors=True)
        if args.no_kraft:
            bare = work / f"snap-{name}-no-kraft"
            if not (bare / "topics-describe.txt").exists():
                shutil.rmtree(bare, ignore_errors=True)
                subprocess.run([auditor, "simulate", str(bare), "--seed", "3", "--dump-layout", args.layout,
                                "--no-shapes", "--kraft-controllers", "0", *sim_args], check=True, capture_output=True)
            bare_s, binfo = run_audit(work, name + "-no-kraft", bare, args.event_log)
            assert binfo["diverged"] == diverged, ("the quorum changed the diverged followers", binfo, diverged)
            row.update(no_kraft_audit_s=round(bare_s, 2), no_kraft_audit_jobs=binfo["jobs"],
                       kraft_over_none=round(audit_s / bare_s, 2))
            if not args.keep:
                shutil.rmtree(bare, ignore_errors=True)
        print(json.dumps(row), flush=True)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
