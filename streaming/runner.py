"""Run the job: ``replimon run`` (live, against any Kafka and PostgreSQL from the config) and the
embedded demo. Starts Spark, applies the PostgreSQL migrations, starts the query and stops it
cleanly on Ctrl-C / SIGTERM (the checkpoint then resumes exactly where it stopped)."""

from __future__ import annotations

import logging
import re
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
                stop: threading.Event | None = None, **build_options: Any) -> Any:
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
                         live=time_mode == LIVE, stop=stop)
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
                live: bool | None = None, stop: threading.Event | None = None) -> BatchWriter:
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
        kafka = KafkaSink(settings, run_id, checkpoint.end_offsets if checkpoint else None, stop=stop)
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
            own_kafka = KafkaSink(settings, run_id, None, stop=stop) if kafka is not None and live is True else kafka
            sinks.append(QualitySink(settings, run_id, pg.dsn, lambda: pg.pipeline, kafka=own_kafka,
                                     end_offsets=checkpoint.end_offsets if checkpoint else None,
                                     window_start_ms=window_start_ms, background=live is True,
                                     paused=lambda: guard.down if guard is not None else False))
    return BatchWriter(sinks, guard=guard, observers=observers, window_start_ms=window_start_ms,
                       records_in=checkpoint.records_in if checkpoint else None)


INTERRUPTED = 130  # the shell's status for a process stopped by SIGINT (Ctrl-C)
FAILED = 1  # the query failed (docs/operations.md, "Exit status")


def _gateway_up() -> bool:
    """Whether this process talks to a JVM (Py4J calls may be under way)."""
    from pyspark import SparkContext

    return SparkContext._gateway is not None


class StopRequested(BaseException):
    """Ctrl-C or SIGTERM while the job was starting (before its query ran): everything it had
    started is stopped; ``code`` is the exit status (130 after Ctrl-C, 0 after SIGTERM)."""

    def __init__(self, code: int) -> None:
        super().__init__("stopped while starting")
        self.code = code


class QueryFailed(RuntimeError):
    """The streaming query failed. ``str``: one line with the first cause; ``trace``: the whole
    text Spark gave (the log file's, docs/operations.md "Exit status")."""

    def __init__(self, line: str, trace: str) -> None:
        super().__init__(line)
        self.trace = trace


