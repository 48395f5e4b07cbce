"""Run the job: ``replimon run`` (live, against any Kafka and PostgreSQL from the config) and the
embedded demo. Starts Spark, applies the PostgreSQL migrations, starts the query and stops it
cleanly on Ctrl-C / SIGTERM (the checkpoint then resumes exactly where it stopped)."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from replimon.kafka import offsets_total
from replimon.streaming.bucket_state import legacy_in, pinned_buckets
from replimon.streaming.checkpoint import Checkpoint
from replimon.streaming.job import QUERY_NAME, build, read_source
from replimon.streaming.processor import LIVE, REPLAY
from replimon.streaming.sinks.base import BatchResult, Sink
from replimon.streaming.writer import BatchWriter

log = logging.getLogger("replimon.run")


def consumer_lag(progress: Any) -> int | None:
    """Records on the input topics the query had not read at the end of a micro-batch: the
    source's latest offsets (``reportLatestOffset``) minus the batch's end offsets."""
    lag = None
    for source in progress.sources:
        latest, end = offsets_total(source.latestOffset), offsets_total(source.endOffset)
        if latest is not None and end is not None:
            lag = (lag or 0) + max(0, latest - end)
    return lag


class MetricsListener:
    """Writes each micro-batch's progress (duration, rows, rates, trigger, consumer lag) to
    ``pipeline_metrics``."""

    def __init__(self, sink: Any, trigger_ms: int | None = None, query_name: str | None = None) -> None:
        self.sink = sink
        self.trigger_ms = trigger_ms
        self.query_name = query_name  # only this query's progress (a session may run several)

    def make(self) -> Any:
        from pyspark.sql.streaming import StreamingQueryListener

        sink = self.sink
        trigger_ms = self.trigger_ms
        name = self.query_name
        failing: list[bool] = []

        class _Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:  # noqa: N802
                pass

            def onQueryProgress(self, event: Any) -> None:  # noqa: N802
                p = event.progress
                if name is not None and p.name != name:
                    return
                try:
                    sink.write_metrics(
                        int(p.batchId), duration_ms=int(p.batchDuration), input_rows=int(p.numInputRows),
                        input_rows_per_s=float(p.inputRowsPerSecond or 0.0),
                        processed_rows_per_s=float(p.processedRowsPerSecond or 0.0),
                        trigger_ms=trigger_ms, lag_records=consumer_lag(p))
                    failing[:] = []
                except Exception as exc:  # metrics must never stop the job
                    if not failing:  # once per outage: the batch sink says when PostgreSQL is back
                        log.warning("could not write pipeline metrics: %s", " ".join(str(exc).split())[:160])
                    failing[:] = [True]

            def onQueryIdle(self, event: Any) -> None:  # noqa: N802
                pass

            def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
                pass

        return _Listener()


def checkpoint_buckets(spark: Any, settings: Any, checkpoint: str) -> Any:
    """``settings`` with the checkpoint's state bucket count, when it has one that differs (a
    checkpoint started before the default changed, or under another setting): said once as a
    warning, and the query resumes instead of failing on its first batch."""
    pinned = pinned_buckets(spark, checkpoint)
    wanted = settings.streaming.state_buckets
    if pinned is None or pinned == wanted:
        return settings
    log.warning("streaming.state_buckets is %s but the checkpoint %s was started with %s: using %s "
                   "(pinned in the checkpoint; a new checkpoint takes the setting)", wanted, checkpoint,
                   pinned, pinned)
    return settings.model_copy(update={"streaming": settings.streaming.model_copy(update={"state_buckets": pinned})})


def start_query(spark: Any, settings: Any, *, run_id: str = "live", time_mode: str = LIVE,
                checkpoint: str | Path | None = None, api: str = "pandas", starting: str = "earliest",
                ending: str | None = None, trigger_s: float | None = None, available_now: bool = False,
                observers: list[Callable[[BatchResult], None]] | None = None, pg: Any = None,
                kafka_out: bool = True, max_offsets: int | None = None,
                metrics_listener: bool = True, window_start_ms: int | None = None,
                **build_options: Any) -> Any:
    """Build and start the monitoring query; returns the StreamingQuery. With ``pg`` (and
    ``metrics_listener``) each micro-batch's progress also goes to ``pipeline_metrics``.
    ``build_options`` go to ``build`` (a replay's initial state, floors, groups), and
    ``window_start_ms`` to the writer."""
    ckpt = Path(checkpoint) if checkpoint else Path(settings.paths.checkpoint_dir) / run_id
    settings = checkpoint_buckets(spark, settings, str(ckpt))
    raw = read_source(spark, settings, starting=starting, ending=ending, max_offsets=max_offsets)
    # A checkpoint of the state's shape before is migrated as its buckets are read (bucket_state.py).
    out = build(spark, raw, settings, time_mode=time_mode, api=api,
                migrate_from=legacy_in(spark, str(ckpt)), **build_options)
    writer = make_writer(settings, run_id, Checkpoint(str(ckpt)), pg=pg, kafka_out=kafka_out,
                         observers=observers or (), window_start_ms=window_start_ms,
                         live=time_mode == LIVE)
    ckpt.mkdir(parents=True, exist_ok=True)
    name = f"{QUERY_NAME}_{run_id}".replace("-", "_")
    if pg is not None and metrics_listener:
        trigger_ms = None if available_now else int((trigger_s or settings.streaming.trigger_interval_s) * 1000)
        spark.streams.addListener(MetricsListener(pg, trigger_ms, name).make())
    stream = (out.writeStream.queryName(name)
              .option("checkpointLocation", str(ckpt)).foreachBatch(writer))
    if available_now:
        stream = stream.trigger(availableNow=True)
    else:
        stream = stream.trigger(processingTime=f"{trigger_s or settings.streaming.trigger_interval_s} seconds")
    return stream.start()


def make_writer(settings: Any, run_id: str, checkpoint: Checkpoint | None, *, pg: Any = None,
                kafka_out: bool = True, observers: Any = (), window_start_ms: int | None = None,
                live: bool | None = None) -> BatchWriter:
    """The ``foreachBatch`` writer with its sinks, in order: Kafka (``kafka_out``), PostgreSQL
    (``pg``: a ``PostgresSink``; also the exactly-once guard), data quality (when the settings
    turn it on and there is a PostgreSQL database for its results). ``checkpoint``: the query's
    (None: no offset log to read, as in tests that drive the writer by hand). ``live``: the query
    runs in live mode (False: a replay), recorded on each batch's metrics row, and validated off
    the batch's path (``sinks/quality.py``)."""
    from replimon.streaming.sinks.kafka import KafkaSink
    from replimon.streaming.sinks.postgres import PostgresBatchSink

    sinks: list[Sink] = []
    kafka = None
    if kafka_out:
        kafka = KafkaSink(settings, run_id, checkpoint.end_offsets if checkpoint else None)
        sinks.append(kafka)
    guard = None
    if pg is not None:
        from replimon.streaming.sinks.backlog import Backlog

        guard = PostgresBatchSink(pg, checkpoint.stream_id if checkpoint else None,
                                  backlog=Backlog.at(checkpoint.location if checkpoint else None), live=live)
        sinks.append(guard)
        from replimon.streaming.sinks.quality import QualitySink

        if QualitySink.wanted(settings) and isinstance(getattr(pg, "dsn", None), str):
            # Live, it validates off the batch's path with a Kafka producer of its own (the
            # batch's sink flushes and may replace its producer meanwhile; sinks/quality.py).
            own_kafka = KafkaSink(settings, run_id, None) if kafka is not None and live is True else kafka
            sinks.append(QualitySink(settings, run_id, pg.dsn, lambda: pg.pipeline, kafka=own_kafka,
                                     end_offsets=checkpoint.end_offsets if checkpoint else None,
                                     window_start_ms=window_start_ms, background=live is True))
    return BatchWriter(sinks, guard=guard, observers=observers, window_start_ms=window_start_ms,
                       records_in=checkpoint.records_in if checkpoint else None)


INTERRUPTED = 130  # the shell's status for a process stopped by SIGINT (Ctrl-C)


def run(settings: Any, *, run_id: str = "live", replay: bool = False, api: str = "pandas",
        starting: str = "earliest", checkpoint: str | None = None,
        observers: list[Callable[[BatchResult], None]] | None = None,
        stop_event: threading.Event | None = None) -> int:
    """Run until stopped (live) or until the input is consumed (replay).

    Returns 0 after the input was consumed (replay) or a stop by SIGTERM or ``stop_event``, and
    130 after Ctrl-C (SIGINT); either way the running micro-batch is let finish first, so the
    checkpoint and PostgreSQL agree and a restart resumes where this run stopped. A second Ctrl-C
    stops at once (KeyboardInterrupt). Raises RuntimeError (one line) when the query failed.
    The session is stopped before returning (docs/operations.md, "Stopping")."""
    from replimon.store.schema import migrate
    from replimon.streaming.session import get_session
    from replimon.streaming.sinks.postgres import PostgresSink

    applied = migrate(settings.postgres.dsn)
    if applied:
        log.info("applied PostgreSQL migrations %s", applied)
    spark = get_session(settings.streaming.master, settings.streaming.shuffle_partitions,
                        **settings.streaming.spark_conf)
    try:
        sc = spark.sparkContext
        log.info("Spark %s, master %s, application %s", spark.version, sc.master, sc.applicationId)
        pg = PostgresSink(settings.postgres.dsn, run_id=run_id)
        try:
            query = start_query(spark, settings, run_id=run_id, time_mode=REPLAY if replay else LIVE,
                                checkpoint=checkpoint, api=api, starting=starting, available_now=replay,
                                observers=observers, pg=pg)
            return _wait(query, stop_event or threading.Event())
        finally:
            pg.close()
    finally:
        spark.stop()


def _wait(query: Any, stop: threading.Event) -> int:
    """Wait for the query to end or for a stop request; stop it between micro-batches."""
    signals: list[int] = []
    previous: dict[int, Any] = {}

    def request(signum: int, _frame: Any) -> None:
        signals.append(signum)
        stop.set()
        # The next Ctrl-C is the impatient one: Python's default (KeyboardInterrupt) again.
        signal.signal(signal.SIGINT, signal.default_int_handler)

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, request)
    try:
        while query.isActive and not stop.is_set():
            time.sleep(0.2)
        if query.isActive:
            log.info("stopping: waiting for the running micro-batch to finish (Ctrl-C again stops now)")
            _stop_between_batches(query)
        query.awaitTermination(60)
        exc = query.exception()
        if exc is not None:
            # The JVM's message is the whole trace; its first line says what failed.
            raise RuntimeError(f"the streaming query failed: {str(exc).strip().splitlines()[0]}")
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    log.info("stopped")
    return INTERRUPTED if signal.SIGINT in signals else 0


def _stop_between_batches(query: Any, patience_s: float = 15.0) -> None:
    """``query.stop()`` interrupts the micro-batch thread; inside a ``foreachBatch`` call that
    shows up as a Py4J InterruptedException and a trace. Wait (up to ``patience_s``: a job behind
    its trigger starts the next batch at once, so there may be no gap) until no trigger is
    active, then stop."""
    deadline = time.monotonic() + patience_s
    while query.isActive and time.monotonic() < deadline:
        try:
            status = query.status
        except Exception:  # the query ended meanwhile
            break
        if not status.get("isTriggerActive", False) or status.get("message", "").startswith("Waiting"):
            break
        time.sleep(0.05)
    if query.isActive:
        query.stop()
