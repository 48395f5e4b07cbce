"""What a run report shows, read from PostgreSQL (``replimon.replay.report`` renders it).

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
from datetime import datetime
from typing import Any

import psycopg

from replimon.replay import LIVE_RUN, require_run
from replimon.streaming.sinks.postgres import ms_from_ts

MAX_TIMELINES = 50
MAX_ALERT_ROWS = 1000
MAX_DEAD_LETTERS = 20
NOTABLE = ("critical", "warning")


def _ms(ts: datetime | None) -> int | None:
    return ms_from_ts(ts)


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


_ALERT_SELECT = """SELECT alert_id, status, group_id, kind, severity, category, instance, node,
    event_ts, detected_ts, inserted_at, message, evidence FROM alerts"""


def _alert(row: tuple[Any, ...]) -> AlertRow:
    (alert_id, status, group, kind, severity, category, instance, node, event_ts, detected_ts,
     inserted_at, message, evidence) = row
    return AlertRow(alert_id, status, group, kind, severity, category, instance, node,
                    _ms(event_ts) or 0, _ms(detected_ts) or 0, _ms(inserted_at) or 0, message,
                    list(evidence or []))


def _replay_row(conn: psycopg.Connection[Any], run_id: str) -> dict[str, Any] | None:
    row = conn.execute("SELECT started_at, finished_at, params, status FROM replay_runs"
                       " WHERE run_id = %s", (run_id,)).fetchone()
    if row is None:
        return None
    return {"started_ms": _ms(row[0]), "finished_ms": _ms(row[1]), "params": dict(row[2] or {}),
            "status": row[3]}


def _span(conn: psycopg.Connection[Any], run_id: str) -> tuple[int, int] | None:
    lo, hi = conn.execute("""
        SELECT least((SELECT min(event_ts) FROM alerts WHERE run_id = %(r)s),
                     (SELECT min(ts) FROM group_timeseries WHERE run_id = %(r)s),
                     (SELECT min(last_ts) FROM node_timeseries WHERE run_id = %(r)s)),
               greatest((SELECT max(event_ts) FROM alerts WHERE run_id = %(r)s),
                        (SELECT max(ts) FROM group_timeseries WHERE run_id = %(r)s),
                        (SELECT max(clock_ts) FROM group_state WHERE run_id = %(r)s))""",
                          {"r": run_id}).fetchone() or (None, None)
    return None if lo is None or hi is None else (_ms(lo) or 0, _ms(hi) or 0)


def _kinds(conn: psycopg.Connection[Any], run_id: str) -> list[KindCount]:
    rows = conn.execute("""
        SELECT kind, min(severity), min(category), count(DISTINCT alert_id),
               count(DISTINCT alert_id) FILTER (WHERE status = 'resolved')
        FROM alerts WHERE run_id = %s GROUP BY kind""", (run_id,)).fetchall()
    order = {"critical": 0, "warning": 1, "info": 2}
    out = [KindCount(*r) for r in rows]
    out.sort(key=lambda k: (order.get(k.severity, 3), -k.alerts, k.kind))
    return out


def _affected(conn: psycopg.Connection[Any], run_id: str) -> list[Affected]:
    rows = conn.execute("""
        SELECT group_id,
               count(DISTINCT alert_id) FILTER (WHERE severity = 'critical'),
               count(DISTINCT alert_id) FILTER (WHERE severity = 'warning'),
               min(event_ts), array_agg(DISTINCT kind ORDER BY kind)
        FROM alerts WHERE run_id = %s AND severity IN ('critical', 'warning')
        GROUP BY group_id
        ORDER BY 2 DESC, 3 DESC, 4, 1""", (run_id,)).fetchall()
    return [Affected(g, c, w, _ms(first) or 0, list(kinds)) for g, c, w, first, kinds in rows]


def _timelines(conn: psycopg.Connection[Any], run_id: str, groups: list[str]) -> list[Timeline]:
    if not groups:
        return []
    alerts: dict[str, list[AlertRow]] = {g: [] for g in groups}
    for row in conn.execute(_ALERT_SELECT + " WHERE run_id = %s AND group_id = ANY(%s)"
                            " ORDER BY event_ts, alert_id, status", (run_id, groups)):
        alerts[row[2]].append(_alert(row))
    points: dict[str, list[dict[str, Any]]] = {g: [] for g in groups}
    cur = conn.execute("""
        SELECT group_id, ts, decided, executed_majority, effective_horizon, event_horizon,
               members, pending, active_start, active_config, pending_configs
        FROM group_timeseries WHERE run_id = %s AND group_id = ANY(%s) ORDER BY group_id, ts""",
                       (run_id, groups))
    names = [d.name for d in cur.description or []]
    for row in cur:
        p = dict(zip(names, row, strict=True))
        p["ts"] = _ms(p["ts"])
        points[p.pop("group_id")].append(p)
    nodes: dict[str, dict[str, list[dict[str, Any]]]] = {g: {} for g in groups}
    cur = conn.execute("""
        SELECT group_id, node_id, ts, member, decided, executed, last_ts, heartbeat_age_ms, silent
        FROM node_timeseries WHERE run_id = %s AND group_id = ANY(%s)
        ORDER BY group_id, node_id, ts""", (run_id, groups))
    names = [d.name for d in cur.description or []]
    for row in cur:
        p = dict(zip(names, row, strict=True))
        p["ts"], p["last_ts"] = _ms(p["ts"]), _ms(p["last_ts"])
        nodes[p.pop("group_id")].setdefault(p.pop("node_id"), []).append(p)
    return [Timeline(g, alerts[g], points[g], nodes[g]) for g in groups]


def _latency(conn: psycopg.Connection[Any], run_id: str) -> list[Latency]:
    # Firing rows only: a resolved row's detection is the resolution, not the alert's detection.
    rows = conn.execute("""
        SELECT kind, count(*),
               percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM detected_ts - event_ts)),
               max(extract(epoch FROM detected_ts - event_ts)),
               percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM inserted_at - event_ts)),
               max(extract(epoch FROM inserted_at - event_ts))
        FROM alerts WHERE run_id = %s AND status = 'firing' GROUP BY kind ORDER BY kind""",
                        (run_id,)).fetchall()

    def ms(v: Any) -> float | None:
        return None if v is None else round(float(v) * 1000, 1)

    return [Latency(kind, n, ms(med), None if mx is None else round(float(mx) * 1000),
                    ms(wmed), None if wmx is None else round(float(wmx) * 1000))
            for kind, n, med, mx, wmed, wmx in rows]


def _dq(conn: psycopg.Connection[Any], run_id: str) -> list[DqSummary]:
    rows = conn.execute("""
        SELECT suite, expectation, count(*), count(*) FILTER (WHERE NOT success),
               sum(evaluated), sum(unexpected), min(ts), max(ts),
               (SELECT d.details FROM dq_results d WHERE d.run_id = q.run_id AND d.suite = q.suite
                  AND d.expectation = q.expectation AND NOT d.success ORDER BY d.ts DESC LIMIT 1)
        FROM dq_results q WHERE run_id = %s
        GROUP BY run_id, suite, expectation ORDER BY 4 DESC, 1, 2""", (run_id,)).fetchall()
    return [DqSummary(s, e, n, f, None if ev is None else int(ev), None if un is None else int(un),
                      _ms(t0), _ms(t1), details) for s, e, n, f, ev, un, t0, t1, details in rows]


def load_run(dsn: str, run_id: str, *, max_timelines: int = MAX_TIMELINES,
             max_alert_rows: int = MAX_ALERT_ROWS) -> RunData:
    """Everything the report of ``run_id`` shows; ValueError for a run PostgreSQL does not know."""
    with psycopg.connect(dsn) as conn:
        require_run(conn, run_id)
        groups, events = conn.execute(
            "SELECT count(*), sum((snapshot->'counts'->>'events')::bigint) FROM group_state"
            " WHERE run_id = %s", (run_id,)).fetchone() or (0, None)
        batches, records = conn.execute(
            "SELECT count(*), sum(input_rows) FROM pipeline_metrics WHERE run_id = %s",
            (run_id,)).fetchone() or (0, None)
        (dead,) = conn.execute("SELECT count(*) FROM dead_letters WHERE run_id = %s",
                               (run_id,)).fetchone() or (0,)
        dead_rows = [{"topic": t, "partition": p, "offset": o, "reason": r, "kafka_ms": _ms(k)}
                     for t, p, o, r, k in conn.execute(
                         'SELECT topic, partition, "offset", reason, kafka_ts FROM dead_letters'
                         ' WHERE run_id = %s ORDER BY kafka_ts, topic, partition, "offset" LIMIT %s',
                         (run_id, MAX_DEAD_LETTERS))]
        affected = _affected(conn, run_id)
        notable_total = sum(a.critical + a.warning for a in affected)
        notable = [_alert(r) for r in conn.execute(
            _ALERT_SELECT + " WHERE run_id = %s AND status = 'firing' AND severity IN"
            " ('critical', 'warning') ORDER BY event_ts, alert_id LIMIT %s",
            (run_id, max_alert_rows))]
        kinds = _kinds(conn, run_id)
        data = RunData(
            run_id=run_id, live=run_id == LIVE_RUN, replay=_replay_row(conn, run_id),
            groups=int(groups), events=None if events is None else int(events),
            records_read=None if records is None else int(records), batches=int(batches),
            dead_letters=int(dead), dead_letter_rows=dead_rows, span=_span(conn, run_id),
            kinds=kinds, affected=affected,
            timelines=_timelines(conn, run_id, [a.group for a in affected[:max_timelines]]),
            notable_alerts=notable, notable_total=notable_total, latency=_latency(conn, run_id),
            dq=_dq(conn, run_id), max_timelines=max_timelines, max_alert_rows=max_alert_rows)
    for k in kinds:
        data.severities[k.severity] = data.severities.get(k.severity, 0) + k.alerts
    return data
