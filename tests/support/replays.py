"""What the replay tests share (docs/replay.md): the published trace a replay is compared with,
a run's alerts in a window as the comparison reads them, and a family's window replayed from the
live run's checkpoint records with the rows the comparison reads."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg


@dataclass
class Base:
    settings: Any
    events: list[dict[str, Any]]
    start_ms: int
    run_id: str

    def at(self, seconds: int) -> int:
        return self.start_ms + seconds * 1000


def alert_rows(dsn: str, run_id: str, lo: int, hi: int) -> list[tuple[Any, ...]]:
    """A run's alerts with event times in [lo, hi): what must agree between runs."""
    with psycopg.connect(dsn) as conn:
        return sorted(conn.execute(
            "SELECT alert_id, status, group_id, kind, severity, instance, node, event_ts, message, evidence"
            " FROM alerts WHERE run_id = %s AND event_ts >= to_timestamp(%s / 1000.0)"
            " AND event_ts < to_timestamp(%s / 1000.0)", (run_id, lo, hi)).fetchall(), key=str)


def live_run(spark: Any, settings: Any, events: list[dict[str, Any]], tmp: Path) -> Base:
    """``events`` published and run through the job once as the live run would see them: many
    micro-batches, so checkpoint records end at offsets before a later window."""
    from replimon.streaming.processor import REPLAY
    from replimon.streaming.runner import start_query
    from replimon.streaming.sinks.postgres import PostgresSink
    from tests.support import publish

    publish(settings, events)
    run_id = f"base-{uuid.uuid4().hex[:8]}"
    pg = PostgresSink(settings.postgres.dsn, run_id=run_id)
    query = start_query(spark, settings, run_id=run_id, time_mode=REPLAY, available_now=True, pg=pg,
                        max_offsets=len(events) // 12, checkpoint=tmp / "base-ckpt")
    query.awaitTermination(600)
    assert query.exception() is None, query.exception()
    pg.close()
    return Base(settings, events, min(e["ts_ms"] for e in events), run_id)


def simulated_base(spark: Any, settings: Any, sim: Any, faults: tuple[str, ...], seconds: int, tmp: Path, *,
                   groups: int = 3, seed: int = 5) -> Base:
    """A fleet of ``sim``'s family (a simulator package: ``Simulator``, ``SimOptions``,
    ``parse_injection``) with ``faults``, published and run through the job as live."""
    events: list[dict[str, Any]] = []
    sim.Simulator(sim.SimOptions(duration_ms=seconds * 1000, groups=groups, seed=seed),
                  [sim.parse_injection(f) for f in faults], events.append).run()
    events.sort(key=lambda e: e["ts_ms"])
    return live_run(spark, settings, events, tmp)


@dataclass
class Window:
    """A window replayed from the live run's checkpoint records: the live run's alerts in it
    (``want``), the replay's (``got``), the replay's groups as (group, family, version from
    config, active_start, pending), its timeline's (distinct config_version count, points without
    one), and its INCOMPLETE_HISTORY count."""

    want: list[tuple[Any, ...]]
    got: list[tuple[Any, ...]]
    groups: list[tuple[Any, ...]]
    steps: tuple[Any, ...] | None
    incomplete: tuple[Any, ...] | None


def replayed_window(spark: Any, base: Base, from_s: int, to_s: int, version_key: str) -> Window:
    """``[from_s, to_s)`` of ``base``'s trace replayed from its checkpoint records
    (``version_key``: the config field that is the family's configuration version)."""
    from replimon.streaming.replay import replay

    lo, hi = base.at(from_s), base.at(to_s)
    run = replay(base.settings, lo, hi, spark=spark, checkpoints_of=base.run_id).run_id
    dsn = base.settings.postgres.dsn
    with psycopg.connect(dsn) as conn:
        groups = conn.execute(
            "SELECT group_id, family, (config->>%s)::bigint, active_start, pending"
            " FROM group_state WHERE run_id = %s ORDER BY group_id", (version_key, run)).fetchall()
        steps = conn.execute(
            "SELECT count(DISTINCT config_version), count(*) FILTER (WHERE config_version IS NULL)"
            " FROM group_timeseries WHERE run_id = %s", (run,)).fetchone()
        incomplete = conn.execute("SELECT count(*) FROM alerts WHERE run_id = %s AND kind = 'INCOMPLETE_HISTORY'",
                                  (run,)).fetchone()
    return Window(alert_rows(dsn, base.run_id, lo, hi), alert_rows(dsn, run, lo, hi), groups, steps, incomplete)
