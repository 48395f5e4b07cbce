"""The schema's migrations against the real embedded PostgreSQL: shipped as package data, applied
once even by concurrent starters, idempotent."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from replimon.embedded import EmbeddedPostgres
from replimon.store.schema import migrate, migrations

pytestmark = pytest.mark.postgres

TABLES = ("alerts", "group_state", "node_state", "group_timeseries", "node_timeseries",
          "dead_letters", "pipeline_metrics", "pipeline_batches", "replay_runs", "dq_results")


@pytest.fixture
def fresh_db(postgres: EmbeddedPostgres) -> Iterator[str]:
    """An empty database of its own (the session one is migrated already)."""
    name = f"mig_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield postgres.dsn.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_the_migrations_are_shipped_numbered_from_one() -> None:
    shipped = migrations()
    assert [v for v, _, _ in shipped] == list(range(1, len(shipped) + 1)) and len(shipped) >= 2
    assert shipped[0][1] == "init"
    assert all(sql.lstrip().startswith("-- replimon PostgreSQL schema") for _, _, sql in shipped)


def test_migrations_apply_once_even_when_concurrent_and_are_idempotent(fresh_db: str) -> None:
    shipped = [v for v, _, _ in migrations()]
    assert shipped[0] == 1 and shipped == sorted(set(shipped))
    start = threading.Barrier(2)

    def run() -> list[int]:
        start.wait()
        return migrate(fresh_db)

    with ThreadPoolExecutor(2) as pool:
        results = [f.result() for f in [pool.submit(run), pool.submit(run)]]
    assert sorted(results) == [[], shipped]  # one applied everything, the other found it done
    assert migrate(fresh_db) == []
    with psycopg.connect(fresh_db) as conn:
        recorded = conn.execute("SELECT version, name FROM schema_migrations ORDER BY 1").fetchall()
        tables = {r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")}
    assert recorded == [(v, n) for v, n, _ in migrations()] and recorded[0] == (1, "init")
    assert set(TABLES) | {"schema_migrations", "alerts_current"} <= tables


def test_migrate_on_a_migrated_database_applies_nothing(postgres: EmbeddedPostgres) -> None:
    migrate(postgres.dsn)
    assert migrate(postgres.dsn) == []


def _alert_sql(run: str, alert_id: str, status: str, severity: str, kind: str) -> str:
    return ("INSERT INTO alerts (run_id, alert_id, status, group_id, kind, severity, category,"
            " event_ts, detected_ts, message, batch_id)"
            f" VALUES ('{run}', '{alert_id}', '{status}', 'g1', '{kind}', '{severity}',"
            f" '{'info' if severity == 'info' else 'wedge'}', now(), now(), 'm', 0)")


def test_version_4_turns_stored_info_alerts_into_events(fresh_db: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A database written before version 4 holds info alerts as 'firing': the migration makes
    them 'event' rows (same ids), leaves the others alone, and from then on the table takes an
    'event' row for an info alert and nothing else."""
    import replimon.store.schema as schema

    before = [m for m in migrations() if m[0] < 4]
    monkeypatch.setattr(schema, "migrations", lambda: before)
    assert migrate(fresh_db) == [1, 2, 3]
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        conn.execute(_alert_sql("live", "i1", "firing", "info", "CONFIG_INSTALLED"))
        conn.execute(_alert_sql("live", "w1", "firing", "critical", "QUORUM_LOST"))
        conn.execute(_alert_sql("live", "w1", "resolved", "critical", "QUORUM_LOST"))
    monkeypatch.undo()
    assert migrate(fresh_db) == [v for v, _, _ in migrations() if v >= 4]
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        rows = conn.execute("SELECT alert_id, status FROM alerts ORDER BY 1, 2").fetchall()
        assert rows == [("i1", "event"), ("w1", "firing"), ("w1", "resolved")]
        for bad in (_alert_sql("live", "i2", "firing", "info", "RECONFIG_REFUSED"),
                    _alert_sql("live", "w2", "event", "critical", "QUORUM_LOST"),
                    _alert_sql("live", "w3", "open", "critical", "QUORUM_LOST")):
            with pytest.raises(psycopg.errors.CheckViolation):
                conn.execute(bad)
        conn.execute(_alert_sql("live", "i2", "event", "info", "RECONFIG_REFUSED"))


