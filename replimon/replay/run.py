"""Running a replay: the monitoring job over a planned window (``window.py``), ``availableNow``,
event time, a fresh checkpoint and a new run id, into PostgreSQL only (rows keyed by the run id,
so nothing live is touched; no Kafka output), with a ``replay_runs`` row that records how to
reproduce it. ``replimon replay`` is the command line for this."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from replimon.kafka import offsets_to_json as to_json_offsets
from replimon.replay.window import (
    ReplayError,
    StartState,
    Window,
    choose_start,
    plan_window,
    read_checkpoints,
)

log = logging.getLogger("replimon.replay")

INITIAL_SCHEMA = "bucket int, group string, state string, floors string"


def new_run_id(now: datetime | None = None) -> str:
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S")
    return f"replay-{stamp}-{uuid.uuid4().hex[:6]}"


@dataclass
class ReplayResult:
    run_id: str
    window: Window
    start: StartState
    records_total: int  # records between the starting and the ending offsets
    records_read: int = 0
    alerts: int = 0
    seconds: float = 0.0
    params: dict[str, Any] = field(default_factory=dict)


def input_topics(settings: Any) -> list[str]:
    t = settings.kafka.topics
    return [t.decisions, t.executions, t.heartbeats, t.config]


def plan(settings: Any, from_ms: int, to_ms: int, *, groups: Sequence[str] | None = None,
         state_from: str = "checkpoint", checkpoints_of: str | None = "live") -> tuple[Window, StartState]:
    """The window's offsets and the state the replay starts from (``checkpoints_of``: the run
    whose checkpoint records count, the live job's by default; None: any)."""
    bootstrap = settings.kafka.bootstrap_servers
    window = plan_window(bootstrap, input_topics(settings), from_ms, to_ms)
    only = frozenset(groups) if groups else None
    checkpoints = read_checkpoints(bootstrap, settings.kafka.topics.state) if state_from == "checkpoint" else []
    return window, choose_start(window, checkpoints, only, state_from, checkpoints_of)


def replay(settings: Any, from_ms: int, to_ms: int, *, groups: Sequence[str] | None = None,
           state_from: str = "checkpoint", run_id: str | None = None, api: str = "pandas",
           command: Sequence[str] | None = None, spark: Any = None,
           progress: Callable[[int, int], None] | None = None,
           stop: threading.Event | None = None, checkpoints_of: str | None = "live") -> ReplayResult:
    """Replay ``[from_ms, to_ms)``; returns when the window is done (the query ends by itself).
    ``progress(read, total)`` is called as micro-batches complete."""
    from replimon.streaming.processor import REPLAY
    from replimon.streaming.runner import start_query
    from replimon.streaming.session import get_session
    from replimon.streaming.sinks.postgres import PostgresSink, migrate

    window, start = plan(settings, from_ms, to_ms, groups=groups, state_from=state_from,
                         checkpoints_of=checkpoints_of)
    run_id = run_id or new_run_id()
    total = sum(window.until[tp] - start.starting[tp] for tp in window.until)
    params = {
        "command": list(command or []), "from_ms": from_ms, "to_ms": to_ms,
        "groups": sorted(groups) if groups else None, "state_from": state_from,
        "starting_offsets": to_json_offsets(start.starting), "ending_offsets": to_json_offsets(window.until),
        "window_offsets": to_json_offsets(window.start),
        "checkpoints": {g: {"clock_ms": cp.clock_ms, "run_id": cp.run_id, "batch_id": cp.batch_id}
                        for g, cp in sorted(start.checkpoints.items())},
        "records": total, "bootstrap_servers": settings.kafka.bootstrap_servers,
    }
    result = ReplayResult(run_id, window, start, total, params=params)
    migrate(settings.postgres.dsn)
    pg = PostgresSink(settings.postgres.dsn, run_id=run_id, migrate_schema=False)
    pg.record_run(params, "running")
    spark = spark or get_session(settings.streaming.master, settings.streaming.shuffle_partitions,
                                 **settings.streaming.spark_conf)
    initial = None
    rows = start.initial_rows(settings.streaming.state_buckets)
    if rows:
        initial = spark.createDataFrame(rows, INITIAL_SCHEMA)
    checkpoint = Path(settings.paths.checkpoint_dir) / "replays" / run_id
    # Records are in publishing order, not event-time order: the window's first records (the first
    # at or after --from by timestamp) are followed by a few up to the skew older. What events
    # from before the window produce is left out; what those produce is kept.
    skew_ms = int(settings.thresholds.skew_s * 1000)
    started = time.monotonic()
    status = "failed"
    try:
        query = start_query(
            spark, settings, run_id=run_id, time_mode=REPLAY, checkpoint=checkpoint, api=api,
            starting=json.dumps(to_json_offsets(start.starting)),
            ending=json.dumps(to_json_offsets(window.until)), available_now=True, pg=pg,
            kafka_out=False, window_start_ms=from_ms - skew_ms,
            initial=initial, floors=to_json_offsets(start.floors) if start.floors else None,
            only_groups=frozenset(groups) if groups else None)
        seen: set[int] = set()
        while query.isActive and not (stop and stop.is_set()):
            time.sleep(0.3)
            result.records_read = _read_so_far(query, seen, result.records_read)
            if progress:
                progress(result.records_read, total)
        if query.isActive:
            query.stop()
        query.awaitTermination(60)
        result.records_read = _read_so_far(query, seen, result.records_read)
        if progress:
            progress(result.records_read, total)
        exc = query.exception()
        if exc is not None:
            raise RuntimeError(f"the replay's query failed: {exc}")
        status = "stopped" if stop and stop.is_set() else "done"
    finally:
        result.seconds = time.monotonic() - started
        result.alerts = pg.alert_count() if status == "done" else 0
        params["records_read"] = result.records_read
        pg.record_run(params, status)
        pg.close()
    return result


def _read_so_far(query: Any, seen: set[int], read: int) -> int:
    for p in query.recentProgress:
        batch = int(p["batchId"])
        if batch not in seen:
            seen.add(batch)
            read += int(p["numInputRows"])
    return read


__all__ = ["ReplayError", "ReplayResult", "new_run_id", "plan", "replay"]
