"""``replimon report RUN_ID``: one self-contained HTML postmortem report of a stored run, and a
Markdown summary to paste into a postmortem document (docs/report.md).

Guarantees:

- the HTML file needs nothing but itself: CSS and script are inline, the charts are inline SVG
  drawn by `replimon.replay.report_svg`, there is no CDN, font or image to fetch (the page has a
  ``data:`` favicon so a browser does not even ask for one);
- everything that came from the data (group names, messages, evidence, parameters) is escaped
  with `html.escape`; the script only toggles classes and opens ``<details>`` elements;
- it stays usable for a fleet of 1,000 groups: the summaries come first and cover every group
  and alert (by aggregate queries), timelines are drawn for the most affected groups only (at
  most ``max_timelines``, critical first) with a note naming how many were left out, and the
  per-alert latency table is capped (``max_alert_rows``) with a note;
- the same database content (and, with ``events``, the same records in Kafka) gives the same
  files (no generation time, no randomness).

Sections: summary (groups, events, alerts by kind and severity, time span), affected groups, a
timeline per affected group with its alerts and their evidence, detection latency, data
quality, dead letters, and the command and offsets that reproduce the run.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from replimon.core.rules.chain.family import CHAIN
from replimon.core.rules.qlog.family import QLOG
from replimon.replay import iso
from replimon.replay.report_chain import chain_listing
from replimon.replay.report_data import AlertRow, RunData, Timeline, load_run
from replimon.replay.report_events import EventSource
from replimon.replay.report_lanes import generation_steps, generations, legislature_steps
from replimon.replay.report_md import duration, markdown, reproduce, run_kind
from replimon.replay.report_svg import timeline_svg

MAX_EVIDENCE_ROWS = 50
EVIDENCE_COLUMNS = ("type", "node", "ts_ms", "seq", "incarnation", "topic", "partition", "offset")


@dataclass
class ReportSummary:
    """What `write_report` wrote, for the CLI to print."""

    run_id: str
    html_path: Path
    md_path: Path | None
    groups: int
    affected: int
    timelines: int
    alerts: int
    by_kind: dict[str, int] = field(default_factory=dict)
    by_severity: dict[str, int] = field(default_factory=dict)

    def lines(self) -> list[str]:
        out = [f"run {self.run_id}: {self.groups} groups, {self.affected} affected, "
               f"{self.alerts} alerts ("
               + ", ".join(f"{n} {s}" for s, n in self.by_severity.items()) + ")",
               f"wrote {self.html_path} ({self.timelines} timelines)"]
        if self.md_path is not None:
            out.append(f"wrote {self.md_path}")
        return out


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _num(v: int | None) -> str:
    return "-" if v is None else f"{v:,}"


def _prose(text: str) -> str:
    """Escaped text with Markdown's `code` spans shown as code (the notes shared with the
    Markdown summary)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", _e(text))


