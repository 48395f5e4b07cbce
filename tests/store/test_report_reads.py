"""What a run report reads, on a small run written here: totals, kinds, affected groups in
order, the capped alert lists, latency, data quality and the event-time span."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from replimon.store.report_reads import (
    affected_groups,
    alert_kinds,
    alert_latency,
    dead_letter_rows,
    dq_summaries,
    event_span,
    group_alerts,
    group_points,
    node_points,
    notable_alerts,
    run_totals,
)
from replimon.store.values import stored_status, ts_from_ms
from tests.support.outputs import store_alerts

pytestmark = pytest.mark.postgres


def test_an_empty_run_reads_as_nothing(dsn: str, new_run: Callable[[], str]) -> None:
    run = new_run()
    with psycopg.connect(dsn) as conn:
        assert run_totals(conn, run) == (0, None, 0, None, 0)
        assert event_span(conn, run) is None
        assert alert_kinds(conn, run) == [] and affected_groups(conn, run) == []
        assert notable_alerts(conn, run, 10) == [] and alert_latency(conn, run) == []
        assert dq_summaries(conn, run) == [] and dead_letter_rows(conn, run, 10) == []
        assert group_alerts(conn, run, []) == {} and group_points(conn, run, []) == {}
        assert node_points(conn, run, ["g1"]) == {"g1": {}}


def test_alerts_by_kind_group_and_latency(dsn: str, outputs: dict[str, Any],
                                          new_run: Callable[[], str]) -> None:
    run = new_run()
    emitted = outputs["alerts"]
    store_alerts(dsn, run, emitted)
    ids: dict[str, set[str]] = {}
    for a in emitted:
        ids.setdefault(a["kind"], set()).add(a["alert_id"])
    notable = [a for a in emitted if a["status"] == "firing" and a["severity"] in ("critical", "warning")]
    with psycopg.connect(dsn) as conn:
        kinds = {k: (s, c, n, r) for k, s, c, n, r in alert_kinds(conn, run)}
        affected = affected_groups(conn, run)
        listed = notable_alerts(conn, run, 1)
        by_group = group_alerts(conn, run, ["g1", "g2"])
        latency = {row[0]: row[1:] for row in alert_latency(conn, run)}
        span = event_span(conn, run)
    assert set(kinds) == set(ids)
    assert kinds["NODE_SILENT"][2:] == (len(ids["NODE_SILENT"]), len(ids["NODE_SILENT"]))  # resolved
    assert kinds["BEYOND_HORIZON"][:2] == ("critical", "violation")
    # g1 has the critical violation, g2 only the warning wedge: g1 first.
    assert [g for g, *_ in affected][:2] == ["g1", "g2"]
    g1 = affected[0]
    assert g1[1] >= 1 and "BEYOND_HORIZON" in g1[4]
    assert g1[3] == min(a["event_ts_ms"] for a in notable if a["group"] == "g1")
    first = min(notable, key=lambda a: (a["event_ts_ms"], a["alert_id"]))
    assert [(r["alert_id"], r["event_ms"], r["detected_ms"]) for r in listed] == [
        (first["alert_id"], first["event_ts_ms"], first["detected_ts_ms"])]
    assert listed[0]["inserted_ms"] > 0 and listed[0]["evidence"] == first["evidence"]
    # The report reads rows as stored: an info alert's row is an event (docs/postgres.md).
    assert sorted(r["alert_id"] + r["status"] for r in by_group["g2"]) == sorted(
        a["alert_id"] + stored_status(a["severity"], a["status"]) for a in emitted if a["group"] == "g2")
    assert any(r["status"] == "event" for r in by_group["g2"])
    n, median, most = latency["BEYOND_HORIZON"][:3]
    waits = [a["detected_ts_ms"] - a["event_ts_ms"] for a in emitted
             if a["kind"] == "BEYOND_HORIZON" and a["status"] == "firing"]
    assert n == len(waits) and most == pytest.approx(max(waits))
    assert median is not None and min(waits) <= median <= max(waits)
    assert span == (min(a["event_ts_ms"] for a in emitted), max(a["event_ts_ms"] for a in emitted))


def test_totals_dead_letters_and_data_quality(dsn: str, outputs: dict[str, Any],
                                              new_run: Callable[[], str]) -> None:
    run = new_run()
    last = {s["group"]: s for s in outputs["snapshots"]}
    t0 = 1_767_225_600_000
    with psycopg.connect(dsn) as conn:
        for group, snap in last.items():
            conn.execute("INSERT INTO group_state (run_id, group_id, history, trusted, snapshot,"
                         " family, batch_id) VALUES (%s, %s, %s, %s, %s, %s, 0)",
                         (run, group, snap["history"], snap["trusted"], Jsonb(snap), snap["family"]))
        for batch, rows in ((0, 100), (1, 50)):
            conn.execute("INSERT INTO pipeline_metrics (run_id, batch_id, ts, input_rows)"
                         " VALUES (%s, %s, now(), %s)", (run, batch, rows))
        for offset in (3, 1, 2):
            conn.execute('INSERT INTO dead_letters (run_id, topic, partition, "offset", reason,'
                         " kafka_ts, batch_id) VALUES (%s, 'replica.decisions', 0, %s, 'bad', %s, 0)",
                         (run, offset, ts_from_ms(t0 + offset)))
        for batch, ok in ((0, True), (1, False), (2, False)):
            conn.execute("INSERT INTO dq_results (run_id, batch_id, suite, expectation, ts, success,"
                         " evaluated, unexpected, details) VALUES (%s, %s, 's', 'e', %s, %s, 10, %s, %s)",
                         (run, batch, ts_from_ms(t0 + batch), ok, 0 if ok else 1,
                          Jsonb({"batch": batch})))
        totals = run_totals(conn, run)
        dead = dead_letter_rows(conn, run, 2)
        dq = dq_summaries(conn, run)
    events = sum(s["counts"]["events"] for s in last.values())
    assert totals == (len(last), events, 2, 150, 3)
    assert [(d["offset"], d["kafka_ms"]) for d in dead] == [(1, t0 + 1), (2, t0 + 2)]
    assert dq == [("s", "e", 3, 2, 30, 2, t0, t0 + 2, {"batch": 2})]
