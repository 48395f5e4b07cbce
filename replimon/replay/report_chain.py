"""A chain group's configuration band in a report timeline (docs/report.md, "Timelines"): its
views and what stopped them, drawn in the configurations' place (``report_lanes.config_band``).

* *view*: a segment per epoch from its first install (CHAIN_VIEW_INSTALLED: a diamond that opens
  the evidence) to the next epoch's, labelled ``epoch N · head..tail``; without any install (a
  history that starts inside an epoch) the steps of ``config_version``, chain unknown;
* *wedge / lease*: the intervals the group's current epoch was wedged along the event series
  (a wedge replaced within the series' step is not drawn), each CHAIN_WEDGE_NOT_REPLACED from
  the wedge to the install that replaced it, and each lease expiry (CHAIN_LEASE_EXPIRED,
  CHAIN_VIEW_STALE) from the lease's end to its renewal or the view without the member, all
  clickable to their evidence.

``chain_listing`` gives the same as one line of text under the picture. Every string from the
data is escaped; the functions are pure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from replimon.replay import iso
from replimon.replay.report_data import AlertRow, Timeline
from replimon.replay.report_draw import (
    LEFT,
    NODE_COLORS,
    PLOT,
    SEV_COLOR,
    alert_title,
    band_label,
    generation_steps,
    installs,
)
from replimon.replay.report_draw import esc as _e

LEASE_KINDS = ("CHAIN_LEASE_EXPIRED", "CHAIN_VIEW_STALE")


class ViewStep(NamedTuple):
    """One epoch's view: when it was first installed, its chain head..tail (empty: not known)
    and the CHAIN_VIEW_INSTALLED alert that says so (None: from config_version alone)."""

    ts: int
    epoch: int
    chain: list[str]
    alert_id: str | None


class Interval(NamedTuple):
    """A stretch of a wedge or a lease expiry: from ``ts`` to ``end`` (None: still open at the
    end of the run), the alert that reports it (None: from the event series alone)."""

    ts: int
    end: int | None
    kind: str
    node: str | None
    alert: AlertRow | None
    resolved: AlertRow | None


def view_steps(t: Timeline) -> list[ViewStep]:
    """Each epoch of the group above the bootstrap epoch 0, in time order: from its
    CHAIN_VIEW_INSTALLED event (the chain is in its evidence), else from the changes of
    config_version along the points (chain unknown)."""
    out: list[ViewStep] = []
    for a, ev in installs(t, "CHAIN_VIEW_INSTALLED", "chain"):
        epoch = int(ev.get("epoch", a.instance or 0))
        if epoch > 0:
            out.append(ViewStep(a.event_ms, epoch, [str(m) for m in ev.get("chain") or []], a.alert_id))
    return out or [ViewStep(ts, v, [], None) for ts, v in generation_steps(t.series_points or t.points)]


def _pairs(t: Timeline, kinds: tuple[str, ...]) -> list[Interval]:
    """The alerts of ``kinds`` as intervals from their firing to their resolution."""
    by_id: dict[str, dict[str, AlertRow]] = {}
    for a in t.alerts:
        if a.kind in kinds:
            by_id.setdefault(a.alert_id, {})[a.status] = a
    out = [Interval(r["firing"].event_ms, r["resolved"].event_ms if "resolved" in r else None,
                    r["firing"].kind, r["firing"].node, r["firing"], r.get("resolved"))
           for r in by_id.values() if "firing" in r]
    return sorted(out, key=lambda i: (i.ts, i.kind, i.node or ""))


def wedged_spans(points: list[dict[str, Any]]) -> list[Interval]:
    """The stretches of points whose current epoch is wedged (``wedged``, the event series)."""
    out: list[Interval] = []
    start: int | None = None
    for p in points:
        if p.get("wedged") and start is None:
            start = p["ts"]
        elif not p.get("wedged") and start is not None:
            out.append(Interval(start, p["ts"], "wedged", None, None, None))
            start = None
    if start is not None:
        out.append(Interval(start, None, "wedged", None, None, None))
    return out


def _label(s: ViewStep) -> str:
    return f"epoch {s.epoch}" + (f" · {s.chain[0]}..{s.chain[-1]}" if s.chain else "")


def chain_lane(t: Timeline, points: list[dict[str, Any]], c_top: float, row_h: int,
               x: Callable[[int], float]) -> list[str]:
    """The chain band (module docstring): views above, wedges and lease expiries below."""
    parts = [band_label(c_top + row_h / 2 + 4, "view"),
             band_label(c_top + 1.5 * row_h + 4, "wedge / lease")]
    steps = view_steps(t)
    for i, s in enumerate(steps):
        x0 = x(s.ts)
        x1 = x(steps[i + 1].ts) if i + 1 < len(steps) else LEFT + PLOT
        label = _label(s)
        title = (f"epoch {s.epoch} from {iso(s.ts)}"
                 + (f": {' > '.join(s.chain)} (head {s.chain[0]}, tail {s.chain[-1]})" if s.chain else ""))
        mark = (f' class="mk cfg viewstep" data-alert="{_e(s.alert_id)}" tabindex="0"' if s.alert_id
                else ' class="viewstep"')
        parts.append(
            f'<g{mark} data-epoch="{_e(s.epoch)}"><title>{_e(title)}</title>'
            f'<rect x="{x0:.1f}" y="{c_top + 3}" width="{max(x1 - x0, 2):.1f}" height="{row_h - 6}" '
            f'fill="{NODE_COLORS[i % 2 + 3]}" fill-opacity="0.18" stroke="{NODE_COLORS[i % 2 + 3]}"/>'
            f'<path d="M{x0:.1f},{c_top + 3} l5,8 l-5,8 l-5,-8 z" fill="#455a64"/>'
            + (f'<text class="cfgtext" x="{x0 + 8:.1f}" y="{c_top + 15}">{_e(label)}</text>'
               if x1 - x0 > 7 * len(label) else "") + "</g>")
    y0 = c_top + row_h + 3
    for w in wedged_spans(points):
        x0, x1 = x(w.ts), LEFT + PLOT if w.end is None else x(w.end)
        parts.append(f'<rect class="wedged" x="{x0:.1f}" y="{y0}" width="{max(x1 - x0, 2):.1f}" '
                     f'height="{row_h - 6}" fill="#6d4c41" fill-opacity="0.25"><title>the current '
                     f'epoch wedged from {_e(iso(w.ts))}'
                     + ("" if w.end is None else f" to {_e(iso(w.end))}") + "</title></rect>")
    for w in _pairs(t, ("CHAIN_WEDGE_NOT_REPLACED", *LEASE_KINDS)):
        if w.alert is None:
            continue
        x0, x1 = x(w.ts), LEFT + PLOT if w.end is None else x(w.end)
        lease = w.kind in LEASE_KINDS
        text = f"lease {w.node}" if lease else f"wedge {w.alert.instance}"
        colour = SEV_COLOR[w.alert.severity]
        parts.append(
            f'<g class="mk {"lease" if lease else "wedge"}" data-alert="{_e(w.alert.alert_id)}" tabindex="0">'
            f'<title>{_e(alert_title(w.alert, w.resolved))}</title>'
            f'<rect x="{x0:.1f}" y="{y0 + (row_h - 6) / 2 if lease else y0}" width="{max(x1 - x0, 2):.1f}" '
            f'height="{(row_h - 6) / 2}" fill="{colour}" fill-opacity="0.35" stroke="{colour}"/>'
            + (f'<text class="cfgtext" x="{x0 + 4:.1f}" y="{c_top + row_h + 15}">{_e(text)}</text>'
               if x1 - x0 > 7 * len(text) else "") + "</g>")
    return parts


def chain_listing(t: Timeline) -> str:
    """The chain band as a line of text: each view, each wedge not replaced, each lease expiry."""
    views = ", ".join(f"epoch {_e(s.epoch)}" + (f" [{_e(' > '.join(s.chain))}]" if s.chain else "")
                      + f" from {_e(iso(s.ts))}" for s in view_steps(t))
    stops = [f"{_e(w.kind)} " + (_e(w.node) if w.kind in LEASE_KINDS else f"epoch {_e(w.alert and w.alert.instance)}")
             + f" from {_e(iso(w.ts))}"
             + (f" to {_e(iso(w.end))}" if w.end is not None else " (not resolved)")
             for w in _pairs(t, ("CHAIN_WEDGE_NOT_REPLACED", *LEASE_KINDS))]
    return f'<p class="views">Views: {views or "none known"}' + (
        f"; wedges and lease expiries: {', '.join(stops)}" if stops else "") + "</p>"
