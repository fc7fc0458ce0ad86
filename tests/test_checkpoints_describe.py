"""Checkpoint files follow Kafka's reader (a bad version, count or entry rejects the file);
kafka-topics --describe parses from 0.11 to 4.x."""

from __future__ import annotations

import json
import re
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from auditor.ingest.checkpoints import COUNT_LINE, EPOCH_ENTRY, OFFSETS_ENTRY, parse_checkpoints
from auditor.ingest.describe import parse_describe
from auditor.ingest.discovery import HWM, LEADER_EPOCH, InputFile
from auditor.ingest.lines import DRIVER_READ_BYTES, file_contents
from tests import reference as ref

pytestmark = pytest.mark.spark
SNAP = datetime(2026, 1, 1, tzinfo=timezone.utc)

CHECKPOINTS = {
    # file_id: (kind, text, usable, entries)
    0: (LEADER_EPOCH, "0\n3\n0 0\n2 40\n5 90\n", True, [(0, 0), (2, 40), (5, 90)]),
    1: (LEADER_EPOCH, "1\n1\n0 0\n", False, []),                       # unknown version
    2: (LEADER_EPOCH, "0\n3\n0 0\n2 40\n", False, []),                  # count mismatch
    3: (LEADER_EPOCH, "0\n2\n0 0\n2 forty\n", False, []),               # malformed entry
    4: (LEADER_EPOCH, "", True, []),                                    # empty file = empty cache
    5: (LEADER_EPOCH, "0\n", True, []),                                 # no count line = empty
    6: (LEADER_EPOCH, "0\n1\n\n7 12\n\n", True, [(7, 12)]),             # blank lines skipped
    7: (HWM, "0\n2\norders 0 100\nmy.topic-x 12 7\n", True, [("orders", 0, 100), ("my.topic-x", 12, 7)]),
    8: (HWM, "0\n1\norders 0\n", False, []),                            # two fields
    9: (LEADER_EPOCH, "0\n1\n99999999999 0\n", False, []),              # epoch overflows INT
}


def _numbered(spark, texts):  # type: ignore[no-untyped-def]
    rows = [(fid, i + 1, line) for fid, text in texts.items() for i, line in enumerate(text.splitlines())]
    return spark.createDataFrame(rows, "file_id int, line_number bigint, text string")


def _contents(spark, texts):  # type: ignore[no-untyped-def]
    return spark.createDataFrame([(fid, text.encode()) for fid, text in texts.items()], "file_id int, content binary")


def test_checkpoint_files(spark) -> None:  # type: ignore[no-untyped-def]
    files = spark.createDataFrame(
        [(fid, kind, f"f{fid}", SNAP, 1, "d", "t" if kind == LEADER_EPOCH else None,
          0 if kind == LEADER_EPOCH else None) for fid, (kind, *_rest) in CHECKPOINTS.items()],
        "file_id int, kind string, rel string, snapshot timestamp, broker int, log_dir string, topic string, partition int")
    parsed = parse_checkpoints(files.join(_contents(spark, {k: v[1] for k, v in CHECKPOINTS.items()}), "file_id"))
    usable = {r.file_id: (r.usable, r.reason) for r in parsed.files.collect()}
    entries: dict[int, list] = {}  # type: ignore[type-arg]
    for r in parsed.entries.collect():
        value = (r.epoch, r.offset) if r.kind == LEADER_EPOCH else (r.topic, r.partition, r.offset)
        entries.setdefault(r.file_id, []).append(value)
    for fid, (_, _text, ok, expected) in CHECKPOINTS.items():
        assert usable[fid][0] is ok, (fid, usable[fid])
        assert sorted(entries.get(fid, [])) == sorted(expected), fid
    assert "version 1" in usable[1][1]
    assert usable[2][1] == "expected 3 entries but found 2"
    assert usable[3][1] == "malformed entry on line 4"
    lines = parsed.lines.collect()
    per_file: dict[int, list[str]] = {}
    for r in lines:
        per_file.setdefault(r.file_id, []).append(r.disposition)
    for fid, (_, text, ok, _) in CHECKPOINTS.items():
        assert len(per_file.get(fid, [])) == len(text.splitlines())
        if not ok:
            assert set(per_file[fid]) == {"quarantined"}
    assert sorted(per_file[6]) == ["parsed", "skipped", "skipped", "skipped", "skipped"]
    assert all(r.error.startswith("checkpoint file rejected: ") for r in lines if r.disposition == "quarantined")



