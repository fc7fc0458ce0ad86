"""The simulator on its own (no Spark): Kafka's cache and truncation rules in its model,
determinism, fault coverage, fault specs, flat memory, and the CLI."""

from __future__ import annotations

import hashlib
import json
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import main
from auditor.errors import InputError
from auditor.simulator import ALL_FAULTS, parse_faults, simulate
from auditor.simulator.history import FAULTS, SHAPED_FAULTS
from auditor.simulator.kraft import KRAFT_FAULTS
from auditor.simulator.model import EpochCache, Log, epoch_truncation, kip101_truncation


def tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def test_assign_follows_kafka_2_0_1() -> None:
    c = EpochCache()
    c.assign(1, 0)
    c.assign(1, 5)            # same epoch, higher start: no update
    c.assign(3, 10)
    assert c.entries == [(1, 0), (3, 10)]
    c.assign(2, 8)            # non-monotonic: entries with epoch >= 2 or start >= 8 go
    assert c.entries == [(1, 0), (2, 8)]
    c.assign(0, 4)
    assert c.entries == [(0, 4)]


def test_end_offset_for_follows_kafka() -> None:
    c = EpochCache([(4, 11), (6, 20)])
    assert c.end_offset_for(-1, 30) == (-1, -1)
    assert c.end_offset_for(6, 30) == (6, 30)
    assert c.end_offset_for(2, 30) == (2, 11)      # below the first epoch: (requested, first start)
    assert c.end_offset_for(5, 30) == (4, 20)
    assert c.end_offset_for(7, 30) == (-1, -1)
    assert EpochCache().end_offset_for(3, 0) == (-1, -1)


def test_kafka_diverging_epochs_example() -> None:
    # AbstractFetcherThreadTest.testDivergingEpochs: follower 0:0 1:2 2:4, leader 0:0 1:2 2:5
    follower, leader = Log(), Log()
    for epoch in (0, 2, 4):
        follower.append(1, 1, epoch, tag=epoch)
    for epoch, tag in ((0, 0), (2, 2), (5, 9)):
        leader.append(1, 1, epoch, tag=tag)
    fc = EpochCache([(0, 0), (2, 1), (4, 2)])
    lc = EpochCache([(0, 0), (2, 1), (5, 2)])
    t = epoch_truncation(follower, fc, 0, lc, leader.leo)
    assert (t.offset, t.rounds) == (2, 1)
    assert follower.leo == 3  # not applied


def test_kip_279_scenario_1_in_the_model() -> None:
    # A: [0,10] e1, [11,20] e1, then leader again in e3 from 21; B: [0,10] e1, [11,15] e2
    a, b = Log(), Log()
    a.append(1, 11, 1, tag=1)
    a.append(1, 10, 1, tag=2)
    a.append(1, 5, 3, tag=4)
    b.append(1, 11, 1, tag=1)
    b.append(1, 5, 2, tag=3)
    la, lb = EpochCache([(1, 0), (3, 21)]), EpochCache([(1, 0), (2, 11)])
    assert epoch_truncation(b, lb, 11, la, a.leo).offset == 11
    assert kip101_truncation(b, lb, 11, la, a.leo).offset is None  # the silent divergence of KIP-279


def test_log_truncate_and_copy_keep_batches_whole() -> None:
    log = Log()
    log.append(3, 4, 1, tag=1)     # batches [0,3] [4,7] [8,11]
    assert log.floor(6) == 4 and log.batch_at(12) is None
    assert log.truncate(6) == 8 and log.leo == 4
    other = Log()
    other.copy_from(Log([*log.runs]), 0, 1)
    assert other.leo == 4 and [b.base for b in other.batches()] == [0]