def test_version_5_keeps_a_version_4_database_and_makes_its_groups_xcom(
        fresh_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database the version 4 sink wrote keeps every row: its groups become family 'xcom' with
    the configuration their snapshot held (the same ``config`` the monitor gives now), a group
    without a configuration yet gets none, and each time-series point's config_version is its
    active start."""
    import json

    import replimon.store.schema as schema
    from tests.support.outputs import monitor_outputs

    before = [m for m in migrations() if m[0] < 5]
    monkeypatch.setattr(schema, "migrations", lambda: before)
    assert migrate(fresh_db) == [1, 2, 3, 4]
    snaps = {s["group"]: s for s in monitor_outputs()["snapshots"]}
    # The v4 sink's snapshot had no family, config or config_version.
    old = {g: {k: v for k, v in s.items() if k not in ("family", "config", "config_version")}
           for g, s in snaps.items()}
    old["g-no-map"] = {**old["g1"], "group": "g-no-map", "active": None, "pending": []}
    for key in ("effective_horizon", "executed_majority", "window_use", "window_fraction"):
        old["g-no-map"].pop(key, None)
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        for g, s in old.items():
            active = s["active"]
            conn.execute(
                "INSERT INTO group_state (run_id, group_id, history, trusted, decided, active_start,"
                " members, pending, snapshot, batch_id) VALUES ('live', %s, %s, %s, %s, %s, %s, %s, %s, 3)",
                (g, s["history"], s["trusted"], s["decided"], active and active["start"],
                 active and json.dumps(active["members"]), json.dumps(s["pending"]), json.dumps(s)))
            conn.execute("INSERT INTO group_timeseries (run_id, group_id, ts, decided, active_start)"
                         " VALUES ('live', %s, now(), %s, %s)", (g, s["decided"], active and active["start"]))
            conn.execute("INSERT INTO node_state (run_id, group_id, node_id, member, executed, silent,"
                         " batch_id) VALUES ('live', %s, 'n1', true, 7, false, 3)", (g,))
        rows_before = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone() for t in TABLES}
    monkeypatch.undo()
    assert migrate(fresh_db) == [v for v, _, _ in migrations() if v >= 5]
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        assert {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone() for t in TABLES} == rows_before
        groups = dict((g, (f, c, snap)) for g, f, c, snap in conn.execute(
            "SELECT group_id, family, config, snapshot FROM group_state"))
        series = dict(conn.execute("SELECT group_id, config_version FROM group_timeseries"))
        nodes = conn.execute("SELECT group_id, executed, family_state FROM node_state").fetchall()
        with pytest.raises(psycopg.errors.NotNullViolation):  # every group has a family from now on
            conn.execute("INSERT INTO group_state (run_id, group_id, history, trusted, snapshot, batch_id)"
                         " VALUES ('live', 'g9', 'complete', true, '{}', 4)")
        conn.execute("INSERT INTO group_state (run_id, group_id, history, trusted, snapshot, batch_id,"
                     " family, pending) VALUES ('live', 'g9', 'complete', true, '{}', 4, 'gen', NULL)")
    assert {g: (f, c) for g, (f, c, _) in groups.items()} == {
        **{g: ("xcom", s["config"]) for g, s in snaps.items()}, "g-no-map": ("xcom", None)}
    assert {g: snap for g, (_, _, snap) in groups.items()} == old
    assert series == {**{g: s["config_version"] for g, s in snaps.items()}, "g-no-map": None}
    assert sorted(nodes) == [(g, 7, None) for g in sorted(old)]


def test_version_6_keeps_a_version_5_databases_metrics_without_a_latency(
        fresh_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Metrics rows written before version 6 keep every value and have neither ``live`` nor
    ``written_at`` (no alert latency, docs/dashboards.md); the alerts of a batch are found by
    (run, batch) through the new index."""
    import replimon.store.schema as schema

    before = [m for m in migrations() if m[0] < 6]
    monkeypatch.setattr(schema, "migrations", lambda: before)
    assert migrate(fresh_db) == [1, 2, 3, 4, 5]
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        conn.execute("INSERT INTO pipeline_metrics (run_id, batch_id, ts, duration_ms, input_rows, trigger_ms)"
                     " VALUES ('live', 7, now(), 850, 9451, 1000)")
        conn.execute(_alert_sql("live", "w1", "firing", "critical", "QUORUM_LOST"))  # batch 0
        old = conn.execute("SELECT * FROM pipeline_metrics").fetchall()
    monkeypatch.undo()
    assert migrate(fresh_db) == [v for v, _, _ in migrations() if v >= 6]
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        assert conn.execute("SELECT * FROM pipeline_metrics").fetchall() == [(*old[0], None, None)]
        conn.execute("SET enable_seqscan = off")
        plan = conn.execute("EXPLAIN SELECT alert_id FROM alerts WHERE run_id = 'live' AND batch_id = 0").fetchall()
        assert "alerts_batch" in " ".join(r[0] for r in plan)
