"""What the two writers share: the guard moves only forward and says whether a batch is new; an
alert row is stored as its payload and never changed."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest

from replimon.store.reads import RunReader
from replimon.store.runs import DEFAULT_PIPELINE
from replimon.store.writes import ADVANCE, INSERT_ALERT, alert_row
from tests.support.outputs import store_alerts

pytestmark = pytest.mark.postgres


def advance(dsn: str, run: str, batch_id: int, pipeline: str = DEFAULT_PIPELINE) -> bool:
    with psycopg.connect(dsn) as conn:
        return conn.execute(ADVANCE, (run, pipeline, batch_id)).fetchone() is not None


def test_the_guard_moves_only_forward(dsn: str, new_run: Callable[[], str]) -> None:
    run = new_run()
    reader = RunReader(dsn, run)
    assert reader.last_batch_id() is None
    assert advance(dsn, run, 0) and reader.last_batch_id() == 0
    assert not advance(dsn, run, 0)  # a retry
    assert advance(dsn, run, 5) and not advance(dsn, run, 3)  # an older batch
    assert reader.last_batch_id() == 5
    # Each pipeline has its own guard (the data-quality writer's is "<pipeline>:quality").
    assert advance(dsn, run, 1, "monitor:quality")
    assert RunReader(dsn, run, pipeline="monitor:quality").last_batch_id() == 1
    assert reader.last_batch_id() == 5


def test_concurrent_guards_of_one_batch_let_one_writer_through(
        dsn: str, new_run: Callable[[], str]) -> None:
    run = new_run()
    start = threading.Barrier(2)

    def write() -> bool:
        with psycopg.connect(dsn) as conn, conn.transaction():
            start.wait()
            return conn.execute(ADVANCE, (run, DEFAULT_PIPELINE, 0)).fetchone() is not None

    with ThreadPoolExecutor(2) as pool:
        results = [f.result() for f in [pool.submit(write), pool.submit(write)]]
    assert sorted(results) == [False, True]


def test_an_alert_row_is_its_payload_and_never_changes(
        dsn: str, outputs: dict[str, Any], new_run: Callable[[], str]) -> None:
    run = new_run()
    first = outputs["alerts"][0]
    store_alerts(dsn, run, [first], batch_id=4)
    changed = {**first, "message": "another message", "evidence": []}
    store_alerts(dsn, run, [changed], batch_id=9)  # same (alert_id, status): a fact already
    assert RunReader(dsn, run).alerts() == [first]
    with psycopg.connect(dsn) as conn:
        (batch,) = conn.execute("SELECT batch_id FROM alerts WHERE run_id = %s",
                                (run,)).fetchone() or (None,)
    assert batch == 4
    row = alert_row(first, run, 4)
    assert INSERT_ALERT.count("%s") == len(row) and row[:3] == (
        run, first["alert_id"], "event" if first["severity"] == "info" else first["status"])


def test_an_info_alert_is_stored_as_an_event_and_read_back_as_emitted(
        dsn: str, outputs: dict[str, Any], new_run: Callable[[], str]) -> None:
    """Both insert paths (rows, and the JSON text the job hands PostgreSQL) store an info alert's
    row as 'event' (never 'firing': it is not a problem and never resolves); the reads give the
    payload back as the monitor emitted it, and it is not among the firing alerts."""
    from replimon.store.writes import INSERT_ALERTS_JSON, json_array

    info = [a for a in outputs["alerts"] if a["severity"] == "info"][:2]
    problem = next(a for a in outputs["alerts"] if a["severity"] == "critical" and a["status"] == "firing")
    assert len(info) == 2 and all(a["status"] == "firing" for a in info)
    run = new_run()
    with psycopg.connect(dsn) as conn:
        conn.execute(INSERT_ALERT, alert_row(info[0], run, 0))
        conn.execute(INSERT_ALERTS_JSON, {"run": run, "alerts": json_array([json.dumps(info[1])]),
                                          "batch": 0})
        conn.execute(INSERT_ALERT, alert_row(problem, run, 0))
        stored = dict(conn.execute("SELECT alert_id, status FROM alerts WHERE run_id = %s",
                                   (run,)).fetchall())
    assert stored == {info[0]["alert_id"]: "event", info[1]["alert_id"]: "event",
                      problem["alert_id"]: "firing"}
    reader = RunReader(dsn, run)
    got = {a["alert_id"]: a for a in reader.alerts()}
    assert all(got[a["alert_id"]] == a for a in (*info, problem))
    assert [a["alert_id"] for a in reader.firing_alerts()] == [problem["alert_id"]]
    assert reader.alert_ids(status="event") == {a["alert_id"] for a in info}
