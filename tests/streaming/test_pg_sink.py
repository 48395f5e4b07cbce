"""The streaming job's PostgreSQL writer against the real embedded PostgreSQL: one transaction
per micro-batch, the exactly-once effect (a retried, replayed or stale batch changes nothing) and
the rows each payload becomes. The schema and the readers are the store's (tests/store).

Payloads are real: alerts and group snapshots come from the monitor run over a simulator history
with a violation (BEYOND_HORIZON) and a wedge that fires and resolves (NODE_SILENT). Each test
writes under its own run id, so tests share the session database without seeing each other.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from replimon.core import GroupMonitor
from replimon.embedded import EmbeddedPostgres
from replimon.producers import simulator_chain, simulator_gen, simulator_qlog
from replimon.store.reads import RunReader
from replimon.store.rows import config_members
from replimon.store.schema import migrate
from replimon.store.values import ms_from_ts, nonneg, ts_from_ms
from replimon.streaming.sinks.postgres import PostgresSink
from tests.support import eventually
from tests.support.outputs import monitor_outputs, outputs_of

pytestmark = pytest.mark.postgres

TABLES = ("alerts", "group_state", "node_state", "group_timeseries", "node_timeseries",
          "dead_letters", "pipeline_metrics", "pipeline_batches")


# -- payloads --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def payloads() -> dict[str, Any]:
    """Alerts (in emission order) and snapshots (every 10 s of event time and at the end) of a
    60 s two-group run with BEYOND_HORIZON on g1 and NODE_SILENT (firing, then resolved) on g2."""
    return monitor_outputs()


def dead_letters() -> list[dict[str, Any]]:
    return [
        {"topic": "replica.decisions", "partition": 0, "offset": 17,
         "raw": b"\x00\xff\xfe{not json", "reason": "not JSON", "kafka_ts": 1_767_225_600_123},
        {"topic": "replica.heartbeats", "partition": 3, "offset": 2**40,
         "raw": b"", "reason": "empty value",
         "kafka_ts": datetime(2026, 1, 1, 0, 0, 1, 5000, tzinfo=UTC)},
        {"topic": "replica.config", "partition": 1, "offset": 0, "raw": None,
         "reason": "tombstone", "kafka_ts": None},
    ]


def metrics(batch_id: int) -> dict[str, Any]:
    return {"ts": 1_767_225_700_000 + batch_id, "duration_ms": 850, "input_rows": 9451,
            "input_rows_per_s": 11_118.8, "processed_rows_per_s": 11_000.5}


# -- database --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dsn(postgres: EmbeddedPostgres) -> str:
    migrate(postgres.dsn)
    return postgres.dsn


@pytest.fixture
def sink(dsn: str) -> Iterator[PostgresSink]:
    with PostgresSink(dsn, run_id=f"test-{uuid.uuid4().hex[:12]}") as s:
        yield s


def contents(dsn: str, run_id: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table for one run, in a stable order (timestamps included)."""
    out = {}
    with psycopg.connect(dsn) as conn:
        for table in TABLES:
            rows = conn.execute(f"SELECT * FROM {table} WHERE run_id = %s", (run_id,)).fetchall()
            out[table] = sorted(rows, key=repr)
    return out


def count(dsn: str, table: str, run_id: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table} WHERE run_id = %s", (run_id,)).fetchone()
    assert row is not None
    return int(row[0])


def stored(sink: PostgresSink) -> RunReader:
    """What the sink's run holds, read back through the store."""
    return RunReader(sink.dsn, sink.run_id, pipeline=sink.pipeline)


def write_all(sink: PostgresSink, batch_id: int, p: dict[str, Any]) -> bool:
    return sink.write_batch(batch_id, alerts=p["alerts"], snapshots=p["snapshots"],
                            dead_letters=dead_letters(), metrics=metrics(batch_id))