class Signals:
    """SIGINT and SIGTERM for the job's life (main thread only). While ``starting`` a signal
    raises `StopRequested` at once (nothing of the query runs yet: what started is stopped on the
    way out, the JVM included); after, it sets ``stop`` and the running micro-batch is let finish
    (``_wait``). A second Ctrl-C stops at once (KeyboardInterrupt)."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.received: list[int] = []
        self.starting = True
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Signals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._request)
        return self

    def __exit__(self, *_exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _request(self, signum: int, _frame: Any) -> None:
        self.received.append(signum)
        self.stop.set()
        if self.starting and not _gateway_up():
            # Before the JVM answers, nothing but Python waits: raise (the JVM being launched is
            # stopped on the way out). Once it answers, a raise inside a Py4J call leaves Py4J's
            # traces: the flag is checked when the session is up instead.
            raise StopRequested(self.code)
        # The next Ctrl-C is the impatient one: Python's default (KeyboardInterrupt) again.
        signal.signal(signal.SIGINT, signal.default_int_handler)

    @property
    def code(self) -> int:
        return INTERRUPTED if signal.SIGINT in self.received else 0


def run(settings: Any, *, run_id: str = "live", replay: bool = False, api: str = "pandas",
        starting: str = "earliest", checkpoint: str | None = None,
        observers: list[Callable[[BatchResult], None]] | None = None,
        stop_event: threading.Event | None = None) -> int:
    """Run until stopped (live) or until the input is consumed (replay).

    Returns 0 after the input was consumed (replay) or a stop by SIGTERM or ``stop_event``, and
    130 after Ctrl-C (SIGINT); either way the running micro-batch is let finish first, so the
    checkpoint and PostgreSQL agree and a restart resumes where this run stopped. A signal while
    the job starts raises `StopRequested` after stopping what had started; a second Ctrl-C stops
    at once (KeyboardInterrupt). Raises `QueryFailed` (one line) when the query failed.
    PostgreSQL may be down: the job starts without it (its rows wait in the backlog, the
    migrations are applied when it answers). The session and the JVM are stopped before this
    returns or raises (docs/operations.md, "Stopping")."""
    from replimon.streaming.session import get_session
    from replimon.streaming.sinks.postgres import OUTAGE, PostgresSink

    stop = stop_event or threading.Event()
    with Signals(stop) as signals:
        spark = None
        try:
            pg = PostgresSink(settings.postgres.dsn, run_id=run_id, migrate_schema=False, migrate_on_connect=True)
            try:
                pg.migrate()
            except OUTAGE as exc:
                log.warning("PostgreSQL: cannot reach it at start (%s); the job starts without it: alerts "
                            "go to Kafka, the tables' rows wait in a backlog until it answers",
                            " ".join(str(exc).split())[:160])
            spark = get_session(settings.streaming.master, settings.streaming.shuffle_partitions,
                                **settings.streaming.spark_conf)
            if stop.is_set():  # a signal while the session started
                raise StopRequested(signals.code)
            sc = spark.sparkContext
            log.info("Spark %s, master %s, application %s", spark.version, sc.master, sc.applicationId)
            try:
                try:
                    query = start_query(spark, settings, run_id=run_id, time_mode=REPLAY if replay else LIVE,
                                        checkpoint=checkpoint, api=api, starting=starting, available_now=replay,
                                        observers=observers, pg=pg, stop=stop)
                except Exception as exc:  # a source option, a checkpoint of another query, ...
                    text = _text(exc)
                    raise QueryFailed(f"the streaming query did not start: {first_cause(text)}", text) from None
                signals.starting = False
                if stop.is_set():  # a stop_event set meanwhile
                    log.info("stopping")
                return _wait(query, stop, signals)
            finally:
                pg.close()
        except BaseException:
            signals.starting = False  # no StopRequested while stopping
            _kill_jvm()
            spark = None
            raise
        finally:
            signals.starting = False
            if spark is not None:
                _stop_session(spark)


def _stop_session(spark: Any) -> None:
    """``spark.stop()``. The JVM itself ends with this process (its stdin closes, and the kernel
    sends it SIGTERM: ``session.jvm_launch``); killing it here would only make PySpark's
    accumulator server print a trace."""
    try:
        spark.stop()
    except Exception as exc:  # the JVM is going away anyway
        log.debug("stopping Spark: %s", exc)


def _kill_jvm() -> None:
    """After an interruption or a failure at start: the JVM this process started, stopped."""
    from pyspark import SparkContext

    from replimon.streaming.session import jvm_process, mute_jvm, stop_process

    proc = jvm_process()
    if proc is not None:
        mute_jvm()
        server = getattr(SparkContext._active_spark_context, "_accumulatorServer", None)
        if server is not None:  # its connection from the JVM breaks: no trace for that
            server.handle_error = lambda *_args: None
        stop_process(proc, 5.0)

        SparkContext._gateway = SparkContext._jvm = SparkContext._active_spark_context = None  # type: ignore[assignment]


def _wait(query: Any, stop: threading.Event, signals: Signals | None = None) -> int:
    """Wait for the query to end or for a stop request; stop it after the running micro-batch."""
    while query.isActive and not stop.is_set():
        time.sleep(0.2)
    if query.isActive:
        log.info("stopping: waiting for the running micro-batch to finish (Ctrl-C again stops now)")
        try:
            _stop_after_batch(query)
        except Exception as exc:  # spark.sql.streaming.stopTimeout: the batch would not stop
            log.warning("stopping: the running micro-batch did not stop (%s); the JVM is stopped "
                        "with it (the batch runs again at the next start)", first_cause(_text(exc)))
            _kill_jvm()
            log.info("stopped")
            return signals.code if signals is not None else 0
    try:
        query.awaitTermination(60)
        exc = query.exception()
    except Exception as raised:  # awaitTermination raises the query's failure
        exc = raised
    if exc is not None:
        if stop.is_set():  # the stop cut a batch short (it runs again at the next start)
            log.debug("the query ended with %s", first_cause(str(exc)))
        else:
            text = _text(exc)
            raise QueryFailed(f"the streaming query failed: {first_cause(text)}", text)
    log.info("stopped")
    return signals.code if signals is not None else 0


def _text(exc: Any) -> str:
    """The whole text of a query's failure (a StreamingQueryException's description and its
    JVM trace when there is one)."""
    parts = [str(exc)]
    for attr in ("getStackTrace", "desc"):
        value = getattr(exc, attr, None)
        if callable(value):
            try:
                value = value()
            except Exception:
                value = None
        if isinstance(value, str) and value not in parts:
            parts.append(value)
    return "\n".join(parts)


# A Python error's last line in a trace: "ValueError: boom", "replimon...Stopped: ...".
_PY_ERROR = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Stopped|Interrupt|Warning|Failed|Unavailable))(: .*)?$")


def first_cause(text: str) -> str:
    """The first cause of a query's failure as one line: the innermost Python error of the first
    Python traceback (a sink or the source raised it), else the first line after Spark's
    "terminated with exception:", else the text's first line."""
    lines = [line.rstrip() for line in text.splitlines()]
    if "Traceback (most recent call last):" in text:
        start = next(i for i, line in enumerate(lines) if "Traceback (most recent call last):" in line)
        cause = None
        for line in lines[start + 1:]:
            stripped = line.strip()
            if stripped.startswith("at ") or stripped.startswith("\tat "):
                break
            m = _PY_ERROR.match(stripped)
            if m and not line.startswith(" "):
                cause = stripped
        if cause:
            name, sep, message = cause.partition(":")
            return _shorten(name.rsplit(".", 1)[-1] + sep + message)  # the class without its module
    for line in lines:
        if "terminated with exception:" in line:
            rest = line.split("terminated with exception:", 1)[1].strip()
            if rest:
                return _shorten(rest)
    first = next((line.strip() for line in lines if line.strip()), "no message")
    return _shorten(first)


