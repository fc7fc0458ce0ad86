"""The column functions the auditor's own code builds its expressions with: PySpark's
``pyspark.sql.functions``, with the JVM lookups of the ones it calls most made once per
Spark context and kept.

Each of PySpark's functions asks the JVM, over py4j, for the ``functions`` class, then for
the member, before it calls it: two round trips that carry no work (a static method of a
loaded class never changes while the JVM runs), and an audit builds its plans with
thousands of such calls. This module is imported as ``F`` by the auditor's modules; the
functions below keep what the JVM answered (a column by name and a plain literal are kept
whole: PySpark's ``Column`` is immutable, one object serves every expression), and every
other name is PySpark's own function (module ``__getattr__``). Nothing outside the
auditor's own calls changes: PySpark and py4j are left as they are. Where this PySpark has
no classic ``Column`` to wrap a JVM column in, the kept lookups are not used.
"""

from __future__ import annotations

from typing import Any

from pyspark import SparkContext
from pyspark.sql import Column
from pyspark.sql import functions as _F

try:  # the classic (py4j) column: a JVM column wrapped as PySpark does it
    from pyspark.sql.classic.column import Column as _JvmColumn
except ImportError:  # pragma: no cover - a PySpark without it: PySpark's own functions
    _JvmColumn = None

FUNCTIONS = "org.apache.spark.sql.functions"
PYTHON_UTILS = "org.apache.spark.api.python.PythonUtils"

#: (id of the Spark context, what, key) -> (that context, the value). The context is kept
#: with its entries so that its id names it as long as they live.
_KEPT: dict[tuple[int, str, Any], tuple[SparkContext, Any]] = {}
#: The most entries kept (an audit makes a few thousand; beyond, values are made anew).
MAX_KEPT = 50_000


def _kept(what: str, key: Any, make: Any) -> Any:
    sc = SparkContext._active_spark_context  # noqa: SLF001 - the context the value belongs to
    if sc is None:
        return make()
    entry = (id(sc), what, key)
    found = _KEPT.get(entry)
    if found is None or found[0] is not sc:
        found = (sc, make())
        if len(_KEPT) < MAX_KEPT:
            _KEPT[entry] = found
    return found[1]


def col(name: str) -> Column:
    """``pyspark.sql.functions.col(name)``, made once per Spark context."""
    if not _ready():
        return _F.col(name)
    return _kept("col", name, lambda: _JvmColumn(_member(FUNCTIONS, "col")(name)))  # type: ignore[no-any-return,misc]


column = col


def lit(value: Any) -> Column:
    """``pyspark.sql.functions.lit(value)``, made once per Spark context for a plain value
    (None, a bool, an int, a float, a string); anything else as PySpark makes it."""
    if value is not None and type(value) not in (bool, int, float, str):
        return _F.lit(value)
    if not _ready():
        return _F.lit(value)
    return _kept("lit", (type(value).__name__, value),  # type: ignore[no-any-return]
                 lambda: _JvmColumn(_member(FUNCTIONS, "lit")(value)))  # type: ignore[misc]


def _member(class_name: str, name: str) -> Any:
    """py4j's callable for static method ``name`` of ``class_name``, looked up once."""
    def make() -> Any:
        sc = SparkContext._active_spark_context  # noqa: SLF001
        assert sc is not None and sc._jvm is not None  # noqa: SLF001
        return getattr(getattr(sc._jvm, class_name), name)  # noqa: SLF001
    return _kept("member", (class_name, name), make)


#: The most elements of one call of ``java.util.List.of`` (its fixed-arity overloads).
LIST_OF_MOST = 10


def seq(jvm_objects: list[Any]) -> Any:
    """A Scala ``Seq`` of ``jvm_objects`` (py4j references), made in two round trips for up
    to :data:`LIST_OF_MOST` elements (``java.util.List.of``, then ``PythonUtils.toSeq``)
    where py4j's list conversion makes one per element, plus one per further ten."""
    list_of = _member("java.util.List", "of")
    chunks = [jvm_objects[i:i + LIST_OF_MOST] for i in range(0, len(jvm_objects), LIST_OF_MOST)] or [[]]
    if len(chunks) == 1:
        listed = list_of(*chunks[0])
    else:
        listed = _member("java.util", "ArrayList")(list_of(*chunks[0]))
        for chunk in chunks[1:]:
            listed.addAll(list_of(*chunk))
    return _member(PYTHON_UTILS, "toSeq")(listed)


def _jc(c: Column | str) -> Any:
    return (col(c) if isinstance(c, str) else c)._jc  # type: ignore[attr-defined]


def _ready() -> bool:
    return _JvmColumn is not None and SparkContext._active_spark_context is not None  # noqa: SLF001


def _over(name: str, *cols: Column | str) -> Column:
    if not _ready() or any(not isinstance(c, (Column, str)) for c in cols):
        return getattr(_F, name)(*cols)  # type: ignore[no-any-return]
    return _JvmColumn(_member(FUNCTIONS, name)(*[_jc(c) for c in cols]))  # type: ignore[misc]


def _over_seq(name: str, cols: tuple[Any, ...]) -> Column:
    if len(cols) == 1 and isinstance(cols[0], (list, tuple, set)):
        cols = tuple(cols[0])
    if not _ready() or any(not isinstance(c, (Column, str)) for c in cols):
        return getattr(_F, name)(*cols)  # type: ignore[no-any-return]
    return _JvmColumn(_member(FUNCTIONS, name)(seq([_jc(c) for c in cols])))  # type: ignore[misc]


def when(condition: Column, value: Any) -> Column:
    """``pyspark.sql.functions.when``."""
    if not _ready() or not isinstance(condition, Column):
        return _F.when(condition, value)
    return _JvmColumn(_member(FUNCTIONS, "when")(condition._jc, _jc(lit(value) if not isinstance(value, Column)  # type: ignore[misc,attr-defined]
                                                                  else value)))


def coalesce(*cols: Column | str) -> Column:
    """``pyspark.sql.functions.coalesce``."""
    return _over_seq("coalesce", cols)


def struct(*cols: Any) -> Column:
    """``pyspark.sql.functions.struct``."""
    return _over_seq("struct", cols)


def array(*cols: Any) -> Column:
    """``pyspark.sql.functions.array``."""
    return _over_seq("array", cols)


def greatest(*cols: Column | str) -> Column:
    """``pyspark.sql.functions.greatest``."""
    return _over_seq("greatest", cols)


def least(*cols: Column | str) -> Column:
    """``pyspark.sql.functions.least``."""
    return _over_seq("least", cols)


def concat(*cols: Column | str) -> Column:
    """``pyspark.sql.functions.concat``."""
    return _over_seq("concat", cols)


def max(c: Column | str) -> Column:  # noqa: A001 - PySpark's name
    """``pyspark.sql.functions.max``."""
    return _over("max", c)


def min(c: Column | str) -> Column:  # noqa: A001 - PySpark's name
    """``pyspark.sql.functions.min``."""
    return _over("min", c)


def sum(c: Column | str) -> Column:  # noqa: A001 - PySpark's name
    """``pyspark.sql.functions.sum``."""
    return _over("sum", c)


def count(c: Column | str) -> Column:
    """``pyspark.sql.functions.count``."""
    return _over("count", c)


def size(c: Column | str) -> Column:
    """``pyspark.sql.functions.size``."""
    return _over("size", c)


def __getattr__(name: str) -> Any:
    # every other function is PySpark's own
    return getattr(_F, name)