# -- batches ---------------------------------------------------------------------------------------
def test_a_batch_writes_all_rows(sink: PostgresSink, payloads: dict[str, Any]) -> None:
    assert write_all(sink, 0, payloads)
    run, alerts, snaps = sink.run_id, payloads["alerts"], payloads["snapshots"]
    # Alerts round-trip to their payload form, field for field.
    assert stored(sink).alerts() == sorted(alerts, key=lambda a: (a["event_ts_ms"], a["alert_id"], a["status"]))
    last = {s["group"]: s for s in snaps}
    assert count(sink.dsn, "group_state", run) == len(last) == 2
    assert count(sink.dsn, "node_state", run) == sum(len(s["nodes"]) for s in last.values())
    assert count(sink.dsn, "group_timeseries", run) == len({(s["group"], s["clock_ms"]) for s in snaps})
    assert count(sink.dsn, "dead_letters", run) == 3
    assert sink.last_batch_id() == 0
    with psycopg.connect(sink.dsn) as conn:
        row = conn.execute("SELECT batch_id, ts, duration_ms, input_rows, input_rows_per_s, alerts,"
                           " dead_letters, groups FROM pipeline_metrics WHERE run_id = %s",
                           (run,)).fetchall()
    assert row == [(0, ts_from_ms(1_767_225_700_000), 850, 9451, 11_118.8, len(alerts), 3, 2)]


def test_the_same_batch_again_changes_nothing(sink: PostgresSink, payloads: dict[str, Any]) -> None:
    assert write_all(sink, 0, payloads)
    before = contents(sink.dsn, sink.run_id)
    assert all(before[t] for t in TABLES)
    assert not write_all(sink, 0, payloads)  # a retried batch
    # Even a retry that carries different rows writes nothing: the committed batch stands.
    extra = {**payloads["alerts"][0], "alert_id": "not-in-batch-0"}
    assert not sink.write_batch(0, alerts=[extra], snapshots=[], dead_letters=[], metrics=None)
    assert contents(sink.dsn, sink.run_id) == before


def test_an_older_batch_is_rejected(sink: PostgresSink, payloads: dict[str, Any]) -> None:
    alerts = payloads["alerts"]
    assert sink.write_batch(5, alerts=alerts[:1], snapshots=[], dead_letters=[], metrics=metrics(5))
    before = contents(sink.dsn, sink.run_id)
    assert not sink.write_batch(3, alerts=alerts[1:], snapshots=payloads["snapshots"],
                                dead_letters=dead_letters(), metrics=metrics(3))
    assert contents(sink.dsn, sink.run_id) == before and sink.last_batch_id() == 5
    assert sink.write_batch(6, alerts=alerts[1:2], snapshots=[], dead_letters=[], metrics=None)
    assert sink.last_batch_id() == 6
    assert stored(sink).alert_ids() == {alerts[0]["alert_id"], alerts[1]["alert_id"]}


def test_a_crash_mid_transaction_leaves_nothing_and_the_batch_can_be_retried(
        sink: PostgresSink, payloads: dict[str, Any]) -> None:
    bad = dead_letters()
    bad[-1] = {**bad[-1], "offset": "not-an-offset"}  # the server refuses it after the other rows
    with pytest.raises(psycopg.errors.DataError):
        sink.write_batch(0, alerts=payloads["alerts"], snapshots=payloads["snapshots"],
                         dead_letters=bad, metrics=metrics(0))
    assert all(rows == [] for rows in contents(sink.dsn, sink.run_id).values())
    assert sink.last_batch_id() is None
    assert write_all(sink, 0, payloads)  # same sink, same connection, same batch id
    assert count(sink.dsn, "alerts", sink.run_id) == len(payloads["alerts"])
    assert count(sink.dsn, "dead_letters", sink.run_id) == 3


def test_concurrent_writers_of_one_batch_write_it_once(dsn: str, payloads: dict[str, Any]) -> None:
    run_id = f"test-{uuid.uuid4().hex[:12]}"
    start = threading.Barrier(2)

    def write() -> bool:
        with PostgresSink(dsn, run_id=run_id, migrate_schema=False) as s:
            start.wait()
            return write_all(s, 0, payloads)

    with ThreadPoolExecutor(2) as pool:
        results = [f.result() for f in [pool.submit(write), pool.submit(write)]]
    assert sorted(results) == [False, True]
    assert count(dsn, "alerts", run_id) == len(payloads["alerts"])


