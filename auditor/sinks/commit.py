"""Landing one run's rows in OUT: writers take turns, every write is journaled, and the
writes of a run that died halfway are undone by the next writer.

Delta commits are atomic per table, never across the six tables of a run. Three rules make
a run land completely or not at all, with any number of audits writing into one OUT:

1. **Writers take turns.** A run computes everything before it writes anything; then it
   takes an exclusive lock on ``OUT/_auditor/lock`` for its writes only (seconds), so
   audits compute in parallel and land one after the other. The lock is ``flock(2)``: the
   kernel releases it when the holder exits, even by ``SIGKILL``, so a killed run never
   leaves OUT locked. A run that cannot get the lock within the timeout fails with exit 2
   and writes nothing.
2. **Every write is journaled first.** Before a run touches a table it records the
   table's current version in ``OUT/_auditor/journal.json`` (written whole and renamed
   into place). A run that fails while writing restores each table it touched to that
   version, which is safe because nobody else can have committed in between (rule 1).
3. **The next writer finishes a dead run's business.** A journal left behind means its run
   was killed while writing. Whoever takes the lock next (another audit, or ``auditor
   recover OUT``) restores the tables the journal names and adds a FAILED ``runs`` row for
   that run, unless the run's SUCCEEDED ``runs`` row had already been committed (its last
   write): then the run landed and only the journal is removed.

Readers who count only runs with a SUCCEEDED ``runs`` row (the README's rule) therefore
never see rows of a run in progress, of a failed run or of a killed run.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa

from auditor.errors import OutputError
from auditor.sinks import schemas
from auditor.sinks.delta import TableWriter, arrow_schema, table_path

logger = logging.getLogger(__name__)

STATE_DIR = "_auditor"
LOCK_FILE = "lock"
JOURNAL_FILE = "journal.json"
#: How long a run waits for another run's writes before it gives up (exit 2).
#: ``AUDITOR_LOCK_TIMEOUT`` (seconds) overrides it.
DEFAULT_LOCK_TIMEOUT_S = 600.0
LOCK_TIMEOUT_ENV = "AUDITOR_LOCK_TIMEOUT"


def lock_timeout() -> float:
    """The lock timeout in seconds (:data:`DEFAULT_LOCK_TIMEOUT_S` or the environment's)."""
    raw = os.environ.get(LOCK_TIMEOUT_ENV, "")
    try:
        return float(raw) if raw else DEFAULT_LOCK_TIMEOUT_S
    except ValueError as exc:
        raise OutputError(f"{LOCK_TIMEOUT_ENV}={raw!r} is not a number of seconds") from exc


def runs_row(*, run_id: str, cluster: str, started_at: datetime, finished_at: datetime | None, status: str,
             input: str, format: str, protocol: str, writer: str, tool_version: str, spark_version: str,
             counts: dict[str, Any]) -> pa.Table:
    """The one ``runs`` row of a run, as Arrow (its ``day`` is ``started_at``'s UTC day)."""
    row = {
        "run_id": run_id, "cluster": cluster, "started_at": started_at, "finished_at": finished_at,
        "status": status, "input": input, "format": format, "protocol": protocol,
        "writer": writer, "tool_version": tool_version, "spark_version": spark_version,
        "counts": json.dumps(counts, sort_keys=True), "day": started_at.astimezone(timezone.utc).date(),
    }
    return pa.Table.from_pylist([row], schema=arrow_schema(schemas.RUNS))


@dataclass(frozen=True)
class RunIdentity:
    """What a FAILED ``runs`` row needs, kept in the journal for whoever recovers the run."""

    run_id: str
    cluster: str
    started_at: datetime
    input: str
    format: str
    protocol: str
    writer: str
    tool_version: str
    spark_version: str

    def row(self, status: str, counts: dict[str, Any], finished_at: datetime | None = None) -> pa.Table:
        return runs_row(**self.__dict__, finished_at=finished_at or datetime.now(timezone.utc), status=status,
                        counts=counts)

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "started_at": self.started_at.isoformat()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunIdentity:
        return cls(**{**data, "started_at": datetime.fromisoformat(data["started_at"])})


def _state_dir(out: str) -> str:
    path = os.path.join(out, STATE_DIR)
    os.makedirs(path, exist_ok=True)
    return path


@contextlib.contextmanager
def out_lock(out: str, *, timeout: float | None = None, holder: str = "",
             waiting: Callable[[str], None] | None = None, poll: float = 0.1) -> Iterator[None]:
    """Hold the exclusive write lock of OUT (rule 1 of the module docstring).

    Args:
        out: the output directory.
        timeout: seconds to wait for another holder (default :func:`lock_timeout`).
        holder: who holds it (written into the lock file for the waiting runs' messages).
        waiting: called once with a message when the lock is busy.

    Raises:
        OutputError: the lock was not free within ``timeout``.
    """
    timeout = lock_timeout() if timeout is None else timeout
    path = os.path.join(_state_dir(out), LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # close-on-exec: Spark's JVM never inherits it
    try:
        deadline = time.monotonic() + timeout
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                    logger.warning("the file system of %s does not support locks: concurrent audits into it "
                                   "are not safe (run one at a time)", out)
                    break
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if not told and waiting is not None:
                waiting(f"waiting for another audit to finish writing to {out} ({_read_holder(fd) or 'unknown'})")
                told = True
            if time.monotonic() >= deadline:
                raise OutputError(
                    f"{out} is busy: another audit ({_read_holder(fd) or 'unknown'}) has held its write lock for "
                    f"more than {timeout:.0f}s; nothing was written (set {LOCK_TIMEOUT_ENV} to wait longer)")
            time.sleep(poll)
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder.encode("utf-8", "replace"), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def _read_holder(fd: int) -> str:
    try:
        return os.pread(fd, 500, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""


@dataclass
class Journal:
    """The journal of one run's writes (rule 2). Only the lock holder reads or writes it."""

    path: str
    run: RunIdentity
    versions: dict[str, int] = field(default_factory=dict)  # table path -> version before the run
    phase: str = "writing"  # writing | rolling-back

    @classmethod
    def begin(cls, out: str, run: RunIdentity) -> Journal:
        journal = cls(os.path.join(_state_dir(out), JOURNAL_FILE), run)
        journal._save()
        return journal

    @classmethod
    def load(cls, out: str) -> Journal | None:
        path = os.path.join(out, STATE_DIR, JOURNAL_FILE)
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise OutputError(f"{path} cannot be read ({exc}): a run died while writing to {os.path.dirname(path)}; "
                              "restore its tables by hand (DESCRIBE HISTORY) and remove the file") from exc
        return cls(path, RunIdentity.from_json(data["run"]), {k: int(v) for k, v in data["versions"].items()},
                   data["phase"])

    def record(self, table: str, version: int) -> None:
        """Note ``table``'s version before this run's first write to it."""
        self.versions.setdefault(table, version)
        self._save()

    def roll_back(self, writer: TableWriter) -> None:
        """Restore every table this run wrote to its version before the run; then forget."""
        self.phase = "rolling-back"
        self._save()
        failed = []
        for table, version in reversed(list(self.versions.items())):
            try:
                writer.restore(table, version)
            except Exception as exc:  # keep going: restore what can be restored
                logger.error("could not restore %s to version %d: %s", table, version, exc)
                failed.append(table)
        if failed:  # keep the journal: the next writer tries again
            raise OutputError(f"could not restore {', '.join(failed)} after a failed run; the next audit "
                              f"into this OUT (or `auditor recover`) will try again")
        self.done()

    def done(self) -> None:
        """The run's writes are final (landed or undone)."""
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.path)

    def _save(self) -> None:
        data = {"run": self.run.to_json(), "versions": self.versions, "phase": self.phase}
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)


def recover(out: str, writer: TableWriter, by: str) -> str | None:
    """Finish the business of a run that died while writing to OUT (rule 3). Call it while
    holding :func:`out_lock`. Returns what was done, or None when there was nothing to do."""
    journal = Journal.load(out)
    if journal is None:
        return None
    run_id = journal.run.run_id
    runs = table_path(out, "runs")
    if journal.phase == "writing" and runs in journal.versions and _version(writer, runs) > journal.versions[runs]:
        journal.done()  # its SUCCEEDED runs row, its last write, was committed: it landed
        return f"run {run_id} had landed before it stopped"
    journal.roll_back(writer)
    writer.append(runs, journal.run.row("FAILED", {"error": f"stopped while writing; its writes were undone by {by}"}),
                  schemas.RUNS)
    return f"undid the writes of run {run_id}, which stopped while writing"


def _version(writer: TableWriter, path: str) -> int:
    return writer.prepare(path, schemas.RUNS)


def land(out: str, writer: TableWriter, run: RunIdentity,
         tables: list[tuple[str, Any]], runs_row_of: Callable[[], pa.Table],
         *, before_runs_row: Callable[[], None] = lambda: None,
         after: Callable[[], None] | None = None,
         progress: Callable[[str], None] = lambda _: None) -> None:
    """Write one run's tables, then its SUCCEEDED ``runs`` row, under the lock and the
    journal; on any failure restore what was written and re-raise.

    Args:
        tables: ``(name, rows)`` in write order (``rows`` as :class:`TableWriter` takes them).
        runs_row_of: builds the SUCCEEDED ``runs`` row (called after the data tables).
        before_runs_row: last check before the run counts (raise to roll everything back).
        after: more writes once the run has landed, still under the lock and outside the
            journal (the incremental store: its rows stay valid whatever happens next). A
            failure there is logged; the run stays landed.
    """
    holder = f"run {run.run_id}, pid {os.getpid()}"
    with out_lock(out, holder=holder, waiting=progress):
        done = recover(out, writer, by=f"run {run.run_id}")
        if done:
            progress(done)
        journal = Journal.begin(out, run)
        try:
            for name, rows in tables:
                progress(f"writing {name}")
                path = table_path(out, name)
                schema = schemas.OUTPUT_TABLES[name]
                journal.record(path, writer.prepare(path, schema))
                writer.replace_run(path, rows, schema, run.run_id)
            before_runs_row()
            progress("writing runs")
            path = table_path(out, "runs")
            journal.record(path, writer.prepare(path, schemas.RUNS))
            writer.replace_run(path, runs_row_of(), schemas.RUNS, run.run_id)
        except BaseException:  # KeyboardInterrupt and SystemExit (SIGTERM) included
            journal.roll_back(writer)
            raise
        journal.done()
        if after is not None:
            try:
                after()
            except Exception as exc:  # the run has landed: never turn it into a failure
                logger.warning("run %s landed, but writing the incremental store failed (%s): the next "
                               "incremental run parses those files again", run.run_id, type(exc).__name__)


def append_failed(out: str, writer: TableWriter, row: pa.Table, timeout: float = 30.0) -> None:
    """Append a FAILED ``runs`` row under the lock (finishing a dead run's business first).
    Best effort: it waits ``timeout`` seconds at most (a run that failed because OUT stayed
    busy must not wait as long again)."""
    with out_lock(out, timeout=min(timeout, lock_timeout()), holder=f"failed-run record, pid {os.getpid()}"):
        recover(out, writer, by="a later run")
        writer.append(table_path(out, "runs"), row, schemas.RUNS)
