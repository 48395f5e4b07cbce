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