def test_a_lost_connection_is_reopened_once(dsn: str, payloads: dict[str, Any]) -> None:
    pipeline = f"reconnect-{uuid.uuid4().hex[:8]}"
    with PostgresSink(dsn, run_id=f"test-{uuid.uuid4().hex[:12]}", pipeline=pipeline) as sink:
        assert sink.write_batch(0, alerts=payloads["alerts"][:1], snapshots=[], dead_letters=[],
                                metrics=None)
        name = f"replimon-sink-{pipeline}"
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                          " WHERE application_name = %s", (name,))
            eventually(lambda: not admin.execute("SELECT 1 FROM pg_stat_activity WHERE application_name = %s",
                                                 (name,)).fetchone(),
                       timeout=10, interval=0.05, what="the terminated backend to go")
        assert sink.write_batch(1, alerts=payloads["alerts"][1:2], snapshots=[],
                                dead_letters=[], metrics=None)
        assert sink.last_batch_id() == 1 and len(stored(sink).alert_ids()) == 2


def test_listener_metrics_merge_into_the_batch_row_once(sink: PostgresSink,
                                                         payloads: dict[str, Any]) -> None:
    """Counts come with the batch, durations and rates later from the query listener (another
    thread); each column keeps its first value, so a repeated progress event changes nothing."""
    assert sink.write_batch(0, alerts=payloads["alerts"], snapshots=[], dead_letters=[],
                            metrics={"ts": 1_767_225_700_000})
    progress = {"duration_ms": 850, "input_rows": 9451, "input_rows_per_s": 11_118.8,
                "processed_rows_per_s": 11_000.5}
    with ThreadPoolExecutor(1) as pool:
        pool.submit(sink.write_metrics, 0, **progress).result()
    sink.write_metrics(0, **{k: v * 2 for k, v in progress.items()})  # a replayed event
    sink.write_metrics(1, duration_ms=20, input_rows=0)  # a batch the sink never saw
    with psycopg.connect(sink.dsn) as conn:
        rows = conn.execute("SELECT batch_id, ts, duration_ms, input_rows, input_rows_per_s,"
                            " processed_rows_per_s, alerts, dead_letters, groups"
                            " FROM pipeline_metrics WHERE run_id = %s ORDER BY batch_id",
                            (sink.run_id,)).fetchall()
    assert rows[0] == (0, ts_from_ms(1_767_225_700_000), 850, 9451, 11_118.8, 11_000.5,
                       len(payloads["alerts"]), 0, 0)
    assert rows[1][0] == 1 and rows[1][1] is not None and rows[1][2:] == (20, 0, None, None,
                                                                          None, None, None)
    with pytest.raises(TypeError, match="rows_per_second"):
        sink.write_metrics(2, rows_per_second=1.0)


def test_a_batch_records_when_its_rows_were_written_and_whether_it_ran_live(
        sink: PostgresSink, payloads: dict[str, Any]) -> None:
    """docs/dashboards.md, "Alert latency": the batch's own write records ``written_at`` (the
    clock at its last statement: after its transaction began, when its alerts' ``inserted_at``
    was taken) and ``live``; the listener's progress never sets ``written_at``, and neither a
    retried batch nor a later progress event changes either."""
    assert sink.write_batch(0, alerts=payloads["alerts"], snapshots=[], dead_letters=[],
                            metrics={"live": True})
    sink.write_metrics(1, duration_ms=20, input_rows=0)  # the listener first: no written_at yet
    assert sink.write_batch(1, alerts=[], snapshots=[], dead_letters=[], metrics={"live": False})
    sink.write_metrics(2, duration_ms=20, input_rows=0)  # a batch the sink never wrote

    def rows() -> list[tuple[Any, ...]]:
        with psycopg.connect(sink.dsn) as conn:
            return conn.execute("SELECT batch_id, live, written_at, ts FROM pipeline_metrics"
                                " WHERE run_id = %s ORDER BY batch_id", (sink.run_id,)).fetchall()

    before = rows()
    with psycopg.connect(sink.dsn) as conn:
        inserted = conn.execute("SELECT DISTINCT inserted_at FROM alerts WHERE run_id = %s",
                                (sink.run_id,)).fetchall()
    assert len(inserted) == 1 and before[0][3] == inserted[0][0]  # one transaction: one now()
    assert before[0][1] is True and before[0][2] >= inserted[0][0]
    assert before[1][1] is False and before[1][2] is not None and before[1][2] > before[0][2]
    assert before[2][1:3] == (None, None)
    assert not sink.write_batch(0, alerts=payloads["alerts"], snapshots=[], dead_letters=[],
                                metrics={"live": False})  # a retry: skipped
    sink.write_metrics(0, duration_ms=850, input_rows=9451, live=False)
    sink.write_metrics(1, duration_ms=40, input_rows=1, live=True)
    assert rows() == before


