"""Drawing primitives shared by a report timeline's bands (``report_svg.py`` draws the picture,
``report_lanes.py`` and ``report_chain.py`` each family's configuration band): the geometry, the
colours, escaping, the alert tooltip and the steps of a configuration version. Pure functions of
their arguments."""

from __future__ import annotations

from html import escape
from typing import Any

from replimon.replay import evidence_line, iso
from replimon.replay.report_data import AlertRow, Timeline

W, LEFT, RIGHT = 1100, 150, 24
PLOT = W - LEFT - RIGHT
SEV_COLOR = {"critical": "#c62828", "warning": "#ef6c00", "info": "#607d8b"}
NODE_COLORS = ("#1565c0", "#2e7d32", "#6a1b9a", "#00838f", "#5d4037", "#827717", "#ad1457",
               "#37474f")
HORIZON_COLOR = "#b71c1c"
STEPS_MS = (100, 200, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000,
            600_000, 900_000, 1_800_000, 3_600_000, 7_200_000, 21_600_000, 43_200_000, 86_400_000)
MAX_TITLE_EVIDENCE = 6


def esc(value: Any) -> str:
    return escape(str(value), quote=True)


def alert_title(a: AlertRow, resolved: AlertRow | None = None) -> str:
    """The tooltip of an alert marker: kind, times, message, evidence with offsets."""
    lines = [f"{a.kind} ({a.severity}) {a.status} at {iso(a.event_ms)}  id {a.alert_id}",
             a.message]
    if resolved is not None:
        lines.append(f"resolved at {iso(resolved.event_ms)}: {resolved.message}")
    lines += [evidence_line(ev) for ev in a.evidence[:MAX_TITLE_EVIDENCE]]
    if len(a.evidence) > MAX_TITLE_EVIDENCE:
        lines.append(f"... {len(a.evidence) - MAX_TITLE_EVIDENCE} more evidence events")
    if not a.evidence:
        lines.append("(no evidence events: raised by a timer, from the group's state)")
    return "\n".join(lines)


def band_label(y: float, text: str, *, small: bool = False) -> str:
    return (f'<text class="{"band small" if small else "band"}" x="8" y="{y:.1f}">'
            f'{esc(text)}</text>')


def generation_steps(points: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(time, version) of each change of config_version along the points, the first one
    included: the generation (epoch, legislature) a group switched to and when the points first
    show it."""
    out: list[tuple[int, int]] = []
    for p in points:
        v = p.get("config_version")
        if v is not None and (not out or out[-1][1] != v):
            out.append((p["ts"], v))
    return out


def installs(t: Timeline, kind: str, key: str) -> list[tuple[AlertRow, dict[str, Any]]]:
    """A configuration band's steps: ``t``'s info alerts of ``kind`` (a configuration installed:
    QLOG_RECONFIGURED, CHAIN_VIEW_INSTALLED), by time then instance, each with its first evidence
    event that carries ``key`` (``{}``: none)."""
    rows = sorted((a for a in t.alerts if a.kind == kind and a.status != "resolved"),
                  key=lambda a: (a.event_ms, a.instance or 0))
    return [(a, next((e for e in a.evidence if key in e), {})) for a in rows]