CSS = """
:root{--fg:#1d2329;--muted:#5f6b76;--line:#d7dde3;--bg:#fff;--soft:#f4f6f8}
*{box-sizing:border-box}
body{margin:0;padding:24px 32px 64px;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,
"Helvetica Neue",Arial,sans-serif;color:var(--fg);background:var(--bg);max-width:1280px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:32px 0 8px;border-bottom:1px solid
var(--line);padding-bottom:4px}h3{font-size:15px;margin:24px 0 6px}
.sub,.note{color:var(--muted)}code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,
Consolas,monospace;font-size:12.5px}pre{background:var(--soft);padding:8px 10px;overflow:auto;
border-radius:4px;white-space:pre-wrap;word-break:break-all}
nav a{margin-right:14px}a{color:#1565c0}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}.card{border:1px solid var(--line);
border-radius:6px;padding:8px 14px;min-width:130px}.card b{display:block;font-size:20px}
.card span{color:var(--muted);font-size:12px}
table{border-collapse:collapse;margin:6px 0 10px}th,td{border-bottom:1px solid var(--line);
padding:3px 10px 3px 0;text-align:left;vertical-align:top}th{font-weight:600;color:var(--muted);
font-size:12px}td.n{text-align:right;font-variant-numeric:tabular-nums}
.sev{display:inline-block;border-radius:3px;padding:0 5px;color:#fff;font-size:12px}
.sev-critical{background:#c62828}.sev-warning{background:#ef6c00}.sev-info{background:#607d8b}
section.group{border-top:1px solid var(--line);margin-top:18px}
svg.timeline{display:block;max-width:1100px;background:#fff}
svg .panel{fill:#fafbfc;stroke:#e1e5ea}svg .grid{stroke:#eceff2}svg .axis{stroke:#9aa5b0}
svg text{font:11px system-ui,sans-serif;fill:#3d4852}svg .tick{fill:#6b7782;font-size:10px}
svg .band{font-size:11px;font-weight:600;fill:#3d4852}svg .band.small{font-weight:400;
fill:#6b7782}svg .cfgtext{font-size:10px;fill:#263238}svg .drop{stroke-dasharray:3 3;
stroke-width:1;opacity:.7}svg .mk{cursor:pointer}svg .mk:hover path,svg .mk.sel path{
stroke:#000;stroke-width:1.5}svg .mk.sel .drop{opacity:1;stroke-width:2}
.legend{font-size:12px;color:var(--muted);margin:2px 0 8px}.lg{margin-right:14px;white-space:nowrap}
.lg i{display:inline-block;width:14px;height:4px;margin-right:4px;vertical-align:middle}
.lg i.solid{background:#455a64}.lg i.dotted{border-top:2px dotted #455a64;height:0}
.lg i.horizon{border-top:2px dashed #b71c1c;height:0}
.lg i.ring{width:9px;height:9px;border:2px solid #455a64;border-radius:50%}
details.ev{margin:4px 0;border-left:3px solid transparent;padding-left:6px}
details.ev.hl{border-left-color:#1565c0;background:#f0f6ff}details.ev summary{cursor:pointer}
details.ev table{font-size:12px}details.ev td:nth-child(3){white-space:nowrap}.msg{display:block;margin:2px 0 4px;cursor:text}
@media print{details.ev{display:block}nav{display:none}}
"""

SCRIPT = """
(function () {
  "use strict";
  function show(id) {
    var first = null;
    document.querySelectorAll("details.ev").forEach(function (d) {
      var hit = d.getAttribute("data-alert") === id;
      d.classList.toggle("hl", hit);
      if (hit) { d.open = true; if (!first) { first = d; } }
    });
    document.querySelectorAll(".mk").forEach(function (m) {
      m.classList.toggle("sel", m.getAttribute("data-alert") === id);
    });
    if (first) { first.scrollIntoView({block: "nearest"}); }
  }
  function marker(el) {
    return el && el.closest ? el.closest(".mk[data-alert]") : null;
  }
  document.addEventListener("click", function (ev) {
    var m = marker(ev.target);
    if (m) { show(m.getAttribute("data-alert")); }
  });
  document.addEventListener("keydown", function (ev) {
    var m = marker(ev.target);
    if (m && (ev.key === "Enter" || ev.key === " ")) {
      ev.preventDefault();
      show(m.getAttribute("data-alert"));
    }
  });
})();
"""


def _sev(s: str) -> str:
    return f'<span class="sev sev-{_e(s)}">{_e(s)}</span>'