# -- what is stored --------------------------------------------------------------------------------
def test_firing_and_resolved_alerts_are_both_stored(sink: PostgresSink,
                                                    payloads: dict[str, Any]) -> None:
    alerts = payloads["alerts"]
    (fired,) = [a for a in alerts if a["kind"] == "NODE_SILENT" and a["status"] == "firing"]
    (resolved,) = [a for a in alerts if a["kind"] == "NODE_SILENT" and a["status"] == "resolved"]
    (violation,) = [a for a in alerts if a["kind"] == "BEYOND_HORIZON"]
    assert fired["alert_id"] == resolved["alert_id"]
    before = [a for a in alerts if a is not resolved]
    assert sink.write_batch(0, alerts=before, snapshots=[], dead_letters=[], metrics=None)
    firing = {a["alert_id"]: a for a in stored(sink).firing_alerts()}
    assert firing[fired["alert_id"]] == fired and firing[violation["alert_id"]] == violation
    assert sink.write_batch(1, alerts=[resolved], snapshots=[], dead_letters=[], metrics=None)
    firing = {a["alert_id"]: a for a in stored(sink).firing_alerts()}
    assert fired["alert_id"] not in firing and violation["alert_id"] in firing
    rows = [a for a in stored(sink).alerts() if a["alert_id"] == fired["alert_id"]]
    assert rows == [fired, resolved]
    assert stored(sink).alert_ids(status="resolved") == {resolved["alert_id"]}
    with psycopg.connect(sink.dsn) as conn:
        current = conn.execute("SELECT status, batch_id FROM alerts_current"
                               " WHERE run_id = %s AND alert_id = %s",
                               (sink.run_id, fired["alert_id"])).fetchall()
    assert current == [("resolved", 1)]


def test_dead_letters_round_trip_raw_bytes(sink: PostgresSink) -> None:
    letters = dead_letters()
    assert sink.write_batch(7, alerts=[], snapshots=[], dead_letters=letters, metrics={})
    with psycopg.connect(sink.dsn) as conn:
        rows = conn.execute('SELECT topic, partition, "offset", raw, reason, kafka_ts, batch_id'
                            " FROM dead_letters WHERE run_id = %s ORDER BY topic",
                            (sink.run_id,)).fetchall()
    expected = sorted(
        ((d["topic"], d["partition"], d["offset"], d["raw"], d["reason"],
          ts_from_ms(d["kafka_ts"]), 7) for d in letters), key=lambda r: r[0])
    assert rows == expected
    by_topic = {r[0]: r for r in rows}
    assert type(by_topic["replica.decisions"][3]) is bytes
    assert by_topic["replica.decisions"][3] == b"\x00\xff\xfe{not json"
    assert by_topic["replica.heartbeats"][3] == b"" and by_topic["replica.config"][3] is None
    assert ms_from_ts(by_topic["replica.decisions"][5]) == 1_767_225_600_123
    # Metrics without a time are stamped at write time; counts default to the batch's.
    with psycopg.connect(sink.dsn) as conn:
        m = conn.execute("SELECT ts IS NOT NULL, input_rows, alerts, dead_letters, groups"
                         " FROM pipeline_metrics WHERE run_id = %s", (sink.run_id,)).fetchall()
    assert m == [(True, None, 0, 3, 0)]


