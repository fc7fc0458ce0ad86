"""Log-consistency auditor for Kafka and other replicated logs, on Apache Spark.

Python API (SPEC section 7)::

    import auditor
    snap = auditor.load_snapshot(spark, "/path/to/snapshot")
    tables = auditor.audit(snap)
    answers = auditor.end_offset_for(caches, requests)   # Kafka's EOE (SPEC 4.2)

Nothing here starts Spark at import time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from auditor.version import __version__

__all__ = ["__version__", "audit", "end_offset_for", "load_snapshot"]

if TYPE_CHECKING:
    from auditor.engine import audit
    from auditor.load import load_snapshot
    from auditor.semantics.eoe import end_offset_for


def __getattr__(name: str) -> Any:
    # Lazy: `auditor --help` and the pure-Python tests never import pyspark.
    if name == "load_snapshot":
        from auditor.load import load_snapshot

        return load_snapshot
    if name == "audit":
        from auditor.engine import audit

        return audit
    if name == "end_offset_for":
        from auditor.semantics.eoe import end_offset_for

        return end_offset_for
    raise AttributeError(f"module 'auditor' has no attribute {name!r}")
