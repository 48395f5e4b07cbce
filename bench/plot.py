"""The alert-latency curve of a ``bench/pipeline.py`` result as an SVG file (no plotting library:
the project has none, and a few lines and markers need none).

    .venv/bin/python bench/plot.py bench/results/pipeline-curve.json docs/img/pipeline-latency.svg

``bench/pipeline.py`` calls ``write_latency_curve`` itself after a run (``--plot``). The chart:
offered events/s (x) against the alert latency of the injected faults (y: p50 dashed, p99 solid),
one colour a group count; a filled marker where the rate was kept up, a hollow one where it was
not; the targets as crosses. With targets the y axis stops at four times the largest target's
p99: a latency above it (a rate far past what the job keeps up with) is drawn at the top with its
value. The numbers are in the result's tables; the chart shows the shape.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")
W, H = 720, 420
LEFT, RIGHT, TOP, BOTTOM = 70, 190, 40, 55


def curve_points(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One series per group count: (published events/s, p50 s, p99 s, kept up) of each rate run."""
    series = []
    for g in result["groups"]:
        points = []
        for s in g.get("sustained", []):
            m = s.get("summary")
            if not m or m.get("published_events_per_s") is None or m.get("latency_s_p99") is None:
                continue
            points.append((float(m["published_events_per_s"]), m["latency_s_p50"], m["latency_s_p99"],
                           bool(m["keeps_up"])))
        if points:
            series.append({"groups": g["groups"], "points": sorted(points)})
    return series


def _ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``top``."""
    raw = top / count
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [i * step for i in range(int(math.ceil(top / step)) + 1)]


def latency_svg(result: dict[str, Any], targets: Sequence[tuple[int, float]] = (), title: str = "") -> str:
    """The chart (module doc) as SVG text; ``targets``: (events/s, p99 s) crosses."""
    series = curve_points(result)
    xs = [p[0] for s in series for p in s["points"]] + [float(t[0]) for t in targets]
    ys = [y for s in series for p in s["points"] for y in p[1:3] if y is not None] + [t[1] for t in targets]
    xt = _ticks(max(xs, default=1.0) * 1.05)
    top = max(ys, default=1.0)
    if targets:  # a rate far past what the job keeps up with would squash the rest: clipped
        top = min(top, 4 * max(t[1] for t in targets))
    yt = _ticks(top * 1.05)
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def x(v: float) -> float:
        return LEFT + pw * v / xt[-1]

    def y(v: float) -> float:
        return TOP + ph * (1 - min(v, yt[-1]) / yt[-1])

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
           'font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{LEFT}" y="22" font-size="14">{escape(title or "Alert latency against offered rate")}</text>']
    for v in xt:
        out.append(f'<line x1="{x(v):.1f}" y1="{TOP}" x2="{x(v):.1f}" y2="{TOP + ph}" stroke="#eee"/>')
        out.append(f'<text x="{x(v):.1f}" y="{TOP + ph + 16}" text-anchor="middle">{v:,.0f}</text>')
    for v in yt:
        out.append(f'<line x1="{LEFT}" y1="{y(v):.1f}" x2="{LEFT + pw}" y2="{y(v):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>')
    out.append(f'<text x="{LEFT + pw / 2}" y="{H - 12}" text-anchor="middle">events/s published</text>')
    out.append(f'<text transform="translate(18 {TOP + ph / 2}) rotate(-90)" text-anchor="middle">'
               'alert latency, s (event to PostgreSQL row)</text>')
    legend_y = TOP + 10
    for i, s in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        for idx, dash in ((2, ""), (1, ' stroke-dasharray="5 4"')):
            pts = " ".join(f"{x(p[0]):.1f},{y(p[idx]):.1f}" for p in s["points"] if p[idx] is not None)
            out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
            for p in s["points"]:
                if p[idx] is not None:
                    fill = colour if p[3] else "white"
                    out.append(f'<circle cx="{x(p[0]):.1f}" cy="{y(p[idx]):.1f}" r="4" fill="{fill}" '
                               f'stroke="{colour}" stroke-width="2"/>')
                    if p[idx] > yt[-1]:  # clipped: its value beside the marker
                        out.append(f'<text x="{x(p[0]) - 8:.1f}" y="{y(p[idx]) + 14:.1f}" text-anchor="end" '
                                   f'fill="{colour}">{p[idx]:,.0f} s</text>')
        out.append(f'<line x1="{W - RIGHT + 15}" y1="{legend_y}" x2="{W - RIGHT + 40}" y2="{legend_y}" '
                   f'stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{W - RIGHT + 46}" y="{legend_y + 4}">{s["groups"]:,} groups</text>')
        legend_y += 18
    for rate, p99 in targets:
        cx, cy = x(rate), y(p99)
        out.append(f'<path d="M{cx - 5:.1f},{cy - 5:.1f} L{cx + 5:.1f},{cy + 5:.1f} M{cx - 5:.1f},{cy + 5:.1f} '
                   f'L{cx + 5:.1f},{cy - 5:.1f}" stroke="black" stroke-width="2"/>')
    notes = ["solid: p99, dashed: p50", "filled: kept up", "hollow: not kept up"]
    if targets:
        notes.append("x: target p99 at a rate")
    for note in notes:
        legend_y += 18
        out.append(f'<text x="{W - RIGHT + 15}" y="{legend_y}">{escape(note)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_latency_curve(result: dict[str, Any], path: Path, targets: Sequence[tuple[int, float]] = ()) -> bool:
    """Write the chart to ``path``; False (nothing written) when no rate was measured."""
    if not curve_points(result):
        return False
    st = result.get("settings", {})
    title = (f"Alert latency against offered rate (trigger {st.get('trigger_s', '?'):g} s, "
             f"{st.get('nodes', '?')} nodes a group)") if isinstance(st.get("trigger_s"), (int, float)) else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(latency_svg(result, targets, title))
    return True


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: bench/plot.py RESULT.json OUT.svg", file=sys.stderr)
        return 2
    from pipeline import TARGETS  # bench/pipeline.py (the scripts run from bench/)

    if not write_latency_curve(json.loads(Path(args[0]).read_text()), Path(args[1]), TARGETS):
        print(f"{args[0]}: no sustained rate with a latency to plot", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
