"""The third band of a report timeline, per protocol family (docs/report.md, "Timelines"):
XCom's configurations (installed, refused, active), a generations group's generations, a
quorum-log group's legislatures (each membership, the lease renewals to the same set, the
leader), a chain group's views, wedges and lease expiries (``report_chain.py``); and a quorum-log group's decree frontier for the frontier band. Each function returns
SVG fragments on the axis ``x`` it is given; every string from the data is escaped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from replimon.core.rules.chain.family import CHAIN
from replimon.core.rules.qlog.family import QLOG
from replimon.replay import iso
from replimon.replay.report_chain import chain_lane
from replimon.replay.report_data import AlertRow, Timeline
from replimon.replay.report_draw import (
    LEFT,
    NODE_COLORS,
    PLOT,
    alert_title,
    band_label,
    generation_steps,
    installs,
)
from replimon.replay.report_draw import esc as _e


def config_band(t: Timeline, points: list[dict[str, Any]], c_top: float, row_h: int,
                x: Callable[[int], float]) -> list[str]:
    """The band for ``t``'s family: legislatures (quorum-log), views (chain), generations, else
    XCom's configurations."""
    if t.family == QLOG:
        return legislatures_lane(t, points, c_top, row_h, x)
    if t.family == CHAIN:
        return chain_lane(t, points, c_top, row_h, x)
    if generations(t):
        return generations_lane(points, c_top, row_h, x)
    return configurations_lane(t, c_top, row_h, x)


def _config_of(a: AlertRow) -> tuple[Any, Any]:
    """(start, event horizon) a CONFIG_INSTALLED alert installed, from its config evidence."""
    for ev in a.evidence:
        if ev.get("type") == "config" and "start" in ev:
            return ev["start"], ev.get("event_horizon")
    return a.instance, None


def configurations_lane(t: Timeline, c_top: float, row_h: int, x: Callable[[int], float]) -> list[str]:
    """XCom's configurations band: the configurations installed (CONFIG_INSTALLED, refusals)
    and the active one of each snapshot."""
    parts: list[str] = []
    parts.append(band_label(c_top + row_h / 2 + 4, "installed"))
    parts.append(band_label(c_top + 1.5 * row_h + 4, "active"))
    installs = sorted((a for a in t.alerts if a.kind == "CONFIG_INSTALLED"),
                      key=lambda a: (a.event_ms, a.alert_id))
    for i, a in enumerate(installs):
        start, eh = _config_of(a)
        x0 = x(a.event_ms)
        x1 = x(installs[i + 1].event_ms) if i + 1 < len(installs) else LEFT + PLOT
        label = f"start {start}" + (f" · eh {eh}" if eh is not None else "")
        parts.append(
            f'<g class="mk cfg" data-alert="{_e(a.alert_id)}" tabindex="0">'
            f'<title>{_e(alert_title(a))}</title>'
            f'<rect x="{x0:.1f}" y="{c_top + 3}" width="{max(x1 - x0, 2):.1f}" '
            f'height="{row_h - 6}" fill="{NODE_COLORS[i % 2 + 3]}" fill-opacity="0.18" '
            f'stroke="{NODE_COLORS[i % 2 + 3]}"/>'
            f'<path d="M{x0:.1f},{c_top + 3} l5,8 l-5,8 l-5,-8 z" fill="#455a64"/>'
            + (f'<text class="cfgtext" x="{x0 + 8:.1f}" y="{c_top + 15}">{_e(label)}</text>'
               if x1 - x0 > 60 else "") + "</g>")
    for a in (a for a in t.alerts if a.kind == "RECONFIG_REFUSED"):
        x0 = x(a.event_ms)
        parts.append(
            f'<g class="mk refused" data-alert="{_e(a.alert_id)}" tabindex="0">'
            f'<title>{_e(alert_title(a))}</title>'
            f'<path d="M{x0 - 5:.1f},{c_top + 6} l10,10 m0,-10 l-10,10" stroke="#6d4c41" '
            f'stroke-width="2.2"/></g>')
    for i, p in enumerate(t.points):
        if p["active_config"] is None:
            continue
        x0 = x(p["ts"])
        x1 = x(t.points[i + 1]["ts"]) if i + 1 < len(t.points) else LEFT + PLOT
        pending = f"; pending: {p['pending_configs']}" if p["pending_configs"] else ""
        dash = ' stroke-dasharray="3 2"' if pending else ""
        parts.append(
            f'<g><title>{_e(iso(p["ts"]))}: active {_e(p["active_config"])}{_e(pending)}</title>'
            f'<rect x="{x0:.1f}" y="{c_top + row_h + 3}" width="{max(x1 - x0, 3):.1f}" '
            f'height="{row_h - 6}" fill="#90a4ae" fill-opacity="0.35" stroke="#546e7a"{dash}/>'
            + (f'<text class="cfgtext" x="{x0 + 4:.1f}" y="{c_top + row_h + 15}">'
               f'{_e(p["active_config"])}{" (+pending)" if pending else ""}</text>'
               if x1 - x0 > 120 else "") + "</g>")
    return parts


