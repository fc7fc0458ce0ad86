"""Columns by name and literals, each made once per Spark context and kept.

PySpark's ``F.col(name)`` and ``F.lit(value)`` each ask the JVM, over py4j, for the
``functions`` class, then for its member, then call it: three round trips for a value
that never changes while the JVM runs (a column by name is an unresolved reference, a
literal a constant; PySpark's ``Column`` is immutable, so one object serves every
expression). An audit builds thousands of them. These two helpers keep each one per
Spark context; they are the auditor's own and change nothing else in the process (PySpark's
own functions are untouched).
"""

from __future__ import annotations

from typing import Any

from pyspark import SparkContext
from pyspark.sql import Column
from pyspark.sql import functions as F

#: (id of the Spark context, what, key) -> (that context, the column). The context is kept
#: with its entries so that its id names it as long as they live.
_KEPT: dict[tuple[int, str, Any], tuple[SparkContext, Column]] = {}
#: The most entries kept (an audit makes a few thousand; beyond, columns are made anew).
MAX_KEPT = 50_000


def _kept(what: str, key: Any, make: Any) -> Column:
    sc = SparkContext._active_spark_context  # noqa: SLF001 - the context the column belongs to
    if sc is None:
        return make()  # type: ignore[no-any-return]
    entry = (id(sc), what, key)
    found = _KEPT.get(entry)
    if found is None or found[0] is not sc:
        found = (sc, make())
        if len(_KEPT) < MAX_KEPT:
            _KEPT[entry] = found
    return found[1]


def col(name: str) -> Column:
    """``F.col(name)``, made once per Spark context."""
    return _kept("col", name, lambda: F.col(name))


def lit(value: Any) -> Column:
    """``F.lit(value)``, made once per Spark context for a plain value (None, a bool, an
    int, a float, a string); anything else (a column, a date, a list) as ``F.lit`` makes it."""
    if value is not None and type(value) not in (bool, int, float, str):
        return F.lit(value)
    return _kept("lit", (type(value).__name__, value), lambda: F.lit(value))
