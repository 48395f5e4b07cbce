"""Runs: which run ids exist, the error for one that does not, a replay's own row."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from replimon.store.runs import (
    DEFAULT_PIPELINE,
    LIVE_RUN,
    known_runs,
    last_batch_id,
    replay_run,
    require_run,
    run_exists,
)
from replimon.store.values import ts_from_ms
from replimon.store.writes import ADVANCE
from tests.support.outputs import store_alerts

pytestmark = pytest.mark.postgres


def test_a_run_exists_once_any_table_has_its_rows(dsn: str, outputs: dict[str, Any],
                                                  new_run: Callable[[], str]) -> None:
    batches, replay, alerts_only, nothing = (new_run() for _ in range(4))
    with psycopg.connect(dsn) as conn:
        conn.execute(ADVANCE, (batches, DEFAULT_PIPELINE, 0))
        # A replay that failed before its first batch still has its replay_runs row.
        conn.execute("INSERT INTO replay_runs (run_id, status) VALUES (%s, 'failed')", (replay,))
    store_alerts(dsn, alerts_only, outputs["alerts"][:1])
    with psycopg.connect(dsn) as conn:
        assert all(run_exists(conn, r) for r in (batches, replay, alerts_only))
        assert not run_exists(conn, nothing)
        known = known_runs(conn)
        assert known == sorted(known) and {batches, replay} <= set(known)
        assert nothing not in known
        require_run(conn, batches)
        with pytest.raises(ValueError, match=rf"no run '{nothing}' in PostgreSQL \(known: .*{batches}"):
            require_run(conn, nothing)
        assert last_batch_id(conn, batches) == 0 and last_batch_id(conn, replay) is None


def test_a_replay_row_reads_back_and_the_live_run_has_none(dsn: str,
                                                          new_run: Callable[[], str]) -> None:
    run = new_run()
    params = {"from_ms": 1_767_225_600_000, "groups": ["g1"], "command": ["replimon", "replay"]}
    with psycopg.connect(dsn) as conn:
        conn.execute("INSERT INTO replay_runs (run_id, started_at, finished_at, params, status)"
                     " VALUES (%s, %s, %s, %s, 'done')",
                     (run, ts_from_ms(1_767_225_601_000), ts_from_ms(1_767_225_602_500),
                      Jsonb(params)))
        assert replay_run(conn, run) == {"started_ms": 1_767_225_601_000,
                                         "finished_ms": 1_767_225_602_500, "params": params,
                                         "status": "done"}
        assert replay_run(conn, LIVE_RUN) is None
