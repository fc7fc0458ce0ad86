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

A column by name (``F.col("x")``, or a name where PySpark wants a column) is made once per
JVM and name, then shared: an immutable, unresolved reference. A cast to a ``DataType``
object (``Column.cast``, ``Column.try_cast``) sends the JVM's type, parsed once per JVM and
type, where PySpark looks the active session up anew (five round trips and a Python
session object) and parses the type's JSON at every call.

A list becomes a Scala sequence in one call per eight elements, too, when the JVM has the
auditor's jar (``auditor.localjar``, a local session it started): py4j sends a Python list as
a new ``ArrayList`` and one ``add`` per element, a round trip each, so ``Seqs.of(a, b, c)``
(then ``Seqs.plus(seq, ...)`` for each next :data:`SEQ_ARITY`) replaces
``PythonUtils.toSeq([a, b, c])``, the same sequence.

A class named through a gateway's JVM view (``jvm.PythonSQLUtils``, ``jvm.functions``:
PySpark's own code names them so at every ``createDataFrame`` from Arrow and every
higher-order function such as ``transform`` or ``filter`` with a lambda, and in several
``Column`` helpers) is found by the JVM once per view, then kept on the view. py4j's JVM
side tries the bare name and each package the view imports, in order, before the one that
has the class; every miss is a class-loader search through all ~280 jars on Spark's class
path. Measured 2026-11-28 on a warm JVM: ``jvm.PythonSQLUtils`` 2.0 ms a lookup,
``jvm.functions`` 0.29 ms; a warm one-partition audit made 878 lookups (374 and 316 of
those), ~0.85 s of its planning thread, and 102 with them kept. A class never changes while
the JVM runs. Packages (and names py4j takes for packages) are not kept.

It replaces three private helpers of PySpark (``_get_jvm_function``,
``_create_column_from_name``, ``_to_seq``), each a few lines that look a method up and call
it, the classic ``Column``'s ``cast`` and ``try_cast``, and py4j's ``JVMView.__getattr__``
(wrapped: it still does the lookup), only when they still have the signatures they have in
PySpark 4.0 and py4j 0.10.9: a PySpark whose helpers differ keeps its own (:func:`install`
returns False and says so in the debug log).
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Iterable
from typing import Any

from auditor.localjar import SEQ_ARITY, SEQS_CLASS

logger = logging.getLogger(__name__)

#: (id of a gateway's JVM view, what, key) -> (that view, what the JVM gave for it): static
#: methods' py4j callables, columns by name, types, whether the auditor's jar is there.
#: The view is kept so that its id names it as long as the entry lives.
_MEMBERS: dict[tuple[int, str, Any], tuple[Any, Any]] = {}
#: The most entries kept (an audit makes some hundreds; beyond, values are made anew).
MAX_KEPT = 20_000
_INSTALLED: list[bool] = []

FUNCTIONS = "org.apache.spark.sql.functions"
PYTHON_UTILS = "org.apache.spark.api.python.PythonUtils"

#: The helpers replaced, with the parameters they take in the PySpark versions checked.
EXPECTED = {
    ("pyspark.sql.functions.builtin", "_get_jvm_function"): ["name", "sc"],
    ("pyspark.sql.classic.column", "_create_column_from_name"): ["name"],
    ("pyspark.sql.classic.column", "_to_seq"): ["sc", "cols", "converter"],
    ("pyspark.sql.classic.column", "Column.cast"): ["self", "dataType"],
    ("pyspark.sql.classic.column", "Column.try_cast"): ["self", "dataType"],
    ("py4j.java_gateway", "JVMView.__getattr__"): ["self", "name"],
}


def _kept(jvm: Any, what: str, key: Any, make: Callable[[], Any]) -> Any:
    """``make()``, called once per JVM view ``jvm`` and (``what``, ``key``)."""
    entry_key = (id(jvm), what, key)
    found = _MEMBERS.get(entry_key)
    if found is None:
        found = (jvm, make())
        if len(_MEMBERS) < MAX_KEPT:
            _MEMBERS[entry_key] = found
    return found[1]


def static_member(jvm: Any, class_name: str, member: str) -> Any:
    """py4j's callable for static method ``member`` of ``class_name``, looked up in ``jvm``
    (a gateway's JVM view) the first time only."""
    return _kept(jvm, "member", (class_name, member), lambda: getattr(getattr(jvm, class_name), member))


def _get_jvm_function(name: str, sc: Any) -> Callable[..., Any]:
    assert sc._jvm is not None
    if name == "col":
        return functools.partial(column, sc._jvm)
    return static_member(sc._jvm, FUNCTIONS, name)


def _create_column_from_name(name: str) -> Any:
    from pyspark.sql.utils import get_active_spark_context

    return column(get_active_spark_context()._jvm, name)


