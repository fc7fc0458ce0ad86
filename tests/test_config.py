"""Config files are strict: unknown keys, bad values and unknown checks are errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor.config import AllowRule, Config, load_config, parse_config, validate_run_id
from auditor.errors import ConfigError, UsageError

REPO = Path(__file__).resolve().parents[1]


def test_shipped_default_config_loads() -> None:
    cfg = load_config(REPO / "conf" / "default.toml")
    assert cfg.cluster == "default" and cfg.format == "kafka" and cfg.fail_on == "critical"
    assert cfg.effective_protocol == "epoch"
    assert cfg.spark_conf["spark.sql.shuffle.partitions"] == "8"
    assert not cfg.incremental and cfg.store_keep_runs == 24


def test_full_config_round_trip() -> None:
    cfg = parse_config({
        "audit": {"cluster": "prod-eu", "format": "table", "fail_on": "warning"},
        "severity": {"OFFSET_GAP": "INFO"},
        "allowlist": [{"check": "FOLLOWER_LAG", "topic": "orders", "partition": 0, "replica": 3}],
        "compaction": {"topics": ["audit-log"]},
        "run": {"incremental": True, "store_keep_runs": 48, "work_dir": "/shared/work"},
    })
    assert cfg.effective_protocol == "raft"
    assert cfg.severity == {"OFFSET_GAP": "INFO"}
    assert cfg.allowlist == (AllowRule("FOLLOWER_LAG", "orders", 0, 3),)
    assert cfg.compacted_topics == ("audit-log",)
    assert cfg.incremental and cfg.store_keep_runs == 48 and cfg.work_dir == "/shared/work"


@pytest.mark.parametrize("data, message", [
    ({"audit": {"clustr": "x"}}, "unknown key"),
    ({"sevrity": {}}, "unknown section"),
    ({"severity": {"NOT_A_CHECK": "INFO"}}, "unknown check"),
    ({"severity": {"OFFSET_GAP": "LOUD"}}, "is not one of"),
    ({"audit": {"fail_on": "sometimes"}}, "fail_on"),
    ({"audit": {"protocol": "paxos"}}, "protocol"),
    ({"audit": {"cluster": 3}}, "must be a string"),
    ({"allowlist": [{"topic": "x"}]}, "needs a check"),
    ({"allowlist": [{"check": "FOLLOWER_LAG", "partition": "0"}]}, "integer"),
    ({"allowlist": [{"check": "FOLLOWER_LAG", "broker": 1}]}, "unknown key"),
    ({"compaction": {"topics": "orders"}}, "array of strings"),
    ({"run": {"store_keep_runs": 0}}, "at least 1"),
    ({"run": {"store_keep_runs": "24"}}, "must be an integer"),
])
def test_bad_config_is_rejected(data: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ConfigError, match=message):
        parse_config(data)


def test_unparsable_and_missing_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[audit\ncluster = ", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.toml")


def test_cli_overrides_are_validated() -> None:
    cfg = Config().with_overrides(cluster="c1", fail_on=None)
    assert cfg.cluster == "c1" and cfg.fail_on == "critical"
    with pytest.raises(ConfigError):
        Config().with_overrides(cluster="bad name with spaces")


def test_run_ids_are_safe_for_predicates() -> None:
    assert validate_run_id("nightly-2026-11-22T00:00") == "nightly-2026-11-22T00:00"
    for bad in ("x' OR '1'='1", "", "a b"):
        with pytest.raises(UsageError):
            validate_run_id(bad)


def test_where_a_run_keeps_its_intermediates(tmp_path: Path) -> None:
    """Local mode: the system's temporary folder; a cluster: OUT/_auditor/work (executors
    write there, so never the driver's own /tmp); [run] work_dir / --work-dir first."""
    from types import SimpleNamespace

    from auditor.run import check_paths, work_root

    def session(master: str) -> object:
        return SimpleNamespace(sparkContext=SimpleNamespace(master=master))

    out = str(tmp_path / "out")
    assert work_root(session("local[2]"), out, Config()) is None  # type: ignore[arg-type]
    assert work_root(session("spark://10.0.0.1:7077"), out, Config()) == str(tmp_path / "out" / "_auditor" / "work")  # type: ignore[arg-type]
    assert work_root(session("yarn"), "rel/out", Config()) == str(Path("rel/out").resolve() / "_auditor" / "work")  # type: ignore[arg-type]
    chosen = Config(work_dir=str(tmp_path / "shared"))
    assert work_root(session("local[2]"), out, chosen) == str(tmp_path / "shared")  # type: ignore[arg-type]
    assert work_root(session("yarn"), out, chosen) == str(tmp_path / "shared")  # type: ignore[arg-type]
    (tmp_path / "snap").mkdir()
    with pytest.raises(UsageError, match="--work-dir .* is inside the input"):
        check_paths(str(tmp_path / "snap"), out, Config(work_dir=str(tmp_path / "snap" / "w")))
