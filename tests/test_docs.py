"""The documents users read: every check has its row in the contract, with its default
severity; the README and the design notes stay readable; nothing points outside the
repository; the history speaks of dates and commits."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from auditor.registry import REGISTRY, SEVERITIES

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = ROOT / "docs" / "contract.md"


def _check_rows() -> dict[str, str]:
    rows = {}
    for line in CONTRACT.read_text().splitlines():
        m = re.match(r'^\| <a id="check-([a-z-]+)"></a>`([A-Z_]+)` \| ([^|]+) \|', line)
        if m:
            rows[m.group(2)] = m.group(3)
            assert m.group(1) == m.group(2).lower().replace("_", "-"), line
    return rows


def test_every_check_has_its_row_in_the_contract_with_its_default_severity() -> None:
    rows = _check_rows()
    assert set(rows) == {c.name for c in REGISTRY}
    for check in REGISTRY:
        first = next(s for s in re.findall(r"[A-Z]+", rows[check.name]) if s in SEVERITIES)
        assert first == check.severity, (check.name, rows[check.name])
        assert f'id="{check.doc.split("#")[1]}"' in CONTRACT.read_text()


def test_the_readme_and_the_design_notes_stay_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 400
    assert len((ROOT / "docs" / "design.md").read_text().splitlines()) <= 400
    readme = (ROOT / "README.md").read_text()
    assert "docs/contract.md" in readme


def test_no_file_points_outside_the_repository_or_speaks_of_sessions() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    texts = [p for p in tracked if p.endswith((".md", ".py", ".sh", ".toml", ".txt", ".sql", ".json")) and (ROOT / p).is_file()]
    assert len(texts) > 100
    shared = "../" + "shared"  # (spelled so that this file does not hold it)
    outside = [p for p in texts if shared in (ROOT / p).read_text(errors="replace")]
    assert outside == [], outside
    sessions = re.compile(r"\b(\w+-)?(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|"
                          r"twelfth|\w+teenth|\w+tieth|\d+(st|nd|rd|th)) sessions?\b", re.IGNORECASE)
    talk = [p for p in texts if sessions.search((ROOT / p).read_text(errors="replace"))]
    assert talk == [], talk
