"""The PostgreSQL schema: replimon's versioned migrations and `migrate`, which applies them.

The schema is the SQL files ``replimon/store/migrations/NNN_name.sql`` (package data, shipped in
the wheel). `migrate` applies those whose version is not yet in ``schema_migrations``, all in one
transaction under an advisory lock, so processes starting together apply each migration exactly
once and a failing migration leaves the schema as it was. A shipped migration's statements never
change (a version is applied once, so a changed statement would not run where the old one had);
a change of schema is a new file with the next number (docs/postgres.md "Migrations").
"""

from __future__ import annotations

import re
from importlib import resources

import psycopg

# pg_advisory_xact_lock key of the migrations: any constant shared by all replimon processes.
MIGRATION_LOCK = 0x7265706C696D6F6E  # b"replimon"
_MIGRATION_FILE = re.compile(r"^(\d+)_(\w+)\.sql$")


def migrations() -> list[tuple[int, str, str]]:
    """The shipped migrations as (version, name, sql), by version."""
    out = []
    for entry in resources.files("replimon.store").joinpath("migrations").iterdir():
        match = _MIGRATION_FILE.match(entry.name)
        if match:
            out.append((int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    out.sort()
    versions = [v for v, _, _ in out]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"duplicate migration versions: {versions}")
    return out


def migrate(dsn: str) -> list[int]:
    """Apply the pending migrations; return the versions applied now (empty: schema up to date).

    Idempotent and safe to run from many processes at once: everything happens in one
    transaction holding ``pg_advisory_xact_lock(MIGRATION_LOCK)``; a failing migration rolls back
    all of this call's migrations.
    """
    applied: list[int] = []
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())")
        done = {v for (v,) in conn.execute("SELECT version FROM schema_migrations")}
        for version, name, sql in migrations():
            if version in done:
                continue
            # No parameters: psycopg sends the file as one simple query (many statements).
            conn.execute(sql.encode())
            conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                         (version, name))
            applied.append(version)
    return applied
