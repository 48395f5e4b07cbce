"""Shared fixtures: the embedded broker and PostgreSQL, started once per session on first use."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from replimon.embedded import EmbeddedBroker, EmbeddedPostgres


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
def topic_prefix() -> str:
    """A prefix unique to this test, so topic names never collide within a session broker."""
    return f"t-{uuid.uuid4().hex[:12]}-"
