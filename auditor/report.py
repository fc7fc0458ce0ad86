"""``auditor report``: one self-contained HTML file for a run, read from the Delta tables
alone (no Spark, no network: inline CSS and SVG, no script).

Per flagged partition (an unsuppressed finding of WARNING or worse) it draws what the
seeds' figures draw: one lane per replica (leader first, ISR marked) along the offset axis,
the epoch runs of each log as coloured segments labelled with their epoch, the epoch cache
as a thin strip below, HWM and LEO marks (on KRaft's metadata log, which has no HWM: its
committed bound, and a flag at each node's snapshot ids), and each follower's divergence and
truncation offsets; then the EOE rounds and the findings. Long stretches where nothing
happens are drawn short (a broken axis), so the interesting part stays visible.

Every drawn element carries ``data-*`` attributes (replica, offset, kind), so tests read
the diagram from the DOM.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass
from pathlib import Path

from auditor.ingest.discovery import is_kraft_folder
from auditor.registry import REGISTRY, SEVERITY_RANK
from auditor.sinks.runview import (
    PartitionView,
    Row,
    RunView,
    anchor,
    details,
    findings_by_check,
    load_run,
    snapshot_ids,
)

DEFAULT_MAX_DIAGRAMS = 200
SEVERITY_COLOURS = {"CRITICAL": "#b71c1c", "ERROR": "#e65100", "WARNING": "#f9a825", "INFO": "#607d8b"}
EPOCH_COLOURS = ("#4e79a7", "#59a14f", "#9c755f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#bab0ac",
                 "#86bcb6", "#8cd17d")


#: check -> one line on what its findings mean
SUMMARY = {c.name: c.summary for c in REGISTRY}


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


# --- the offset axis ---------------------------------------------------------------------


@dataclass(frozen=True)
class Axis:
    """A piecewise-linear offset axis: each interval between two interesting offsets gets a
    width that grows with the log of its length, so long healthy stretches are drawn short."""

    points: tuple[int, ...]  # sorted interesting offsets
    xs: tuple[float, ...]  # their x positions
    broken: tuple[int, ...]  # indexes i of intervals [points[i], points[i+1]) drawn shortened

    @classmethod
    def build(cls, offsets: list[int], x0: float, x1: float) -> Axis:
        points = sorted(set(offsets))
        if len(points) == 1:
            points.append(points[0] + 1)
        lengths = [b - a for a, b in zip(points, points[1:], strict=False)]
        weights = [1.0 + math.log10(1 + n) for n in lengths]
        scale = (x1 - x0) / sum(weights)
        xs = [x0]
        for w in weights:
            xs.append(xs[-1] + w * scale)
        median = sorted(lengths)[len(lengths) // 2]
        broken = tuple(i for i, n in enumerate(lengths) if n >= 100 and n > 10 * max(1, median))
        return cls(tuple(points), tuple(xs), broken)

    def x(self, offset: int) -> float:
        p = self.points
        if offset <= p[0]:
            return self.xs[0]
        if offset >= p[-1]:
            return self.xs[-1]
        lo, hi = 0, len(p) - 1
        while hi - lo > 1:  # the interval holding the offset
            mid = (lo + hi) // 2
            if p[mid] <= offset:
                lo = mid
            else:
                hi = mid
        frac = (offset - p[lo]) / (p[hi] - p[lo])
        return self.xs[lo] + frac * (self.xs[hi] - self.xs[lo])


def _marks(r: Row) -> list[tuple[str, int]]:
    """The marks drawn on a replica's lane: (kind, offset)."""
    out = []
    for kind, column in (("log-start", "log_start_offset"), ("hwm", "high_watermark"), ("leo", "log_end_offset"),
                         ("divergence", "divergence_offset"), ("truncation", "truncation_offset")):
        if r.get(column) is not None:
            out.append((kind, int(r[column])))
    return out


MARK_STYLE = {
    "log-start": ("#555", "2,2", "start"), "hwm": ("#1565c0", "", "HWM"), "leo": ("#000", "", "LEO"),
    "divergence": ("#c62828", "5,3", "diverges"), "truncation": ("#ef6c00", "2,3", "truncates to"),
    "committed": ("#2e7d32", "6,2", "committed bound"),
}


