"""What a run report reads (``replimon.replay.report_data`` builds the report's model from it).

Each function is one bounded query over one run, whatever the fleet size: aggregates for the
summary (alerts by kind, affected groups, latency per kind, data quality per expectation) and
full rows only for the groups a report draws and for at most ``limit`` listed alerts. The terms
(an *alert* is one ``alert_id``, an *affected group* has a warning or critical alert, the
*event-time span*) are defined in docs/report.md. Times come back as epoch ms; nothing here
writes.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import psycopg

from replimon.store.values import ms_from_ts

_ALERT_SELECT = """SELECT alert_id, status, group_id, kind, severity, category, instance, node,
    event_ts, detected_ts, inserted_at, message, evidence FROM alerts"""


def _alert(row: tuple[Any, ...]) -> dict[str, Any]:
    """One alert row with its times as epoch ms (``inserted_ms``: when PostgreSQL stored it)."""
    (alert_id, status, group, kind, severity, category, instance, node, event_ts, detected_ts,
     inserted_at, message, evidence) = row
    return {"alert_id": alert_id, "status": status, "group": group, "kind": kind,
            "severity": severity, "category": category, "instance": instance, "node": node,
            "event_ms": ms_from_ts(event_ts) or 0, "detected_ms": ms_from_ts(detected_ts) or 0,
            "inserted_ms": ms_from_ts(inserted_at) or 0, "message": message,
            "evidence": list(evidence or [])}


class RunTotals(NamedTuple):
    groups: int
    events: int | None  # group_state.snapshot.counts.events summed; None: no group
    batches: int  # pipeline_metrics rows
    records_read: int | None  # pipeline_metrics.input_rows summed; None: no batch
    dead_letters: int


def run_totals(conn: psycopg.Connection[Any], run_id: str) -> RunTotals:
    """How big the run is (`RunTotals`)."""
    groups, events = conn.execute(
        "SELECT count(*), sum((snapshot->'counts'->>'events')::bigint) FROM group_state"
        " WHERE run_id = %s", (run_id,)).fetchone() or (0, None)
    batches, records = conn.execute(
        "SELECT count(*), sum(input_rows) FROM pipeline_metrics WHERE run_id = %s",
        (run_id,)).fetchone() or (0, None)
    (dead,) = conn.execute("SELECT count(*) FROM dead_letters WHERE run_id = %s",
                           (run_id,)).fetchone() or (0,)
    return RunTotals(int(groups), None if events is None else int(events), int(batches),
                     None if records is None else int(records), int(dead))


def dead_letter_rows(conn: psycopg.Connection[Any], run_id: str, limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` dead letters by Kafka time: topic, partition, offset, reason, kafka_ms."""
    return [{"topic": t, "partition": p, "offset": o, "reason": r, "kafka_ms": ms_from_ts(k)}
            for t, p, o, r, k in conn.execute(
                'SELECT topic, partition, "offset", reason, kafka_ts FROM dead_letters'
                ' WHERE run_id = %s ORDER BY kafka_ts, topic, partition, "offset" LIMIT %s',
                (run_id, limit))]


def event_span(conn: psycopg.Connection[Any], run_id: str) -> tuple[int, int] | None:
    """The earliest and latest event time the run's tables hold (alerts, time-series points,
    nodes' latest events, group clocks); None: no time at all."""
    lo, hi = conn.execute("""
        SELECT least((SELECT min(event_ts) FROM alerts WHERE run_id = %(r)s),
                     (SELECT min(ts) FROM group_timeseries WHERE run_id = %(r)s),
                     (SELECT min(last_ts) FROM node_timeseries WHERE run_id = %(r)s)),
               greatest((SELECT max(event_ts) FROM alerts WHERE run_id = %(r)s),
                        (SELECT max(ts) FROM group_timeseries WHERE run_id = %(r)s),
                        (SELECT max(clock_ts) FROM group_state WHERE run_id = %(r)s))""",
                          {"r": run_id}).fetchone() or (None, None)
    return None if lo is None or hi is None else (ms_from_ts(lo) or 0, ms_from_ts(hi) or 0)


def alert_kinds(conn: psycopg.Connection[Any], run_id: str) -> list[tuple[str, str, str, int, int]]:
    """Per kind: (kind, severity, category, alert ids, of which resolved), in no set order."""
    return [(k, s, c, int(n), int(r)) for k, s, c, n, r in conn.execute("""
        SELECT kind, min(severity), min(category), count(DISTINCT alert_id),
               count(DISTINCT alert_id) FILTER (WHERE status = 'resolved')
        FROM alerts WHERE run_id = %s GROUP BY kind""", (run_id,))]


def affected_groups(conn: psycopg.Connection[Any],
                    run_id: str) -> list[tuple[str, int, int, int, list[str]]]:
    """Groups with a warning or critical alert: (group, critical ids, warning ids, earliest event
    time of those, their kinds sorted), most critical first, then most warning, then earliest."""
    rows = conn.execute("""
        SELECT group_id,
               count(DISTINCT alert_id) FILTER (WHERE severity = 'critical'),
               count(DISTINCT alert_id) FILTER (WHERE severity = 'warning'),
               min(event_ts), array_agg(DISTINCT kind ORDER BY kind)
        FROM alerts WHERE run_id = %s AND severity IN ('critical', 'warning')
        GROUP BY group_id
        ORDER BY 2 DESC, 3 DESC, 4, 1""", (run_id,)).fetchall()
    return [(g, int(c), int(w), ms_from_ts(first) or 0, list(kinds))
            for g, c, w, first, kinds in rows]