def generations(t: Timeline) -> bool:
    """Whether the group's configuration is a version number without XCom's configuration text
    (the generations family: group_timeseries.config_version is the generation number)."""
    pts = [*t.points, *t.series_points]
    return t.family not in (QLOG, CHAIN) and (any(p.get("config_version") is not None for p in pts)
            and all(p.get("active_config") is None for p in pts))


def generations_lane(points: list[dict[str, Any]], c_top: float, row_h: int,
                      x: Callable[[int], float]) -> list[str]:
    """The generations band: a segment per generation from the point that first shows it to the
    next one, labelled with its number and members, a diamond at each switch (drawn as XCom's
    installed configurations are)."""
    parts = [band_label(c_top + row_h / 2 + 4, "generation"),
             band_label(c_top + 1.5 * row_h + 4, "members")]
    steps = generation_steps(points)
    members = {p["ts"]: p.get("members") for p in points}
    for i, (ts, num) in enumerate(steps):
        x0 = x(ts)
        x1 = x(steps[i + 1][0]) if i + 1 < len(steps) else LEFT + PLOT
        n = members.get(ts)
        title = f"generation {num} from {iso(ts)}" + (f": {n} members" if n is not None else "")
        parts.append(
            f'<g class="genstep" data-gen="{_e(num)}"><title>{_e(title)}</title>'
            f'<rect x="{x0:.1f}" y="{c_top + 3}" width="{max(x1 - x0, 2):.1f}" '
            f'height="{row_h - 6}" fill="{NODE_COLORS[i % 2 + 3]}" fill-opacity="0.18" '
            f'stroke="{NODE_COLORS[i % 2 + 3]}"/>'
            f'<path d="M{x0:.1f},{c_top + 3} l5,8 l-5,8 l-5,-8 z" fill="#455a64"/>'
            + (f'<text class="cfgtext" x="{x0 + 8:.1f}" y="{c_top + 15}">gen {_e(num)}</text>'
               if x1 - x0 > 40 else "")
            + (f'<text class="cfgtext" x="{x0 + 8:.1f}" y="{c_top + row_h + 15}">{_e(n)}</text>'
               if n is not None and x1 - x0 > 20 else "") + "</g>")
    return parts


def decree_lines(t: Timeline, points: list[dict[str, Any]]) -> list[tuple[str, str, str, list[Any]]]:
    """A quorum-log group's decree frontier in the frontier band: (class, colour, dash, value per
    point) of the highest decree passed (the event series only) and the decree a majority of the
    legislature executed; nothing for another family."""
    if t.family != QLOG:
        return []
    out = [("passed", "#757575", "5 3", [p.get("passed") for p in points]),
           ("majority", "#212121", "", [p.get("executed_majority") for p in points])]
    return [line for line in out if any(v is not None for v in line[3])]


class LegStep(NamedTuple):
    """A quorum-log membership: the legislature that installed it, when, its members in order,
    the QLOG_RECONFIGURED alert that says so (None: from config_version alone) and how many
    same-set Reconfs (lease renewals) followed before the next membership."""

    ts: int
    leg: int
    members: list[str]
    alert_id: str | None
    renewals: list[tuple[int, int]]  # (time, legislature)