#: Field values a checkpoint line may hold: numbers at and past the int and long bounds, a
#: sign, leading zeros, names Kafka accepts as topics and ones it does not.
TOKENS = ("0", "1", "7", "-1", "+3", "007", "2147483647", "2147483648", "-2147483649", "9223372036854775807",
          "9223372036854775808", "-9223372036854775809", "orders", "my.topic-x", "bad/topic", "forty")


@st.composite
def checkpoint_file(draw):  # type: ignore[no-untyped-def]
    """(epoch file?, text) of a checkpoint file that is often well formed and often not."""
    epoch_file = draw(st.booleans())
    number = st.integers(0, 2**31 - 1).map(str)
    good = st.tuples(number, number) if epoch_file else st.tuples(st.sampled_from(["orders", "a.b_c-1"]), number, number)
    entry = st.one_of(good.map(" ".join), st.lists(st.sampled_from(TOKENS), max_size=4).map(" ".join),
                      st.lists(st.sampled_from(TOKENS), min_size=2, max_size=3).map("\t".join))
    entries = draw(st.lists(entry, max_size=4))
    version = draw(st.sampled_from(["0", "0", "0", "1", " 0 ", "\t0", "x", None]))
    count = draw(st.sampled_from([str(len(entries))] * 3 + [str(len(entries) + 1), " 2", "abc", "-1",
                                  "99999999999999999999", None]))
    lines = [x for x in (version, count) if x is not None] + entries
    for _ in range(draw(st.integers(0, 2))):  # blank lines anywhere
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(["", "  "])))
    end = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    text = end.join(lines) + (end if lines and draw(st.booleans()) else "")
    return epoch_file, text


#: Files every draw holds (Hypothesis tries the simplest draw first): one of each verdict.
EDGE_FILES = [(True, "0\n2\n0 0\n3 10\n"), (False, "0\r\n1\r\norders 0 5"), (True, "1\n0\n"),
              (True, "0\nabc\n"), (False, "0\n99999999999999999999\n"), (True, "0\n1\n0 x\n"),
              (True, "0\n1\n-1 0\n"), (False, "0\n1\norders 0 9223372036854775808\n"),
              (False, "0\n2\norders 0 1\n"), (True, "\n  \n0\n\n1\n\n4 4\n\n"), (True, ""),
              # Kafka's own shape, parsed in the file's row: at the digits' bounds, no final
              # line end, no entry; and files one step outside it, read line by line
              (False, "0\n2\norders 0 5\na.b_c-1 999999999 999999999999999999\n"), (True, "0\n0\n"),
              (True, "0\n1\n999999999 999999999999999999"), (True, "0\n3\n1 2\n"),
              (False, "0\n1\norders 1234567890 5\n"), (True, "0\n1\n0  7\n"), (False, "0\n1\n0 1\n"),
              (True, "0\n1\n1 2\n\n"), (False, "0\n001\norders 007 0099\n"), (False, "0\n1\norders 2147483648 5\n"),
              (True, "0\n1\n2147483648 0\n"), (True, "0\r\n1\r\n3 4\r\n")]

#: Files above the driver's read size (Spark's binary file source reads them), of
#: thousands of entries: one of Kafka's shape, one not.
LARGE_FILES = [(False, "0\n6000\n" + "".join(f"topic.{k % 7} {k} {k * 1000}\n" for k in range(6000))),
               (True, "0\n9001\n" + "".join(f"{k} {k * 10}\n" for k in range(9000)) + "9000 x\n")]
assert all(len(text) > DRIVER_READ_BYTES for _, text in LARGE_FILES)