def _table(head: list[str], rows: list[list[str]], numeric: set[int] | None = None,
           cls: str = "") -> str:
    """A table; cells are HTML already escaped by the caller."""
    numeric = numeric or set()
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f'<td{" class=n" if i in numeric else ""}>{c}</td>'
                         for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def _summary(d: RunData) -> str:
    span = "-" if d.span is None else f"{iso(d.span[0])} → {iso(d.span[1])}"
    length = "" if d.span is None else duration(d.span[1] - d.span[0])
    total = sum(k.alerts for k in d.kinds)
    cards = [("groups", _num(d.groups)), ("affected groups", _num(len(d.affected))),
             ("events taken", _num(d.events)), ("records read", _num(d.records_read)),
             ("alerts", _num(total))] + [(s, _num(d.severities.get(s, 0)))
                                          for s in ("critical", "warning", "info")] + [
             ("dead letters", _num(d.dead_letters)), ("event-time span", length or "-")]
    out = ['<section id="summary"><h2>Summary</h2>',
           f'<p>Event time {_e(span)} (UTC). {d.batches} micro-batches. Events taken: the events '
           'the monitor counted over all groups (group_state); records read: what the job read '
           'from Kafka, dead letters included (pipeline_metrics).</p><div class="cards">']
    out += [f'<div class="card"><b>{_e(v)}</b><span>{_e(k)}</span></div>' for k, v in cards]
    out.append('</div><h3>Alerts by kind</h3>')
    if d.kinds:
        out.append(_table(["kind", "severity", "category", "alerts", "resolved"],
                          [[f'<code>{_e(k.kind)}</code>', _sev(k.severity), _e(k.category),
                            _num(k.alerts), _num(k.resolved)] for k in d.kinds], {3, 4},
                          "kinds"))
        out.append('<p class="note">An alert is one alert id (an occurrence); a wedge that '
                   'cleared also has a resolved row.</p>')
    else:
        out.append("<p>No alerts.</p>")
    return "".join(out) + "</section>"


def _affected(d: RunData) -> str:
    out = ['<section id="affected"><h2>Affected groups</h2>']
    if not d.affected:
        return out[0] + "<p>No group had a warning or critical alert.</p></section>"
    drawn = {t.group: i for i, t in enumerate(d.timelines)}
    rows = [[(f'<a href="#tl-{drawn[a.group]}">{_e(a.group)}</a>' if a.group in drawn
              else _e(a.group)), _num(a.critical), _num(a.warning), _e(iso(a.first_ms)),
             ", ".join(f"<code>{_e(k)}</code>" for k in a.kinds)] for a in d.affected]
    out.append(_table(["group", "critical", "warning", "first alert", "kinds"], rows, {1, 2},
                      "affected"))
    if len(d.affected) > len(d.timelines):
        out.append(f'<p class="note">Timelines are drawn for the first {len(d.timelines)} of '
                   f'{len(d.affected)} affected groups (critical first, then by first alert); '
                   f'{len(d.affected) - len(d.timelines)} groups are listed here without one.</p>')
    return "".join(out) + "</section>"


def _evidence_table(evidence: list[dict[str, Any]]) -> str:
    if not evidence:
        return ('<p class="note">No evidence events: raised by a timer from the group\'s state '
                '(the watermark passed its deadline).</p>')
    rows = []
    for ev in evidence[:MAX_EVIDENCE_ROWS]:
        cells = [_e(iso(ev.get(c)) if c == "ts_ms" else ev.get(c, "")) for c in EVIDENCE_COLUMNS]
        rest = {k: v for k, v in ev.items() if k not in EVIDENCE_COLUMNS}
        cells.append(f'<span class="mono">{_e(json.dumps(rest, sort_keys=True))}</span>')
        rows.append(cells)
    out = _table([*EVIDENCE_COLUMNS[:2], "event time", *EVIDENCE_COLUMNS[3:], "fields"], rows,
                 {3, 4, 6, 7})
    if len(evidence) > MAX_EVIDENCE_ROWS:
        out += f'<p class="note">... {len(evidence) - MAX_EVIDENCE_ROWS} more evidence events.</p>'
    return out


