"""Shared fixtures: the embedded broker and PostgreSQL, started once per session on first use."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from replimon.embedded import EmbeddedBroker, EmbeddedPostgres

# A non-interactive shell starts a background job with SIGINT ignored, and a child process keeps an
# ignored signal ignored: the tests that stop replimon with Ctrl-C would then test nothing (and
# wait). Started that way, this process handles SIGINT as Python does by default, so the commands
# it starts get SIGINT as from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    """One Tansu broker for the session; tests isolate themselves with `topic_prefix`."""
    with EmbeddedBroker() as running:
        yield running


@pytest.fixture(scope="session")
def postgres() -> Iterator[EmbeddedPostgres]:
    """One PostgreSQL for the session, database ``replimon`` at ``postgres.dsn``."""
    with EmbeddedPostgres() as running:
        yield running


@pytest.fixture
def empty_database(postgres: EmbeddedPostgres) -> Iterator[str]:
    """A new database with replimon's migrations applied (so no other test's rows), dropped after."""
    import psycopg

    from replimon.store.schema import migrate

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    dsn = postgres.dsn.rsplit("/", 1)[0] + f"/{name}"
    migrate(dsn)
    yield dsn
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def topic_prefix() -> str:
    """A prefix unique to this test, so topic names never collide within a session broker."""
    return f"t-{uuid.uuid4().hex[:12]}-"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No REPLIMON_* variable from the caller's shell, and an empty working directory."""
    for key in list(os.environ):
        if key.upper().startswith("REPLIMON_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local SparkSession (local[2], RocksDB state store) for the session."""
    from replimon.streaming.session import get_session

    session = get_session()
    yield session
    session.stop()


@pytest.fixture(scope="session")
def e2e(spark: object, broker: EmbeddedBroker, postgres: EmbeddedPostgres,
        tmp_path_factory: pytest.TempPathFactory) -> object:
    """The end-to-end run (``tests/support/e2e.py``): every simulator fault through the real broker,
    Spark job and PostgreSQL, once per session for every test that reads its results."""
    from tests.support.e2e import run_e2e

    return run_e2e(spark, broker, postgres, tmp_path_factory.mktemp("e2e"))