def _kafka_shaped(epoch_file: bool, text: str) -> bool:
    """Whether the audit parses the file in its row: ``0``, a count of at most 9 digits, as
    many entries of Kafka's own shape, ``\n`` after each line but maybe the last."""
    lines = re.sub(r"\n\Z", "", text).split("\n")
    entry = (EPOCH_ENTRY if epoch_file else OFFSETS_ENTRY).replace(r"\z", r"\Z")
    return (len(lines) >= 2 and lines[0] == "0" and re.match(COUNT_LINE.replace(r"\z", r"\Z"), lines[1]) is not None
            and int(lines[1]) == len(lines) - 2 and all(re.match(entry, x) for x in lines[2:]))


@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.generate])  # (no shrinking: a failure prints its draw)
@given(st.lists(checkpoint_file(), min_size=30, max_size=30, unique_by=lambda f: f[1]))
def test_checkpoint_files_read_as_kafkas_reader_model(spark, generated) -> None:  # type: ignore[no-untyped-def]
    """Generated checkpoint files (versions, counts, entries and blank lines, well formed or
    not) give each file's verdict, each line's disposition and each entry as the pure-Python
    model of Kafka's reader (``tests/reference.read_checkpoint``)."""
    drawn = EDGE_FILES + LARGE_FILES + generated
    with tempfile.TemporaryDirectory(prefix="checkpoints-") as folder:
        inputs = []
        for fid, (epoch_file, text) in enumerate(drawn):
            path = Path(folder) / f"f{fid}"
            path.write_bytes(text.encode())  # (bytes: the line terminators as drawn)
            inputs.append((fid, InputFile(str(path), f"f{fid}", LEADER_EPOCH if epoch_file else HWM, SNAP, 1, "d",
                                          "t" if epoch_file else None, 0 if epoch_file else None, len(text))))
        parsed = parse_checkpoints(file_contents(spark, inputs, placed=True))  # (the reader an audit uses)
        # the three frames' rows as JSON text, in one job
        union = parsed.files.select(F.lit("files").alias("frame"), F.to_json(F.struct("file_id", "usable", "reason"))
                                    .alias("row")).unionByName(
            parsed.lines.select(F.lit("lines").alias("frame"), F.to_json(F.struct(
                "file_id", "line_number", "disposition", "error", "shown")).alias("row"))).unionByName(
            parsed.entries.select(F.lit("entries").alias("frame"), F.to_json(F.struct(
                "file_id", "line_number", "topic", "partition", "epoch", "offset")).alias("row"))).unionByName(
            parsed.counts.select(F.lit("counts").alias("frame"), F.to_json(F.struct(
                "file_id", "lines", "lines_parsed", "lines_skipped", "lines_quarantined")).alias("row"))).unionByName(
            parsed.quarantined.select(F.lit("quarantined").alias("frame"), F.to_json(F.struct(
                "file_id", "line_number", "disposition", "error", "shown")).alias("row")))
        collected = union.collect()
    got: dict[str, list[tuple[object, ...]]] = {"files": [], "lines": [], "entries": [], "counts": [],
                                                "quarantined": []}
    line_columns = ("file_id", "line_number", "disposition", "error", "shown")
    for r in collected:
        row = json.loads(r.row)
        got[r.frame].append(tuple(row.get(k) for k in {
            "files": ("file_id", "usable", "reason"), "lines": line_columns, "quarantined": line_columns,
            "entries": ("file_id", "line_number", "topic", "partition", "epoch", "offset"),
            "counts": ("file_id", "lines", "lines_parsed", "lines_skipped", "lines_quarantined")}[r.frame]))
    want: dict[str, list[tuple[object, ...]]] = {"files": [], "lines": [], "entries": [], "counts": [],
                                                 "quarantined": []}
    for fid, (epoch_file, text) in enumerate(drawn):
        read = ref.read_checkpoint(text, epoch_file)
        want["files"].append((fid, read.reason is None, read.reason))
        want["lines"] += [(fid, *line) for line in read.lines]
        want["quarantined"] += [(fid, *line) for line in read.lines if line[1] == "quarantined"]
        if read.lines:  # (per file with lines: what the run's line accounting adds up)
            want["counts"].append((fid, len(read.lines), *[sum(1 for line in read.lines if line[1] == d)
                                                           for d in ("parsed", "skipped", "quarantined")]))
        want["entries"] += [(fid, n, "t", 0, *value) if epoch_file else (fid, n, *value[:2], None, value[2])
                            for n, value in read.entries]
    for frame in want:
        assert sorted(got[frame], key=repr) == sorted(want[frame], key=repr), frame
    # both readers are tried: files of Kafka's own shape and others, each of either kind
    shaped = {(epoch_file, _kafka_shaped(epoch_file, text)) for epoch_file, text in drawn}
    assert shaped == {(True, True), (True, False), (False, True), (False, False)}, shaped
    # every kind of verdict is among them (the model's)
    kinds = {"usable" if r is None else "range" if "never writes" in r else r.split(" ")[0] for _, _, r in want["files"]}
    assert kinds == {"usable", "unrecognised", "entry", "malformed", "range", "expected"}, kinds