def _alert_details(rows: dict[str, AlertRow]) -> str:
    first = rows.get("firing") or next(iter(rows.values()))
    resolved = rows.get("resolved")
    where = " ".join(f"{k} {v}" for k, v in (("instance", first.instance), ("node", first.node))
                     if v is not None)
    out = [f'<details class="ev" data-alert="{_e(first.alert_id)}"><summary>'
           f'{_sev(first.severity)} <code>{_e(first.kind)}</code> at {_e(iso(first.event_ms))}'
           f'{" · " + _e(where) if where else ""} · '
           f'{"resolved at " + _e(iso(resolved.event_ms)) if resolved else _e(first.status)}'
           f' · id <code>{_e(first.alert_id)}</code>'
           # The explanation is part of the summary, so it shows with the evidence closed.
           f'<span class="msg">{_e(first.message)}</span>']
    if resolved is not None and first is not resolved:
        out.append(f'<span class="msg">Resolved: {_e(resolved.message)}</span>')
    out += ["</summary>", _evidence_table(first.evidence)]
    if resolved is not None and first is not resolved:
        out += ['<p class="note">Evidence of the resolution:</p>', _evidence_table(resolved.evidence)]
    return "".join(out) + "</details>"


def _timeline(t: Timeline, index: int) -> str:
    by_id: dict[str, dict[str, AlertRow]] = {}
    for a in t.alerts:
        by_id.setdefault(a.alert_id, {})[a.status] = a
    notable = [r for r in by_id.values() if next(iter(r.values())).severity != "info"]
    info = [r for r in by_id.values() if next(iter(r.values())).severity == "info"]
    counts: dict[str, int] = {}
    for r in notable:
        s = next(iter(r.values())).severity
        counts[s] = counts.get(s, 0) + 1
    head = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    out = [f'<section class="group" id="tl-{index}" data-group="{_e(t.group)}">'
           f'<h3>group {_e(t.group)} <span class="sub">({_e(head)})</span></h3>',
           timeline_svg(t, index),
           '<p class="note">Click a marker (or focus it and press Enter) to open its evidence; '
           'hover for a summary.</p>']
    if generations(t):  # each switch as text too: the lane's labels may not fit
        steps = generation_steps(t.series_points or t.points)
        out.append('<p class="gens">Generations: ' + ", ".join(
            f"gen {_e(num)} from {_e(iso(ts))}" for ts, num in steps) + "</p>")
    if t.family == QLOG:  # each membership as text too, with its lease renewals
        out.append('<p class="legs">Legislatures: ' + ", ".join(
            f"leg {_e(s.leg)}" + (f" [{_e(', '.join(s.members))}]" if s.members else "")
            + f" from {_e(iso(s.ts))}"
            + (f" (+{len(s.renewals)} lease renewals to {_e(s.renewals[-1][1])})" if s.renewals else "")
            for s in legislature_steps(t)) + "</p>")
    if t.family == CHAIN:  # each view as text too, with the wedges and lease expiries
        out.append(chain_listing(t))
    out += [_alert_details(r) for r in notable]
    if info:
        out.append(f'<h4>{len(info)} info events (CONFIG_INSTALLED, RECONFIG_REFUSED, '
                   'INCOMPLETE_HISTORY, ...)</h4>')
        out += [_alert_details(r) for r in info]
    return "".join(out) + "</section>"


def _sources(d: RunData) -> str:
    """Where the timelines' frontier and heartbeat points come from."""
    snapshots = ('the group snapshots (node_timeseries, group_timeseries): every micro-batch in '
                 'a replay, at most every streaming.snapshot_interval_s in a live run')
    if d.series_note is None:
        return f"Frontiers and heartbeat ages are {_e(snapshots)}."
    if any(t.series_points for t in d.timelines):
        return ("Frontiers, the horizon and heartbeat ages are lines computed from the run's "
                "events by the monitor core at regular points of event time "
                f"({_e(d.series_note)}); the dots are {_e(snapshots)}.")
    return (f"Frontiers and heartbeat ages are {_e(snapshots)}; no series from the events: "
            f"{_e(d.series_note)}.")


