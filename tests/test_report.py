"""``auditor report`` in a real headless browser (Debian's chromium through chromedriver)
and ``auditor explain``, on the tables of an audit of the demo's snapshot (what
``scripts/demo.sh`` simulates)."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pytest

from auditor.config import Config
from auditor.explain import explain
from auditor.report import write_report
from auditor.run import run_audit
from auditor.sinks.runview import details

pytestmark = pytest.mark.spark

ARTIFACTS = Path(os.environ.get("AUDITOR_TEST_ARTIFACTS", Path(__file__).parent.parent / "test-artifacts"))


@pytest.fixture(scope="module")
def demo_tables(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    from auditor.simulator import simulate

    base = tmp_path_factory.mktemp("report")
    # as scripts/demo.sh (whose simulate has the CLI's default quorum of 3 controllers)
    simulate(base / "snapshot", brokers=3, topics=2, partitions=4, seed=7, kraft_controllers=3,
             faults="unclean-election,lossy-shutdown,fast-failover,stopped-follower,zombie-transaction,cleaner-bug")
    out = base / "tables"
    run_audit(spark, str(base / "snapshot"), str(out), Config(cluster="demo", fail_on="never"), run_id="demo-1")
    return out


def _chrome():  # type: ignore[no-untyped-def]
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1200,2000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"))


def _followers_named_by_findings(view, p):  # type: ignore[no-untyped-def]
    """replica -> (divergence, truncation) offsets as the partition's findings name them."""
    named = {}
    for f in p.findings:
        d = details(f)
        if f["replica"] is not None and ("divergence_offset" in d or "truncation_offset" in d):
            named[f["replica"]] = (d.get("divergence_offset"), d.get("truncation_offset"))
    return named


def test_report_in_a_real_browser(demo_tables, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    page = tmp_path / "r.html"
    view = write_report(str(page), str(demo_tables))
    flagged = view.flagged()
    assert len(flagged) >= 2  # the demo's incidents
    driver = _chrome()
    try:
        driver.get(page.resolve().as_uri())
        severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert severe == []
        checked_marks = 0
        for topic, partition in flagged:
            p = view.partition(topic, partition)
            svg = driver.find_element(By.CSS_SELECTOR, f'svg.partition-diagram[data-partition="{p.name}"]')
            assert svg.size["width"] > 0 and svg.size["height"] > 0, p.name
            lanes = svg.find_elements(By.CSS_SELECTOR, "g.lane")
            assert [int(lane.get_attribute("data-replica")) for lane in lanes] == [r["replica"] for r in p.replicas]
            if p.status["leader"] is not None:
                assert lanes[0].get_attribute("data-role") == "leader"
            assert all(lane.size["width"] > 0 for lane in lanes)
            ticks = {int(t.get_attribute("data-offset")): float(t.get_attribute("x1"))
                     for t in svg.find_elements(By.CSS_SELECTOR, "line.tick")}
            named = _followers_named_by_findings(view, p)
            for r, lane in zip(p.replicas, lanes, strict=True):
                expected = {"hwm": r["high_watermark"], "leo": r["log_end_offset"],
                            "divergence": r["divergence_offset"], "truncation": r["truncation_offset"]}
                if r["replica"] in named:  # the offsets the findings name are the ones drawn
                    assert (expected["divergence"], expected["truncation"]) == named[r["replica"]]
                for kind, offset in expected.items():
                    marks = lane.find_elements(By.CSS_SELECTOR, f"line.mark.{kind}")
                    if offset is None:
                        assert marks == [], (p.name, r["replica"], kind)
                        continue
                    (mark,) = marks
                    assert int(mark.get_attribute("data-offset")) == offset
                    # drawn where the axis puts that offset
                    assert abs(float(mark.get_attribute("x1")) - ticks[offset]) < 0.2, (p.name, kind)
                    checked_marks += kind in ("divergence", "truncation")
        assert checked_marks >= 2
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "report.png"))
        first = driver.find_element(By.CSS_SELECTOR, "svg.partition-diagram")
        first.screenshot(str(ARTIFACTS / "report-partition.png"))
        assert (ARTIFACTS / "report.png").stat().st_size > 10_000
    finally:
        driver.quit()