def test_snapshots_produce_group_node_and_timeseries_rows(sink: PostgresSink,
                                                          payloads: dict[str, Any]) -> None:
    snaps = payloads["snapshots"]
    assert sink.write_batch(0, alerts=[], snapshots=snaps, dead_letters=[], metrics=None)
    last = {s["group"]: s for s in snaps}
    with psycopg.connect(sink.dsn) as conn:
        groups = conn.execute(
            "SELECT group_id, history, trusted, clock_ts, decided, active_start,"
            " active_event_horizon, members, pending, effective_horizon, executed_majority,"
            " window_use, window_fraction, open_alerts, snapshot, family, config FROM group_state"
            " WHERE run_id = %s ORDER BY group_id", (sink.run_id,)).fetchall()
        nodes = conn.execute(
            "SELECT group_id, node_id, member, executed, decided, incarnation, protocol, status,"
            " last_ts, suspects, effective_horizon, silent, family_state FROM node_state WHERE run_id = %s"
            " ORDER BY group_id, node_id", (sink.run_id,)).fetchall()
        series = conn.execute(
            "SELECT group_id, ts, decided, executed_majority, effective_horizon, event_horizon,"
            " window_use, window_fraction, members, pending, active_start, active_config,"
            " pending_configs, config_version FROM group_timeseries"
            " WHERE run_id = %s ORDER BY group_id, ts", (sink.run_id,)).fetchall()
        node_series = conn.execute(
            "SELECT group_id, node_id, ts, member, decided, executed, last_ts, heartbeat_age_ms,"
            " silent FROM node_timeseries WHERE run_id = %s ORDER BY group_id, node_id, ts",
            (sink.run_id,)).fetchall()
    assert groups == [
        (g, s["history"], s["trusted"], ts_from_ms(s["clock_ms"]), s["decided"],
         s["active"]["start"], s["active"]["event_horizon"], s["active"]["members"], s["pending"],
         s["effective_horizon"], s["executed_majority"], s["window_use"], s["window_fraction"],
         s["open_alerts"], s, "xcom", s["config"])
        for g, s in sorted(last.items())]
    assert nodes == [
        (g, n, x["member"], x["executed"], x["decided"], x["incarnation"], x["protocol"],
         x["status"], ts_from_ms(x["last_ts_ms"]), x["suspects"], x["effective_horizon"],
         x["silent"], {k: x[k] for k in ("executed", "decided", "protocol", "effective_horizon")})
        for g, s in sorted(last.items()) for n, x in sorted(s["nodes"].items())]
    def config(c: dict[str, Any]) -> str:
        return f"start {c['start']} · eh {c['event_horizon']} · " + " ".join(m["id"] for m in c["members"])

    assert series == sorted(
        (s["group"], ts_from_ms(s["clock_ms"]), s["decided"], s["executed_majority"],
         s["effective_horizon"], s["active"]["event_horizon"], s["window_use"],
         s["window_fraction"], len(s["active"]["members"]), len(s["pending"]),
         s["active"]["start"], config(s["active"]),
         " | ".join(config(c) for c in s["pending"]) or None, s["active"]["start"])
        for s in snaps)
    assert node_series == sorted(
        (s["group"], n, ts_from_ms(s["clock_ms"]), x["member"], x["decided"], x["executed"],
         ts_from_ms(x["last_ts_ms"]), s["clock_ms"] - x["last_ts_ms"], x["silent"])
        for s in snaps for n, x in s["nodes"].items())
    # A group's nodes look stale by how long ago they last spoke, as of the group clock.
    assert any(age > 0 for *_, age, _silent in node_series)
    # A snapshot taken while NODE_SILENT was open shows it in the series' group state history.
    assert any(s["open_alerts"] for s in snaps)
    # A later batch moves the state on and adds points; the same clock again overwrites its point.
    moved = {**last["g1"], "decided": last["g1"]["decided"] + 5}
    assert sink.write_batch(1, alerts=[], snapshots=[moved], dead_letters=[], metrics=None)
    with psycopg.connect(sink.dsn) as conn:
        (decided,) = conn.execute("SELECT decided FROM group_state WHERE run_id = %s"
                                  " AND group_id = 'g1'", (sink.run_id,)).fetchall()
        points = conn.execute("SELECT count(*), max(decided) FROM group_timeseries"
                              " WHERE run_id = %s AND group_id = 'g1' AND ts = %s",
                              (sink.run_id, ts_from_ms(moved["clock_ms"]))).fetchall()
    assert decided == (moved["decided"],) and points == [(1, moved["decided"])]


