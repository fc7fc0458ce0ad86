"""The cut points of one audit: frames that later queries read more than once, each set
computed by one Spark job and stored under the run's work dir, then read back as the plan
of their stretch of the run says (:class:`auditor.policy.Plan`).

Planning a query over a stored frame is much cheaper than over the plan that made it (each
DataFrame step re-analyses its plan), and a stored frame is never recomputed, so every
later query reads exactly the same rows.
"""

from __future__ import annotations

import contextlib
import itertools
import uuid
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession

from auditor.compare.drill import stored_drill_files
from auditor.frames import union_all
from auditor.materialise import materialise
from auditor.policy import Plan, Plans, SizePolicy


@dataclass
class Cuts:
    """One audit's cut points, in order (``engine-<id>-<n>``)."""

    spark: SparkSession
    work_dir: str
    policy: SizePolicy
    plans: Plans
    label: str = field(default_factory=lambda: f"engine-{uuid.uuid4().hex[:12]}")
    _serial: itertools.count[int] = field(default_factory=itertools.count)

    def next_label(self) -> str:
        """A new cut point's label."""
        return f"{self.label}-{next(self._serial)}"

    def plan(self, rows: int = 0) -> Plan:
        """The plan of work over ``rows`` stored rows: spread out when they are log-sized,
        else the work after the scan's."""
        return self.plans.spread if self.policy.is_log_sized(rows) else self.plans.after_scan

    def applied(self, plan: Plan) -> contextlib.AbstractContextManager[None]:
        """The block runs with ``plan``'s settings, when it is not the work after the
        scan's own (which :func:`auditor.engine.audit` applies for the whole audit)."""
        return contextlib.nullcontext() if plan == self.plans.after_scan else plan.applied(self.spark)

    def cut(self, plan: Plan | None = None, **frames: DataFrame) -> dict[str, DataFrame]:
        """Store ``frames`` in one job; returns them read back."""
        return materialise(frames, self.work_dir, self.next_label(), plan or self.plans.after_scan)

    def cut_listing(self, files: tuple[str, DataFrame] | None, plan: Plan | None = None,
                    **frames: DataFrame) -> tuple[dict[str, DataFrame], dict[int, frozenset[int]]]:
        """A cut that also stores a drill-down's file list (``files``: its name and frame),
        returned read back without Spark (empty when ``files`` is None: nothing is read
        again). The files each drill-down reads, and their sections it parses, are listed
        in the job of the cut before it, not by a job of their own."""
        label = self.next_label()
        stored = materialise({**frames, **({files[0]: files[1]} if files is not None else {})}, self.work_dir,
                             label, plan or self.plans.after_scan)
        return stored, stored_drill_files(self.work_dir, label, files[0]) if files is not None else {}

    def union(self, frames: list[DataFrame], plan: Plan | None = None) -> DataFrame:
        """The rows of ``frames``, in one partition when the plan is narrow."""
        return union_all(frames, narrow=(plan or self.plans.after_scan).narrow)