def test_same_seed_same_snapshot(tmp_path: Path) -> None:
    a = simulate(tmp_path / "a", topics=2, partitions=4, seed=7)
    b = simulate(tmp_path / "b", topics=2, partitions=4, seed=7)
    simulate(tmp_path / "c", topics=2, partitions=4, seed=8)
    assert tree_digest(tmp_path / "a") == tree_digest(tmp_path / "b") != tree_digest(tmp_path / "c")
    assert a.batches == b.batches > 0


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_all_injects_every_fault(tmp_path: Path, seed: int) -> None:
    summary = simulate(tmp_path / "s", topics=2, partitions=5, faults="all", seed=seed)
    assert set(summary.faults) == set(FAULTS), summary.faults_skipped
    doc = json.loads((tmp_path / "s" / "expected_findings.json").read_text())
    assert {f["fault"] for f in doc["faults"]} == set(FAULTS)
    assert doc["findings"] and doc["replicas"]
    # every follower of every partition has an expectation
    assert len(doc["replicas"]) == summary.partitions * 2


def test_healthy_cluster_expects_nothing_above_info(tmp_path: Path) -> None:
    simulate(tmp_path / "s", topics=3, partitions=10, faults="none", seed=3)
    doc = json.loads((tmp_path / "s" / "expected_findings.json").read_text())
    assert doc["findings"] == [] and doc["faults"] == []
    assert all(r["divergence_offset"] is None and r["truncation_offset"] is None for r in doc["replicas"])


def test_fault_specs(tmp_path: Path) -> None:
    assert parse_faults("none") == {}
    assert parse_faults("unclean-election=2, torn-tail") == {"unclean-election": 2, "torn-tail": 1}
    assert sum(parse_faults("all").values()) == len(ALL_FAULTS) == len(FAULTS) + len(KRAFT_FAULTS)
    toml = tmp_path / "f.toml"
    toml.write_text('[faults]\nlossy-shutdown = 3\nall = 1\n')
    assert parse_faults(f"@{toml}")["lossy-shutdown"] == 4
    for bad in ("explode", "torn-tail=x", "torn-tail=-1", f"@{tmp_path / 'missing.toml'}"):
        with pytest.raises(InputError):
            parse_faults(bad)
    toml.write_text("[fault]\nx = 1\n")
    with pytest.raises(InputError, match="unknown table"):
        parse_faults(f"@{toml}")


def test_memory_does_not_grow_with_batches(tmp_path: Path) -> None:
    peaks = []
    for n, name in ((1_000, "small"), (20_000, "large")):
        tracemalloc.start()
        simulate(tmp_path / name, brokers=3, topics=1, partitions=1, batches=n, faults="none", seed=2,
                 segment_batches=5_000)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    # 20x the batches: the peak is set by buffers and one segment's batch list, not by the log
    assert peaks[1] < 3 * peaks[0] + 4_000_000, peaks


def test_cli_simulate_and_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(main, ["simulate", str(tmp_path / "s"), "--partitions", "2", "--faults",
                              "unclean-election,stopped-follower", "--seed", "5"])
    assert ok.exit_code == 0, ok.output
    assert "faults injected: stopped-follower x1, unclean-election x1" in ok.output
    again = runner.invoke(main, ["simulate", str(tmp_path / "s")])
    assert again.exit_code == 2 and "not empty" in again.output
    bad = runner.invoke(main, ["simulate", str(tmp_path / "t"), "--faults", "meteor"])
    assert bad.exit_code == 2 and "unknown fault 'meteor'" in bad.output
    old = runner.invoke(main, ["simulate", str(tmp_path / "u"), "--kafka-version", "2.1", "--records"])
    assert old.exit_code == 2 and "2.2 or later" in old.output
    # a KRaft quorum by default from Kafka 2.8 (3 controllers, node ids after the brokers')
    assert (tmp_path / "s" / "broker=5" / "meta" / "__cluster_metadata-0" / "quorum-state").exists()
    assert (tmp_path / "s" / "metadata-quorum-status.txt").exists()
    zk = runner.invoke(main, ["simulate", str(tmp_path / "v"), "--kafka-version", "2.1"])
    assert zk.exit_code == 0 and not list((tmp_path / "v").glob("broker=*/meta"))
    no_kraft = runner.invoke(main, ["simulate", str(tmp_path / "w"), "--kafka-version", "2.1", "--kraft-controllers", "3"])
    assert no_kraft.exit_code == 2 and "2.8 or later" in no_kraft.output


