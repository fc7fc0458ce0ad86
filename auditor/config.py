"""Typed, strict configuration: TOML in ``conf/`` loaded into frozen dataclasses.

Unknown sections or keys, wrong types and unknown check or severity names are
:class:`~auditor.errors.ConfigError`. Command-line flags override the file.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from auditor.errors import ConfigError
from auditor.registry import CHECKS, FAIL_ON_CHOICES, FORMATS, PROTOCOLS, SEVERITIES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
_CLUSTER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@dataclass(frozen=True)
class AllowRule:
    """One allowlist entry; a field left out matches every value."""

    check: str
    topic: str | None = None
    partition: int | None = None
    replica: int | None = None
    reason: str = ""


@dataclass(frozen=True)
class Config:
    """Everything a run needs besides the input and output paths."""

    cluster: str = "default"
    format: str = "kafka"
    protocol: str | None = None
    fail_on: str = "critical"
    master: str | None = None
    spark_conf: dict[str, str] = field(default_factory=dict)
    severity: dict[str, str] = field(default_factory=dict)
    allowlist: tuple[AllowRule, ...] = ()
    compacted_topics: tuple[str, ...] = ()
    incremental: bool = False  # [run] incremental: reuse what earlier runs parsed (--format kafka)
    store_keep_runs: int = 24  # [run] store_keep_runs: the store forgets files the cluster's last N runs did not use
    work_dir: str | None = None  # [run] work_dir: where a run stores its intermediates (auditor.run.work_root)
    verify_crc: bool = False  # [input] verify_crc: read segment files' batches whole and check their CRCs

    @property
    def effective_protocol(self) -> str:
        """The protocol given, or the format's default (SPEC 4.3)."""
        from auditor.registry import DEFAULT_PROTOCOL

        return self.protocol or DEFAULT_PROTOCOL[self.format]

    def with_overrides(self, **overrides: Any) -> Config:
        """Return a copy with the non-None ``overrides`` applied, validated again."""
        changes = {k: v for k, v in overrides.items() if v is not None}
        cfg = replace(self, **changes)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Raise :class:`ConfigError` when a value is out of its domain."""
        if not _CLUSTER.match(self.cluster):
            raise ConfigError(f"cluster name {self.cluster!r} must match {_CLUSTER.pattern}")
        if self.format not in FORMATS:
            raise ConfigError(f"format {self.format!r} is not one of {', '.join(FORMATS)}")
        if self.protocol is not None and self.protocol not in PROTOCOLS:
            raise ConfigError(f"protocol {self.protocol!r} is not one of {', '.join(PROTOCOLS)}")
        if self.fail_on not in FAIL_ON_CHOICES:
            raise ConfigError(f"fail_on {self.fail_on!r} is not one of {', '.join(FAIL_ON_CHOICES)}")
        for check, level in self.severity.items():
            if check not in CHECKS:
                raise ConfigError(f"[severity] names unknown check {check!r}")
            if level not in SEVERITIES:
                raise ConfigError(f"[severity] {check} = {level!r} is not one of {', '.join(SEVERITIES)}")
        for rule in self.allowlist:
            if rule.check not in CHECKS:
                raise ConfigError(f"[[allowlist]] names unknown check {rule.check!r}")
        if self.store_keep_runs < 1:
            raise ConfigError(f"[run] store_keep_runs must be at least 1, got {self.store_keep_runs}")


def validate_run_id(run_id: str) -> str:
    """Return ``run_id`` when it is safe to use in table predicates, else raise."""
    from auditor.errors import UsageError

    if not _RUN_ID.match(run_id):
        raise UsageError(f"--run-id {run_id!r} must match {_RUN_ID.pattern}")
    return run_id


_SECTIONS: dict[str, set[str]] = {
    "audit": {"cluster", "format", "protocol", "fail_on"},
    "spark": {"master", "conf"},
    "severity": set(),  # keys are check names, validated separately
    "allowlist": set(),
    "compaction": {"topics"},
    "run": {"incremental", "store_keep_runs", "work_dir"},
    "input": {"verify_crc"},
}


def load_config(path: str | Path | None) -> Config:
    """Load and validate a TOML config file; ``None`` gives the built-in defaults.

    Raises:
        ConfigError: the file is missing, not TOML, or holds unknown keys or bad values.
    """
    if path is None:
        return Config()
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {p} does not exist") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {p} cannot be read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {p} is not valid TOML: {exc}") from exc
    return parse_config(data, source=str(p))


def parse_config(data: dict[str, Any], source: str = "<config>") -> Config:
    """Build a :class:`Config` from already-parsed TOML, rejecting unknown keys."""
    unknown = set(data) - set(_SECTIONS)
    if unknown:
        raise ConfigError(f"{source}: unknown section(s) {', '.join(sorted(unknown))}")
    audit = _table(data, "audit", source)
    spark = _table(data, "spark", source)
    compaction = _table(data, "compaction", source)
    run = _table(data, "run", source)
    inputs = _table(data, "input", source)
    for name, table in (("audit", audit), ("spark", spark), ("compaction", compaction), ("run", run),
                        ("input", inputs)):
        extra = set(table) - _SECTIONS[name]
        if extra:
            raise ConfigError(f"{source}: unknown key(s) in [{name}]: {', '.join(sorted(extra))}")
    severity = _table(data, "severity", source)
    rules = data.get("allowlist", [])
    if not isinstance(rules, list):
        raise ConfigError(f"{source}: allowlist must be an array of tables ([[allowlist]])")
    spark_conf = spark.get("conf", {})
    if not isinstance(spark_conf, dict):
        raise ConfigError(f"{source}: [spark] conf must be a table")
    cfg = Config(
        cluster=_str(audit, "cluster", "default", source),
        format=_str(audit, "format", "kafka", source),
        protocol=_opt_str(audit, "protocol", source),
        fail_on=_str(audit, "fail_on", "critical", source),
        master=_opt_str(spark, "master", source),
        spark_conf={str(k): str(v) for k, v in spark_conf.items()},
        severity={str(k): _as_str(v, f"[severity] {k}", source) for k, v in severity.items()},
        allowlist=tuple(_allow_rule(r, source) for r in rules),
        compacted_topics=tuple(_str_list(compaction, "topics", source)),
        incremental=_bool(run, "incremental", False, source),
        store_keep_runs=_int(run, "store_keep_runs", 24, source),
        work_dir=_opt_str(run, "work_dir", source),
        verify_crc=_bool(inputs, "verify_crc", False, source),
    )
    cfg.validate()
    return cfg


def _table(data: dict[str, Any], name: str, source: str) -> dict[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: [{name}] must be a table")
    return value


def _as_str(value: Any, what: str, source: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{source}: {what} must be a string, got {type(value).__name__}")
    return value


def _bool(table: dict[str, Any], key: str, default: bool, source: str) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{source}: {key} must be true or false, got {type(value).__name__}")
    return value


def _int(table: dict[str, Any], key: str, default: int, source: str) -> int:
    value = table.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"{source}: {key} must be an integer, got {type(value).__name__}")
    return value


def _str(table: dict[str, Any], key: str, default: str, source: str) -> str:
    return _as_str(table.get(key, default), key, source)


def _opt_str(table: dict[str, Any], key: str, source: str) -> str | None:
    value = table.get(key)
    if value is None or value == "":
        return None
    return _as_str(value, key, source)


def _str_list(table: dict[str, Any], key: str, source: str) -> list[str]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{source}: {key} must be an array of strings")
    return list(value)


def _allow_rule(raw: Any, source: str) -> AllowRule:
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: each [[allowlist]] entry must be a table")
    extra = set(raw) - {"check", "topic", "partition", "replica", "reason"}
    if extra:
        raise ConfigError(f"{source}: unknown key(s) in [[allowlist]]: {', '.join(sorted(extra))}")
    if "check" not in raw:
        raise ConfigError(f"{source}: every [[allowlist]] entry needs a check")
    for key in ("partition", "replica"):
        if key in raw and (not isinstance(raw[key], int) or isinstance(raw[key], bool)):
            raise ConfigError(f"{source}: [[allowlist]] {key} must be an integer")
    return AllowRule(
        check=_as_str(raw["check"], "allowlist check", source),
        topic=_as_str(raw["topic"], "allowlist topic", source) if "topic" in raw else None,
        partition=raw.get("partition"),
        replica=raw.get("replica"),
        reason=_as_str(raw.get("reason", ""), "allowlist reason", source),
    )
