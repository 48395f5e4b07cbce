"""The store's tests share the session PostgreSQL, migrated; each test writes under run ids of
its own, so tests never see each other's rows."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from replimon.embedded import EmbeddedPostgres
from replimon.store.schema import migrate
from tests.support.outputs import monitor_outputs


@pytest.fixture(scope="module")
def dsn(postgres: EmbeddedPostgres) -> str:
    migrate(postgres.dsn)
    return postgres.dsn


@pytest.fixture(scope="module")
def outputs() -> dict[str, Any]:
    return monitor_outputs()


@pytest.fixture
def new_run() -> Callable[[], str]:
    """A fresh run id each call."""
    return lambda: f"store-{uuid.uuid4().hex[:12]}"
