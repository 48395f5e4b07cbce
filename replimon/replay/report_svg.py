"""The timeline of one group as inline SVG, drawn here (no chart library, no network).

One picture per affected group, four bands on one event-time axis:

1. *alerts*: a triangle per warning/critical alert at its event time, a bar to its resolution for
   a wedge that resolved; a dashed line from it down through the other bands;
2. *frontiers*: each node's executed (solid) and decided (dotted) frontier, and the group's
   effective horizon (red, stepped): a node's decided frontier touching the horizon is the
   picture of a horizon wedge. The lines go through the series computed from the events
   (``Timeline.series_*``, `replimon.replay.report_series`) when the report has them, else
   through the snapshots (node_timeseries, group_timeseries); the snapshots are dots either way;
3. *configurations* (``report_lanes.py``, per family): the configurations installed (CONFIG_INSTALLED, a segment from its install
   to the next one, labelled with its start and event horizon), refusals (RECONFIG_REFUSED) and
   the active configuration of each snapshot (group_timeseries.active_config, with the pending
   ones); for a generations group, its *generations* instead: a segment per generation number
   (group_timeseries.config_version) from the point that first shows it to the next, with a
   diamond at each switch and the generation's member count; for a quorum-log group, its
   *legislatures*: a segment per membership (QLOG_RECONFIGURED events: a Reconf to the same set
   renews the leader's lease and is a tick, not a segment) and the leader along the event series;
   its frontier band adds the group's decree frontier (highest passed, executed by a majority);
   for a chain group, its *views* (``report_chain.py``): a segment per epoch labelled
   ``epoch N · head..tail``, and the wedges and lease expiries below;
4. *heartbeats*: each node's heartbeat age (how stale it looked: a line through the event
   series, else the snapshots; the snapshots' ages as dots) with its NODE_SILENT intervals, and
   GROUP_SILENT intervals across the band.

Every marker carries ``data-alert`` (the alert id) and a ``<title>`` (the browser's tooltip) with
the alert and its evidence events (type, node, time, topic/partition/offset); the report's script
opens the evidence table on click. Every string from the data is escaped (`html.escape`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from replimon.replay import evidence_line, iso
from replimon.replay.report_data import AlertRow, Timeline
from replimon.replay.report_draw import (
    HORIZON_COLOR,
    LEFT,
    NODE_COLORS,
    PLOT,
    SEV_COLOR,
    STEPS_MS,
    W,
    alert_title,
    band_label,
)
from replimon.replay.report_draw import esc as _e
from replimon.replay.report_lanes import config_band, decree_lines


def _nice(lo: float, hi: float, n: int = 4) -> list[float]:
    """About ``n`` round ticks covering [lo, hi]."""
    span = max(hi - lo, 1e-9)
    raw = span / n
    mag = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 1
    step = next((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), 10 * mag)
    first = int(lo // step) * step
    ticks, t = [], first
    while t <= hi + step * 1e-9:
        if t >= lo - step * 1e-9:
            ticks.append(t)
        t += step
    return ticks


def _fmt_int(v: float) -> str:
    return f"{int(v):,}".replace(",", "\u2009")


def _time_range(t: Timeline) -> tuple[int, int]:
    times: list[int] = [p["ts"] for p in [*t.points, *t.series_points] if p["ts"] is not None]
    for rows in [*t.nodes.values(), *t.series_nodes.values()]:
        times += [p["ts"] for p in rows if p["ts"] is not None]
        times += [p["last_ts"] for p in rows if p["last_ts"] is not None]
    for a in t.alerts:
        times.append(a.event_ms)
        times += [ev["ts_ms"] for ev in a.evidence if isinstance(ev.get("ts_ms"), int)]
    lo, hi = (min(times), max(times)) if times else (0, 1000)
    if hi - lo < 1000:
        lo, hi = lo - 500, hi + 500
    pad = (hi - lo) // 40
    return lo - pad, hi + pad


def _polyline(points: Iterable[tuple[float, float] | None], **attrs: str) -> str:
    """Polylines through the points, broken where a point is None (a NULL value)."""
    out: list[str] = []
    run: list[tuple[float, float]] = []
    extra = " ".join(f'{k.rstrip("_").replace("_", "-")}="{v}"' for k, v in attrs.items())
    for p in [*points, None]:
        if p is None:
            if len(run) == 1:
                out.append(f'<circle cx="{run[0][0]:.1f}" cy="{run[0][1]:.1f}" r="2.5" '
                           f'fill="{attrs.get("stroke", "#000")}"/>')
            elif run:
                pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in run)
                out.append(f'<polyline fill="none" points="{pts}" {extra}/>')
            run = []
        else:
            run.append(p)
    return "".join(out)


def _evidence_points(t: Timeline, color: dict[str, str]) -> list[tuple[str, int, int, str]]:
    """(node, ts, frontier, tooltip) of the warning/critical alerts' evidence events that carry
    an executed frontier or a decided instance, for nodes the timeline draws."""
    out = []
    for a in t.alerts:
        if a.severity == "info":
            continue
        for ev in a.evidence:
            n, ts = ev.get("node"), ev.get("ts_ms")
            value = ev.get("executed", ev.get("instance"))
            if n in color and isinstance(ts, int) and isinstance(value, int):
                out.append((n, ts, value, f"evidence of {a.kind}: {evidence_line(ev)}"))
    return out


def timeline_svg(t: Timeline, index: int) -> str:
    """The SVG of one group's timeline (``index`` makes element ids unique in the page)."""
    t0, t1 = _time_range(t)

    def x(ms: int) -> float:
        return LEFT + (ms - t0) * PLOT / (t1 - t0)

    nodes = sorted(set(t.nodes) | set(t.series_nodes))
    # The lines: from the events when the report has their series, else through the snapshots;
    # the snapshots are drawn as dots either way.
    line_nodes = t.series_nodes if t.series_points else t.nodes
    line_points = t.series_points or t.points
    color = {n: NODE_COLORS[i % len(NODE_COLORS)] for i, n in enumerate(nodes)}
    by_id: dict[str, dict[str, AlertRow]] = {}
    for a in t.alerts:
        by_id.setdefault(a.alert_id, {})[a.status] = a
    notable = [(rows["firing"], rows.get("resolved")) for rows in by_id.values()
               if "firing" in rows and rows["firing"].severity != "info"]
    parts: list[str] = []
    y = 6
    # -- 1. alerts strip
    strip_top, strip_h = y, 30
    parts.append(band_label(strip_top + strip_h / 2, "alerts"))
    markers: list[str] = []
    # -- 2. frontiers
    y += strip_h + 10
    f_top, f_h = y, 200
    values = [v for rows in [*t.nodes.values(), *line_nodes.values()] for p in rows
              for v in (p["decided"], p["executed"]) if v is not None]
    values += [p["effective_horizon"] for p in line_points if p["effective_horizon"] is not None]
    values += [v for _, _, v, _ in _evidence_points(t, color)]
    decrees = decree_lines(t, line_points)
    values += [v for *_, pts in decrees for v in pts if v is not None]
    lo, hi = (min(values), max(values)) if values else (0, 1)
    if hi - lo < 4:
        lo, hi = lo - 2, hi + 2
    pad = (hi - lo) * 0.06
    lo, hi = lo - pad, hi + pad

    def fy(v: float) -> float:
        return f_top + f_h - (v - lo) * f_h / (hi - lo)

    parts.append(f'<rect class="panel" x="{LEFT}" y="{f_top}" width="{PLOT}" height="{f_h}"/>')
    parts.append(band_label(f_top + 12, "frontier"))
    parts.append(band_label(f_top + 26, "(instance)", small=True))
    for v in _nice(lo, hi):
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{LEFT + PLOT}" y1="{fy(v):.1f}" '
                     f'y2="{fy(v):.1f}"/><text class="tick" x="{LEFT - 6}" y="{fy(v) + 4:.1f}" '
                     f'text-anchor="end">{_fmt_int(v)}</text>')
    # The effective horizon holds from one snapshot to the next: a step after each point.
    steps: list[tuple[float, float] | None] = []
    for i, p in enumerate(line_points):
        if p["effective_horizon"] is None:
            steps.append(None)
            continue
        nxt = line_points[i + 1]["ts"] if i + 1 < len(line_points) else p["ts"]
        steps += [(x(p["ts"]), fy(p["effective_horizon"])), (x(nxt), fy(p["effective_horizon"]))]
    parts.append(_polyline(steps, stroke=HORIZON_COLOR, stroke_width="2",
                           stroke_dasharray="7 3", class_="horizon"))
    for n in nodes:
        rows = line_nodes.get(n, [])
        parts.append(_polyline([None if p["decided"] is None else (x(p["ts"]), fy(p["decided"]))
                                for p in rows], stroke=color[n], stroke_width="1.4",
                               stroke_dasharray="2 3"))
        parts.append(_polyline([None if p["executed"] is None else (x(p["ts"]), fy(p["executed"]))
                                for p in rows], stroke=color[n], stroke_width="2.2",
                               class_="series" if t.series_points else "snapshots"))
        for p in t.nodes.get(n, []):
            if p["executed"] is not None:
                parts.append(
                    f'<circle cx="{x(p["ts"]):.1f}" cy="{fy(p["executed"]):.1f}" r="3" '
                    f'fill="{color[n]}"><title>{_e(n)} at {_e(iso(p["ts"]))}: executed '
                    f'{_e(p["executed"])}, decided {_e(p["decided"])}'
                    f'{"" if p["member"] else " (not a member)"}</title></circle>')
    for key, colour, dash, pts in decrees:  # a quorum-log group's decree frontier
        parts.append(_polyline([None if v is None else (x(p["ts"]), fy(v))
                                for p, v in zip(line_points, pts, strict=True)],
                               stroke=colour, stroke_width="1.6", stroke_dasharray=dash,
                               class_=f"decrees {key}"))
    # Evidence events that carry a frontier: the moments the alerts are about, between snapshots.
    for n, ts, value, title in _evidence_points(t, color):
        parts.append(f'<circle class="evpt" cx="{x(ts):.1f}" cy="{fy(value):.1f}" r="4.5" '
                     f'fill="#fff" stroke="{color[n]}" stroke-width="1.8"><title>{_e(title)}'
                     f'</title></circle>')
    # -- 3. configurations (XCom) or generations (any other family: its config_version steps)
    y = f_top + f_h + 12
    c_top, row_h = y, 22
    parts.append(f'<rect class="panel" x="{LEFT}" y="{c_top}" width="{PLOT}" height="{2 * row_h}"/>')
    parts += config_band(t, line_points, c_top, row_h, x)
    # -- 4. heartbeats
    y = c_top + 2 * row_h + 12
    h_top, h_h = y, 110
    ages = [p["heartbeat_age_ms"] for rows in [*t.nodes.values(), *line_nodes.values()]
            for p in rows if p["heartbeat_age_ms"] is not None]
    h_max = max([1000, *ages]) * 1.1

    def hy(v: float) -> float:
        return h_top + h_h - v * h_h / h_max

    parts.append(f'<rect class="panel" x="{LEFT}" y="{h_top}" width="{PLOT}" height="{h_h}"/>')
    parts.append(band_label(h_top + 12, "heartbeat age"))
    parts.append(band_label(h_top + 26, "(s)", small=True))
    for v in _nice(0, h_max / 1000, 3):
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{LEFT + PLOT}" y1="{hy(v * 1000):.1f}" '
                     f'y2="{hy(v * 1000):.1f}"/><text class="tick" x="{LEFT - 6}" '
                     f'y="{hy(v * 1000) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for first, resolved in notable:
        if first.kind not in ("NODE_SILENT", "GROUP_SILENT"):
            continue
        x0, x1 = x(first.event_ms), x(resolved.event_ms) if resolved else LEFT + PLOT
        who = first.node or "group"
        parts.append(
            f'<g class="mk silent" data-alert="{_e(first.alert_id)}" tabindex="0">'
            f'<title>{_e(alert_title(first, resolved))}</title>'
            f'<rect x="{x0:.1f}" y="{h_top + 1}" width="{max(x1 - x0, 2):.1f}" height="{h_h - 2}" '
            f'fill="{SEV_COLOR[first.severity]}" fill-opacity="0.12"/>'
            f'<text class="cfgtext" x="{x0 + 4:.1f}" y="{h_top + h_h - 6}">'
            f'{_e(first.kind)} {_e(who)}</text></g>')
    for n in nodes:
        parts.append(_polyline([None if p["heartbeat_age_ms"] is None
                                else (x(p["ts"]), hy(p["heartbeat_age_ms"]))
                                for p in line_nodes.get(n, [])],
                               stroke=color[n], stroke_width="1.8",
                               class_="series" if t.series_points else "snapshots"))
        if t.series_points:  # the snapshots' ages as dots on the line from the events
            parts += [f'<circle cx="{x(p["ts"]):.1f}" cy="{hy(p["heartbeat_age_ms"]):.1f}" r="2.5" '
                      f'fill="{color[n]}"><title>{_e(n)} at {_e(iso(p["ts"]))}: heartbeat age '
                      f'{p["heartbeat_age_ms"] / 1000:g} s (snapshot)</title></circle>'
                      for p in t.nodes.get(n, []) if p["heartbeat_age_ms"] is not None]
    bottom = h_top + h_h
    # -- alert markers over everything (drawn last so they are on top and clickable)
    for first, resolved in sorted(notable, key=lambda fr: fr[0].event_ms):
        x0, sev = x(first.event_ms), first.severity
        bar = ""
        if resolved is not None:
            bar = (f'<line x1="{x0:.1f}" x2="{x(resolved.event_ms):.1f}" y1="{strip_top + 24}" '
                   f'y2="{strip_top + 24}" stroke="{SEV_COLOR[sev]}" stroke-width="4" '
                   f'stroke-opacity="0.45"/>')
        markers.append(
            f'<g class="mk sev-{_e(sev)}" data-alert="{_e(first.alert_id)}" tabindex="0" '
            f'role="button"><title>{_e(alert_title(first, resolved))}</title>{bar}'
            f'<line class="drop" x1="{x0:.1f}" x2="{x0:.1f}" y1="{strip_top + 18}" y2="{bottom}" '
            f'stroke="{SEV_COLOR[sev]}"/>'
            f'<path d="M{x0 - 7:.1f},{strip_top + 2} h14 l-7,16 z" fill="{SEV_COLOR[sev]}"/></g>')
    parts += markers
    # -- time axis
    parts.append(_axis(t0, t1, bottom, x))
    height = bottom + 34
    legend = "".join(
        f'<span class="lg"><i style="background:{color[n]}"></i>{_e(n)}</span>' for n in nodes)
    return (f'<svg id="tl-svg-{index}" class="timeline" viewBox="0 0 {W} {height}" '
            f'width="100%" role="img" aria-label="timeline of group {_e(t.group)}">{"".join(parts)}</svg>'
            f'<div class="legend">{legend}<span class="lg"><i class="solid"></i>executed</span>'
            f'<span class="lg"><i class="dotted"></i>decided</span>'
            f'<span class="lg"><i class="horizon"></i>effective horizon</span>'
            f'<span class="lg"><i class="ring"></i>evidence event</span>'
            f'<span class="lg"><i style="background:{SEV_COLOR["critical"]}"></i>critical</span>'
            f'<span class="lg"><i style="background:{SEV_COLOR["warning"]}"></i>warning</span>'
            f'<span class="lg">times UTC, {_e(iso(t0)[:10])}</span></div>')


def _axis(t0: int, t1: int, y: float, x: Callable[[int], float]) -> str:
    step = next((s for s in STEPS_MS if (t1 - t0) / s <= 9), STEPS_MS[-1])
    out = [f'<line class="axis" x1="{LEFT}" x2="{LEFT + PLOT}" y1="{y + 2}" y2="{y + 2}"/>']
    tick = -(-t0 // step) * step
    while tick <= t1:
        label = iso(tick, date=False)[:12 if step < 1000 else 8]
        out.append(f'<line class="axis" x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="{y + 2}" '
                   f'y2="{y + 7}"/><text class="tick" x="{x(tick):.1f}" y="{y + 20}" '
                   f'text-anchor="middle">{_e(label)}</text>')
        tick += step
    return "".join(out)
