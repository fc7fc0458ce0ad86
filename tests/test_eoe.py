"""EOE (SPEC 4.2) in Spark against the reference model, every edge case included."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditor import end_offset_for  # the public API of SPEC 7
from tests import reference

pytestmark = pytest.mark.spark

CACHE = [(1, 0), (2, 40), (5, 90)]  # epochs 1, 2, 5; LEO 120


@pytest.mark.parametrize("requested, expected", [
    (-1, (-1, -1)),      # undefined request
    (5, (5, 120)),       # latest epoch -> LEO
    (7, (-1, -1)),       # above every epoch
    (0, (0, 0)),         # below every epoch -> (requested, first start)
    (1, (1, 40)),        # known epoch -> next epoch's start
    (3, (2, 90)),        # unknown epoch in between -> (largest <= requested, next start)
])
def test_edge_cases_match_the_reference(requested: int, expected: tuple[int, int]) -> None:
    assert reference.end_offset_for(CACHE, 120, requested) == expected


def test_spark_edge_cases(spark) -> None:  # type: ignore[no-untyped-def]
    caches = spark.createDataFrame(
        [("t", 0, 1, e, s, 120) for e, s in CACHE] + [("t", 0, 2, 4, 7, 7)],
        "topic string, partition int, replica int, epoch int, start_offset bigint, log_end_offset bigint")
    reqs = [(-1,), (5,), (7,), (0,), (1,), (3,)]
    requests = spark.createDataFrame(
        [("t", 0, 1, r, f"q{i}") for i, (r,) in enumerate(reqs)]
        + [("t", 0, 2, 4, "current-epoch-at-leo"), ("t", 0, 3, 1, "no-cache"), ("t", 0, 1, 3, "duplicate"),
           ("t", 0, 1, 3, "duplicate")],
        "topic string, partition int, replica int, requested_epoch int, tag string")
    out = end_offset_for(caches, requests)
    assert out.columns == ["topic", "partition", "replica", "requested_epoch", "tag", "epoch", "end_offset"]
    assert dict(out.dtypes)["epoch"] == "int" and dict(out.dtypes)["end_offset"] == "bigint"
    got = sorted((r.tag, r.epoch, r.end_offset) for r in out.collect())
    expected = sorted([(f"q{i}", *reference.end_offset_for(CACHE, 120, r)) for i, (r,) in enumerate(reqs)]
                      + [("current-epoch-at-leo", 4, 7), ("no-cache", -1, -1), ("duplicate", 2, 90),
                         ("duplicate", 2, 90)])
    assert got == expected


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cases=st.lists(st.tuples(
    st.lists(st.tuples(st.integers(0, 12), st.integers(0, 200)), max_size=6),
    st.integers(0, 300), st.integers(-1, 14)), min_size=30, max_size=30))
def test_spark_matches_reference_on_random_caches(spark, cases) -> None:  # type: ignore[no-untyped-def]
    cache_rows, request_rows, expected = [], [], {}
    for i, (entries, leo, requested) in enumerate(cases):
        cache = sorted({e: s for e, s in entries}.items())  # one start per epoch, sorted by epoch
        cache_rows += [("t", i, 1, e, s, leo) for e, s in cache]
        request_rows.append(("t", i, 1, requested))
        expected[i] = reference.end_offset_for(cache, leo, requested)
    caches = spark.createDataFrame(cache_rows or [("t", -1, 1, 0, 0, 0)],
                                   "topic string, partition int, replica int, epoch int, start_offset bigint, log_end_offset bigint")
    requests = spark.createDataFrame(request_rows, "topic string, partition int, replica int, requested_epoch int")
    got = {r.partition: (r.epoch, r.end_offset) for r in end_offset_for(caches, requests).collect()}
    assert got == expected
