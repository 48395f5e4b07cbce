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
