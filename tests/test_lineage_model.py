"""The Spark lineage and rebuilt epoch cache agree with the pure-Python reference model on
generated replica logs (epoch changes, regressions, gaps, epoch -1, overlaps)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditor.semantics import lineage
from tests import reference

SNAP = datetime(2026, 1, 1, tzinfo=timezone.utc)


@st.composite
def replica_log(draw: st.DrawFn) -> list[tuple[int, int, int]]:
    """A log of batches: mostly contiguous, with gaps, epoch bumps, regressions, -1 epochs."""
    n = draw(st.integers(0, 12))
    offset = draw(st.integers(0, 50))
    epoch = draw(st.integers(-1, 3))
    out = []
    for _ in range(n):
        step = draw(st.sampled_from(["same", "same", "bump", "regress", "none"]))
        if step == "bump":
            epoch = max(epoch, 0) + draw(st.integers(1, 3))
        elif step == "regress":
            epoch = max(-1, epoch - draw(st.integers(1, 3)))
        elif step == "none":
            epoch = -1
        gap = draw(st.sampled_from([0, 0, 0, 1, 5, -1]))  # -1: overlap with the previous batch
        base = max(0, offset + gap)
        size = draw(st.integers(1, 4))
        out.append((base, base + size - 1, epoch))
        offset = base + size
    return out


def test_reference_assign_matches_kafka_examples() -> None:
    # KAFKA-FORMATS 2.2: a lower epoch truncates every later entry
    assert reference.rebuild_cache([(0, 0, 1), (1, 1, 2), (2, 2, 1)]) == [(1, 2)]
    assert reference.rebuild_cache([(0, 4, 0), (5, 9, 2), (10, 10, 2), (11, 11, 5)]) == [(0, 0), (2, 5), (5, 11)]
    assert reference.rebuild_cache([(0, 0, -1), (1, 1, 3)]) == [(3, 1)]


@pytest.mark.spark
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(logs=st.lists(replica_log(), min_size=40, max_size=40))
def test_spark_lineage_matches_reference(spark, logs) -> None:  # type: ignore[no-untyped-def]
    rows = [(SNAP, "t", i, 1, b, l, e, None, "f", n) for i, log in enumerate(logs) for n, (b, l, e) in enumerate(log)]
    batches = spark.createDataFrame(
        rows, "snapshot timestamp, topic string, partition int, replica int, base_offset bigint, last_offset bigint, "
              "epoch int, crc bigint, file string, line_number bigint")
    got_lineage: dict[int, list] = {}  # type: ignore[type-arg]
    for r in lineage.log_lineage(batches).collect():
        got_lineage.setdefault(r.partition, []).append((r.epoch, r.start_offset, r.end_offset, r.batch_count))
    got_cache: dict[int, list] = {}  # type: ignore[type-arg]
    for r in lineage.rebuilt_cache(batches).collect():
        got_cache.setdefault(r.partition, []).append((r.epoch, r.start_offset))
    for i, log in enumerate(logs):
        assert sorted(got_lineage.get(i, []), key=lambda x: (x[1], x[2])) == reference.log_lineage(log), log
        assert sorted(got_cache.get(i, []), key=lambda x: x[1]) == reference.rebuild_cache(log), log