def _partition_marks(p: PartitionView) -> list[tuple[str, int]]:
    """Marks drawn on every lane: KRaft's metadata log has no HWM; its committed bound C
    (``partition_status.max_high_watermark``, SPEC 4.7) is marked instead."""
    c = p.status.get("max_high_watermark") if p.status else None
    if is_kraft_folder(p.topic, p.partition) and c is not None:
        return [("committed", int(c))]
    return []


def partition_svg(p: PartitionView, width: int = 960) -> str:
    """The diagram of one partition (see the module docstring)."""
    label_w, lane_h, gap, top = 150, 34, 28, 34  # gap: a truncation label clears the next divergence label
    x0, x1 = label_w + 10, width - 20
    shared = _partition_marks(p)
    offsets = [o for r in p.replicas for _, o in _marks(r)] + [o for _, o in shared]
    offsets += [end for r in p.replicas for end, _ in snapshot_ids(r)]
    offsets += [v for row in p.lineage for v in (row["start_offset"], row["end_offset"]) if v is not None]
    if not offsets:
        offsets = [0, 1]
    axis = Axis.build(offsets, x0, x1)
    height = top + len(p.replicas) * (lane_h + gap) + 30
    isr = {r["replica"] for r in p.replicas if r.get("in_isr")}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="partition-diagram" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" data-partition="{_e(p.name)}" role="img" '
             f'aria-label="replicas of {_e(p.name)} along the offset axis">']
    # axis ticks at every interesting offset, break marks on shortened stretches
    axis_y = height - 22
    parts.append(f'<line x1="{x0}" y1="{axis_y}" x2="{x1}" y2="{axis_y}" stroke="#999"/>')
    last_label = -1e9
    for off, x in zip(axis.points, axis.xs, strict=True):
        parts.append(f'<line class="tick" data-offset="{off}" x1="{x:.1f}" y1="{axis_y - 3}" x2="{x:.1f}" '
                     f'y2="{axis_y + 3}" stroke="#999"/>')
        if x - last_label > 34:
            parts.append(f'<text x="{x:.1f}" y="{axis_y + 15}" font-size="10" text-anchor="middle">{off}</text>')
            last_label = x
    for i in axis.broken:
        mid = (axis.xs[i] + axis.xs[i + 1]) / 2
        parts.append(f'<text class="axis-break" x="{mid:.1f}" y="{axis_y + 4}" font-size="13" '
                     f'text-anchor="middle" fill="#999">//</text>')
    lineage: dict[int, list[Row]] = {}
    for row in p.lineage:
        lineage.setdefault(row["replica"], []).append(row)
    for i, r in enumerate(p.replicas):
        y = top + i * (lane_h + gap)
        replica = r["replica"]
        role = r["role"] or "unknown role"
        tag = " (ISR)" if replica in isr else (" (not in ISR)" if r.get("in_isr") is False else "")
        parts.append(f'<g class="lane" data-replica="{replica}" data-role="{_e(role)}" '
                     f'data-in-isr="{str(replica in isr).lower()}" data-status="{_e(r["status"])}">')
        parts.append(f'<text x="4" y="{y + 14}" font-size="12" font-weight="bold">broker {replica}</text>'
                     f'<text x="4" y="{y + 28}" font-size="10">{_e(role)}{_e(tag)}</text>')
        for row in lineage.get(replica, []):
            if row["start_offset"] is None or row["end_offset"] is None:
                continue
            xa, xb = axis.x(row["start_offset"]), axis.x(row["end_offset"])
            colour = EPOCH_COLOURS[row["epoch"] % len(EPOCH_COLOURS)] if row["epoch"] >= 0 else "#ccc"
            if row["source"] == "log":
                parts.append(f'<rect class="epoch-run" data-epoch="{row["epoch"]}" data-start="{row["start_offset"]}" '
                             f'data-end="{row["end_offset"]}" x="{xa:.1f}" y="{y}" width="{max(1.0, xb - xa):.1f}" '
                             f'height="{lane_h - 12}" fill="{colour}" stroke="#fff"><title>epoch {row["epoch"]}: '
                             f'[{row["start_offset"]}, {row["end_offset"]}), {row["batch_count"]} batches</title></rect>')
                if xb - xa > 22:
                    parts.append(f'<text x="{(xa + xb) / 2:.1f}" y="{y + 15}" font-size="10" fill="#fff" '
                                 f'text-anchor="middle">e{row["epoch"]}</text>')
            else:
                parts.append(f'<rect class="cache-entry" data-epoch="{row["epoch"]}" data-start="{row["start_offset"]}" '
                             f'x="{xa:.1f}" y="{y + lane_h - 10}" width="{max(1.0, xb - xa):.1f}" height="5" '
                             f'fill="{colour}" opacity="0.7"><title>epoch cache: epoch {row["epoch"]} from '
                             f'{row["start_offset"]}</title></rect>')
        for kind, off in _marks(r) + shared:
            colour, dash, text = MARK_STYLE[kind]
            x = axis.x(off)
            dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
            parts.append(f'<line class="mark {kind}" data-kind="{kind}" data-offset="{off}" x1="{x:.1f}" '
                         f'y1="{y - 4}" x2="{x:.1f}" y2="{y + lane_h - 2}" stroke="{colour}" stroke-width="2"'
                         f'{dash_attr}><title>{text} {off}</title></line>')
            # (the committed bound is the partition's: its line crosses every lane, its label
            # sits on the first only, clear of the followers' divergence labels)
            if kind in ("divergence", "truncation", "hwm") or (kind == "committed" and i == 0):
                dy = {"divergence": -6, "truncation": lane_h + 6, "hwm": -6, "committed": -6}[kind]
                # labels above the lane: a divergence's left of its line, an HWM's right of
                # it, so the two do not cover each other at one offset
                left = x > x1 - 70 or (kind == "divergence" and x > x0 + 70)
                anchor, tx = ("end", x - 3) if left else ("start", x + 2)
                parts.append(f'<text x="{tx:.1f}" y="{y + dy}" font-size="9" fill="{colour}" '
                             f'text-anchor="{anchor}">{text} {off}</text>')
        for end, epoch in snapshot_ids(r):  # KRaft: the node's own snapshots, a flag at each end offset
            x = axis.x(end)
            parts.append(f'<path class="mark snapshot" data-kind="snapshot" data-offset="{end}" data-epoch="{epoch}" '
                         f'd="M{x:.1f},{y - 4} L{x:.1f},{y + lane_h - 2} M{x:.1f},{y - 4} L{x - 7:.1f},{y} '
                         f'L{x:.1f},{y + 4}" fill="#6a1b9a" stroke="#6a1b9a" stroke-width="1.5">'
                         f'<title>snapshot {end}-{epoch}: offsets below {end} (epoch {epoch})</title></path>')
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


