"""Reading a run back: alerts in their payload form and order, windows, what is firing, ids,
counts, group states; `RunReader` reads the same through its own connections."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from replimon.store.reads import (
    RunReader,
    alert_count,
    alert_ids,
    alerts,
    firing_alerts,
    group_snapshots,
)
from tests.support.outputs import store_alerts

pytestmark = pytest.mark.postgres


def by_event_time(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda a: (a["event_ts_ms"], a["alert_id"], a["status"]))


def test_alerts_read_back_as_their_payloads_by_event_time(
        dsn: str, outputs: dict[str, Any], new_run: Callable[[], str]) -> None:
    run, other = new_run(), new_run()
    emitted = outputs["alerts"]
    store_alerts(dsn, run, emitted)
    store_alerts(dsn, other, emitted[:1])
    with psycopg.connect(dsn) as conn:
        assert alerts(conn, run) == by_event_time(emitted)  # field for field
        assert alert_ids(conn, run) == {a["alert_id"] for a in emitted}
        assert alert_count(conn, run) == len(emitted)
        assert alerts(conn, other) == emitted[:1]  # each run reads its own rows only
        assert alerts(conn, new_run()) == [] and alert_count(conn, new_run()) == 0


def test_a_window_bounds_event_times_half_open(dsn: str, outputs: dict[str, Any],
                                               new_run: Callable[[], str]) -> None:
    run = new_run()
    emitted = by_event_time(outputs["alerts"])
    store_alerts(dsn, run, emitted)
    times = sorted({a["event_ts_ms"] for a in emitted})
    assert len(times) >= 3
    lo, hi = times[1], times[-1]
    with psycopg.connect(dsn) as conn:
        inside = alerts(conn, run, window=(lo, hi))
        # An open end (the CLI's 2**62) and a start at 0 are no bounds.
        assert alerts(conn, run, window=(0, 2**62)) == emitted
        assert alerts(conn, run, window=(lo, 2**62)) == [a for a in emitted if a["event_ts_ms"] >= lo]
    assert inside == [a for a in emitted if lo <= a["event_ts_ms"] < hi]
    assert inside and all(a["event_ts_ms"] != hi for a in inside)


def test_a_resolved_alert_is_no_longer_firing(dsn: str, outputs: dict[str, Any],
                                              new_run: Callable[[], str]) -> None:
    run = new_run()
    emitted = outputs["alerts"]
    (resolved,) = [a for a in emitted if a["kind"] == "NODE_SILENT" and a["status"] == "resolved"]
    before = [a for a in emitted if a is not resolved]
    # Info alerts are events: stored, never firing (docs/postgres.md, "Tables").
    problems = [a for a in before if a["severity"] != "info"]
    assert len(problems) < len(before)
    store_alerts(dsn, run, before)
    with psycopg.connect(dsn) as conn:
        assert firing_alerts(conn, run) == by_event_time(problems)
        store_alerts(dsn, run, [resolved], batch_id=1)
        firing = firing_alerts(conn, run)
        assert resolved["alert_id"] not in {a["alert_id"] for a in firing}
        assert firing == [a for a in by_event_time(problems) if a["alert_id"] != resolved["alert_id"]]
        assert alert_ids(conn, run, "resolved") == {resolved["alert_id"]}
        assert alert_ids(conn, run, "firing") == {a["alert_id"] for a in problems}
        assert alert_ids(conn, run, "event") == {a["alert_id"] for a in before if a not in problems}


def test_group_snapshots_are_the_stored_snapshots(dsn: str, outputs: dict[str, Any],
                                                  new_run: Callable[[], str]) -> None:
    run = new_run()
    last = {s["group"]: s for s in outputs["snapshots"]}
    with psycopg.connect(dsn) as conn:
        for group, snap in last.items():
            conn.execute("INSERT INTO group_state (run_id, group_id, history, trusted, snapshot,"
                         " family, batch_id) VALUES (%s, %s, %s, %s, %s, %s, 0)",
                         (run, group, snap["history"], snap["trusted"], Jsonb(snap), snap["family"]))
    with psycopg.connect(dsn) as conn:
        assert group_snapshots(conn, run) == last
        assert group_snapshots(conn, new_run()) == {}


def test_a_run_reader_reads_the_same(dsn: str, outputs: dict[str, Any],
                                     new_run: Callable[[], str]) -> None:
    run = new_run()
    emitted = outputs["alerts"]
    store_alerts(dsn, run, emitted)
    reader = RunReader(dsn, run)
    with psycopg.connect(dsn) as conn:
        assert reader.alerts() == alerts(conn, run)
        assert reader.alerts(window=(0, emitted[0]["event_ts_ms"] + 1)) == alerts(
            conn, run, window=(0, emitted[0]["event_ts_ms"] + 1))
        assert reader.firing_alerts() == firing_alerts(conn, run)
        assert reader.alert_ids() == alert_ids(conn, run)
        assert reader.alert_ids("resolved") == alert_ids(conn, run, "resolved") != set()
        assert reader.alert_count() == len(emitted)
        assert reader.group_snapshots() == {} and reader.last_batch_id() is None
    with pytest.raises(ValueError, match="DSN"):
        RunReader("", run)
