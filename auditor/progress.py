"""Progress of a long audit: the stage, and within it how far Spark's running job is.

A background thread polls Spark's status tracker once a second. On a terminal it redraws
one line (``\\r``); otherwise it writes a plain log line at most every ``every_s`` seconds,
so schedulers' logs stay readable. The input's size is known from the file walk, so while
the input is read the line also says about how many of its bytes are behind (tasks done
over tasks in the job: the read is split into tasks of about equal size).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any


@dataclass(frozen=True)
class JobState:
    """Tasks of the running jobs and the input bytes their finished tasks read, summed
    over the active stages."""

    done: int
    total: int
    input_bytes: int = 0


def spark_poller(spark: Any) -> Callable[[], JobState | None]:
    """A function reading the session's active stages from Spark's status store (None
    when no stage runs)."""
    store = spark._jsc.sc().statusStore()

    def poll() -> JobState | None:
        stages = store.activeStages()
        done = total = read = 0
        for i in range(stages.size()):
            stage = stages.apply(i)
            done += stage.numCompleteTasks()
            total += stage.numTasks()
            read += stage.inputBytes()
        return JobState(done, total, read) if total else None

    return poll


class ProgressLine:
    """Prints the stage and the running job's progress until :meth:`stop`."""

    def __init__(self, poll: Callable[[], JobState | None], stream: IO[str], tty: bool, *,
                 started: float | None = None, every_s: float = 30.0, interval_s: float = 1.0) -> None:
        self.poll, self.stream, self.tty = poll, stream, tty
        self.started = time.monotonic() if started is None else started
        self.every_s, self.interval_s = every_s, interval_s
        self.stage = ""
        self._last_log = 0.0
        self._drawn = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def set_stage(self, message: str) -> None:
        """A new stage: always printed as its own line."""
        self._clear()
        self.stage = message
        self.stream.write(f"[{time.monotonic() - self.started:6.1f}s] {message}\n")
        self.stream.flush()
        self._last_log = time.monotonic()

    def line(self, state: JobState) -> str:
        pct = 100 * state.done // max(1, state.total)
        text = f"[{time.monotonic() - self.started:6.1f}s]   {pct:3d}% of the running job ({state.done}/{state.total} tasks)"
        if state.input_bytes:
            text += f", {state.input_bytes / 1e6:,.0f} MB of input read"
        return text

    def tick(self) -> None:
        """One poll: redraw (terminal) or log (at most every ``every_s`` seconds)."""
        state = self.poll()
        if state is None:
            return
        if self.tty:
            self.stream.write("\r" + self.line(state) + "\x1b[K")
            self._drawn = True
        elif time.monotonic() - self._last_log >= self.every_s:
            self.stream.write(self.line(state) + "\n")
            self._last_log = time.monotonic()
        self.stream.flush()

    def _clear(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self._drawn = False

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.tick()
            except Exception:  # progress must never break a run (e.g. the JVM is going away)
                return

    def start(self) -> ProgressLine:
        self._thread = threading.Thread(target=self._run, name="auditor-progress", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self._clear()
        self.stream.flush()
