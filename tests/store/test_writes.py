"""What the two writers share: the guard moves only forward and says whether a batch is new; an
alert row is stored as its payload and never changed."""

from __future__ import annotations

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
    assert INSERT_ALERT.count("%s") == len(row) and row[:3] == (run, first["alert_id"], "firing")
