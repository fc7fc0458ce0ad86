"""The progress line of long audits: redrawn on a terminal, a log line now and then
otherwise, and never in the way of the stage lines."""

from __future__ import annotations

import io

from auditor.progress import JobState, ProgressLine


def test_a_terminal_gets_one_redrawn_line_and_stage_lines() -> None:
    out = io.StringIO()
    states = iter([JobState(3, 12, 50_000_000), None, JobState(12, 12, 200_000_000)])
    line = ProgressLine(lambda: next(states), out, tty=True, started=0.0)
    line.set_stage("reading and parsing the input under S")
    line.tick()
    line.tick()  # idle: nothing drawn
    line.tick()
    line.set_stage("auditing")
    text = out.getvalue()
    assert "reading and parsing the input under S\n" in text
    assert "\r" in text and " 25% of the running job (3/12 tasks), 50 MB of input read" in text
    assert "100% of the running job (12/12 tasks), 200 MB of input read" in text
    assert "\x1b[K\r\x1b[K[" in text  # the progress line is cleared before the next stage line
    assert text.rstrip("\n").endswith("auditing")


def test_a_log_gets_plain_lines_at_most_every_period() -> None:
    out = io.StringIO()
    line = ProgressLine(lambda: JobState(1, 4), out, tty=False, every_s=3600)
    line.set_stage("computing the output tables")
    for _ in range(5):
        line.tick()  # within the period: no line
    assert out.getvalue().count("\n") == 1 and "\r" not in out.getvalue() and "\x1b" not in out.getvalue()
    line.every_s = 0
    line.tick()
    assert out.getvalue().splitlines()[-1].endswith("25% of the running job (1/4 tasks)")


def test_the_thread_stops_and_survives_a_failing_poll() -> None:
    out = io.StringIO()

    def broken() -> JobState:
        raise RuntimeError("the JVM went away")

    line = ProgressLine(broken, out, tty=True, interval_s=0.01).start()
    line.stop()
    assert line._thread is not None and not line._thread.is_alive()