def test_explain_prints_the_offsets_the_findings_name(demo_tables) -> None:  # type: ignore[no-untyped-def]
    from auditor.sinks.runview import load_run

    view = load_run(str(demo_tables))
    # (the flagged partitions, and the metadata log, which no fault of the demo's touches)
    for topic, partition in [*view.flagged(), ("__cluster_metadata", 0)]:
        buf = io.StringIO()
        p = explain(str(demo_tables), topic, partition, file=buf)
        text = buf.getvalue()
        assert "\x1b[" not in text  # not a terminal: plain text
        assert f"{topic}-{partition} in run demo-1" in text
        # the metadata log's truncation is KRaft's whatever the run's protocol (SPEC 4.7)
        protocol = "kraft" if topic in ("__cluster_metadata", "@metadata") else view.run["protocol"]
        assert f"followers against the leader (protocol {protocol})" in text
        for r in p.replicas:
            assert f"broker {r['replica']}" in text
        for replica, (divergence, truncation) in _followers_named_by_findings(view, p).items():
            if divergence is not None:
                assert f"broker {replica}: ground truth: diverges from the leader at offset {divergence}" in text
            if truncation is not None:
                assert f"truncation: to offset {truncation}," in text
        for f in p.findings:
            assert f["check"] in text


def test_report_and_explain_refuse_what_is_not_there(demo_tables, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from click.testing import CliRunner

    from auditor.cli import main

    runner = CliRunner()
    missing = runner.invoke(main, ["explain", str(demo_tables), "orders-99"])
    assert missing.exit_code == 2 and "no partition orders-99" in missing.output
    bad = runner.invoke(main, ["explain", str(demo_tables), "orders"])
    assert bad.exit_code == 2 and "TOPIC-PARTITION" in bad.output
    for args in ([], ["orders-1", "--topic", "orders"], ["--topic", "orders"], ["orders-1", "--partition", "1"]):
        twice = runner.invoke(main, ["explain", str(demo_tables), *args])
        assert twice.exit_code == 2 and "name the partition once" in twice.output, args
    spec_spelling = runner.invoke(main, ["explain", str(demo_tables), "--topic", "orders", "--partition", "1"])
    positional = runner.invoke(main, ["explain", str(demo_tables), "orders-1"])
    assert spec_spelling.exit_code == 0 and spec_spelling.output == positional.output
    no_run = runner.invoke(main, ["report", str(demo_tables), "--run-id", "nope", "--output", str(tmp_path / "x.html")])
    assert no_run.exit_code == 2 and "no SUCCEEDED run 'nope'" in no_run.output
    ok = runner.invoke(main, ["report", str(demo_tables), "--output", str(tmp_path / "r.html"), "--max-diagrams", "1"])
    assert ok.exit_code == 0
    text = (tmp_path / "r.html").read_text()
    assert text.count('<svg xmlns="http://www.w3.org/2000/svg" class="partition-diagram"') == 1
    assert "listed only" in text


def test_a_command_that_reads_the_tables_exits_with_its_own_status(demo_tables, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The exit status is the command's, never an abort as the process ends. Through
    ``deltalake``'s default file system, Arrow's I/O threads could still run at exit: a
    process reading the ``runs`` table whole and exiting aborted (SIGABRT) in 10 of 12
    runs, and ``report --run-id nope`` exited 134 instead of 2 in 2 to 9 of 20
    (``auditor.sinks.arrow_read``). Each attempt is a process of its own."""
    import subprocess
    import sys

    # (the process ends as soon as the table is read: the window the threads outlived)
    read = "import sys\nfrom auditor.sinks.arrow_read import read_delta\nsys.exit(read_delta(sys.argv[1]).num_rows + 10)\n"
    for attempt in range(8):
        done = subprocess.run([sys.executable, "-c", read, str(demo_tables / "runs")], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 11, (attempt, done.returncode, done.stderr[-500:])
    auditor = Path(sys.executable).with_name("auditor")
    for attempt in range(4):
        done = subprocess.run([str(auditor), "report", str(demo_tables), "--run-id", "nope",
                               "--output", str(tmp_path / "x.html")], capture_output=True, text=True, timeout=120)
        assert (done.returncode, "terminate called" in done.stderr) == (2, False), (attempt, done.stderr[-500:])


def test_explain_straight_from_the_snapshot_says_what_the_tables_say(demo_tables) -> None:  # type: ignore[no-untyped-def]
    from auditor.explain import explain_snapshot, is_output_folder
    from auditor.sinks.runview import load_run

    snapshot = demo_tables.parent / "snapshot"
    assert is_output_folder(str(demo_tables)) and not is_output_folder(str(snapshot))
    topic, partition = load_run(str(demo_tables)).flagged()[0]
    from_tables, from_snapshot = io.StringIO(), io.StringIO()
    explain(str(demo_tables), topic, partition, file=from_tables)
    explain_snapshot(str(snapshot), topic, partition, Config(cluster="demo"), file=from_snapshot)

    def body(text: str) -> list[str]:  # the run id and the snapshot time differ
        return [line for line in text.splitlines()[2:] if line.strip()]

    assert body(from_snapshot.getvalue()) == body(from_tables.getvalue())
