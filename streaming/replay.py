"""Running a replay: the monitoring job over a planned window (``replimon.replay``),
``availableNow``, event time, a fresh checkpoint and a new run id, into PostgreSQL only (rows keyed
by the run id, so nothing live is touched; no Kafka output), with a ``replay_runs`` row that
records how to reproduce it. Each group starts from its checkpoint record, if it has one, as the
stateful operator's initial state (docs/replay.md)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from replimon.kafka import offsets_to_json
from replimon.replay.run import ReplayResult, new_run_id, plan
from replimon.replay.window import StartState
from replimon.streaming.rows import INITIAL_SCHEMA, bucket_of


def initial_rows(start: StartState, buckets: int) -> list[tuple[int, str, str, str]]:
    """(bucket, group, state, floors) rows for the stateful operator's initial state: the
    checkpoint record each group starts from, with the offsets it already holds."""
    return [(bucket_of(g, buckets), g, cp.state, json.dumps(offsets_to_json(cp.offsets), separators=(",", ":")))
            for g, cp in sorted(start.checkpoints.items())]


def replay(settings: Any, from_ms: int, to_ms: int, *, groups: Sequence[str] | None = None,
           state_from: str = "checkpoint", run_id: str | None = None, api: str = "pandas",
           command: Sequence[str] | None = None, spark: Any = None,
           progress: Callable[[int, int], None] | None = None,
           stop: threading.Event | None = None, checkpoints_of: str | None = "live") -> ReplayResult:
    """Replay ``[from_ms, to_ms)``; returns when the window is done (the query ends by itself).
    ``progress(read, total)`` is called as micro-batches complete."""
    from replimon.store.reads import RunReader
    from replimon.store.schema import migrate
    from replimon.streaming.processor import REPLAY
    from replimon.streaming.runner import start_query
    from replimon.streaming.session import get_session
    from replimon.streaming.sinks.postgres import PostgresSink

    window, start = plan(settings, from_ms, to_ms, groups=groups, state_from=state_from,
                         checkpoints_of=checkpoints_of)
    run_id = run_id or new_run_id()
    total = sum(window.until[tp] - start.starting[tp] for tp in window.until)
    params = {
        "command": list(command or []), "from_ms": from_ms, "to_ms": to_ms,
        "groups": sorted(groups) if groups else None, "state_from": state_from,
        "starting_offsets": offsets_to_json(start.starting), "ending_offsets": offsets_to_json(window.until),
        "window_offsets": offsets_to_json(window.start),
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
    rows = initial_rows(start, settings.streaming.state_buckets)
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
            starting=json.dumps(offsets_to_json(start.starting)),
            ending=json.dumps(offsets_to_json(window.until)), available_now=True, pg=pg,
            kafka_out=False, window_start_ms=from_ms - skew_ms,
            initial=initial, floors=offsets_to_json(start.floors) if start.floors else None,
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
        result.alerts = RunReader(settings.postgres.dsn, run_id).alert_count() if status == "done" else 0
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