DESCRIBE_0_11 = (
    "Topic:orders\tPartitionCount:2\tReplicationFactor:2\tConfigs:\n"
    "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\n"
    "\tTopic: orders\tPartition: 1\tLeader: -1\tReplicas: 2,1\tIsr: \n"
)
DESCRIBE_3_9 = (
    "Topic: events\tTopicId: 9kQf2wbZQ0yGm8dn1aVXbw\tPartitionCount: 2\tReplicationFactor: 3\t"
    "Configs: cleanup.policy=compact,delete,min.insync.replicas=2,segment.bytes=1073741824\n"
    "\tTopic: events\tPartition: 0\tLeader: 3\tReplicas: 3,1,2\tIsr: 3,1\tElr: 2\tLastKnownElr: \tOffline: \n"
    "\tTopic: events\tPartition: 1\tLeader: none\tReplicas: 1,2,3\tIsr: \tElr: \tLastKnownElr: 1\n"
    "\n"
    "Error while executing topic command : Timed out waiting for a node assignment.\n"
    "Topic: __consumer_offsets\tTopicId: x\tPartitionCount: 50\tReplicationFactor: 3\tConfigs: "
    "compression.type=producer,cleanup.policy=compact,segment.bytes=104857600\n"
)


def test_describe_across_versions(spark) -> None:  # type: ignore[no-untyped-def]
    files = spark.createDataFrame([(0, "a/topics-describe.txt", SNAP, None), (1, "b/topics-describe.txt", SNAP, None)],
                                  "file_id int, rel string, snapshot timestamp, broker int")
    parsed = parse_describe(_numbered(spark, {0: DESCRIBE_0_11, 1: DESCRIBE_3_9}), files)
    md = {(r.topic, r.partition): r for r in parsed.metadata.collect()}
    assert (md[("orders", 0)].leader, md[("orders", 0)].replicas, md[("orders", 0)].isr) == (1, [1, 2], [1, 2])
    assert md[("orders", 1)].leader is None and md[("orders", 1)].isr == []
    assert md[("orders", 0)].has_elr is False and md[("orders", 0)].elr is None
    ev0 = md[("events", 0)]
    assert (ev0.leader, ev0.replicas, ev0.isr, ev0.elr, ev0.last_known_elr, ev0.has_elr) == (
        3, [3, 1, 2], [3, 1], [2], [], True)
    assert md[("events", 1)].leader is None and md[("events", 1)].last_known_elr == [1]
    topics = {r.topic: r.cleanup_policy for r in parsed.topics.collect()}
    assert topics == {"orders": None, "events": "compact,delete", "__consumer_offsets": "compact"}
    disp = [(r.file_id, r.line_number, r.disposition, r.error) for r in parsed.lines.collect()]
    assert len(disp) == len(DESCRIBE_0_11.splitlines()) + len(DESCRIBE_3_9.splitlines())
    bad = [d for d in disp if d[2] == "quarantined"]
    assert bad == [(1, 5, "quarantined", "unrecognised line in topics-describe.txt")]
    assert [d for d in disp if d[2] == "skipped"] == [(1, 4, "skipped", None)]
