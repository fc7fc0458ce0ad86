"""``auditor simulate``: simulate Kafka partition replication with injected faults and write
a snapshot in the SPEC 3.1 layout, plus ``expected_findings.json`` (the ground truth).

Partitions are simulated and written one at a time, so memory stays flat whatever the
size of the cluster; per-broker checkpoint entries and the expected findings are streamed
to side files and assembled at the end.
"""

from __future__ import annotations

from auditor.simulator.cluster import continue_simulation, simulate
from auditor.simulator.plan import ALL_FAULTS, parse_faults
from auditor.simulator.shapes import truncate_from_start

__all__ = ["ALL_FAULTS", "continue_simulation", "parse_faults", "simulate", "truncate_from_start"]
