"""The summaries and the drill-down against the pure-Python reference model.

Replica histories (tests/history.py) are damaged here and there: a batch dropped (a gap), a
batch stretched over the next one or back over the one before (overlaps), a batch printed
twice (two dumps of one segment), a batch rewritten with other content or in a lower epoch
(a regression). Windows
are made 4 offsets wide and a section's tail 2 lines, so one history spans many windows:
some windows equal, some different, differences at window edges, followers lagging by more
and by less than the tail. Each replica's log is dumped as 1 to 4 segment files, and only
the newest two mark their tails, so a lag may also reach past the tails. Every value the
engine derives from summaries or from drilled batches (divergence, truncation, records
removed, counts, lineage, gaps, overlaps, regressions, ISR completeness) must equal the
model's.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from auditor import audit, load_snapshot
from auditor.ingest import wholefile
from auditor.ingest.discovery import InputFile
from auditor.simulator.kafka_text import PartitionMeta
from auditor.summarise import digest
from tests import reference as ref
from tests.conftest import as_session, large_input
from tests.history import History, histories
from tests.scenarios import Replica, write_describe, write_partition

pytestmark = pytest.mark.spark

Batch = tuple[int, int, int, str]  # base, last, epoch, content


@dataclass
class Damaged:
    history: History
    logs: dict[int, list[Batch]]  # what each replica's dump prints (repeats included)
    segments: dict[int, int]  # dump files (segments) each replica's log is split into


def _can_stretch_back(log: list[Batch], i: int) -> bool:
    return log[i][0] > log[i - 1][0] + 1


def _stretch_back(draw: st.DrawFn, log: list[Batch], i: int) -> None:
    """Batch ``i`` stretched back over the one before it (the ``cover`` damage): where that
    one agrees, the offsets both cover agree (SPEC 4.4), and the divergence starts after it.
    (Not onto the base of that one: the dump writer salts a batch's CRC by its base, so the
    two would share the content of one.)"""
    base, last, epoch, content = log[i]
    log[i] = (draw(st.integers(log[i - 1][0] + 1, base - 1)), last, epoch, content + "<")


@st.composite
def damaged_histories(draw: st.DrawFn, cover: bool = False) -> Damaged:
    """``cover``: first, where a follower holds a batch of its leader's log followed by
    another, that other stretched back into it (the ``cover`` damage on a batch after one
    that agrees: the offsets both cover agree, SPEC 4.4)."""
    h = draw(histories())
    logs = {rid: list(r.log) for rid, r in h.replicas.items()}
    spots = [(rid, i) for rid, log in logs.items() if rid != h.leader for i in range(1, len(log))
             if _can_stretch_back(log, i) and log[i - 1] in h.replicas[h.leader].log] if cover else []
    if spots:
        rid, i = draw(st.sampled_from(spots))
        _stretch_back(draw, logs[rid], i)
    for _ in range(draw(st.integers(0, 3))):
        rid = draw(st.sampled_from(sorted(logs)))
        log = logs[rid]
        if len(log) < 2:
            continue
        i = draw(st.integers(1, len(log) - 1))
        base, last, epoch, content = log[i]
        damage = draw(st.sampled_from(["gap", "overlap", "cover", "repeat", "content", "regress", "retention",
                                       "split", "merge"]))
        if damage == "retention":
            # local segments deleted (retention, tiered storage): the log starts at a higher
            # offset, and what it held below is out of every comparison's scope (SPEC 2, 4.4)
            del log[:i]
        elif damage == "gap":
            del log[i]
        elif damage == "overlap":
            log[i - 1] = (log[i - 1][0], base, log[i - 1][2], log[i - 1][3] + "+")
        elif damage == "cover" and _can_stretch_back(log, i):
            _stretch_back(draw, log, i)
        elif damage == "repeat":
            log.insert(i, log[i])
        elif damage == "content" and sum(1 for b in log if b[:3] == (base, last, epoch)) == 1:
            # (not on a repeated batch: the dump writer gives every batch of one base offset
            # the same CRC, so a repeat rewritten in content would print as the repeat)
            log[i] = (base, last, epoch, content + "x")
        elif damage == "regress" and epoch > 0:
            log[i] = (base, last, epoch - 1, content + "r")
        elif damage == "split" and last > base:
            # one batch written as two in its epoch (or, on the leader, the others' one as
            # two): the offsets agree in term, not as batches (the raft rule, SPEC 4.3)
            cut = draw(st.integers(base, last - 1))
            log[i:i + 1] = [(base, cut, epoch, content + "a"), (cut + 1, last, epoch, content + "b")]
        elif damage == "merge" and i + 1 < len(log) and log[i + 1][0] == last + 1 and log[i + 1][2] == epoch:
            log[i:i + 2] = [(base, log[i + 1][1], epoch, content + "m")]
    long_enough = sorted(rid for rid, log in logs.items() if len(log) >= 2)
    if long_enough and draw(st.booleans()):  # one replica's oldest local segments deleted, as above
        rid = draw(st.sampled_from(long_enough))
        del logs[rid][:draw(st.integers(1, len(logs[rid]) - 1))]
    for rid, log in logs.items():
        # One content per base offset, as the dump writer salts CRCs (``salt`` by base, the
        # last content of a base winning): two contents at one base (an overlap stretched
        # onto a repeat, a repeat regressed into another epoch) would print with one salt,
        # so the model holds what the files hold.
        content = {b[0]: b[3] for b in log}
        logs[rid] = [(*b[:3], content[b[0]]) for b in log]  # type: ignore[misc]
    segments = {rid: draw(st.integers(1, 4)) for rid in sorted(logs)}
    return Damaged(h, logs, segments)


def _sequence(batches: list[Batch]) -> tuple[set[tuple[int, int]], set[tuple[int, int]], set[tuple[int, int, int]]]:
    """Gaps, overlaps and epoch regressions of a replica's log (SPEC 5), as the engine
    defines them: batches in offset order, each against the highest offset and epoch before
    it; one regression per batch whose epoch is below an earlier batch's."""
    ordered = sorted(set(batches), key=lambda b: (b[0], b[1], b[2], b[3]))
    gaps, overlaps, regressions = set(), set(), set()
    prev_last: int | None = None
    max_epoch: int | None = None
    for base, last, epoch, _ in ordered:
        if prev_last is not None and base > prev_last + 1:
            gaps.add((prev_last + 1, base))
        if prev_last is not None and base <= prev_last:
            overlaps.add((base, last + 1))
        if epoch >= 0 and max_epoch is not None and epoch < max_epoch:
            regressions.add((base, last + 1, epoch))
        prev_last = last if prev_last is None else max(prev_last, last)
        if epoch >= 0:
            max_epoch = epoch if max_epoch is None else max(max_epoch, epoch)
    return gaps, overlaps, regressions


