"""Running a replay over a planned window (``replimon.replay``), under a new run id, into
PostgreSQL only (rows keyed by the run id, so nothing live is touched; no Kafka output), with a
``replay_runs`` row that records how to reproduce it. Each group starts from its checkpoint
record, if it has one (docs/replay.md).

Two engines, the same rows: ``batch`` (the default), a bounded Spark batch job over the offset
range, one task per partition number, running the decode stage and the stateful processor's
logic in memory (``replay_batch.py``); ``stream``, the monitoring query itself (``availableNow``,
event time, a fresh checkpoint, the checkpoint records as the stateful operator's initial
state)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from replimon.kafka import offsets_to_json
from replimon.replay.run import ReplayResult, new_run_id, plan
from replimon.replay.window import StartState
from replimon.streaming.rows import INITIAL_SCHEMA, bucket_of

log = logging.getLogger("replimon.replay")


def initial_rows(start: StartState, buckets: int) -> list[tuple[int, str, str, str]]:
    """(bucket, group, state, floors) rows for the stateful operator's initial state: the
    checkpoint record each group starts from, with the offsets it already holds."""
    return [(bucket_of(g, buckets), g, cp.state, json.dumps(offsets_to_json(cp.offsets), separators=(",", ":")))
            for g, cp in sorted(start.checkpoints.items())]


def replay(settings: Any, from_ms: int, to_ms: int, *, groups: Sequence[str] | None = None,
           state_from: str = "checkpoint", run_id: str | None = None, api: str = "pandas",
           command: Sequence[str] | None = None, spark: Any = None,
           progress: Callable[[int, int], None] | None = None,
           stop: threading.Event | None = None, checkpoints_of: str | None = "live",
           engine: str = "batch", snapshot_ms: int | None = None) -> ReplayResult:
    """Replay ``[from_ms, to_ms)``; returns when the window is done.

    ``engine``: ``batch`` (the default: a bounded Spark batch job, one task per partition number,
    ``replay_batch.py``; it falls back to ``stream`` for a topic layout it cannot split) or
    ``stream`` (the monitoring query itself, ``availableNow``; ``api`` is its transformWithState
    API). ``progress(read, total)`` is called as micro-batches complete (``batch``: at the end).
    ``snapshot_ms``: the batch engine's event time between a group's snapshots along the window."""
    from replimon.store.reads import RunReader
    from replimon.store.schema import migrate
    from replimon.streaming.processor import REPLAY
    from replimon.streaming.runner import start_query
    from replimon.streaming.session import get_session
    from replimon.streaming.sinks.postgres import PostgresSink

    if engine not in ("batch", "stream"):
        raise ValueError(f"engine must be batch or stream (got {engine!r})")
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
    checkpoint = Path(settings.paths.checkpoint_dir) / "replays" / run_id
    # Records are in publishing order, not event-time order: the window's first records (the first
    # at or after --from by timestamp) are followed by a few up to the skew older. What events
    # from before the window produce is left out; what those produce is kept.
    skew_ms = int(settings.thresholds.skew_s * 1000)
    started = time.monotonic()
    status = "failed"
    params["engine"] = engine
    try:
        if engine == "batch":
            from replimon.streaming.replay_batch import SplitGroups

            try:
                _run_batch(spark, settings, result, pg, window_start_ms=from_ms - skew_ms, groups=groups,
                           snapshot_ms=snapshot_ms)
                status = "done"
                if progress:
                    progress(result.records_read, total)
                return result
            except SplitGroups as split:
                log.warning("replay: %s; running it as a streaming query instead", split)
                params["engine"] = "stream"
                result.records_read = 0
        initial = None
        rows = initial_rows(start, settings.streaming.state_buckets)
        if rows:
            initial = spark.createDataFrame(rows, INITIAL_SCHEMA)
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


def _run_batch(spark: Any, settings: Any, result: ReplayResult, pg: Any, *, window_start_ms: int,
               groups: Sequence[str] | None, snapshot_ms: int | None) -> None:
    """The replay as a bounded batch job (``replay_batch.py``), written through the writer's sinks
    (PostgreSQL under the run id, data quality), one writer batch per task and one for the final
    timers. Nothing is written before every task is done (a SplitGroups leaves no row)."""
    from replimon.core.limits import Limits
    from replimon.streaming import replay_batch as rb
    from replimon.streaming.runner import make_writer
    from replimon.streaming.writer import batch_result

    start = result.start
    limits = Limits.from_settings(settings)
    job = rb.Job(
        bootstrap=settings.kafka.bootstrap_servers, topic_types=dict(settings.kafka.topics.input_families),
        buckets=settings.streaming.state_buckets, limits=limits,
        floors=json.dumps(offsets_to_json(start.floors), separators=(",", ":")) if start.floors else "",
        pins=tuple(settings.family_pins), only=frozenset(groups) if groups else None,
        snapshot_ms=rb.DEFAULT_SNAPSHOT_MS if snapshot_ms is None else snapshot_ms, since=window_start_ms,
        initial={g: (cp.state, json.dumps(offsets_to_json(cp.offsets), separators=(",", ":")))
                 for g, cp in start.checkpoints.items()})
    spans = rb.tasks(start.starting, result.window.until)
    clock = time.monotonic()
    outs, final, now = rb.run(spark, job, spans)
    ran = time.monotonic()
    result.records_read = sum(o.records for o in outs)
    pg.pipeline = rb.pipeline_name()
    writer = make_writer(settings, result.run_id, None, pg=pg, kafka_out=False, window_start_ms=window_start_ms)
    for batch_id, rows in enumerate(rb.output_order(outs, final)):
        batch = batch_result(batch_id, rows, window_start_ms)
        for sink in writer.sinks:
            sink.write(batch)
    # Where the time went (bench/replay.py): the Spark job (tasks and the final timers) and the
    # writes; per task, reading, decoding and the monitor.
    result.params.update(tasks=len(spans), watermark_ms=now, seconds={
        "spark": round(ran - clock, 3), "write": round(time.monotonic() - ran, 3),
        "tasks": [{"records": o.records, **{k: round(v, 3) for k, v in o.seconds.items()}} for o in outs]})


def _read_so_far(query: Any, seen: set[int], read: int) -> int:
    for p in query.recentProgress:
        batch = int(p["batchId"])
        if batch not in seen:
            seen.add(batch)
            read += int(p["numInputRows"])
    return read
