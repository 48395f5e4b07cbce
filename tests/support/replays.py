"""What the replay tests share (docs/replay.md): the published trace a replay is compared with,
and a run's alerts in a window as the comparison reads them."""

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
