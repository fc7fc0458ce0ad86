"""Damaged input never crashes or hangs an audit, every line is accounted for, and damage
stays where it is (``tests/mutations.py``). ``benchmarks/fuzz.py`` runs 10,000+ mutations;
here Hypothesis draws a few bounded, reproducible combinations."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests import mutations as m

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def base(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    from auditor.simulator import simulate

    root = tmp_path_factory.mktemp("fuzz") / "base"
    simulate(root, brokers=3, topics=2, partitions=3, batches=12, faults="unclean-election=1,lossy-shutdown=1",
             seed=5)
    _, _, findings = m.audit_damaged(spark, root)
    baseline = m.finding_keys(findings)
    assert baseline  # the undamaged cluster has findings to keep
    return root, m.targets(root), baseline


# (each example is one audit of a damaged copy, drawn anew every run; benchmarks/fuzz.py
# runs many)
@settings(max_examples=2, deadline=None, phases=[Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(picks=st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(m.KINDS)), min_size=2, max_size=7),
       seed=st.integers(0, 2**32 - 1))
def test_damaged_snapshots_keep_every_promise(spark, base, tmp_path_factory, picks, seed) -> None:  # type: ignore[no-untyped-def]
    root, targets, baseline = base
    copy = m.copy_snapshot(root, tmp_path_factory.mktemp("damaged") / "snap")
    rng = random.Random(seed)
    applied = m.Applied()
    partitions = sorted({t.partition for t in targets if t.partition})
    used: set[str] = set()
    for pick, kind in picks:
        choices = [t for t in targets if m.applicable(kind, t) and t.rel not in used]
        target = choices[pick % len(choices)]
        used.add(target.rel)
        m.mutate(copy, target, kind, rng, applied, partitions)
    try:
        broken = m.check_invariants(copy, applied, *m.audit_damaged(spark, copy), baseline)
    finally:
        m.restore_permissions(copy)
    assert broken == [], applied.mutations


def test_every_mutation_kind_at_once(spark, base, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """One snapshot with each kind of damage in a different file (a 10 MB line included)."""
    root, targets, baseline = base
    copy = m.copy_snapshot(root, tmp_path / "snap")
    rng = random.Random(3)
    applied = m.Applied()
    partitions = sorted({t.partition for t in targets if t.partition})
    used: set[str] = set()
    for kind in m.KINDS:
        target = next(t for t in targets if m.applicable(kind, t) and t.rel not in used and t.kind != "describe")
        used.add(target.rel)
        m.mutate(copy, target, kind, rng, applied, partitions)
    assert {k for k, _ in applied.mutations} == set(m.KINDS)
    try:
        broken = m.check_invariants(copy, applied, *m.audit_damaged(spark, copy), baseline)
    finally:
        m.restore_permissions(copy)
    assert broken == [], applied.mutations