def legislature_steps(t: Timeline) -> list[LegStep]:
    """Each membership change of a quorum-log group: from its QLOG_RECONFIGURED events (members
    in their evidence; a Reconf to the same set starts no new step), else from the changes of
    config_version along the points (members unknown)."""
    out: list[LegStep] = []
    for a, ev in installs(t, "QLOG_RECONFIGURED", "members"):
        members, leg = list(ev.get("members") or []), int(ev.get("new_leg", a.instance or 0))
        if out and set(out[-1].members) == set(members):
            out[-1].renewals.append((a.event_ms, leg))
        else:
            out.append(LegStep(a.event_ms, leg, members, a.alert_id, []))
    if not out:
        out = [LegStep(ts, v, [], None, []) for ts, v in generation_steps(t.series_points or t.points)]
    return out


def legislatures_lane(t: Timeline, points: list[dict[str, Any]], c_top: float, row_h: int,
                       x: Callable[[int], float]) -> list[str]:
    """The quorum-log band: a segment per membership labelled with its legislature and members
    (a diamond at its install opens the evidence; a tick at each lease renewal), and the leader
    the members name along the event series (else each point's member count)."""
    parts = [band_label(c_top + row_h / 2 + 4, "legislature"),
             band_label(c_top + 1.5 * row_h + 4, "leader" if any("leader" in p for p in points) else "members")]
    steps = legislature_steps(t)
    for i, s in enumerate(steps):
        x0 = x(s.ts)
        x1 = x(steps[i + 1].ts) if i + 1 < len(steps) else LEFT + PLOT
        label = f"leg {s.leg}" + (f" · {','.join(s.members)}" if s.members else "")
        title = (f"legislature {s.leg} from {iso(s.ts)}" + (f": {', '.join(s.members)}" if s.members else "")
                 + (f"; {len(s.renewals)} lease renewals to the same set" if s.renewals else ""))
        mark = f' class="mk cfg legstep" data-alert="{_e(s.alert_id)}" tabindex="0"' if s.alert_id else ' class="legstep"'
        parts.append(
            f'<g{mark} data-leg="{_e(s.leg)}"><title>{_e(title)}</title>'
            f'<rect x="{x0:.1f}" y="{c_top + 3}" width="{max(x1 - x0, 2):.1f}" height="{row_h - 6}" '
            f'fill="{NODE_COLORS[i % 2 + 3]}" fill-opacity="0.18" stroke="{NODE_COLORS[i % 2 + 3]}"/>'
            f'<path d="M{x0:.1f},{c_top + 3} l5,8 l-5,8 l-5,-8 z" fill="#455a64"/>'
            + (f'<text class="cfgtext" x="{x0 + 8:.1f}" y="{c_top + 15}">{_e(label)}</text>'
               if x1 - x0 > 8 * len(label) else "") + "</g>")
        parts += [f'<line class="renewal" x1="{x(ts):.1f}" x2="{x(ts):.1f}" y1="{c_top + 14}" '
                  f'y2="{c_top + row_h - 3}" stroke="#455a64"><title>legislature {_e(leg)} at '
                  f'{_e(iso(ts))}: same members (lease renewal)</title></line>' for ts, leg in s.renewals]
    key = "leader" if any("leader" in p for p in points) else "members"
    for i, p in enumerate(points):
        value = p.get(key)
        if i and points[i - 1].get(key) == value:
            continue
        nxt = next((q["ts"] for q in points[i + 1:] if q.get(key) != value), None)
        x0, x1 = x(p["ts"]), LEFT + PLOT if nxt is None else x(nxt)
        text = "none" if value is None else str(value)
        colour = "#c62828" if value is None and key == "leader" else "#546e7a"
        parts.append(f'<g class="leader"><title>{_e(key)} from {_e(iso(p["ts"]))}: {_e(text)}</title>'
                     f'<rect x="{x0:.1f}" y="{c_top + row_h + 3}" width="{max(x1 - x0, 2):.1f}" '
                     f'height="{row_h - 6}" fill="{colour}" fill-opacity="0.25" stroke="{colour}"/>'
                     + (f'<text class="cfgtext" x="{x0 + 4:.1f}" y="{c_top + row_h + 15}">{_e(text)}</text>'
                        if x1 - x0 > 8 * len(text) else "") + "</g>")
    return parts