# --- the page ----------------------------------------------------------------------------

CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;
font-size:13px;vertical-align:top}th{background:#f5f5f5}.sev{font-weight:bold;color:#fff;padding:1px 6px;
border-radius:3px}section.partition{border-top:2px solid #eee;margin-top:24px;padding-top:8px}
code,pre{font-size:12px}pre{background:#f7f7f7;padding:6px;white-space:pre-wrap;max-width:1000px}
.muted{color:#777}
"""


def _sev(severity: str | None) -> str:
    if not severity:
        return '<span class="muted">none</span>'
    return f'<span class="sev" style="background:{SEVERITY_COLOURS.get(severity, "#777")}">{_e(severity)}</span>'


def _overview(view: RunView) -> str:
    run, counts = view.run, view.counts
    facts = [("run", view.run_id), ("cluster", run["cluster"]), ("input", run["input"]), ("format", run["format"]),
             ("protocol", run["protocol"]), ("started", run["started_at"]), ("finished", run["finished_at"]),
             ("tool", f'{run["tool_version"]} (Spark {run["spark_version"]}, writer {run["writer"]})')]
    snapshots = sorted({str(s) for s in view.tables["partition_status"].column("snapshot").to_pylist()})
    facts.append(("snapshots", ", ".join(snapshots) or "none"))
    for key in ("files", "files_skipped", "lines", "lines_parsed", "lines_skipped", "lines_quarantined",
                "parse_errors", "partitions", "replicas", "batches"):
        if key in counts:
            facts.append((key.replace("_", " "), counts[key]))
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts)
    return f"<h2>Run</h2><table>{rows}</table>"


def _by_check(view: RunView) -> str:
    by_check = sorted(findings_by_check(view.tables["findings"]), key=lambda r: (-SEVERITY_RANK[r[1]], r[0]))
    rows = "".join(f"<tr><td>{_sev(sev)}</td><td>{_e(check)}</td><td>{_e(SUMMARY.get(check, ''))}</td>"
                   f"<td>{n - sup}</td><td>{sup}</td></tr>" for check, sev, n, sup in by_check)
    rows = rows or '<tr><td colspan="5">no findings</td></tr>'
    return ("<h2>Findings by check</h2><p class=muted>Each check, its severity and its offset range: "
            "docs/contract.md, \"Checks\", in the auditor's source.</p><table><tr><th>severity</th><th>check</th>"
            f"<th>meaning</th><th>findings</th><th>suppressed (allowlisted)</th></tr>{rows}</table>")


def _trend(view: RunView) -> str:
    runs = view.history[-30:]
    if len(runs) < 2:
        return "<h2>Trend</h2><p class=muted>No earlier SUCCEEDED run of this cluster in this OUT.</p>"
    rows = []
    for r in runs:
        c = json.loads(r["counts"] or "{}")
        sev = c.get("findings", {})
        mark = " (this run)" if r["run_id"] == view.run_id else ""
        rows.append(f"<tr><td>{_e(r['started_at'])}{mark}</td><td>{_e(r['run_id'])}</td><td>{c.get('partitions', '')}</td>"
                    + "".join(f"<td>{sev.get(s, 0)}</td>" for s in ("CRITICAL", "ERROR", "WARNING", "INFO")) + "</tr>")
    return ("<h2>Trend over SUCCEEDED runs of the cluster</h2><table><tr><th>started</th><th>run</th>"
            "<th>partitions</th><th>critical</th><th>error</th><th>warning</th><th>info</th></tr>"
            + "".join(rows) + "</table>")


def _flagged_table(view: RunView, flagged: list[tuple[str, int]], drawn: set[tuple[str, int]]) -> str:
    status = {(r["topic"], r["partition"]): r for r in view.tables["partition_status"].to_pylist()}
    rows = []
    for key in flagged:
        s = status.get(key, {})
        name = f"{key[0]}-{key[1]}"
        link = f'<a href="#{anchor(*key)}">{_e(name)}</a>' if key in drawn else _e(name)
        rows.append(f"<tr><td>{link}</td><td>{_sev(s.get('worst_severity'))}</td><td>{_e(s.get('finding_count'))}</td>"
                    f"<td>{_e(s.get('leader'))} ({_e(s.get('leader_source'))})</td><td>{_e(s.get('leader_epoch'))}</td>"
                    f"<td>{_e(s.get('max_high_watermark'))}</td><td>{_e(s.get('leader_log_end_offset'))}</td></tr>")
    body = "".join(rows) or '<tr><td colspan="7">no partition has a finding of WARNING or worse</td></tr>'
    note = "" if len(drawn) == len(flagged) else (
        f"<p>The {len(drawn)} worst are drawn below; the other {len(flagged) - len(drawn)} are listed only "
        "(<code>--max-diagrams</code>).</p>")
    return (f"<h2>Flagged partitions ({len(flagged)})</h2>{note}<table><tr><th>partition</th><th>worst</th>"
            "<th>findings</th><th>leader (source)</th><th>leader epoch</th><th>max HWM</th><th>leader LEO</th></tr>"
            f"{body}</table>")


def _rounds_table(p: PartitionView) -> str:
    blocks = []
    for r in p.replicas:
        rounds = p.rounds(r["replica"])
        if r["role"] != "follower" or not rounds:
            continue
        rows = "".join(
            f"<tr><td>{_e(x.get('round'))}</td><td>{_e(x.get('requested_epoch'))}</td>"
            f"<td>{_e(x.get('leader_epoch'))}, {_e(x.get('leader_offset'))}</td>"
            f"<td>{_e(x.get('follower_epoch'))}, {_e(x.get('follower_offset'))}</td>"
            f"<td>{_e(x.get('effective_offset', x.get('offset')))}</td></tr>" for x in rounds)
        blocks.append(f"<p>Follower {r['replica']}: truncation rounds (EOE answers)</p><table>"
                      "<tr><th>round</th><th>requested epoch</th><th>leader (epoch, end offset)</th>"
                      f"<th>follower (epoch, end offset)</th><th>truncates to</th></tr>{rows}</table>")
    return "".join(blocks)


def _partition_section(p: PartitionView) -> str:
    s = p.status
    replicas = "".join(
        f"<tr><td>{r['replica']}</td><td>{_e(r['role'])}</td><td>{_e(r['in_isr'])}</td><td>{_e(r['log_start_offset'])}</td>"
        f"<td>{_e(r['log_end_offset'])}</td><td>{_e(r['high_watermark'])}</td><td>{_e(r['latest_epoch'])}</td>"
        f"<td>{_e(r['divergence_offset'])}</td><td>{_e(r['truncation_offset'])}</td><td>{_e(r['records_to_truncate'])}</td>"
        f"<td>{_e(r['status'])}</td></tr>" for r in p.replicas)
    findings = "".join(
        f"<tr><td>{_sev(f['severity'])}{' (suppressed)' if f['suppressed'] else ''}</td><td>{_e(f['check'])}</td>"
        f"<td>{_e(f['replica'])}</td><td>{_e(f['offset_start'])}..{_e(f['offset_end'])}</td><td>{_e(f['message'])}"
        f"<pre>{_e(json.dumps(details(f), indent=None, sort_keys=True))}</pre></td></tr>" for f in p.findings)
    return (f'<section class="partition" id="{p.anchor}"><h3>{_e(p.name)} {_sev(s.get("worst_severity"))}</h3>'
            f"<p>Leader {_e(s.get('leader'))} ({_e(s.get('leader_source'))}), leader epoch {_e(s.get('leader_epoch'))}, "
            f"{_e(s.get('replica_count'))} replicas, max HWM {_e(s.get('max_high_watermark'))}.</p>"
            f"{partition_svg(p)}"
            "<table><tr><th>broker</th><th>role</th><th>in ISR</th><th>log start</th><th>LEO</th><th>HWM</th>"
            "<th>latest epoch</th><th>diverges at</th><th>truncates to</th><th>records removed</th><th>status</th></tr>"
            f"{replicas}</table>{_rounds_table(p)}"
            "<table><tr><th>severity</th><th>check</th><th>replica</th><th>offsets</th><th>message and evidence</th></tr>"
            f"{findings}</table></section>")


def render_report(view: RunView, max_diagrams: int = DEFAULT_MAX_DIAGRAMS) -> str:
    """The HTML text of the report of ``view``'s run."""
    flagged = view.flagged()
    drawn_keys = flagged[:max_diagrams]
    sections = "".join(_partition_section(view.partition(t, p)) for t, p in drawn_keys)
    legend = ("<p class=muted>Lanes: one per replica, leader first. Coloured bars: runs of batches of one epoch "
              "(<code>epoch_lineage</code>, source log), labelled e&lt;epoch&gt;; thin strip below: the epoch cache. "
              "Marks: log start (grey, dotted), HWM (blue), LEO (black), where a follower diverges from the leader "
              "(red, dashed) and where the protocol truncates it (orange, dotted). Stretches where nothing happens "
              "are drawn short (//).</p>")
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Log audit '
            f"{_e(view.run['cluster'])} {_e(view.run_id)}</title><style>{CSS}</style></head><body>"
            f"<h1>Log audit of {_e(view.run['cluster'])}</h1>{_overview(view)}{_by_check(view)}{_trend(view)}"
            f"{_flagged_table(view, flagged, set(drawn_keys))}{legend}{sections}</body></html>\n")


def write_report(path: str, out: str, cluster: str | None = None, run_id: str | None = None,
                 max_diagrams: int = DEFAULT_MAX_DIAGRAMS) -> RunView:
    """Write the report of a run of OUT to ``path`` (default run: the cluster's latest
    SUCCEEDED one); returns what was read."""
    view = load_run(out, cluster, run_id)
    Path(path).write_text(render_report(view, max_diagrams), encoding="utf-8")
    return view

