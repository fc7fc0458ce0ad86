"""Checkpoint files follow Kafka's reader (a bad version, count or entry rejects the file);
kafka-topics --describe parses from 0.11 to 4.x."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from auditor.ingest.checkpoints import parse_checkpoints
from auditor.ingest.describe import parse_describe
from auditor.ingest.discovery import HWM, LEADER_EPOCH

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


def test_checkpoint_files(spark) -> None:  # type: ignore[no-untyped-def]
    files = spark.createDataFrame(
        [(fid, kind, f"f{fid}", SNAP, 1, "d", "t" if kind == LEADER_EPOCH else None,
          0 if kind == LEADER_EPOCH else None) for fid, (kind, *_rest) in CHECKPOINTS.items()],
        "file_id int, kind string, rel string, snapshot timestamp, broker int, log_dir string, topic string, partition int")
    parsed = parse_checkpoints(_numbered(spark, {k: v[1] for k, v in CHECKPOINTS.items()}), files)
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
