"""The ``foreachBatch`` writer: a micro-batch's output rows become one ``BatchResult``
(``sinks/base.py``), which goes to each sink in order (Kafka, then PostgreSQL, then the
data-quality sink), then to the observers.

Exactly once (docs/streaming.md, "Exactly once" and "Recovery"; tested by
``tests/streaming/test_recovery.py``): PostgreSQL is the guard. A batch Spark runs again after a
crash finds its id already committed there (``repeated``: nothing is written again), or not
committed (written whole, in one transaction). Kafka is written before PostgreSQL, so a crash
between the two sends that one batch to Kafka twice, byte for byte (``sinks/kafka.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from replimon.streaming.rows import ALERT, CHECKPOINT, DEAD, STATE, dead_where
from replimon.streaming.sinks.base import AlertRow, BatchResult, CheckpointRow, Sink, SnapshotRow

log = logging.getLogger("replimon.job")


class Guard(Protocol):
    def committed(self, batch_id: int) -> bool: ...


def batch_result(batch_id: int, rows: Iterable[Any], window_start_ms: int | None = None) -> BatchResult:
    """The output rows of one micro-batch (``rows.py``) as a ``BatchResult``. With
    ``window_start_ms`` (a replay that starts from checkpoint records before its window re-reads
    events before it), alerts and snapshots from before that time are left out (docs/replay.md)."""
    result = BatchResult(batch_id)
    start = window_start_ms
    for r in rows:
        out = r.out
        if out == CHECKPOINT:
            result.checkpoints.append(CheckpointRow(r.group_id, r.ts_ms, r.payload))
        elif start is not None and out in (ALERT, STATE) and r.ts_ms < start:
            continue
        elif out == ALERT:
            result.alert_rows.append(AlertRow(r.group_id, r.id, r.status, r.ts_ms, r.payload))
        elif out == STATE:
            result.snapshot_rows.append(SnapshotRow(r.group_id, r.ts_ms, r.payload))
        elif out == DEAD:
            topic, partition, offset = dead_where(r.id)
            result.dead_letters.append({"topic": topic, "partition": partition, "offset": offset,
                                        "raw": r.raw, "reason": r.payload, "kafka_ts": r.ts_ms})
    result.alert_rows.sort(key=lambda a: (a.event_ts_ms, a.alert_id, a.status))
    return result


_PY4J_ERROR = "py4j.protocol.Py4JJavaError: An error occurred while calling foreachBatch of batch"


def _interrupted(exc: BaseException) -> bool:
    """A JVM call of this batch was interrupted (``query.stop()`` while the batch ran)."""
    java = getattr(exc, "java_exception", None)
    name = ""
    if java is not None:
        try:
            name = str(java.getClass().getName())
        except Exception:  # the gateway is going away
            name = ""
    return name in ("java.lang.InterruptedException", "java.io.InterruptedIOException",
                    "java.nio.channels.ClosedByInterruptException") or (
        not name and "java.lang.InterruptedException" in str(exc)[:2000])


SUMMARY_EVERY_S = 60.0  # quiet batches are summed up in one line this often


class Progress:
    """The job's progress lines (docs/operations.md, "Logs"): a batch that read records or wrote
    anything gets its line; the others (an idle job runs a batch every trigger) are counted and
    summed up once a minute, so an idle job logs one line a minute and a busy one a line a
    batch."""

    def __init__(self, every_s: float = SUMMARY_EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self.clock = clock
        self.quiet = 0  # batches not logged since the last summary
        self.since = clock()
        self.first = True  # the run's first batch is logged whatever it holds: the job works

    def batch(self, batch_id: int, read: int | None, result: BatchResult, seconds: float, note: str) -> None:
        outputs = len(result.alert_rows) + len(result.dead_letters)
        if (read or 0) > 0 or outputs or note or self.first:
            self.first = False
            log.info("batch %s: %s records in; out: %s alerts, %s group states, %s dead letters; %.2fs%s",
                     batch_id, "?" if read is None else read, len(result.alert_rows),
                     len(result.snapshot_rows), len(result.dead_letters), seconds, note)
            return
        self.quiet += 1
        now = self.clock()
        if now - self.since >= self.every_s:
            log.info("idle: %d micro-batch(es) without input in the last %.0f s (the last, batch %s)",
                     self.quiet, now - self.since, batch_id)
            self.quiet, self.since = 0, now


class BatchWriter:
    """The ``foreachBatch`` function (module docstring). ``busy`` while it writes a batch's rows
    to the sinks (not while Spark computes the batch: its read may wait on a lost broker);
    ``finished`` counts the batches it wrote (the runner stops the query after the running one:
    ``runner._stop_after_batch``); ``running``: the last writer made, that runner's."""

    running: BatchWriter | None = None

    def __init__(self, sinks: Sequence[Sink], *, guard: Guard | None = None,
                 observers: Sequence[Callable[[BatchResult], None]] = (),
                 window_start_ms: int | None = None,
                 records_in: Callable[[int], int | None] | None = None) -> None:
        self.sinks = list(sinks)
        self.records_in = records_in  # input records of a batch (the checkpoint's offset log)
        self.guard = guard
        self.observers = list(observers)
        self.window_start_ms = window_start_ms
        self.progress = Progress()
        self.busy = False
        self.finished = 0
        BatchWriter.running = self

    def __call__(self, df: Any, batch_id: int) -> None:
        from replimon.streaming.sinks.kafka import Stopped

        try:
            self._write(df, batch_id)
            self.finished += 1
        except Exception as exc:
            # Stopped: the job was asked to stop while a sink waited for its server.
            if not _interrupted(exc) and not isinstance(exc, Stopped):
                raise
            # query.stop() interrupted this batch (nothing of it is committed: a restart runs it
            # again). Spark recognises a stop inside a Python foreachBatch by matching this text
            # against the error with a backtracking regex, which overflows the JVM's stack on the
            # whole Java trace (StreamExecution.isInterruptedByStop): hand it the short form.
            raise RuntimeError(f"{_PY4J_ERROR} {batch_id}: java.lang.InterruptedException") from None
        finally:
            self.busy = False

    def _write(self, df: Any, batch_id: int) -> None:
        started = time.monotonic()
        rows = df.collect()  # the batch is computed here (read, decoded, monitored): not busy yet
        self.busy = True  # from here its rows go to the sinks: a stop lets this finish
        result = batch_result(batch_id, rows, self.window_start_ms)
        result.repeated = self.guard is not None and self.guard.committed(batch_id)
        for sink in self.sinks:
            sink.write(result)
        if result.repeated:
            result.written = False
        note = ("" if result.written else " (committed before: a retried batch, not written again)")
        if result.deferred:
            note += " (PostgreSQL down: its rows wait in the backlog)"
        # The batch's line counts what came in (records read from the topics, as pipeline_metrics
        # input_rows) and what went out; output rows alone said "3 rows" for 218 records read.
        read = self.records_in(batch_id) if self.records_in is not None else None
        self.progress.batch(batch_id, read, result, time.monotonic() - started, note)
        for observer in self.observers:
            observer(result)

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()