def _shorten(line: str, limit: int = 300) -> str:
    line = " ".join(line.split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _stop_after_batch(query: Any, patience_s: float = 10.0, writing_s: float = 120.0) -> None:
    """Stop the query once its running micro-batch is done. ``query.stop()`` interrupts the
    micro-batch thread; inside a ``foreachBatch`` call that shows up as a Py4J
    InterruptedException (the writer hands Spark its short form). So a batch that is writing
    (its rows in the sinks) is let finish (at most ``writing_s``); a batch still planning,
    reading or in the monitor is let finish for ``patience_s``, then stopped where it stands
    (nothing of it is committed: it runs again at the next start). Either way the query stops
    within a moment of the running batch's end (docs/operations.md, "Stopping")."""
    writer = BatchWriter.running
    done = writer.finished if writer is not None else 0
    started = time.monotonic()
    while query.isActive:
        now = time.monotonic() - started
        if writer is not None and writer.finished > done:
            break  # the running batch ended; the next one, if any, is stopped as it starts
        writing = writer is not None and writer.busy
        try:
            status = query.status
        except Exception:  # the query ended meanwhile
            break
        if not writing and (not status.get("isTriggerActive", False)
                            or status.get("message", "").startswith("Waiting") or now > patience_s):
            break
        if writing and now > writing_s:
            break
        time.sleep(0.05)
    if query.isActive:
        query.stop()
