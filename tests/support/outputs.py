"""Real monitor outputs to store: the alerts and group snapshots of a simulated run, for the
tests that write PostgreSQL rows and read them back (the store's readers, the job's sink).

A 60 s two-group run with BEYOND_HORIZON on g1 and NODE_SILENT on g2 (firing, then resolved),
snapshots every 10 s of event time and at the end.
"""

from __future__ import annotations

from typing import Any

import psycopg

from replimon.core import Monitor
from replimon.producers.simulator import SimOptions, Simulator, parse_injection
from replimon.store.writes import INSERT_ALERT, alert_row

SNAPSHOT_EVERY_MS = 10_000


def outputs_of(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The alert payloads (``Alert.to_dict``, in emission order) and the snapshots (every group's
    every ``SNAPSHOT_EVERY_MS`` of event time and at the end, in the order taken) of a monitor
    run over ``events`` (in order)."""
    monitor = Monitor()
    alerts: list[dict[str, Any]] = []
    snapshots: list[dict[str, Any]] = []
    next_snap = events[0]["ts_ms"] + SNAPSHOT_EVERY_MS
    for ev in events:
        alerts.extend(a.to_dict() for a in monitor.process(ev))
        if ev["ts_ms"] >= next_snap:
            snapshots.extend(g.snapshot() for g in monitor.groups.values())
            next_snap += SNAPSHOT_EVERY_MS
    alerts.extend(a.to_dict() for a in monitor.finish())
    snapshots.extend(g.snapshot() for g in monitor.groups.values())
    return alerts, snapshots


def monitor_outputs() -> dict[str, Any]:
    """``{"events", "alerts", "snapshots"}``: the events (in order), the alert payloads in emission
    order (``Alert.to_dict``) and the snapshots (``GroupMonitor.snapshot()``) in the order taken."""
    events: list[dict[str, Any]] = []
    faults = [parse_injection("beyond_horizon:g1@20s"), parse_injection("node_silent:g2@30s")]
    Simulator(SimOptions(groups=2, duration_ms=60_000), faults, events.append).run()
    alerts, snapshots = outputs_of(events)
    kinds = {(a["kind"], a["status"]) for a in alerts}
    assert {("BEYOND_HORIZON", "firing"), ("NODE_SILENT", "firing"),
            ("NODE_SILENT", "resolved")} <= kinds
    return {"events": events, "alerts": alerts, "snapshots": snapshots}


def store_alerts(dsn: str, run_id: str, alerts: list[dict[str, Any]], batch_id: int = 0) -> None:
    """Alert payloads into ``alerts`` under ``run_id`` with the writers' own statement
    (``replimon.store.writes``), committed."""
    with psycopg.connect(dsn) as conn:
        conn.cursor().executemany(INSERT_ALERT, [alert_row(a, run_id, batch_id) for a in alerts])