def _timelines(d: RunData) -> str:
    out = ['<section id="timelines"><h2>Timelines of the affected groups</h2>',
           '<p class="note">Per group, on one event-time axis: alerts (triangles; a bar to the '
           'resolution), each node\'s executed (solid) and decided (dotted) frontier against the '
           'effective horizon (red, stepped), the configurations installed and active (for a '
           'generations group: each generation it switched to, and its members; for a quorum-log group: '
           'each membership with its legislature, the leader, and the decree frontier; for a chain group: '
           'each epoch\'s view head..tail, its wedges and lease expiries), and the '
           'heartbeat age of each node with its silences. ' + _sources(d) + '</p>']
    if not d.timelines:
        out.append("<p>No affected group: nothing to draw.</p>")
    out += [_timeline(t, i) for i, t in enumerate(d.timelines)]
    return "".join(out) + "</section>"


def _latency(d: RunData) -> str:
    out = ['<section id="latency"><h2>Detection latency</h2>',
           '<p><b>detected − event</b> (event time): how far past the evidence\'s event time the '
           'monitor\'s event-time clock was when it raised the alert, e.g. a silence is only '
           'known once the threshold and the allowed skew have passed. It is the same live and in '
           'a replay of the same events.']
    if d.live:
        out.append(' <b>inserted − event</b> (wall clock): from the event to the alert row in '
                   'PostgreSQL (alerts.inserted_at), the delay an operator saw. Shown for the '
                   'live run only: a replay inserts long after the events happened.')
    else:
        out.append(' The wall-clock latency (inserted_at − event_ts) is not shown: this is not '
                   'the live run, so its rows were inserted long after the events.')
    out.append("</p>")
    if not d.latency:
        return "".join(out) + "<p>No alerts.</p></section>"
    head = ["kind", "alerts", "median detected − event", "max detected − event"]
    if d.live:
        head += ["median inserted − event", "max inserted − event"]
    rows = []
    for lat in d.latency:
        row = [f"<code>{_e(lat.kind)}</code>", _num(lat.alerts), _e(duration(lat.median_ms)),
               _e(duration(lat.max_ms))]
        if d.live:
            row += [_e(duration(lat.wall_median_ms)), _e(duration(lat.wall_max_ms))]
        rows.append(row)
    out.append("<h3>By kind (first rows: firing, or an info event)</h3>" + _table(head, rows, {1, 2, 3, 4, 5}))
    head = ["alert id", "group", "kind", "severity", "event time", "detected", "detected − event"]
    if d.live:
        head += ["inserted − event"]
    rows = []
    for a in d.notable_alerts:
        row = [f"<code>{_e(a.alert_id)}</code>", _e(a.group), f"<code>{_e(a.kind)}</code>",
               _sev(a.severity), _e(iso(a.event_ms)), _e(iso(a.detected_ms)),
               _e(duration(a.detected_ms - a.event_ms))]
        if d.live:
            row.append(_e(duration(a.inserted_ms - a.event_ms)))
        rows.append(row)
    out.append("<h3>Each warning and critical alert</h3>"
               + _table(head, rows, {6, 7}, "alerts"))
    if d.notable_total > len(d.notable_alerts):
        out.append(f'<p class="note">The first {len(d.notable_alerts)} of {d.notable_total} '
                   'warning and critical alerts by event time.</p>')
    return "".join(out) + "</section>"


def _dq(d: RunData) -> str:
    out = ['<section id="dq"><h2>Data quality</h2>']
    if not d.dq:
        return out[0] + "<p>No data-quality results for this run.</p></section>"
    rows = [[_e(q.suite), f"<code>{_e(q.expectation)}</code>", _num(q.evaluations),
             _num(q.failures), _num(q.evaluated), _num(q.unexpected),
             _e(f"{iso(q.first_ms)} → {iso(q.last_ms)}"),
             "" if q.last_failure is None else
             f'<span class="mono">{_e(json.dumps(q.last_failure, sort_keys=True)[:400])}</span>']
            for q in d.dq]
    out.append(_table(["suite", "expectation", "evaluations", "failures", "rows evaluated",
                       "unexpected rows", "evaluated (processing time)", "latest failure"],
                      rows, {2, 3, 4, 5}, "dq"))
    return "".join(out) + "</section>"