def family_events(family: str) -> list[dict[str, Any]]:
    """A 120 s two-group run of ``family`` whose configuration changes: generations with
    restarts (each a new generation), quorum-log with its leases renewed by Reconf (each a new
    legislature) and a recovery moving the second group to new hosts, chain with replica crashes
    (each replacement a new epoch) and a wedge in the second group."""
    events: list[dict[str, Any]] = []
    if family == "gen":
        simulator_gen.Simulator(simulator_gen.SimOptions(duration_ms=120_000, groups=2, seed=3,
                                                         restart_every_s=20), [], events.append).run()
    elif family == "chain":
        simulator_chain.Simulator(simulator_chain.SimOptions(duration_ms=120_000, groups=2, seed=3,
                                                             crash_every_s=20),
                                  [simulator_chain.parse_injection("chain_wedge_not_replaced:ch2@30s")],
                                  events.append).run()
    else:
        simulator_qlog.Simulator(simulator_qlog.SimOptions(duration_ms=120_000, groups=2, seed=3),
                                 [simulator_qlog.parse_injection("qlog_recover_stuck_near_miss:ql2@20s")],
                                 events.append).run()
    return events


# family -> the node fields beyond every family's (node_state.family_state)
FAMILY_NODE_FIELDS = {"gen": {"gen", "node_status", "last_online_in", "last_vote"},
                      "qlog": {"executed", "legislature", "watermark", "leader"},
                      "chain": {"executed", "epoch", "pos", "stable", "wedged", "wedged_epoch",
                                "lease_remaining_ms"}}


@pytest.mark.parametrize("family", sorted(FAMILY_NODE_FIELDS))
def test_a_group_of_another_family_has_its_own_rows_and_no_xcom_values(sink: PostgresSink,
                                                                      family: str) -> None:
    """docs/postgres.md, "Tables": the family-neutral columns hold the family's values, XCom's
    flattened columns are NULL (not an XCom group without a configuration: no pending [] or 0),
    the frontiers are the family's own (none for generations; quorum-log: decided, executed by a
    majority, each node's executed; chain: the head's position, the position a majority holds,
    each replica's position) and each configuration change (a generation, a legislature, an
    epoch) is one step of config_version."""
    snaps = outputs_of(family_events(family))[1]
    last = {s["group"]: s for s in snaps}
    assert all(s["family"] == family and s["config"] for s in last.values())
    assert sink.write_batch(0, alerts=[], snapshots=snaps, dead_letters=[], metrics=None)
    before = contents(sink.dsn, sink.run_id)
    assert not sink.write_batch(0, alerts=[], snapshots=snaps, dead_letters=[], metrics=None)
    assert contents(sink.dsn, sink.run_id) == before  # a replayed batch changes nothing
    with psycopg.connect(sink.dsn) as conn:
        groups = conn.execute(
            "SELECT group_id, family, config, decided, executed_majority, active_start,"
            " active_event_horizon, members, pending, effective_horizon, window_use, window_fraction"
            " FROM group_state WHERE run_id = %s ORDER BY group_id", (sink.run_id,)).fetchall()
        nodes = conn.execute(
            "SELECT group_id, node_id, member, status, executed, decided, protocol,"
            " effective_horizon, family_state FROM node_state WHERE run_id = %s"
            " ORDER BY group_id, node_id", (sink.run_id,)).fetchall()
        series = conn.execute(
            "SELECT group_id, ts, config_version, members, decided, executed_majority, pending,"
            " effective_horizon, event_horizon, window_use, active_start, active_config, pending_configs"
            " FROM group_timeseries WHERE run_id = %s ORDER BY group_id, ts", (sink.run_id,)).fetchall()
    fields = FAMILY_NODE_FIELDS[family]
    assert groups == [(g, family, s["config"], nonneg(s.get("decided")), s.get("executed_majority"), *[None] * 7)
                      for g, s in sorted(last.items())]
    assert nodes == [
        (g, n, x["member"], x["status"], x.get("executed"), None, None, None, {k: x[k] for k in fields})
        for g, s in sorted(last.items()) for n, x in sorted(s["nodes"].items())]
    points = {(s["group"], ts_from_ms(s["clock_ms"])): s for s in snaps}
    assert series == [(g, ts, s["config_version"], config_members(s["config"]), nonneg(s.get("decided")),
                       s.get("executed_majority"), *[None] * 7)
                      for (g, ts), s in sorted(points.items())]
    # The configurations moved on: config_version steps up on the timeline.
    for g in last:
        versions = [v for group, _ts, v, *_ in series if group == g]
        assert len(set(versions)) > 2 and versions == sorted(versions), (g, versions)
    if family == "qlog":  # a quorum-log group has frontiers, and a legislature with a leader
        assert all(s["decided"] > 0 and s["executed_majority"] for s in last.values())
        assert all(fs["legislature"] is not None and fs["watermark"] for *_, fs in nodes)
        assert all(any(m["leader"] for m in s["config"]["members"]) for s in last.values())
    elif family == "chain":  # a chain group: the epoch is config_version, each member its lease
        assert all(s["decided"] > 0 and s["config"]["epoch"] == s["config_version"] for s in last.values())
        assert all(fs["epoch"] and fs["pos"] == executed and fs["lease_remaining_ms"] is not None
                   for _g, _n, member, _st, executed, *_, fs in nodes if member)
    else:
        assert all(fs["gen"] is not None and fs["node_status"] for *_, fs in nodes)


