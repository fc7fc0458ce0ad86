"""Delta tables read into Arrow without Spark (``report``, ``explain``, the incremental store).

One function, so every such read goes through Arrow's own file system for a local table.
``deltalake``'s default file system for a dataset is a handler implemented through Python;
Arrow's I/O threads reading through it can still be alive when the interpreter exits, and
the process then aborts after its work is done ("terminate called without an active
exception", exit status 134 instead of the command's own). Measured 2026-11-26 with
deltalake 1.6.6 and pyarrow 26.0.1 on this machine: a script reading one small table
whole and exiting aborted 13 times in 20; ``auditor report OUT --run-id nope``, which
reads the ``runs`` table and exits 2, exited 134 in 2 to 9 of 20 runs. The same reads through
Arrow's local file system: 0 in 20. (delta-rs issue 2184 and polars issue 24169 report
the same abort at exit.)
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa


def read_delta(path: str, columns: list[str] | None = None, filters: Any = None) -> pa.Table:
    """The rows of the Delta table at ``path`` (partition columns included), with
    ``deltalake``'s ``columns`` and ``filters`` (a filter on partition columns prunes files).

    A local table (a path without a URI scheme) is read through Arrow's local file system;
    a table at a URI through ``deltalake``'s own.
    """
    import pyarrow.fs as pafs
    from deltalake import DeltaTable

    local = "://" not in path
    filesystem = pafs.SubTreeFileSystem(os.path.abspath(path), pafs.LocalFileSystem()) if local else None
    return DeltaTable(path).to_pyarrow_table(columns=columns, filters=filters, filesystem=filesystem)
