"""Runs: which run ids PostgreSQL holds, where a pipeline's guard stands, a replay's own row.

Every table's key starts with ``run_id``: `LIVE_RUN` for the live job, a replay's own run id
otherwise (docs/postgres.md "Runs"), so reading one run is a ``WHERE run_id = %s`` on each
table. `require_run` is the check every reader of a named run makes first: a run id that no table
knows is an error naming the runs that exist, never an empty report or an empty diff that looks
like "same".

All functions take an open connection, so a caller reading several things reads them through
one; they only read.
"""

from __future__ import annotations

from typing import Any

import psycopg

from replimon.store.values import ms_from_ts

LIVE_RUN = "live"
# The streaming job's pipeline in pipeline_batches when none is given (the job names its
# pipelines after the checkpoint's stream id; docs/streaming.md "Exactly once").
DEFAULT_PIPELINE = "monitor"

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


def last_batch_id(conn: psycopg.Connection[Any], run_id: str,
                  pipeline: str = DEFAULT_PIPELINE) -> int | None:
    """The last micro-batch a pipeline committed for a run (its exactly-once guard,
    ``replimon.store.writes.ADVANCE``); None: none yet."""
    row = conn.execute(
        "SELECT last_batch_id FROM pipeline_batches WHERE run_id = %s AND pipeline = %s",
        (run_id, pipeline)).fetchone()
    return None if row is None else int(row[0])


def replay_run(conn: psycopg.Connection[Any], run_id: str) -> dict[str, Any] | None:
    """A replay's ``replay_runs`` row: started_ms, finished_ms (epoch ms; None while running),
    params and status; None for a run that is not a replay (the live job has no row)."""
    row = conn.execute("SELECT started_at, finished_at, params, status FROM replay_runs"
                       " WHERE run_id = %s", (run_id,)).fetchone()
    if row is None:
        return None
    return {"started_ms": ms_from_ts(row[0]), "finished_ms": ms_from_ts(row[1]),
            "params": dict(row[2] or {}), "status": row[3]}