def _dead(d: RunData) -> str:
    out = [f'<section id="dead"><h2>Dead letters</h2><p>{d.dead_letters} records the job could '
           'not read as events (dead_letters).</p>']
    if d.dead_letter_rows:
        out.append(_table(["topic", "partition", "offset", "Kafka time", "reason"],
                          [[_e(r["topic"]), _e(r["partition"]), _e(r["offset"]),
                            _e(iso(r["kafka_ms"])), _e(r["reason"])]
                           for r in d.dead_letter_rows], {1, 2}))
        if d.dead_letters > len(d.dead_letter_rows):
            out.append(f'<p class="note">The first {len(d.dead_letter_rows)} by Kafka time.</p>')
    return "".join(out) + "</section>"


def _reproduce(d: RunData) -> str:
    rep = reproduce(d)
    out = ['<section id="reproduce"><h2>Reproduce</h2>', f"<p>{_prose(rep.note)}</p>",
           f"<pre>{_e(rep.command)}</pre>"]
    if rep.details:
        out.append(_table(["parameter", "value"],
                          [[_e(k), f'<span class="mono">{_e(v)}</span>'] for k, v in rep.details]))
    for key, value in rep.offsets.items():
        out.append(f"<h3>{_e(key)}</h3><pre>{_e(json.dumps(value, indent=2, sort_keys=True))}</pre>")
    if rep.command != "-":
        out.append(f'<p class="note">Then compare the new run with this one: '
                   f'<code>replimon diff {_e(d.run_id)} NEW_RUN_ID</code>.</p>')
    return "".join(out) + "</section>"


def render_html(d: RunData) -> str:
    """The whole page."""
    title = f"replimon report: run {d.run_id}"
    nav = "".join(f'<a href="#{k}">{_e(v)}</a>' for k, v in (
        ("summary", "summary"), ("affected", "affected groups"), ("timelines", "timelines"),
        ("latency", "detection latency"), ("dq", "data quality"), ("dead", "dead letters"),
        ("reproduce", "reproduce")))
    body = "".join([_summary(d), _affected(d), _timelines(d), _latency(d), _dq(d), _dead(d),
                    _reproduce(d)])
    # The script goes in as is: it is a constant, and "</" cannot occur in it.
    return ("<!doctype html>\n"
            f'<html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
            f'content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">'
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body>"
            f"<header><h1>{_e(title)}</h1><p class=\"sub\">run <code>{_e(d.run_id)}</code>: "
            f"{_prose(run_kind(d))}</p></header><nav>{nav}</nav>{body}"
            f"<script>{SCRIPT}</script></body></html>\n")


def write_report(dsn: str, run_id: str, html_path: Path, md_path: Path | None = None, *,
                 max_timelines: int | None = None,
                 events: EventSource | None = None) -> ReportSummary:
    """Write the HTML report of ``run_id`` (and the Markdown summary when ``md_path``).
    ``events``: the broker and topics to read the run's events from, so the timelines plot
    frontiers and heartbeat ages from the events (None: from the tables' snapshots only).

    ValueError ``no run 'x' in PostgreSQL (known: ...)`` for a run PostgreSQL does not know.
    """
    kw = {} if max_timelines is None else {"max_timelines": max_timelines}
    data = load_run(dsn, run_id, events=events, **kw)
    html_path = Path(html_path)
    html_path.parent.mkdir(parents=True, exist_ok=True)
    html_path.write_text(render_html(data), encoding="utf-8")
    if md_path is not None:
        md_path = Path(md_path)
        md_path.parent.mkdir(parents=True, exist_ok=True)
        md_path.write_text(markdown(data), encoding="utf-8")
    severities: dict[str, int] = {s: data.severities[s] for s in ("critical", "warning", "info")
                                  if s in data.severities}
    return ReportSummary(run_id, html_path, md_path, data.groups, len(data.affected),
                         len(data.timelines), sum(k.alerts for k in data.kinds),
                         {k.kind: k.alerts for k in data.kinds}, severities)