def test_kraft_quorum_is_deterministic_and_takes_every_fault(tmp_path: Path) -> None:
    for name in ("a", "b"):
        simulate(tmp_path / name, topics=1, partitions=1, faults="all", seed=9, kraft_controllers=3)
    assert _files(tmp_path / "a").keys() == _files(tmp_path / "b").keys()
    assert all(v[0] == _files(tmp_path / "b")[k][0] for k, v in _files(tmp_path / "a").items())
    doc = json.loads((tmp_path / "a" / "expected_findings.json").read_text())
    assert {f["fault"] for f in doc["faults"] if f["topic"] == "__cluster_metadata"} == set(KRAFT_FAULTS)
    # 3 controllers and 3 brokers: 5 followers of the metadata log, each with an expectation
    assert len([r for r in doc["replicas"] if r["topic"] == "__cluster_metadata"]) == 5


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_a_continued_cluster_keeps_what_did_not_change(tmp_path: Path) -> None:
    from auditor.simulator import continue_simulation

    simulate(tmp_path / "s0", seed=5, partitions=4, batches=60, segment_batches=10, faults="none")
    first = continue_simulation(tmp_path / "s0", tmp_path / "s1", 25, "unclean-election")
    again = continue_simulation(tmp_path / "s0", tmp_path / "s1-again", 25, "unclean-election")
    s0, s1 = _files(tmp_path / "s0"), _files(tmp_path / "s1")
    # deterministic: the same continuation twice gives the same bytes
    assert {k: v[0] for k, v in s1.items()} == {k: v[0] for k, v in _files(tmp_path / "s1-again").items()}
    assert first.faults == again.faults and first.faults["unclean-election"] >= 1
    # the history grew: rolled segments kept their bytes and their modification time, the
    # active segments and checkpoints changed, new segments were rolled
    dumps = [k for k in s1 if k.endswith(".log.txt")]
    kept = [k for k in dumps if k in s0 and s0[k] == s1[k]]
    changed = [k for k in dumps if k in s0 and s0[k][0] != s1[k][0]]
    new = [k for k in dumps if k not in s0]
    assert kept and changed and new and first.batches > 0
    assert all(s1[k][1] != s0[k][1] for k in changed)
    settings = json.loads((tmp_path / "s1" / "simulation.json").read_text())
    assert settings["continuations"] == [{"batches": 25, "faults": "unclean-election"}]
    # a third snapshot replays both continuations
    continue_simulation(tmp_path / "s1", tmp_path / "s2", 10)
    assert len(json.loads((tmp_path / "s2" / "simulation.json").read_text())["continuations"]) == 2


def test_a_continued_kraft_quorum_goes_on(tmp_path: Path) -> None:
    """The metadata log of a continued cluster continues its history: it grows, what did
    not change keeps its bytes and modification time, and a KRaft fault asked of a later
    snapshot is applied (it was dropped without a word before)."""
    from auditor.simulator import continue_simulation

    simulate(tmp_path / "s0", seed=6, topics=1, partitions=1, batches=40, faults="none", kraft_controllers=3)
    later = continue_simulation(tmp_path / "s0", tmp_path / "s1", 60, "kraft-zero-length-snapshot")
    assert later.faults == {"kraft-zero-length-snapshot": 1} and not later.faults_skipped
    s0, s1 = _files(tmp_path / "s0"), _files(tmp_path / "s1")
    meta = [k for k in s1 if "__cluster_metadata-0" in k]
    assert meta
    # the leader's log ends further on (the last segment's name is its base offset)
    def last_segment(files: dict[str, tuple[bytes, int]]) -> int:
        return max(int(Path(k).name.split(".")[0]) for k in files if "__cluster_metadata-0" in k
                   and k.endswith(".log.txt"))
    assert last_segment(s1) > last_segment(s0)
    kept = [k for k in meta if k in s0 and s0[k] == s1[k]]
    new = [k for k in meta if k not in s0 and k.endswith(".log.txt")]
    assert kept and new, (kept, new)
    # the earlier snapshot's history is replayed exactly: the same continuation, the same bytes
    again = continue_simulation(tmp_path / "s0", tmp_path / "s1-again", 60, "kraft-zero-length-snapshot")
    assert again.faults == later.faults
    assert {k: v[0] for k, v in s1.items()} == {k: v[0] for k, v in _files(tmp_path / "s1-again").items()}


