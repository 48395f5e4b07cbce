"""What a command that needs PostgreSQL or Kafka checks before it starts anything heavy (Spark):
that the DSN parses, that PostgreSQL answers, that the broker answers and holds the input topics.

Each check raises :class:`Unavailable` with one line for the operator (no password, no trace);
``exit_code`` is 2 for a value that can never work (a DSN that does not parse: the configuration
is wrong) and 1 for a server that does not answer now (docs/operations.md, "Exit status").
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

CONFIG, UNREACHABLE = 2, 1


class Unavailable(RuntimeError):
    """A dependency the command needs is misconfigured or unreachable; ``str`` is one line."""

    def __init__(self, message: str, exit_code: int = UNREACHABLE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def first_line(exc: BaseException) -> str:
    """An exception's message as one line (libpq and librdkafka messages span several)."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def where_pg(dsn: str) -> str:
    """host:port/dbname of a DSN, never its password."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(dsn)
    except Exception:
        return "(unparsable DSN)"
    host = info.get("host") or "localhost"
    port = info.get("port") or "5432"
    return f"{host}:{port}/{info.get('dbname') or info.get('user') or ''}"


def check_postgres(dsn: str, timeout_s: int = 5) -> None:
    """Raise `Unavailable` unless ``dsn`` parses and PostgreSQL answers a query within
    ``timeout_s``."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    if not dsn:
        raise Unavailable("postgres.dsn is empty: set REPLIMON_POSTGRES__DSN (or postgres.dsn in the "
                          "config file); `replimon db` starts a local PostgreSQL and prints the line",
                          CONFIG)
    try:
        conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        raise Unavailable(f"postgres.dsn is not a libpq connection string or URI: {first_line(exc)}",
                          CONFIG) from None
    try:
        with psycopg.connect(dsn, connect_timeout=timeout_s, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        raise Unavailable(f"cannot reach PostgreSQL at {where_pg(dsn)}: {first_line(exc)}") from None


def _kafka_reason(exc: BaseException) -> str:
    err: Any = exc.args[0] if exc.args else None
    return str(err.str()) if hasattr(err, "str") else first_line(exc)


def check_kafka(bootstrap: str, topics: Iterable[str], timeout_s: float = 10.0) -> None:
    """Raise `Unavailable` unless a broker of ``bootstrap`` answers within ``timeout_s`` and holds
    every topic of ``topics``. librdkafka's own connection log lines are kept off stderr (one
    line here says what is wrong)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    quiet = logging.getLogger("replimon.preflight.rdkafka")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    admin: Any = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout_s * 1000)},
                             logger=quiet)
    try:
        meta = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise Unavailable(f"cannot reach the Kafka broker at {bootstrap} (kafka.bootstrap_servers) "
                          f"within {timeout_s:g} s: {_kafka_reason(exc)}") from None
    missing = sorted(set(topics) - set(meta.topics))
    if missing:
        raise Unavailable(f"the broker at {bootstrap} has no topic {', '.join(missing)} "
                          "(create them, e.g. with `replimon broker`, or fix kafka.topics)")


def server_error(exc: Exception) -> str | None:
    """One line for a server that failed a command (PostgreSQL, Kafka), None for anything else
    (a bug: its traceback is worth having)."""
    module = type(exc).__module__
    if module.startswith("psycopg"):
        return f"PostgreSQL: {first_line(exc)}"
    if module.startswith("confluent_kafka") or module.startswith("cimpl"):
        return f"Kafka: {first_line(exc)}"
    return None
