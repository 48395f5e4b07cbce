"""A report's frontier and heartbeat series computed from the events themselves (pure: no I/O).

The tables hold a group's snapshot only at the end of a micro-batch (a replay) or at most every
``streaming.snapshot_interval_s`` (live), so a replay of two big micro-batches has two points per
group. `event_series` instead feeds a group's events to the monitor core (`GroupMonitor`, the
same rules as the job, none re-derived here) and takes ``GroupMonitor.snapshot()`` at regular
points of event time, every `sample_step` (a round step that gives a chart a few hundred points).

Guarantees:

- the points have the shape of the report's snapshot rows (``group_timeseries`` and
  ``node_timeseries``, docs/postgres.md), so the timeline draws both alike;
- the point at time ``T`` is the group's state after every event of the group with
  ``ts_ms <= T`` (fed in the job's order: event time, node, incarnation, seq) and after its
  timers due by ``T``; a node's heartbeat age there is ``T`` minus the latest event time the
  monitor admitted from it, so a silence shows as a rising line, not as one late dot;
- no point before a group's first event, none outside ``[t0, t1]``, at most ``points + 1`` per
  group; the same events give the same series.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from replimon.core import GroupMonitor, Limits
from replimon.core.rules.chain.family import CHAIN
from replimon.core.rules.family import family_of
from replimon.core.rules.qlog.family import QLOG
from replimon.store.rows import series_values
from replimon.store.values import nonneg

POINTS = 300
# Round steps, so the points fall on whole times (ms).
STEPS_MS = (10, 20, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000,
            120_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000)


@dataclass
class Series:
    """Per group: ``points`` (``group_timeseries``-shaped dicts by ``ts``) and ``nodes`` (node ->
    ``node_timeseries``-shaped dicts by ``ts``), sampled every ``step_ms`` of event time."""

    step_ms: int
    events: int = 0  # events fed (of the groups asked for)
    points: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    nodes: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)


def sample_step(t0: int, t1: int, points: int = POINTS) -> int:
    """The smallest round step that gives at most ``points`` intervals over ``[t0, t1]``."""
    span = max(t1 - t0, 1)
    return next((s for s in STEPS_MS if span / s <= points), -(-span // points))


def feed_key(ev: Mapping[str, Any]) -> tuple[Any, ...]:
    """The order the job's processor hands a micro-batch's events to the core."""
    return (ev["ts_ms"], ev["node"], ev.get("incarnation", 0), ev.get("seq", 0))


def event_series(events: Iterable[dict[str, Any]], groups: Collection[str], t0: int, t1: int, *,
                 points: int = POINTS, limits: Limits | None = None) -> Series:
    """The series of each of ``groups`` over ``[t0, t1]`` from ``events`` (contract-v1 dicts,
    any order; other groups' events are skipped). Module docstring: what a point is."""
    step = sample_step(t0, t1, points)
    wanted = set(groups)
    by_group: dict[str, list[dict[str, Any]]] = {}
    for ev in events:
        if ev["group"] in wanted:
            by_group.setdefault(ev["group"], []).append(ev)
    out = Series(step, sum(len(v) for v in by_group.values()))
    for name in sorted(by_group):
        evs = sorted(by_group[name], key=feed_key)
        out.points[name], out.nodes[name] = _sample(name, evs, t0, t1, step, limits)
    return out


def _sample(name: str, evs: list[dict[str, Any]], t0: int, t1: int, step: int,
            limits: Limits | None) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    g = GroupMonitor(name, limits, family_of(evs[0]["type"]))
    points: list[dict[str, Any]] = []
    nodes: dict[str, list[dict[str, Any]]] = {}
    i, n = 0, len(evs)
    # The first point: the first grid time at or after the group's first event (and t0).
    first = max(t0, evs[0]["ts_ms"])
    at = t0 + -(-(first - t0) // step) * step
    while at <= t1:
        while i < n and evs[i]["ts_ms"] <= at:
            g.on_event(evs[i])
            i += 1
        due = g.next_timer()
        if due is not None and due <= at:
            g.on_timer(at)  # what the job's watermark does once event time passes the deadline
        snap = g.snapshot()
        if snap["clock_ms"] >= 0:
            points.append(group_point(snap, at))
            for node, row in node_points(snap, at):
                nodes.setdefault(node, []).append(row)
        at += step
    return points, nodes


def group_point(s: Mapping[str, Any], ts: int) -> dict[str, Any]:
    """A snapshot as a ``group_timeseries`` row at ``ts`` (what `report_reads.group_points`
    returns; the sink writes the same values, ``replimon.store.rows.series_values``). A
    quorum-log group's point also has what only the events give the report (no column holds
    them): ``passed``, the highest decree passed, and ``leader``, the members naming themselves
    leader (comma-separated; None: none). A chain group's, ``wedged``: whether its current epoch
    is wedged."""
    point = {"ts": ts, **series_values(s)}
    config = s.get("config")
    if s.get("family") == QLOG and isinstance(config, Mapping):
        point["passed"] = config.get("passed")
        point["leader"] = ", ".join(m["id"] for m in config.get("members") or [] if m.get("leader")) or None
    elif s.get("family") == CHAIN:
        point["wedged"] = bool(isinstance(config, Mapping) and config.get("wedged"))
    return point


def node_points(s: Mapping[str, Any], ts: int) -> Iterable[tuple[str, dict[str, Any]]]:
    """A snapshot's nodes as ``node_timeseries`` rows at ``ts``: (node, row)."""
    for node, n in (s.get("nodes") or {}).items():
        last = n.get("last_ts_ms")
        known = last is not None and last >= 0
        yield node, {"ts": ts, "member": n["member"], "decided": nonneg(n.get("decided")),
                     "executed": nonneg(n.get("executed")), "last_ts": last if known else None,
                     "heartbeat_age_ms": max(0, ts - last) if known else None,
                     "silent": bool(n.get("silent"))}