def _expected(d: Damaged) -> tuple[dict, dict, set]:  # type: ignore[type-arg]
    h = d.history
    logs = {rid: sorted(set(log)) for rid, log in d.logs.items()}
    # SPEC 2: max(last offset + 1, base of the newest segment dumped); an empty replica's
    # dump is one segment at 0
    leo = {rid: (max(b[1] for b in log) + 1 if log else 0) for rid, log in logs.items()}
    # an empty replica's dump is one segment at 0: its local log start offset is 0 (SPEC 2)
    start = {rid: (log[0][0] if log else 0) for rid, log in logs.items()}
    cache = {rid: ref.effective_cache(h.replicas[rid].cache, leo[rid]) for rid in logs}
    lead = h.leader
    status, lineage, found = {}, {}, set()
    for rid, log in logs.items():
        spans = [(b, last, e) for b, last, e, _ in log]
        lineage[rid] = sorted(ref.log_lineage(spans))
        gaps, overlaps, regressions = _sequence(d.logs[rid])
        found |= {(rid, "OFFSET_GAP", a, b) for a, b in gaps} | {(rid, "OFFSET_OVERLAP", a, b) for a, b in overlaps}
        found |= {(rid, "EPOCH_REGRESSION", a, b, e) for a, b, e in regressions}
        if rid == lead:
            status[rid] = (len(log), leo[rid], None, None, None, None)
            continue
        lso = max(start[rid], start[lead])
        if log:
            # (a leader with an empty log holds none of the follower's offsets: SPEC 4.4
            # counts them as not agreeing, and the follower truncates as the protocol says)
            d_off = ref.divergence_offset(log, logs[lead], lso)
            tr = ref.truncate_epoch(cache[lead], leo[lead], cache[rid], leo[rid], h.replicas[rid].hwm, spans)
            t = None if tr.missing_hwm else tr.offset
            removed = sum(last - base + 1 for base, last, _, _ in log if t is not None and last >= t)
            raft = ref.truncate_raft([b[:3] for b in logs[lead]], spans, leo[rid]).offset
            status[rid] = (len(log), leo[rid], d_off, t, removed if not tr.missing_hwm else None, raft)
        else:  # an empty follower holds nothing to compare, but ISR_INCOMPLETE still applies
            status[rid] = (0, leo[rid], None, None, None, None)
        l_hwm = h.replicas[lead].hwm
        if l_hwm is not None:  # ISR_INCOMPLETE: every replica is in the ISR
            held = set(log)
            lacking = [b for b in logs[lead] if lso <= b[0] < l_hwm and b not in held]
            if lacking:
                found.add((rid, "ISR_INCOMPLETE", min(b[0] for b in lacking), l_hwm))
    return status, lineage, found


