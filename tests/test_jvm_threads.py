"""``benchmarks/jvm_threads.py``: the CPU of a process's threads read from ``/proc``, checked
on this test's own process with a thread of a known name that burns a known amount of CPU
(no Spark needed)."""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time

import pytest

from benchmarks import jvm_threads as jt

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

BURN_S = 0.3


def _burn(done: threading.Event) -> None:
    # the thread's name as the kernel knows it (/proc/PID/task/TID/comm), digits included
    libc = ctypes.CDLL(None)
    libc.prctl(15, b"burner7", 0, 0, 0)  # PR_SET_NAME
    start = time.thread_time()
    while time.thread_time() - start < BURN_S:
        pass
    done.wait()  # alive while the test reads it


def test_a_threads_cpu_is_counted_under_its_name_without_digits() -> None:
    pid = os.getpid()
    before, process_before = jt.thread_cpu(pid), jt.process_cpu(pid)
    done = threading.Event()
    burner = threading.Thread(target=_burn, args=(done,))
    burner.start()
    try:
        deadline = time.monotonic() + 10
        while jt.thread_cpu(pid)["burner"] < BURN_S - 0.05 and time.monotonic() < deadline:
            time.sleep(0.02)
        after, process_after = jt.thread_cpu(pid), jt.process_cpu(pid)
    finally:
        done.set()
        burner.join()
    assert "burner" not in before and "burner7" not in after
    # /proc counts in clock ticks (1/100 s): the burn, within a few ticks
    assert BURN_S - 0.05 <= after["burner"] <= BURN_S + 0.5, after
    # the process's CPU holds every thread's, the burner's included
    assert process_after - process_before >= after["burner"] - 0.05
    assert process_after >= sum(after.values()) - 0.05


def test_the_machine_is_busy_at_most_all_the_time() -> None:
    busy0, all0 = jt.machine()
    start = time.process_time()
    while time.process_time() - start < 0.1:
        pass
    busy1, all1 = jt.machine()
    assert 0 < busy1 - busy0 <= all1 - all0 + 1e-6  # (seconds as floats: equal tick counts may differ in the last bit)
