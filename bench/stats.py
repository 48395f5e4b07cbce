"""Small statistics and logging helpers of the pipeline benchmark (``bench/pipeline.py``)."""

from __future__ import annotations

import itertools
import math
import statistics
import sys
from collections.abc import Sequence
from typing import Any


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)



# -- statistics ----------------------------------------------------------------------------------
def nearest_rank(values: Sequence[float], q: float) -> float:
    """The q-quantile by nearest rank (p99 of 40 values is the 40th smallest: the max)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def spread(values: Sequence[float], digits: int = 1) -> dict[str, Any]:
    if not values:
        return {"n": 0, "median": None, "p90": None, "p99": None, "min": None, "max": None}
    return {"n": len(values), "median": round(statistics.median(values), digits),
            "p90": round(nearest_rank(values, 0.90), digits), "p99": round(nearest_rank(values, 0.99), digits),
            "min": round(min(values), digits), "max": round(max(values), digits)}


def median_or_none(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def batch_cost(points: Sequence[tuple[float, float]]) -> dict[str, Any] | None:
    """Least squares ``batch ms = fixed + per_event * rows`` over batches of a group count: the
    fixed part bounds the rate a trigger interval allows, the per-event part the rate at any batch
    size (``1 / per_event``); and the same line by Theil-Sen (``theil_sen``), robust to a few
    outlying batches."""
    if len(points) < 3 or len({x for x, _ in points}) < 2:
        return None
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    fixed = my - slope * mx
    slopes = [(y2 - y1) / (x2 - x1) for (x1, y1), (x2, y2) in itertools.combinations(points, 2) if x2 != x1]
    robust = statistics.median(slopes)
    return {"batches": len(points), "rows_range": [min(x for x, _ in points), max(x for x, _ in points)],
            "fixed_ms": round(fixed), "us_per_event": round(slope * 1000, 2),
            "marginal_events_per_s": round(1e6 / (slope * 1000)) if slope > 0 else None,
            # Theil-Sen: the median of the pairwise slopes, the median intercept. One stalled
            # batch (a broker pause) moves a least-squares line a lot and this one little.
            "theil_sen": {"fixed_ms": round(statistics.median(y - robust * x for x, y in points)),
                          "us_per_event": round(robust * 1000, 2)}}


def keeps_up(processed: float, published: float, batch_ms: dict[str, Any], trigger_s: float,
             backlog: tuple[str, bool]) -> dict[str, Any]:
    """The benches' one rule for "the job kept up" (``bench/pipeline.py``'s sustained runs,
    ``bench/demo_soak.py``'s rate mode): it read at least 95 % of what was published over the
    window, its median and p90 batch took at most the trigger (a longer batch delays the next
    one: the backlog grows by design), and its backlog stayed bounded (``backlog``: the name and
    verdict of each bench's own measure of it; a sustained run sees the backlog after every batch,
    a soak only what was left unread at its end). Returns the criteria and ``keeps_up``."""
    name, bounded = backlog
    trigger_ms = trigger_s * 1000
    criteria = {
        "rate_matched": published > 0 and processed >= 0.95 * published,
        "batch_ms_within_trigger": bool(batch_ms["n"]) and batch_ms["median"] <= trigger_ms
        and batch_ms["p90"] <= trigger_ms,
        name: bounded,
    }
    return {"criteria": criteria, "keeps_up": all(criteria.values())}


def ratio(x: float | None, base: float) -> float | None:
    return None if x is None or not base else round(x / base, 3)


def fmt(x: float | int | None, digits: int = 0) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"