CHECKS = ("OFFSET_GAP", "OFFSET_OVERLAP", "EPOCH_REGRESSION", "ISR_INCOMPLETE")


def _shape(d: Damaged) -> str:
    """What makes two damaged histories different: 60 distinct ones per run. (Hypothesis
    tries the simplest example first, and with one example per run that was the only one:
    60 copies of one undamaged two-batch history, in which no window differs.)"""
    return repr((d.history.leader, sorted(d.logs.items()), sorted(d.segments.items()),
                 sorted((rid, r.hwm, r.cache) for rid, r in d.history.replicas.items())))


# (each example is one audit of 40 histories, 10 of them with a batch stretched back over one
# that agrees, drawn anew every run; no shrinking:
# a failure names the history that failed)
@settings(max_examples=2, deadline=None, phases=[Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                                 HealthCheck.large_base_example])
@given(ds=st.lists(damaged_histories(), min_size=30, max_size=30, unique_by=_shape),
       covered=st.lists(damaged_histories(cover=True), min_size=10, max_size=10, unique_by=_shape))
@pytest.mark.parametrize("batches_in_scan", [True, False], ids=["batches-in-scan", "files-read-again"])
def test_summaries_and_drill_down_match_the_model(spark, tmp_path_factory, monkeypatch, batches_in_scan, ds,  # type: ignore[no-untyped-def]
                                                  covered) -> None:
    """Both ways a drill-down gets its batches: from the scan's rows (a small input) and by
    reading the files that hold them again (a large one, whose drilled batches are then
    handled as log-sized, and where odd brokers keep all their dumps in one per-broker
    file). The same snapshot holds three hand-made partitions whose windows differ only in
    content (:func:`_write_content_cases`): one audit per way for both (each audit of a
    large input's way costs the suite ~35 s)."""
    # the draw is not trivial (else Hypothesis draws again, before any audit): damaged
    # histories and diverged followers in it, and logs that start at other offsets (a
    # comparison's scope starts inside a window)
    assume(sum(1 for d in ds if any(d.logs[r] != list(d.history.replicas[r].log) for r in d.logs)) >= 5)
    assume(sum(1 for d in ds for v in _expected(d)[0].values() if v[2] is not None) >= 5)
    assume(sum(1 for d in ds if len({log[0][0] for log in d.logs.values() if log}) > 1) >= 5)
    # and a follower's batch the leader lacks starting inside one it holds (SPEC 4.4)
    assume(any("<" in b[3] for d in covered for log in d.logs.values() for b in log))
    ds = ds + covered
    monkeypatch.setattr(digest, "WINDOW_BITS", 2)
    monkeypatch.setattr(wholefile, "TAIL_LINES", 2)
    root = tmp_path_factory.mktemp("drill")
    for i, d in enumerate(ds):
        # a repeated batch is printed by a second dump of the replica's segment
        write_partition(root, f"h{i}", 0, {
            rid: Replica([(b, last, e) for b, last, e, _ in sorted(set(log))], d.history.replicas[rid].hwm,
                         checkpoint=d.history.replicas[rid].cache, salt={b: c for b, _, _, c in log},
                         segments=d.segments[rid])
            for rid, log in d.logs.items()})
        for rid, log in d.logs.items():
            repeated = [b for b in set(log) if log.count(b) > 1]
            if repeated:
                folder = root / f"broker={rid}" / "data" / f"h{i}-0"
                original = sorted(folder.glob("*.log.txt"))[-1]
                (folder / ("again-" + original.name)).write_text(original.read_text())
    content = _write_content_cases(root)
    write_describe(root, {**{f"h{i}": [PartitionMeta(0, d.history.leader, tuple(d.logs), tuple(d.logs))]
                             for i, d in enumerate(ds)},
                          **{t: [PartitionMeta(0, 1, (1, 2), (1, 2))] for t in content}})
    if not batches_in_scan:
        # Odd brokers' dumps in one multi-section file per broker, as the collector's
        # --per-broker-file writes them: a drill-down reads such a file whole but parses
        # only the sections (partitions, segments) it wants.
        for broker in sorted(root.glob("broker=*")):
            if int(broker.name.split("=")[1]) % 2 == 1:
                dumps = sorted(broker.glob("data/*/*.log.txt"))
                (broker / "dumps").mkdir()
                (broker / "dumps" / "all-segments.txt").write_text("".join(f.read_text() for f in dumps))
                for f in dumps:
                    f.unlink()
    # Batches in the scan: a small input, planned with the session's own settings (two
    # partitions). Files read again: a large input's plans, and every drilled batch counts
    # as log-sized, so the audit runs spread out from the drill-down on.
    with _batches_in_scan(spark, batches_in_scan) as policy:
        snapshot = load_snapshot(spark, str(root), policy=policy)
        tables = audit(snapshot, "epoch", run_id="drill")
        # the raft rule, offset by offset, on the small input's way only (a large input's
        # audit costs the suite ~35 s more; the rule's windows are chosen the same way)
        raft = ({(r.topic, r.replica): r.truncation_offset
                 for r in audit(snapshot, "raft", run_id="drill-raft")["replica_status"].collect()}
                if batches_in_scan else None)
    rs = {(r.topic, r.replica): r for r in tables["replica_status"].collect()}
    lineage: dict[tuple[str, int], list] = {}  # type: ignore[type-arg]
    for r in tables["epoch_lineage"].filter(F.col("source") == "log").collect():
        lineage.setdefault((r.topic, r.replica), []).append((r.epoch, r.start_offset, r.end_offset, r.batch_count))
    found = tables["findings"].collect()
    got = {(r.topic, r.replica, r.check, r.offset_start, r.offset_end, *((r.epoch,) if r.check == "EPOCH_REGRESSION" else ()))
           for r in found if r.check in CHECKS}
    # SPEC 6: finding_id is unique per run and snapshot, whatever the damage
    ids = [(r.snapshot, r.finding_id) for r in found]
    assert len(ids) == len(set(ids)), [r for r in found if ids.count((r.snapshot, r.finding_id)) > 1]
    for i, d in enumerate(ds):
        topic = f"h{i}"
        status, want_lineage, want_found = _expected(d)
        for rid, (count, leo, d_off, t, removed, raft_t) in status.items():
            r = rs[(topic, rid)]
            assert (r.batch_count, r.log_end_offset) == (count, leo), (topic, rid, d)
            if r.role == "follower" and count:
                assert (r.divergence_offset, r.truncation_offset) == (d_off, t), (topic, rid, d)
                if raft is not None:
                    assert raft[(topic, rid)] == raft_t, ("raft", topic, rid, d)
                if removed is not None:
                    assert r.records_to_truncate == removed, (topic, rid, d)
            assert sorted(lineage.get((topic, rid), [])) == want_lineage[rid], (topic, rid, d)
        assert {g[1:] for g in got if g[0] == topic} == want_found, (topic, d)
    _check_content_cases(tables)


