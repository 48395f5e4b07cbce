"""What a run report shows (``replimon.replay.report`` renders it), read from PostgreSQL through
``replimon.store.report_reads``.

`load_run` reads one run with a bounded number of queries whatever the fleet size: aggregates for
the summary (alerts by kind, affected groups, latency per kind, data quality per expectation) and
full rows only for the groups whose timelines are drawn (at most ``max_timelines``) and for the
warning/critical alerts listed one by one (at most ``max_alert_rows``). Times are epoch ms.

Definitions (docs/report.md):

- an *alert* is one ``alert_id`` (an occurrence); a wedge has a ``firing`` and possibly a
  ``resolved`` row under it. Counts by kind count alert ids, as ``count(DISTINCT alert_id)``;
- an *affected group* has at least one warning or critical alert;
- *events* are the events the monitor took, summed over groups from
  ``group_state.snapshot.counts.events`` (a replay started from a checkpoint includes the events
  counted before the checkpoint); *records read* are ``pipeline_metrics.input_rows`` summed;
- the *event-time span* runs from the earliest to the latest time the tables hold for the run
  (alert event times, time-series points, nodes' latest event times).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psycopg

from replimon.replay.report_events import EventSource, load_series
from replimon.store.report_reads import (
    affected_groups,
    alert_kinds,
    alert_latency,
    dead_letter_rows,
    dq_summaries,
    event_span,
    group_alerts,
    group_families,
    group_points,
    node_points,
    notable_alerts,
    run_totals,
)
from replimon.store.runs import LIVE_RUN, replay_run, require_run

MAX_TIMELINES = 50
MAX_ALERT_ROWS = 1000
MAX_DEAD_LETTERS = 20
NOTABLE = ("critical", "warning")


@dataclass
class AlertRow:
    """One stored alert row (one status of one alert id)."""

    alert_id: str
    status: str
    group: str
    kind: str
    severity: str
    category: str
    instance: int | None
    node: str | None
    event_ms: int
    detected_ms: int
    inserted_ms: int
    message: str
    evidence: list[dict[str, Any]]


@dataclass
class KindCount:
    kind: str
    severity: str
    category: str
    alerts: int  # distinct alert ids
    resolved: int  # of which have a resolved row


@dataclass
class Affected:
    group: str
    critical: int
    warning: int
    first_ms: int  # earliest event time of its warning/critical alerts
    kinds: list[str]


@dataclass
class Timeline:
    """What one group's timeline draws."""

    group: str
    alerts: list[AlertRow]  # every row of the group, info included, by event time
    points: list[dict[str, Any]]  # group_timeseries rows by ts (ts as epoch ms)
    nodes: dict[str, list[dict[str, Any]]]  # node -> node_timeseries rows by ts
    # The same shapes computed from the events at regular points of event time
    # (report_series.py); empty when the events could not be read.
    series_points: list[dict[str, Any]] = field(default_factory=list)
    series_nodes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    family: str = "xcom"  # group_state.family: which configuration lane the timeline draws


@dataclass
class Latency:
    kind: str
    alerts: int
    median_ms: float | None
    max_ms: int | None
    wall_median_ms: float | None  # inserted_at - event_ts (live run only)
    wall_max_ms: int | None


@dataclass
class DqSummary:
    suite: str
    expectation: str
    evaluations: int
    failures: int
    evaluated: int | None
    unexpected: int | None
    first_ms: int | None
    last_ms: int | None
    last_failure: dict[str, Any] | None  # details of the latest failed evaluation


@dataclass
class RunData:
    run_id: str
    live: bool
    replay: dict[str, Any] | None  # the replay_runs row (params, status, started/finished)
    groups: int
    events: int | None
    records_read: int | None
    batches: int
    dead_letters: int
    dead_letter_rows: list[dict[str, Any]]
    span: tuple[int, int] | None
    kinds: list[KindCount]
    affected: list[Affected]
    timelines: list[Timeline]
    notable_alerts: list[AlertRow]  # warning/critical firing rows, by event time (capped)
    notable_total: int
    latency: list[Latency]
    dq: list[DqSummary]
    max_timelines: int
    max_alert_rows: int
    severities: dict[str, int] = field(default_factory=dict)
    series_note: str | None = None  # where the event series came from, or why there are none


def load_run(dsn: str, run_id: str, *, max_timelines: int = MAX_TIMELINES,
             max_alert_rows: int = MAX_ALERT_ROWS, events: EventSource | None = None) -> RunData:
    """Everything the report of ``run_id`` shows; ValueError for a run PostgreSQL does not know.
    ``events``: where to read the run's events for the drawn groups' series (None: the tables'
    snapshots only)."""
    with psycopg.connect(dsn) as conn:
        require_run(conn, run_id)
        totals = run_totals(conn, run_id)
        affected = [Affected(*a) for a in affected_groups(conn, run_id)]
        notable_total = sum(a.critical + a.warning for a in affected)
        notable = [AlertRow(**r) for r in notable_alerts(conn, run_id, max_alert_rows)]
        order = {"critical": 0, "warning": 1, "info": 2}
        kinds = [KindCount(*k) for k in alert_kinds(conn, run_id)]
        kinds.sort(key=lambda k: (order.get(k.severity, 3), -k.alerts, k.kind))
        drawn = [a.group for a in affected[:max_timelines]]
        alerts, points = group_alerts(conn, run_id, drawn), group_points(conn, run_id, drawn)
        nodes = node_points(conn, run_id, drawn)
        families = group_families(conn, run_id, drawn)
        latency = [Latency(kind, n, None if med is None else round(med, 1),
                           None if mx is None else round(mx),
                           None if wmed is None else round(wmed, 1),
                           None if wmx is None else round(wmx))
                   for kind, n, med, mx, wmed, wmx in alert_latency(conn, run_id)]
        data = RunData(
            run_id=run_id, live=run_id == LIVE_RUN, replay=replay_run(conn, run_id),
            groups=totals.groups, events=totals.events, records_read=totals.records_read,
            batches=totals.batches, dead_letters=totals.dead_letters,
            dead_letter_rows=dead_letter_rows(conn, run_id, MAX_DEAD_LETTERS),
            span=event_span(conn, run_id), kinds=kinds, affected=affected,
            timelines=[Timeline(g, [AlertRow(**r) for r in alerts[g]], points[g], nodes[g],
                                family=families[g]) for g in drawn],
            notable_alerts=notable, notable_total=notable_total, latency=latency,
            dq=[DqSummary(*d) for d in dq_summaries(conn, run_id)], max_timelines=max_timelines,
            max_alert_rows=max_alert_rows)
    for k in kinds:
        data.severities[k.severity] = data.severities.get(k.severity, 0) + k.alerts
    if events is not None:
        got = load_series(events, drawn, data.span, data.replay)
        data.series_note = got.note
        if got.series is not None:
            for t in data.timelines:
                t.series_points = got.series.points.get(t.group, [])
                t.series_nodes = got.series.nodes.get(t.group, {})
    return data