def test_snapshots_with_no_map_or_no_horizon_yet_are_stored(sink: PostgresSink,
                                                            payloads: dict[str, Any]) -> None:
    events = payloads["events"]
    never = GroupMonitor("g-never").snapshot()  # no event at all: clock -1
    heartbeat = next(e for e in events if e["type"] == "heartbeat" and e["group"] == "g1")
    no_map = GroupMonitor("g-no-map")
    no_map.on_event({**heartbeat, "group": "g-no-map"})
    boot = GroupMonitor("g-boot")
    boot.on_event({**events[0], "group": "g-boot"})  # the boot decision: a map, no executions
    snaps = [never, no_map.snapshot(), boot.snapshot()]
    assert snaps[1]["active"] is None and snaps[1]["clock_ms"] >= 0
    assert snaps[2]["active"] is not None and "effective_horizon" not in snaps[2]
    assert sink.write_batch(0, alerts=[], snapshots=snaps, dead_letters=[], metrics=None)
    with psycopg.connect(sink.dsn) as conn:
        groups = conn.execute(
            "SELECT group_id, clock_ts, decided, active_start, members, effective_horizon,"
            " window_fraction, snapshot FROM group_state WHERE run_id = %s ORDER BY group_id",
            (sink.run_id,)).fetchall()
        series = conn.execute(
            "SELECT group_id, ts, decided, executed_majority, event_horizon, members, pending"
            " FROM group_timeseries WHERE run_id = %s ORDER BY group_id", (sink.run_id,)).fetchall()
        nodes = conn.execute(
            "SELECT node_id, executed, incarnation, protocol, status, effective_horizon"
            " FROM node_state WHERE run_id = %s AND group_id = 'g-boot' ORDER BY node_id",
            (sink.run_id,)).fetchall()
    members = snaps[2]["active"]["members"]
    assert groups == [
        ("g-boot", ts_from_ms(snaps[2]["clock_ms"]), 0, 0, members, None, None, snaps[2]),
        ("g-never", None, None, None, None, None, None, never),
        ("g-no-map", ts_from_ms(heartbeat["ts_ms"]), None, None, None, None, None, snaps[1]),
    ]
    # No clock, no point in time: the never-heard group has no series row.
    assert series == [
        ("g-boot", ts_from_ms(snaps[2]["clock_ms"]), 0, None, 10, len(members), 0),
        ("g-no-map", ts_from_ms(heartbeat["ts_ms"]), None, None, None, None, 0),
    ]
    # The monitor's "none yet" (-1, '') are NULL; the proposer n1 has an incarnation already.
    assert nodes == [("n1", None, 0, None, None, None), ("n2", None, None, None, None, None),
                     ("n3", None, None, None, None, None)]


def test_runs_are_isolated(dsn: str, payloads: dict[str, Any]) -> None:
    live, replay = (f"test-{uuid.uuid4().hex[:12]}" for _ in range(2))
    with PostgresSink(dsn, run_id=live) as a, PostgresSink(dsn, run_id=replay) as b:
        assert write_all(a, 3, payloads)
        assert write_all(b, 0, payloads)  # a replay starts at batch 0 under its own run id
        assert stored(a).alert_ids() == stored(b).alert_ids() == {x["alert_id"] for x in payloads["alerts"]}
        assert a.last_batch_id() == 3 and b.last_batch_id() == 0


