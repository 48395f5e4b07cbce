"""Reading a run back: its alerts (as the monitor emitted them) and its groups' latest states.

Alerts come back in the payload form of ``Alert.to_dict`` (docs/rules.md "Alert records"): times
as epoch ms, evidence as the list stored, so a stored alert compares equal to the alert that was
written: an info alert's ``event`` row comes back with the status the monitor gave it
(``firing``). Order: by event time, then alert id, then status (``firing`` before ``resolved``).

The functions take an open connection (the diff and the report read many things through one).
`RunReader` binds them to one run and opens a short connection per call: what tests, benchmarks
and tools that poll a run while it is being written use. Nothing here writes.
"""

from __future__ import annotations

from typing import Any

import psycopg

from replimon.store.runs import DEFAULT_PIPELINE, LIVE_RUN, last_batch_id
from replimon.store.values import MAX_MS, ms_from_ts, payload_status, ts_from_ms

_ALERT_COLUMNS = """alert_id, group_id, kind, severity, category, status, instance, node,
                    event_ts, detected_ts, message, evidence"""


def _alert_dict(row: tuple[Any, ...]) -> dict[str, Any]:
    """A stored alert in the payload form of ``Alert.to_dict``."""
    (alert_id, group, kind, severity, category, status, instance, node, event_ts, detected_ts,
     message, evidence) = row
    return {"alert_id": alert_id, "group": group, "kind": kind, "severity": severity,
            "category": category, "status": payload_status(status), "instance": instance, "node": node,
            "event_ts_ms": ms_from_ts(event_ts), "detected_ts_ms": ms_from_ts(detected_ts),
            "message": message, "evidence": evidence}


def alerts(conn: psycopg.Connection[Any], run_id: str, *,
           window: tuple[int, int] | None = None) -> list[dict[str, Any]]:
    """Every stored alert row of a run, by event time; with ``window=(t1, t2)`` (epoch ms) only
    rows with event time in ``[t1, t2)``. A bound no stored time can pass (``t1 <= 0``,
    ``t2 > MAX_MS``, such as the CLI's open end 2**62) is no bound."""
    sql = f"SELECT {_ALERT_COLUMNS} FROM alerts WHERE run_id = %s"
    params: list[Any] = [run_id]
    if window is not None:
        if window[0] > 0:
            sql += " AND event_ts >= %s"
            params.append(ts_from_ms(window[0]))
        if window[1] <= MAX_MS:
            sql += " AND event_ts < %s"
            params.append(ts_from_ms(window[1]))
    rows = conn.execute(sql + " ORDER BY event_ts, alert_id, status", params).fetchall()
    return [_alert_dict(r) for r in rows]


def firing_alerts(conn: psycopg.Connection[Any], run_id: str) -> list[dict[str, Any]]:
    """Alerts firing now: a firing row without a resolved row, by event time (never an info
    alert: its row is an ``event``)."""
    rows = conn.execute(
        f"SELECT {_ALERT_COLUMNS} FROM alerts f WHERE f.run_id = %s"
        " AND f.status = 'firing' AND NOT EXISTS (SELECT 1 FROM alerts r"
        "  WHERE r.run_id = f.run_id AND r.alert_id = f.alert_id"
        "  AND r.status = 'resolved')"
        " ORDER BY event_ts, alert_id", (run_id,)).fetchall()
    return [_alert_dict(r) for r in rows]


def alert_ids(conn: psycopg.Connection[Any], run_id: str, status: str | None = None) -> set[str]:
    """The alert ids stored for a run (optionally only rows of one stored status: ``firing``,
    ``resolved`` or ``event``)."""
    rows = conn.execute(
        "SELECT DISTINCT alert_id FROM alerts WHERE run_id = %s"
        " AND (%s::text IS NULL OR status = %s::text)", (run_id, status, status)).fetchall()
    return {r[0] for r in rows}


def alert_count(conn: psycopg.Connection[Any], run_id: str) -> int:
    """Alert rows of a run (a wedge that resolved counts twice: its firing and resolved rows)."""
    row = conn.execute("SELECT count(*) FROM alerts WHERE run_id = %s", (run_id,)).fetchone()
    return int(row[0]) if row else 0


def group_snapshots(conn: psycopg.Connection[Any], run_id: str) -> dict[str, dict[str, Any]]:
    """Each group's latest state, ``GroupMonitor.snapshot()`` as stored in
    ``group_state.snapshot``, by group id."""
    rows = conn.execute("SELECT group_id, snapshot FROM group_state WHERE run_id = %s",
                        (run_id,))
    return {group: snapshot for group, snapshot in rows}


class RunReader:
    """The reads above bound to one run (and one pipeline for `last_batch_id`); each call opens
    its own short connection, so a reader holds nothing between calls and can poll a run that
    another process is writing."""

    def __init__(self, dsn: str, run_id: str = LIVE_RUN, *, pipeline: str = DEFAULT_PIPELINE,
                 connect_timeout: int = 10) -> None:
        if not dsn:
            raise ValueError("RunReader needs a DSN (postgres.dsn)")
        self.dsn, self.run_id, self.pipeline = dsn, run_id, pipeline
        self._connect_timeout = connect_timeout

    def _connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.dsn, autocommit=True, connect_timeout=self._connect_timeout,
                               application_name="replimon-reader")

    def alerts(self, *, window: tuple[int, int] | None = None) -> list[dict[str, Any]]:
        with self._connect() as conn:
            return alerts(conn, self.run_id, window=window)

    def firing_alerts(self) -> list[dict[str, Any]]:
        with self._connect() as conn:
            return firing_alerts(conn, self.run_id)

    def alert_ids(self, status: str | None = None) -> set[str]:
        with self._connect() as conn:
            return alert_ids(conn, self.run_id, status)

    def alert_count(self) -> int:
        with self._connect() as conn:
            return alert_count(conn, self.run_id)

    def group_snapshots(self) -> dict[str, dict[str, Any]]:
        with self._connect() as conn:
            return group_snapshots(conn, self.run_id)

    def last_batch_id(self) -> int | None:
        with self._connect() as conn:
            return last_batch_id(conn, self.run_id, self.pipeline)