def column(jvm: Any, name: Any) -> Any:
    """The JVM column ``functions.col(name)``, made once per JVM and name (a column by name
    is an immutable, unresolved reference: every query may share it)."""
    make = lambda: static_member(jvm, FUNCTIONS, "col")(name)  # noqa: E731
    return _kept(jvm, "column", name, make) if isinstance(name, str) else make()


def _to_seq(sc: Any, cols: Iterable[Any], converter: Callable[[Any], Any] | None = None) -> Any:
    elements = [converter(c) for c in cols] if converter else list(cols)
    assert sc._jvm is not None
    if not _has_seqs(sc._jvm):
        return static_member(sc._jvm, PYTHON_UTILS, "toSeq")(elements)
    seq = static_member(sc._jvm, SEQS_CLASS, "of")(*elements[:SEQ_ARITY])
    for start in range(SEQ_ARITY, len(elements), SEQ_ARITY):
        seq = static_member(sc._jvm, SEQS_CLASS, "plus")(seq, *elements[start:start + SEQ_ARITY])
    return seq


def _has_seqs(jvm: Any) -> bool:
    """Whether the JVM behind ``jvm`` has the auditor's jar (``auditor.localjar``): asked once."""
    from py4j.java_gateway import JavaClass

    return bool(_kept(jvm, "class", SEQS_CLASS, lambda: isinstance(getattr(jvm, SEQS_CLASS), JavaClass)))


#: The JVM's ``DataType.fromJson``, which PySpark's own casts call through the session.
DATA_TYPE = "org.apache.spark.sql.types.DataType"


def jvm_type(jvm: Any, data_type: Any) -> Any:
    """The JVM's ``data_type`` (a PySpark ``DataType``), parsed once per JVM and type."""
    text = data_type.json()
    return _kept(jvm, "type", text, lambda: static_member(jvm, DATA_TYPE, "fromJson")(text))


def _typed(method: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """``Column.<method>`` (cast, try_cast) that sends a ``DataType`` as the JVM's type
    made once, not parsed again through a session looked up anew at every call."""

    def cast(self: Any, dataType: Any) -> Any:  # noqa: N803 (PySpark's parameter name)
        from pyspark.sql.types import DataType

        if not isinstance(dataType, DataType):
            return original(self, dataType)
        from pyspark.sql.classic.column import Column
        from pyspark.sql.utils import get_active_spark_context

        return Column(getattr(self._jc, method)(jvm_type(get_active_spark_context()._jvm, dataType)))

    cast.__name__ = cast.__qualname__ = method
    cast.__doc__ = original.__doc__
    return cast


def _kept_classes(original: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    """``JVMView.__getattr__`` that keeps a class it finds as an attribute of the view, so
    the next lookup of that name is Python's own (no round trip, no class-loader search)."""
    from py4j.java_gateway import JavaClass

    def __getattr__(self: Any, name: str) -> Any:  # noqa: N807 (the method it replaces)
        found = original(self, name)
        if isinstance(found, JavaClass):
            self.__dict__[name] = found
        return found

    __getattr__.__doc__ = original.__doc__
    return __getattr__


_REPLACEMENTS: dict[str, Callable[..., Callable[..., Any]]] = {
    "_get_jvm_function": lambda original: _get_jvm_function,
    "_create_column_from_name": lambda original: _create_column_from_name,
    "_to_seq": lambda original: _to_seq,
    "Column.cast": lambda original: _typed("cast", original),
    "Column.try_cast": lambda original: _typed("try_cast", original),
    "JVMView.__getattr__": _kept_classes,
}


def install() -> bool:
    """Replace PySpark's three lookup helpers, ``Column``'s two casts and py4j's
    ``JVMView.__getattr__`` with the ones above (once per process); False, changing
    nothing, when any of them is missing or has other parameters."""
    if _INSTALLED:
        return _INSTALLED[0]
    import importlib

    targets = []
    for (module_name, name), params in EXPECTED.items():
        try:
            owner: Any = importlib.import_module(module_name)
            *path, attribute = name.split(".")
            for part in path:
                owner = getattr(owner, part)
            current = getattr(owner, attribute)
            found = list(inspect.signature(current).parameters)
        except (ImportError, AttributeError, TypeError, ValueError) as exc:
            logger.debug("PySpark's JVM lookups kept: %s.%s not found (%s)", module_name, name, exc)
            _INSTALLED.append(False)
            return False
        if found != params:
            logger.debug("PySpark's JVM lookups kept: %s.%s takes %s", module_name, name, found)
            _INSTALLED.append(False)
            return False
        targets.append((owner, attribute, name, current))
    for owner, attribute, name, current in targets:
        setattr(owner, attribute, _REPLACEMENTS[name](current))
    _INSTALLED.append(True)
    return True