def test_only_the_newest_segments_of_a_partition_folder_mark_their_tails() -> None:
    def dump(i: int, rel: str, topic: str | None = "t") -> tuple[int, InputFile]:
        return i, InputFile(f"/in/{rel}", rel, "dump", datetime(2026, 1, 1), 1, "data", topic, 0, 1)

    files = [dump(1, "broker=1/data/t-0/00000000000000000000.log.txt"),
             dump(2, "broker=1/data/t-0/00000000000000000300.log.txt"),
             dump(3, "broker=1/data/t-0/00000000000000000600.log.txt"),
             dump(4, "broker=1/data/t-0/00000000000000000600.index.txt"),
             dump(5, "broker=1/data/t-0/00000000000000000900.log.txt"),
             dump(6, "broker=1/data/t-0/again-00000000000000000000.log.txt"),
             dump(7, "broker=2/data/t-0/00000000000000000000.log.txt"),
             dump(8, "broker=1/data/all-segments.txt", topic=None),
             dump(9, "broker=1/data/00000000000000000000.log.txt", topic=None)]
    # per folder, the two highest bases (600 and 900, each file named by them); any file
    # whose name or folder says nothing keeps its tails
    assert wholefile.tail_files(files) == {3, 4, 5, 6, 7, 8, 9}
    assert wholefile.tail_files(files[:2]) == {1, 2}