def test_cli_continue_from(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(main, ["simulate", str(tmp_path / "a"), "--faults", "none", "--batches", "20"]).exit_code == 0
    done = runner.invoke(main, ["simulate", str(tmp_path / "b"), "--continue-from", str(tmp_path / "a"),
                                "--steps", "5", "--faults", "torn-tail"])
    assert done.exit_code == 0, done.output
    assert json.loads((tmp_path / "b" / "simulation.json").read_text())["continuations"] == [
        {"batches": 5, "faults": "torn-tail"}]
    for args, message in (
        (["--continue-from", str(tmp_path / "a"), "--brokers", "4"], "--brokers cannot be given"),
        (["--steps", "3"], "--steps needs --continue-from"),
        (["--continue-from", str(tmp_path / "nothing")], "no readable simulation.json"),
        (["--continue-from", str(tmp_path / "a"), "--faults", "bogus"], "bogus"),
    ):
        bad = runner.invoke(main, ["simulate", str(tmp_path / "c"), *args])
        assert bad.exit_code == 2 and message in bad.output, (args, bad.output)


def test_truncate_from_start_is_kafkas() -> None:
    from auditor.simulator import truncate_from_start

    cache = [(0, 0), (1, 5), (2, 9)]
    assert truncate_from_start(cache, 7) == [(1, 7), (2, 9)]  # the entry in force moves up
    assert truncate_from_start(cache, 5) == [(1, 5), (2, 9)]
    assert truncate_from_start(cache, 0) == cache
    assert truncate_from_start([(0, 0)], 3) == [(0, 3)]


def test_shapes_change_the_files_not_the_truth(tmp_path: Path) -> None:
    """Tiered storage and DeleteRecords on fault-free partitions: the dumps, checkpoints and
    describe output change as on a real broker; the expected findings do not. (The faults
    that need a shape, a zombie transaction and a cleaner bug, happen only in the shaped
    cluster: their partitions are compared apart.)"""
    kwargs = dict(topics=3, partitions=8, batches=40, segment_batches=6, seed=21, faults="all")
    shaped = simulate(tmp_path / "shaped", **kwargs)  # type: ignore[arg-type]
    plain = simulate(tmp_path / "plain", shapes=False, **kwargs)  # type: ignore[arg-type]
    assert shaped.shapes["tiered"] >= 1 and shaped.shapes["retention"] >= 1, shaped.shapes
    assert set(SHAPED_FAULTS) <= set(shaped.faults) and not set(SHAPED_FAULTS) & set(plain.faults)
    assert {f: plain.faults_skipped[f] for f in SHAPED_FAULTS} == {f: 1 for f in SHAPED_FAULTS}
    hosting = {(f["topic"], f["partition"]) for f in json.loads(
        (tmp_path / "shaped" / "expected_findings.json").read_text())["faults"] if f["fault"] in SHAPED_FAULTS}

    def truth(name: str, topic: str | None = None) -> dict:  # type: ignore[type-arg]
        doc = json.loads((tmp_path / name / "expected_findings.json").read_text())
        return {k: [x for x in doc[k] if (x["topic"] == "__consumer_offsets") == (topic is not None)
                    and (x["topic"], x["partition"]) not in hosting]
                for k in ("findings", "replicas", "faults")}

    assert truth("shaped") == truth("plain")
    # the consumer offsets topic the shapes add: nothing to find, no follower diverged, but
    # where a shaped fault happened
    offsets = truth("shaped", "__consumer_offsets")
    assert offsets["findings"] == [] and offsets["replicas"]
    assert all(r["divergence_offset"] is None and r["truncation_offset"] is None for r in offsets["replicas"])
    root = tmp_path / "shaped"
    describe = (root / "topics-describe.txt").read_text()
    assert describe.count("remote.storage.enable=true") == 1  # topic 1 of 3
    starts: dict[tuple[str, int], list[int]] = {}
    for b in (1, 2, 3):
        text = (root / f"broker={b}" / "data" / "log-start-offset-checkpoint").read_text().split("\n")
        assert text[0] == "0" and int(text[1]) == len([line for line in text[2:] if line])
        for line in text[2:]:
            if line:
                topic, p, start = line.split()
                starts.setdefault((topic, int(p)), []).append(int(start))
    tiered_topic = next(line.split()[1] for line in describe.splitlines() if "remote.storage" in line)
    retained = {k: v for k, v in starts.items() if k[0] != tiered_topic}
    assert retained and all(len(set(v)) == 1 and v[0] > 0 for v in retained.values())
    for (topic, p), (log_start, *_) in retained.items():
        for b in (1, 2, 3):
            folder = root / f"broker={b}" / "data" / f"{topic}-{p}"
            if folder.exists():
                entries = (folder / "leader-epoch-checkpoint").read_text().split("\n")[2:]
                assert int(entries[0].split()[1]) == log_start  # truncated from the start
    # a tiered partition's replicas keep their own local segments: the first dumped segment
    # starts above 0 on at least one replica, and the log start stays 0
    tiered = [k for k in starts if k[0] == tiered_topic]
    assert tiered and all(starts[k] == [0, 0, 0] for k in tiered)
    firsts = [min(int(f.name.split(".")[0]) for f in (root / f"broker={b}" / "data" / f"{t}-{p}").glob("*.log.txt"))
              for t, p in tiered for b in (1, 2, 3) if (root / f"broker={b}" / "data" / f"{t}-{p}").exists()]
    assert any(f > 0 for f in firsts)


def test_transactional_topics_print_producers_and_markers(tmp_path: Path) -> None:
    """The third topic is written by transactional producers: batch lines carry producer
    ids, epochs and sequences; one-record COMMIT/ABORT markers are control batches, printed
    as Kafka prints them (count 1, size 78, ``endTxnMarker:`` on the record line)."""
    import re

    simulate(tmp_path / "s", topics=3, partitions=3, batches=60, faults="none", seed=9, records=True)
    describe = (tmp_path / "s" / "topics-describe.txt").read_text()
    txn_topic = [line.split()[1] for line in describe.splitlines() if "PartitionCount" in line][2]
    markers, data = Counter(), 0  # type: ignore[var-annotated]
    for dump in (tmp_path / "s").glob(f"broker=*/data/{txn_topic}-*/*.log.txt"):
        lines = dump.read_text().splitlines()
        for i, line in enumerate(lines):
            if not line.startswith("baseOffset:"):
                continue
            f = dict(re.findall(r"(\w+): (\S+)", line.split(" | ")[0]))
            assert f["isTransactional"] == "true" and int(f["producerId"]) >= 4000
            if f["isControl"] == "true":
                assert (f["count"], f["size"], f["baseSequence"], f["lastSequence"]) == ("1", "78", "-1", "-1")
                marker = re.search(r"endTxnMarker: (COMMIT|ABORT) coordinatorEpoch: 0$", lines[i + 1])
                assert marker and lines[i + 1].startswith(f"| offset: {f['baseOffset']} ")
                markers[marker.group(1)] += 1
            else:
                assert int(f["lastSequence"]) - int(f["baseSequence"]) == int(f["count"]) - 1
                data += 1
    assert markers["COMMIT"] > 0 and markers["ABORT"] > 0 and data > 0, (markers, data)
    # the other topics keep no producer
    other = next((tmp_path / "s").glob("broker=1/data/orders-0/*.log.txt")).read_text()
    assert "producerId: -1" in other and "isTransactional: true" not in other


def test_consumer_offsets_are_compacted_by_each_replica_on_its_own(tmp_path: Path) -> None:
    """``__consumer_offsets`` (always compacted): below its own HWM and before its active
    segment, each replica's cleaner drops batches (gaps) and shortens others (a later base
    offset, the same last offset, a new CRC); above the HWMs every replica holds the same."""
    import re

    simulate(tmp_path / "s", topics=1, partitions=1, batches=80, segment_batches=8, faults="none", seed=4)
    assert "Topic: __consumer_offsets\t" in (tmp_path / "s" / "topics-describe.txt").read_text()
    logs = {}
    for b in (1, 2, 3):
        batches = []
        for dump in sorted((tmp_path / "s").glob(f"broker={b}/data/__consumer_offsets-0/*.log.txt")):
            batches += [tuple(int(x) for x in m) for m in re.findall(
                r"^baseOffset: (\d+) lastOffset: (\d+) .* crc: (\d+)", dump.read_text(), re.M)]
        logs[b] = batches
    plain = simulate(tmp_path / "p", topics=1, partitions=1, batches=80, segment_batches=8, faults="none", seed=4,
                     shapes=False)
    assert plain.shapes == {}
    for b, batches in logs.items():
        lasts = [last for _, last, _ in batches]
        assert lasts == sorted(lasts) and len(set(lasts)) == len(lasts)  # still in order, no overlap
        gaps = sum(1 for (_, l1, _), (b2, _, _) in zip(batches, batches[1:]) if b2 > l1 + 1)
        assert gaps > 0, b
    assert len({tuple(v) for v in logs.values()}) == 3  # each replica cleaned on its own
    tails = [set(v[-5:]) for v in logs.values()]  # the active segment is never cleaned
    assert tails[0] == tails[1] == tails[2]


def test_shaped_faults_and_their_ground_truth(tmp_path: Path) -> None:
    """A zombie transaction (a deposed leader's transactional batches in its old epoch, no
    marker, above the HWM) and a cleaner bug (a committed batch dropped by the leader's
    cleaner above every HWM checkpoint) land only where their shape is, with the findings
    SPEC 5 gives them; a second stopped follower below min ISR is named in ``Elr:``."""
    import re

    summary = simulate(tmp_path / "s", topics=3, partitions=4, batches=30, seed=5, segment_batches=8,
                       faults="zombie-transaction=2,cleaner-bug=1,stopped-follower=4")
    assert summary.faults == {"zombie-transaction": 2, "cleaner-bug": 1, "stopped-follower": 4}
    doc = json.loads((tmp_path / "s" / "expected_findings.json").read_text())
    describe = (tmp_path / "s" / "topics-describe.txt").read_text()
    txn_topic = [line.split()[1] for line in describe.splitlines() if "PartitionCount" in line][2]
    where = {f["fault"]: set() for f in doc["faults"]}  # type: ignore[var-annotated]
    for f in doc["faults"]:
        where[f["fault"]].add((f["topic"], f["partition"]))
    assert all(t in (txn_topic, "__consumer_offsets") for t, _ in where["zombie-transaction"])
    assert all(t == "__consumer_offsets" for t, _ in where["cleaner-bug"])
    claims = Counter((c["check"], c["severity"], c["topic"], c["partition"]) for c in doc["findings"])
    for topic, p in where["zombie-transaction"]:
        assert claims[("DIVERGENT_SUFFIX", "WARNING", topic, p)] == 1, claims
        # the zombie's batches: transactional, a producer of their own, and no marker for it
        zombie = [line for d in (tmp_path / "s").glob(f"broker=*/data/{topic}-{p}/*.txt")
                  for line in d.read_text().splitlines() if "producerId: 49" in line]
        assert zombie and all("isTransactional: true isControl: false" in line for line in zombie)
    (topic, p), = where["cleaner-bug"]
    assert claims[("OFFSET_GAP", "WARNING", topic, p)] == 1
    assert claims[("SILENT_DIVERGENCE", "CRITICAL", topic, p)] == 2  # both followers kept the batch
    gap = next(c for c in doc["findings"] if c["check"] == "OFFSET_GAP")
    followers = [r for r in doc["replicas"] if (r["topic"], r["partition"]) == (topic, p)]
    assert {r["divergence_offset"] for r in followers} == {gap["offset_start"]}
    assert {r["truncation_offset"] for r in followers} == {None}
    # KIP-966: the ISR fell below min ISR 2, so the follower that left it then is eligible
    elr = re.findall(r"Isr: (\d+)\tElr: (\d+)\t", describe)
    assert elr and all(isr != e for isr, e in elr)
