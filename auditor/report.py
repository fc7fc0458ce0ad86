"""A small self-contained HTML summary of one run (``audit --report FILE.html``)."""

from __future__ import annotations

import html
from pathlib import Path

from auditor.run import RunResult


def render_report(result: RunResult) -> str:
    """The HTML text of the report."""
    c = result.counts
    rows = "".join(
        f"<tr><td>{html.escape(sev)}</td><td>{html.escape(check)}</td><td>{n}</td><td>{s}</td></tr>"
        for check, sev, n, s in result.findings_by_check
    ) or "<tr><td colspan=4>no findings</td></tr>"
    facts = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
                    for k, v in c.items() if k != "findings")
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>Log audit {html.escape(result.run_id)}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left}}</style></head>
<body><h1>Log audit run {html.escape(result.run_id)}</h1>
<p>Tables ({html.escape(result.writer)}): {html.escape(result.out)}. Exit status {result.exit_code}.</p>
<h2>Findings</h2><table><tr><th>severity</th><th>check</th><th>count</th><th>suppressed</th></tr>{rows}</table>
<h2>Input</h2><table>{facts}</table></body></html>
"""


def write_report(path: str, result: RunResult) -> None:
    """Write the report to ``path``."""
    Path(path).write_text(render_report(result), encoding="utf-8")
