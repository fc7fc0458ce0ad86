"""CLI wiring: help is instant, usage and input errors exit 2 with one line, before Spark."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import main
from tests.conftest import write


def test_help_does_not_import_spark() -> None:
    code = "import sys; from auditor.cli import main; assert 'pyspark' not in sys.modules; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"
    result = CliRunner().invoke(main, ["audit", "--help"])
    assert result.exit_code == 0
    for option in ("--out", "--format", "--cluster", "--snapshot", "--run-id", "--protocol",
                   "--fail-on", "--conf", "--master", "--report", "--work-dir", "--event-log"):
        assert option in result.output


def test_the_public_api_is_on_the_package_and_lazy() -> None:
    code = ("import sys, auditor; assert 'pyspark' not in sys.modules; "
            "from auditor.semantics import eoe; assert auditor.end_offset_for is eoe.end_offset_for; "
            "assert set(auditor.__all__) >= {'audit', 'load_snapshot', 'end_offset_for'}; print(auditor.end_offset_for)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "function end_offset_for" in out.stdout


def test_missing_input_exits_2_with_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["audit", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].startswith("auditor: error: input")
    assert not (tmp_path / "o").exists()  # OUT did not exist: nothing is created


def test_missing_input_with_existing_out_records_a_failed_run(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    out = tmp_path / "o"
    out.mkdir()
    result = CliRunner().invoke(main, ["audit", str(tmp_path / "nope"), "--out", str(out), "--run-id", "r-9",
                                       "--cluster", "c1"])
    assert result.exit_code == 2
    (row,) = DeltaTable(str(out / "runs")).to_pyarrow_table().to_pylist()
    assert (row["run_id"], row["cluster"], row["status"]) == ("r-9", "c1", "FAILED")
    assert not (out / "findings").exists()


def test_bad_option_values_exit_2(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(main, ["audit", str(tmp_path), "--out", "o", "--protocol", "paxos"]).exit_code == 2
    assert runner.invoke(main, ["audit", str(tmp_path)]).exit_code == 2  # --out is required
    bad_run = runner.invoke(main, ["audit", str(tmp_path), "--out", "o", "--run-id", "a b"])
    assert bad_run.exit_code == 2 and "--run-id" in bad_run.output


def test_bad_config_exits_2(tmp_path: Path) -> None:
    conf = write(tmp_path / "c.toml", "[audit]\nclustr = 'x'\n")
    result = CliRunner().invoke(main, ["audit", str(tmp_path), "--out", "o", "--conf", str(conf)])
    assert result.exit_code == 2 and "unknown key" in result.output


@pytest.mark.parametrize("text, named", [
    ("[audit\n", "not valid TOML"),
    ("[audti]\ncluster = 'x'\n", "audti"),
    ("[audit]\nclustr = 'x'\n", "clustr"),
    ("[audit]\nfail_on = 3\n", "fail_on"),
    ("[audit]\ncluster = 'two words'\n", "cluster"),
    ("[spark]\nconf = 1\n", "conf"),
    ("[severity]\nNO_SUCH_CHECK = 'ERROR'\n", "NO_SUCH_CHECK"),
    ("[severity]\nOFFSET_GAP = 'LOUD'\n", "OFFSET_GAP"),
    ("[severity]\nOFFSET_GAP = 1\n", "OFFSET_GAP"),
    ("[[allowlist]]\ncheck = 'NO_SUCH_CHECK'\n", "NO_SUCH_CHECK"),
    ("[[allowlist]]\ncheck = 'OFFSET_GAP'\npartition = '1'\n", "partition"),
    ("[[allowlist]]\ncheck = 'OFFSET_GAP'\nbroker = 1\n", "broker"),
    ("[compaction]\ntopics = 'orders'\n", "topics"),
    ("[run]\nincremental = 'yes'\n", "incremental"),
    ("[run]\nincrementl = true\n", "incrementl"),
])
def test_every_config_mistake_exits_2_naming_the_key(tmp_path: Path, text: str, named: str) -> None:
    conf = write(tmp_path / "c.toml", text)
    snap = tmp_path / "snap"
    snap.mkdir()
    result = CliRunner().invoke(main, ["audit", str(snap), "--out", str(tmp_path / "o"), "--conf", str(conf)])
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith("auditor: error:") and named in line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("out", ["snap/out", "snap", "snap/broker=1/deeper"])
def test_out_inside_the_input_exits_2(tmp_path: Path, out: str) -> None:
    (tmp_path / "snap" / "broker=1").mkdir(parents=True)
    result = CliRunner().invoke(main, ["audit", str(tmp_path / "snap"), "--out", str(tmp_path / out)])
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert "inside the input folder" in line
    assert not (tmp_path / out / "runs").exists()


def test_options_come_from_the_environment(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["audit", str(tmp_path / "nope"), "--out", "o"],
                                env={"AUDITOR_AUDIT_FAIL_ON": "sometimes"})
    assert result.exit_code == 2 and "sometimes" in result.output


@pytest.mark.parametrize("args, named", [
    (["--format", "etcd"], "--format kafka"),
    (["--out", "s3://bucket/audit"], "local or mounted path"),
])
def test_an_incremental_run_that_cannot_be_exits_2(tmp_path: Path, args: list[str], named: str) -> None:
    snap = tmp_path / "snap"
    snap.mkdir()
    result = CliRunner().invoke(main, ["audit", str(snap), "--out", str(tmp_path / "o"), "--incremental", *args])
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith("auditor: error:") and named in line
    assert not (tmp_path / "o").exists()


def test_an_event_log_folder_that_cannot_be_made_exits_2(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    write(snap / "topics-describe.txt", "")
    write(tmp_path / "file", "not a folder")
    result = CliRunner().invoke(main, ["audit", str(snap), "--out", str(tmp_path / "o"),
                                       "--event-log", str(tmp_path / "file" / "events")])
    assert result.exit_code == 2
    assert "--event-log" in result.output and "cannot create the folder" in result.output
