"""Invariants every audit's tables keep, whatever the input (SPEC 6): one row per replica and
snapshot, one per partition and snapshot, ``finding_id`` unique per snapshot, and no
``epoch_lineage`` row twice. A fact computed on two paths at once (the summaries and the
batches, say) shows up here as a repeated key, where a set comparison would hide it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

KEYS: dict[str, tuple[str, ...]] = {
    "findings": ("snapshot", "finding_id"),
    "replica_status": ("snapshot", "topic", "partition", "replica"),
    "partition_status": ("snapshot", "topic", "partition"),
    # a whole row: two runs of one epoch may start at one offset in a log whose batches repeat
    "epoch_lineage": ("snapshot", "topic", "partition", "replica", "source", "epoch", "start_offset", "end_offset",
                      "batch_count"),
}


def repeated_rows(tables: Mapping[str, Iterable[Mapping[str, Any]]]) -> dict[str, list[tuple[Any, ...]]]:
    """Per table of :data:`KEYS` in ``tables`` (rows as mappings): the keys seen more than once."""
    out = {}
    for name, rows in tables.items():
        counts = Counter(tuple(r[c] for c in KEYS[name]) for r in rows)
        out[name] = sorted((k for k, n in counts.items() if n > 1), key=str)
    return out


RANK = {"INFO": 0, "WARNING": 1, "ERROR": 2, "CRITICAL": 3}
META = ("__cluster_metadata", "@metadata")


def disagreements(tables: Mapping[str, list[Mapping[str, Any]]]) -> list[tuple[Any, ...]]:
    """Where the tables contradict each other (SPEC 6.1's meanings), as
    ``(what, key, one side, the other)``; empty when they agree. ``tables``: the rows of
    ``findings``, ``replica_status``, ``partition_status`` and ``epoch_lineage``.

    - ``partition_status``: ``finding_count`` and ``worst_severity`` are the partition's
      findings', ``replica_count`` its ``replica_status`` rows', the leader is the one row
      whose role is ``leader`` and ``leader_log_end_offset``/``leader_epoch`` are that row's
      LEO and latest epoch; ``max_high_watermark`` the highest HWM (not on KRaft's log: C).
    - ``replica_status``: ``batch_count`` the sum of its ``source = log`` lineage rows', its
      LEO their highest end, ``latest_epoch`` its cache's last entry; a leader has no
      follower columns; nothing removed, no records to truncate; log start <= LEO;
      ``status`` is ``leader`` exactly for the leader, ``unknown`` without a role, and a
      diverged status names its divergence offset.
    - ``epoch_lineage``, ``source = checkpoint``: each entry ends where the next starts,
      the last at the replica's LEO.
    - ``findings``: a replica's finding names a replica of ``replica_status``; offset_start
      <= offset_end.
    """
    out: list[tuple[Any, ...]] = []
    part = lambda r: (r["snapshot"], r["topic"], r["partition"])  # noqa: E731
    rep = lambda r: (r["snapshot"], r["topic"], r["partition"], r["replica"])  # noqa: E731
    replicas = {rep(r): r for r in tables["replica_status"]}
    by_part: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for r in tables["replica_status"]:
        by_part.setdefault(part(r), []).append(r)
    findings: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for f in tables["findings"]:
        findings.setdefault(part(f), []).append(f)
    for p in tables["partition_status"]:
        k, reps, found = part(p), by_part.get(part(p), []), findings.get(part(p), [])
        worst = max((f["severity"] for f in found), key=RANK.__getitem__, default=None)
        out += [("finding_count", k, p["finding_count"], len(found))] * (p["finding_count"] != len(found))
        out += [("worst_severity", k, p["worst_severity"], worst)] * (p["worst_severity"] != worst)
        out += [("replica_count", k, p["replica_count"], len(reps))] * (p["replica_count"] != len(reps))
        leaders = [r for r in reps if r["role"] == "leader"]
        if p["leader"] is None:
            out += [("leader", k, None, [r["replica"] for r in leaders])] * bool(leaders)
        elif [r["replica"] for r in leaders] != [p["leader"]]:
            out.append(("leader", k, p["leader"], [r["replica"] for r in leaders]))
        else:
            (lead,) = leaders
            got, want = (p["leader_log_end_offset"], p["leader_epoch"]), (lead["log_end_offset"], lead["latest_epoch"])
            out += [("leader_leo_epoch", k, got, want)] * (got != want)
        if k[1] not in META:
            hwm = max((r["high_watermark"] for r in reps if r["high_watermark"] is not None), default=None)
            out += [("max_high_watermark", k, p["max_high_watermark"], hwm)] * (p["max_high_watermark"] != hwm)
    lineage: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for row in tables["epoch_lineage"]:
        lineage.setdefault((*rep(row), row["source"]), []).append(row)
    for k, r in replicas.items():
        log, cache = lineage.get((*k, "log"), []), lineage.get((*k, "checkpoint"), [])
        batches = sum(row["batch_count"] for row in log)
        out += [("batch_count", k, r["batch_count"], batches)] * (r["batch_count"] != batches)
        if log:
            end = max(row["end_offset"] for row in log)
            out += [("log_end_offset", k, r["log_end_offset"], end)] * (r["log_end_offset"] != end)
        if cache and r["latest_epoch"] is not None:
            last = max(cache, key=lambda row: row["start_offset"])["epoch"]
            out += [("latest_epoch", k, r["latest_epoch"], last)] * (r["latest_epoch"] != last)
        follower_columns = [r[c] for c in ("divergence_offset", "truncation_offset", "truncation_rounds",
                                           "records_to_truncate")]
        out += [("leader_columns", k, follower_columns, None)] * (
            r["role"] == "leader" and any(v is not None for v in follower_columns))
        out += [("records_to_truncate", k, r["records_to_truncate"], 0)] * (
            r["truncation_offset"] is None and r["records_to_truncate"] not in (0, None))
        start, leo = r["log_start_offset"], r["log_end_offset"]
        out += [("log_start_after_leo", k, start, leo)] * (start is not None and leo is not None and start > leo)
        status = r["status"]
        out += [("status", k, status, r["role"])] * (
            (status == "leader") != (r["role"] == "leader") or (r["role"] is None and status != "unknown")
            or (status in ("silent_divergence", "divergent_suffix") and r["divergence_offset"] is None))
        entries = sorted(cache, key=lambda row: (row["start_offset"], row["epoch"]))
        ends = [row["end_offset"] for row in entries]
        want_ends = [row["start_offset"] for row in entries[1:]] + [leo]
        out += [("cache_entry_ends", k, ends, want_ends)] * (bool(entries) and ends != want_ends)
    for f in tables["findings"]:
        if f["replica"] is not None and rep(f) not in replicas:
            out.append(("finding_replica", rep(f), f["check"], None))
        if f["offset_start"] is not None and f["offset_end"] is not None and f["offset_start"] > f["offset_end"]:
            out.append(("finding_offsets", rep(f), f["offset_start"], f["offset_end"]))
    return out