def notable_alerts(conn: psycopg.Connection[Any], run_id: str, limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` firing rows of warning or critical alerts, by event time."""
    return [_alert(r) for r in conn.execute(
        _ALERT_SELECT + " WHERE run_id = %s AND status = 'firing' AND severity IN"
        " ('critical', 'warning') ORDER BY event_ts, alert_id LIMIT %s", (run_id, limit))]


def group_alerts(conn: psycopg.Connection[Any], run_id: str,
                 groups: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Every alert row (info included) of each of ``groups``, by event time."""
    out: dict[str, list[dict[str, Any]]] = {g: [] for g in groups}
    if groups:
        for row in conn.execute(_ALERT_SELECT + " WHERE run_id = %s AND group_id = ANY(%s)"
                                " ORDER BY event_ts, alert_id, status", (run_id, groups)):
            out[row[2]].append(_alert(row))
    return out


def group_families(conn: psycopg.Connection[Any], run_id: str, groups: list[str]) -> dict[str, str]:
    """Each of ``groups``' protocol family (``group_state.family``; xcom for a group without a
    state row)."""
    out = dict.fromkeys(groups, "xcom")
    if groups:
        out.update(conn.execute("SELECT group_id, family FROM group_state"
                                " WHERE run_id = %s AND group_id = ANY(%s)", (run_id, groups)).fetchall())
    return out


def group_points(conn: psycopg.Connection[Any], run_id: str,
                 groups: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The ``group_timeseries`` points of each of ``groups`` by time (``ts`` as epoch ms)."""
    out: dict[str, list[dict[str, Any]]] = {g: [] for g in groups}
    if not groups:
        return out
    cur = conn.execute("""
        SELECT group_id, ts, decided, executed_majority, effective_horizon, event_horizon,
               window_use, window_fraction, members, pending, active_start, active_config,
               pending_configs, config_version
        FROM group_timeseries WHERE run_id = %s AND group_id = ANY(%s) ORDER BY group_id, ts""",
                       (run_id, groups))
    names = [d.name for d in cur.description or []]
    for row in cur:
        p = dict(zip(names, row, strict=True))
        p["ts"] = ms_from_ts(p["ts"])
        out[p.pop("group_id")].append(p)
    return out


def node_points(conn: psycopg.Connection[Any], run_id: str,
                groups: list[str]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The ``node_timeseries`` points of each node of ``groups`` by time (``ts`` and ``last_ts``
    as epoch ms): group -> node -> points."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {g: {} for g in groups}
    if not groups:
        return out
    cur = conn.execute("""
        SELECT group_id, node_id, ts, member, decided, executed, last_ts, heartbeat_age_ms, silent
        FROM node_timeseries WHERE run_id = %s AND group_id = ANY(%s)
        ORDER BY group_id, node_id, ts""", (run_id, groups))
    names = [d.name for d in cur.description or []]
    for row in cur:
        p = dict(zip(names, row, strict=True))
        p["ts"], p["last_ts"] = ms_from_ts(p["ts"]), ms_from_ts(p["last_ts"])
        out[p.pop("group_id")].setdefault(p.pop("node_id"), []).append(p)
    return out


def _ms(seconds: Any) -> float | None:
    return None if seconds is None else float(seconds) * 1000


def alert_latency(conn: psycopg.Connection[Any], run_id: str) -> list[tuple[Any, ...]]:
    """Per kind, by kind: (kind, alerts, median and max of detected - event time, median and max
    of inserted - event time), the times in ms (float; None: no value)."""
    # First rows only (firing, or an info alert's event): a resolved row's detection is the
    # resolution, not the alert's detection.
    rows = conn.execute("""
        SELECT kind, count(*),
               percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM detected_ts - event_ts)),
               max(extract(epoch FROM detected_ts - event_ts)),
               percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM inserted_at - event_ts)),
               max(extract(epoch FROM inserted_at - event_ts))
        FROM alerts WHERE run_id = %s AND status <> 'resolved' GROUP BY kind ORDER BY kind""",
                        (run_id,)).fetchall()
    return [(kind, int(n), _ms(med), _ms(mx), _ms(wmed), _ms(wmx))
            for kind, n, med, mx, wmed, wmx in rows]


def dq_summaries(conn: psycopg.Connection[Any], run_id: str) -> list[tuple[Any, ...]]:
    """Per (suite, expectation), most failures first: (suite, expectation, evaluations,
    failures, rows evaluated, rows unexpected, first and last evaluation in ms, details of the
    latest failed evaluation or None)."""
    rows = conn.execute("""
        SELECT suite, expectation, count(*), count(*) FILTER (WHERE NOT success),
               sum(evaluated), sum(unexpected), min(ts), max(ts),
               (SELECT d.details FROM dq_results d WHERE d.run_id = q.run_id AND d.suite = q.suite
                  AND d.expectation = q.expectation AND NOT d.success ORDER BY d.ts DESC LIMIT 1)
        FROM dq_results q WHERE run_id = %s
        GROUP BY run_id, suite, expectation ORDER BY 4 DESC, 1, 2""", (run_id,)).fetchall()
    return [(s, e, int(n), int(f), None if ev is None else int(ev), None if un is None else int(un),
             ms_from_ts(t0), ms_from_ts(t1), details)
            for s, e, n, f, ev, un, t0, t1, details in rows]
