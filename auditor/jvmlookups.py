"""PySpark's lookups of JVM static methods, each made once per gateway instead of per call.

Every ``F.col``, ``F.when``, ``F.max`` ... (``pyspark.sql.functions``) and every list of
columns (``select``, ``groupBy``, ``struct``, ``PythonUtils.toSeq``) first asks the JVM, over
py4j, what ``org.apache.spark.sql.functions`` (or ``PythonUtils``) is and then whether it
has a member of that name: two reflection round trips before the call itself. An audit
builds its DataFrames with some 15,000 such calls. The answer never changes while the JVM
runs (they are static methods of loaded classes), so :func:`install` keeps each one, keyed
by the gateway's JVM view: the call itself is then the only round trip.

Measured 2026-11-27 (tenth session), the demo's snapshot audited in one process, the
lookups kept and not in alternate audits after a warm-up: 8.2-10.3 s against 10.3-11.4 s
(the py4j commands of the planning thread 43,000 -> 26,000 per audit). Nothing else
changes: the same JVM methods get the same arguments.

It replaces three private helpers of PySpark (``_get_jvm_function``,
``_create_column_from_name``, ``_to_seq``), each a few lines that look a method up and call
it, and only when they still have the signatures they have in PySpark 4.0: a PySpark whose
helpers differ keeps its own (:func:`install` returns False and says so in the debug log).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable
from typing import Any

logger = logging.getLogger(__name__)

#: (id of the gateway's JVM view, class, member) -> (that view, py4j's callable for the
#: static method). The view is kept so that its id names it as long as the entry lives.
_MEMBERS: dict[tuple[int, str, str], tuple[Any, Any]] = {}
_INSTALLED: list[bool] = []

FUNCTIONS = "org.apache.spark.sql.functions"
PYTHON_UTILS = "org.apache.spark.api.python.PythonUtils"

#: The helpers replaced, with the parameters they take in the PySpark versions checked.
EXPECTED = {
    ("pyspark.sql.functions.builtin", "_get_jvm_function"): ["name", "sc"],
    ("pyspark.sql.classic.column", "_create_column_from_name"): ["name"],
    ("pyspark.sql.classic.column", "_to_seq"): ["sc", "cols", "converter"],
}


def static_member(jvm: Any, class_name: str, member: str) -> Any:
    """py4j's callable for static method ``member`` of ``class_name``, looked up in ``jvm``
    (a gateway's JVM view) the first time only."""
    key = (id(jvm), class_name, member)
    found = _MEMBERS.get(key)
    if found is None:
        found = _MEMBERS[key] = (jvm, getattr(getattr(jvm, class_name), member))
    return found[1]


def _get_jvm_function(name: str, sc: Any) -> Callable[..., Any]:
    assert sc._jvm is not None
    return static_member(sc._jvm, FUNCTIONS, name)


def _create_column_from_name(name: str) -> Any:
    from pyspark.sql.utils import get_active_spark_context

    return static_member(get_active_spark_context()._jvm, FUNCTIONS, "col")(name)


def _to_seq(sc: Any, cols: Iterable[Any], converter: Callable[[Any], Any] | None = None) -> Any:
    if converter:
        cols = [converter(c) for c in cols]
    assert sc._jvm is not None
    return static_member(sc._jvm, PYTHON_UTILS, "toSeq")(cols)


_REPLACEMENTS = {
    "_get_jvm_function": _get_jvm_function,
    "_create_column_from_name": _create_column_from_name,
    "_to_seq": _to_seq,
}


def install() -> bool:
    """Replace PySpark's three lookup helpers with the ones above (once per process);
    False, changing nothing, when any of them is missing or has other parameters."""
    if _INSTALLED:
        return _INSTALLED[0]
    import importlib

    targets = []
    for (module_name, name), params in EXPECTED.items():
        try:
            module = importlib.import_module(module_name)
            current = getattr(module, name)
            found = list(inspect.signature(current).parameters)
        except (ImportError, AttributeError, TypeError, ValueError) as exc:
            logger.debug("PySpark's JVM lookups kept: %s.%s not found (%s)", module_name, name, exc)
            _INSTALLED.append(False)
            return False
        if found != params:
            logger.debug("PySpark's JVM lookups kept: %s.%s takes %s", module_name, name, found)
            _INSTALLED.append(False)
            return False
        targets.append((module, name))
    for module, name in targets:
        setattr(module, name, _REPLACEMENTS[name])
    _INSTALLED.append(True)
    return True