@pytest.mark.parametrize("read", ["whole", "line-by-line"])
def test_tail_rows_come_from_the_two_newest_segment_files(spark, tmp_path, monkeypatch, read) -> None:  # type: ignore[no-untyped-def]
    """The scan marks tails where :func:`tail_files` says, whichever way a file is read: a
    log of 20 one-offset batches in four segment files of 5 batches (each file shorter
    than a tail) has its tail rows in the files at 10 and 15 only."""
    if read == "line-by-line":
        monkeypatch.setattr(wholefile, "whole_file_limit", lambda _spark: 0)
    write_partition(tmp_path, "t", 0, {1: Replica([(i, i, 1) for i in range(20)], 20, segments=4)})
    snap = load_snapshot(spark, str(tmp_path))
    summaries = snap.summaries
    tails = {(r.file.rsplit("/", 1)[1], r.min_base) for r in summaries.filter("tail").collect()}
    assert tails == {(f"{10 if i < 15 else 15:020d}.log.txt", i) for i in range(10, 20)}
    # what sizes the comparisons over them (auditor.engine: spread out when log-sized)
    assert snap.summary_rows == summaries.count() > 0


def test_the_model_finds_sequence_problems() -> None:
    log = [(0, 1, 1, "a"), (2, 3, 1, "b"), (6, 6, 2, "c"), (5, 8, 2, "d"), (9, 9, 1, "e"), (10, 10, 1, "f")]
    gaps, overlaps, regressions = _sequence(log)
    assert gaps == {(4, 5)} and overlaps == {(6, 7)} and regressions == {(9, 10, 1), (10, 11, 1)}


def _batches_in_scan(spark: object, on: bool) -> contextlib.AbstractContextManager[object]:
    """Where the drill-down's batches come from, and the size policy the load and the audit
    take: a small input planned with the session's settings, with batches in the scan; a
    large input whose drilled batches are all log-sized, when the files are read again."""
    if on:
        return contextlib.nullcontext(as_session())
    return large_input(spark, log_sized_rows=0)


def _write_content_cases(root: Path) -> list[str]:
    """Windows equal in count but not in content, away from every truncation probe: a
    follower whose batch 9 has another CRC (window 8-11 of 4 offsets), and a follower lagging
    within the tail whose last batch has another CRC (the tail prefix must match on digests,
    not only on counts); a follower holding a batch twice, the first copy rewritten into an
    older epoch, beside the leader's copy (they agree there: SPEC 4.4, both hold the batch;
    found by the property test above); and a healthy partition beside them. Returns their
    topics."""
    leader = [(0, 2, 1), (3, 3, 1), (4, 6, 1), (7, 8, 1)]
    write_partition(root, "rewritten-repeat", 0, {
        1: Replica(leader, 9, checkpoint=[(1, 0)], segments=2),
        2: Replica([(4, 6, 1), (7, 8, 0), (7, 8, 1)], 9, checkpoint=[(1, 0)], segments=3)})
    spans = [(i, i, 1) for i in range(20)]
    write_partition(root, "middle", 0, {1: Replica(spans, 20), 2: Replica(spans, 20, salt={9: "x"})})
    write_partition(root, "lagging", 0, {1: Replica(spans, 18), 2: Replica(spans[:18], 18, salt={17: "x"})})
    write_partition(root, "healthy", 0, {1: Replica(spans, 18), 2: Replica(spans[:18], 18)})
    return ["middle", "lagging", "healthy", "rewritten-repeat"]


def _check_content_cases(tables: dict) -> None:  # type: ignore[type-arg]
    """The windows that differ only in content are compared batch by batch (:func:`_write_content_cases`)."""
    rows = {r.topic: r for r in tables["replica_status"].filter(
        (F.col("replica") == 2) & F.col("topic").isin("middle", "lagging", "healthy", "rewritten-repeat")).collect()}
    assert (rows["middle"].divergence_offset, rows["middle"].status) == (9, "silent_divergence")
    assert rows["lagging"].divergence_offset == 17
    assert rows["healthy"].divergence_offset is None and rows["healthy"].status != "silent_divergence"
    assert rows["rewritten-repeat"].divergence_offset is None, rows["rewritten-repeat"]