# -- rate ------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_write_rate_of_a_large_batch(sink: PostgresSink, payloads: dict[str, Any]) -> None:
    """10k alerts and 1k snapshots (1k groups of 4 nodes) in one batch; prints rows/s."""
    base = payloads["alerts"]
    alerts = [{**base[i % len(base)], "alert_id": f"a{i:06d}",
               "event_ts_ms": base[i % len(base)]["event_ts_ms"] + i} for i in range(10_000)]
    snap = payloads["snapshots"][-1]
    snaps = [{**snap, "group": f"g{i:04d}", "clock_ms": snap["clock_ms"] + i} for i in range(1000)]
    rows = len(alerts) + len(snaps) * (2 + len(snap["nodes"]))
    started = time.perf_counter()
    assert sink.write_batch(0, alerts=alerts, snapshots=snaps, dead_letters=[], metrics=None)
    elapsed = time.perf_counter() - started
    print(f"\n{rows} rows in {elapsed:.2f} s: {rows / elapsed:,.0f} rows/s")
    assert count(sink.dsn, "alerts", sink.run_id) == 10_000
    assert count(sink.dsn, "node_state", sink.run_id) == 1000 * len(snap["nodes"])


def test_copy_and_executemany_write_the_same_rows(dsn: str, payloads: dict[str, Any],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Large statements go through COPY and one INSERT ... SELECT with the same conflict clause:
    the rows stored are those of executemany (write times aside), updates included."""
    import replimon.streaming.sinks.postgres as sink_module

    volatile = {"run_id", "inserted_at", "updated_at", "committed_at", "written_at"}
    stored = []
    for copy_from in (10**9, 1):
        monkeypatch.setattr(sink_module, "_COPY_FROM", copy_from)
        with PostgresSink(dsn, run_id=f"copy-{uuid.uuid4().hex[:12]}") as s:
            half = len(payloads["snapshots"]) // 2
            assert s.write_batch(1, alerts=payloads["alerts"][:3], snapshots=payloads["snapshots"][:half],
                                 dead_letters=dead_letters()[:1], metrics=None)
            assert write_all(s, 2, payloads)  # repeats keys of batch 1: the updates
            tables = {}
            with psycopg.connect(dsn) as conn:
                for table in TABLES:
                    cols = [c for (c,) in conn.execute(
                        "SELECT column_name FROM information_schema.columns WHERE table_name = %s"
                        " ORDER BY ordinal_position", (table,)) if c not in volatile]
                    if table == "pipeline_metrics":
                        cols.remove("ts")  # now() when the batch carries none
                    quoted = ", ".join('"' + c + '"' for c in cols)
                    rows = conn.execute(f"SELECT {quoted} FROM {table} WHERE run_id = %s",
                                        (s.run_id,)).fetchall()
                    tables[table] = sorted(rows, key=repr)
        stored.append(tables)
    assert stored[0]["node_state"] and stored[0]["group_timeseries"]
    assert stored[0] == stored[1]


def test_alerts_as_the_monitors_json_text_store_the_same_rows(dsn: str, payloads: dict[str, Any]) -> None:
    """The job hands the sink each alert as the JSON text the monitor encoded, and PostgreSQL reads
    it: the rows are those of the same alerts given as dicts (write times aside)."""
    stored = []
    for as_text in (False, True):
        alerts = payloads["alerts"]
        given = [json.dumps(a, separators=(",", ":")) for a in alerts] if as_text else alerts
        with PostgresSink(dsn, run_id=f"text-{uuid.uuid4().hex[:12]}") as s:
            assert s.write_batch(1, alerts=given, snapshots=[], dead_letters=[], metrics=None)
            assert not s.write_batch(1, alerts=given, snapshots=[], dead_letters=[], metrics=None)
            with psycopg.connect(dsn) as conn:
                rows = conn.execute(
                    "SELECT alert_id, status, group_id, kind, severity, category, instance, node, event_ts,"
                    " detected_ts, message, evidence, batch_id FROM alerts WHERE run_id = %s",
                    (s.run_id,)).fetchall()
        stored.append(sorted(rows, key=repr))
    assert len(stored[0]) == len(payloads["alerts"]) > 5
    assert any(r[6] is None for r in stored[0]) and any(r[6] is not None for r in stored[0])
    assert stored[0] == stored[1]
