"""Postmortems over stored runs (issue 6): replaying a window of the topics under a new run id,
comparing two runs (`replimon.replay.diff`) and writing a report of one run
(`replimon.replay.report`).

Every PostgreSQL table is keyed by ``run_id`` ('live' for the live job, a replay's own id
otherwise; docs/postgres.md "Runs"), so reading one run is a ``WHERE run_id = %s`` on each table.
`require_run` is the one check every reader makes first: a run id that no table knows is an
error naming the runs that exist, never an empty report or an empty diff that looks like "same".
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from replimon.streaming.sinks.postgres import LIVE_RUN

__all__ = ["LIVE_RUN", "MAX_MS", "evidence_line", "iso", "known_runs", "require_run", "run_exists"]

# The last millisecond timestamptz and Python's datetime can both hold (9999-12-31T23:59:59.999Z).
MAX_MS = 253_402_300_799_999

# Tables a run leaves rows in. A run that wrote at least one micro-batch has a pipeline_batches
# row; a replay that failed before its first batch still has its replay_runs row.
_RUN_TABLES = ("pipeline_batches", "replay_runs", "group_state", "alerts")


def known_runs(conn: psycopg.Connection[Any]) -> list[str]:
    """Every run id with rows in PostgreSQL, sorted. Reads only the small per-run tables
    (pipeline_batches, replay_runs, group_state), not the alerts."""
    rows = conn.execute(
        "SELECT run_id FROM pipeline_batches UNION SELECT run_id FROM replay_runs"
        " UNION SELECT run_id FROM group_state ORDER BY 1").fetchall()
    return [r[0] for r in rows]


def run_exists(conn: psycopg.Connection[Any], run_id: str) -> bool:
    """True when any table has a row of ``run_id`` (index lookups on each table's key)."""
    probes = " OR ".join(f"EXISTS (SELECT 1 FROM {t} WHERE run_id = %(run)s)" for t in _RUN_TABLES)
    row = conn.execute(f"SELECT {probes}", {"run": run_id}).fetchone()
    return bool(row and row[0])


def require_run(conn: psycopg.Connection[Any], run_id: str) -> None:
    """Raise ``ValueError("no run 'x' in PostgreSQL (known: a, b)")`` unless ``run_id`` exists."""
    if not run_exists(conn, run_id):
        known = ", ".join(known_runs(conn)) or "none"
        raise ValueError(f"no run {run_id!r} in PostgreSQL (known: {known})")


# -- text shared by the diff and the report ------------------------------------------------------
def iso(ms: int | None, *, date: bool = True) -> str:
    """Epoch ms as UTC ISO-8601 with milliseconds ('2026-01-01T00:00:09.865Z')."""
    if ms is None:
        return "-"
    if not 0 <= ms <= MAX_MS:  # e.g. the CLI's open end 2**62: past what datetime can hold
        return "the end" if ms > 0 else str(ms)
    text = (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")
    return text if date else text[11:]


def evidence_line(ev: dict[str, Any]) -> str:
    """One evidence event on one line: what, who, when, and where it was read."""
    where = (f"{ev['topic']}/{ev.get('partition')}/{ev.get('offset')}" if "topic" in ev
             else f"{ev.get('file', '?')}:{ev.get('line', '?')}" if "file" in ev else "-")
    extra = " ".join(f"{k}={ev[k]}" for k in ("instance", "count", "kind", "executed", "decided",
                                               "start", "event_horizon", "outcome") if k in ev)
    return (f"{ev.get('type', '?')} {ev.get('node', '?')} {iso(ev.get('ts_ms'), date=False)} "
            f"seq {ev.get('seq', '?')} @ {where}{' ' + extra if extra else ''}")
