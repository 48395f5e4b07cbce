"""The data-quality sink: Great Expectations suites (``replimon.quality``) over the job's
micro-batches, a sink like the others (``sinks/base.py``), after the PostgreSQL sink.

Every ``quality.every_batches`` batches or ``quality.every_s`` seconds (whichever comes first;
the first batch after a start always), it validates the batch:

1. the input suites on a sample of the batch's input records, read back from Kafka between the
   previous batch's end offsets and this one's (the checkpoint's offset log;
   ``replimon.quality.records``): at most
   ``quality.sample_records`` records, whole groups, contract-valid ones only;
2. the output suites on the batch's alert payloads and latest group snapshots;

then writes one ``dq_results`` row per expectation and a DATA_QUALITY_FAILED alert per failed
expectation (``replimon.quality.results``), and sends the alerts to ``monitor.alerts`` through the
Kafka sink, like the batch's own. A node whose clock is off is the exception: it gets one alert
while it stays off, not one per validation (``replimon.quality.clockwatch``; the nodes reported
are kept in memory, so a restart of the job reports a node still off once more).

Exactly once (docs/quality.md): the sink has its own guard row in ``pipeline_batches``; a retried
batch that was validated before is recognised there and neither re-validated nor re-sent, and the
rows and the guard are committed in one transaction. Kafka gets the alerts at least once, like
the batch's (a crash between the send and the commit sends them again on the retry).

A failing validation (Kafka or PostgreSQL unreachable, a bug) is logged and never stops the job:
the monitor's own output matters more than its data-quality report.

Off the batch's path (``background``, the live job): a validation reads its sample back from Kafka
and runs the suites, about a second; run in the batch's thread it held the next micro-batch, and
every alert that waited for that one (the p99 of the alert latency, docs/performance.md). Live,
the sink hands the batch to a thread of its own and returns: one validation at a time (a batch
that comes due while one runs is not validated; the next one is), its alerts through a Kafka
producer of its own (``kafka_factory``), its rows under its own guard as before. What that costs:
a job stopped or crashed while a validation runs loses that validation (the batch itself is
committed; the first batch after a start is validated again), and its DATA_QUALITY_FAILED alerts
come a second or so after the batch's own. Replays validate in the batch's thread, so a replay's
results are complete when it ends.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from replimon.kafka import TP, offsets_json
from replimon.quality.records import Sample, ranges, read_sample
from replimon.streaming.sinks.base import BatchResult

log = logging.getLogger("replimon.quality")
CLOSE_WAIT_S = 30.0  # how long ``close`` waits for a validation in the background


class QualitySink:
    """Validates micro-batches of one streaming query (module docstring).

    ``dsn``/``pipeline``: where results go (the PostgreSQL sink's database and guard name, read
    when a batch is validated: the guard is named after the checkpoint's stream); ``kafka``: the
    Kafka sink its alerts go through (None: no Kafka output); ``end_offsets``: the checkpoint's
    offset log (None: the batch's input cannot be read back, only the outputs are validated)."""

    def __init__(self, settings: Any, run_id: str, dsn: str, pipeline: Callable[[], str], *,
                 kafka: Any = None, end_offsets: Callable[[int], dict[str, dict[str, int]]] | None = None,
                 window_start_ms: int | None = None, background: bool = False,
                 paused: Callable[[], bool] | None = None) -> None:
        self.settings = settings
        self.q = settings.quality
        self.run_id = run_id
        self.dsn = dsn
        self.pipeline = pipeline
        self.kafka = kafka
        self.end_offsets = end_offsets
        self.window_start_ms = window_start_ms
        self.last_batch: int | None = None
        self.last_time: float | None = None  # time.monotonic() of the last validation
        self.validations = 0  # validations written by this sink (tests, the benchmark)
        self.clocks_off: frozenset[tuple[str, str]] = frozenset()  # (group, node) reported as off
        self.background = background  # validate in a thread of its own (module docstring)
        # True while PostgreSQL is down (the batch sink's backlog): nothing is validated, since
        # the results could not be written (and would say so on every due batch).
        self.paused = paused or (lambda: False)
        self._running: threading.Thread | None = None
        if "great_expectations" not in sys.modules:
            from replimon.quality.engine import warm_up

            warm_up()

    @staticmethod
    def wanted(settings: Any) -> bool:
        """Whether the settings ask for data quality."""
        q = getattr(settings, "quality", None)
        return q is not None and bool(q.enabled)

    # -- cadence ---------------------------------------------------------------------------------
    def due(self, batch_id: int, now: float | None = None) -> bool:
        """Whether batch ``batch_id`` is to be validated (module docstring)."""
        if self.last_time is None or self.last_batch is None:
            return True
        now = time.monotonic() if now is None else now
        if self.q.every_batches and batch_id - self.last_batch >= self.q.every_batches:
            return True
        return bool(self.q.every_s and now - self.last_time >= self.q.every_s)

    # -- the batch -------------------------------------------------------------------------------
    def write(self, result: BatchResult) -> None:
        if self.paused():
            return
        if not self.background:
            self.validate(result)
            return
        if self.busy() or not self.due(result.batch_id):
            return  # one at a time: a batch due meanwhile is not validated, the next one is
        self._running = threading.Thread(target=self.validate, args=(result,), daemon=True,
                                         name=f"replimon-quality-{result.batch_id}")
        self._running.start()

    def busy(self) -> bool:
        """Whether a validation runs in the background now."""
        return self._running is not None and self._running.is_alive()

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Let a validation in the background finish (at most ``wait_s``)."""
        if self._running is not None:
            self._running.join(wait_s)

    def validate(self, result: BatchResult) -> bool:
        """Validate the batch of ``result`` if it is due; True if results were written now."""
        batch_id = result.batch_id
        if not self.due(batch_id):
            return False
        started = time.monotonic()
        try:
            written = self._validate(result)
        except Exception as exc:  # never stop the job (module docstring)
            log.warning("data quality: validating batch %s failed: %s: %s", batch_id,
                        type(exc).__name__, exc)
            written = False
        if written is None:  # nothing to validate (an idle batch): the next one is still due
            return False
        self.last_batch, self.last_time = batch_id, time.monotonic()
        log.info("data quality: batch %s %s in %.2f s", batch_id,
                 "validated" if written else "not written (validated before, or failed)",
                 time.monotonic() - started)
        return written

    def _validate(self, result: Any) -> bool | None:
        """True: validated and written; False: validated before (a retry); None: nothing in the
        batch to validate."""
        from replimon.quality import clockwatch, engine
        from replimon.quality.derive import alert_frame, input_frames, state_frames
        from replimon.quality.results import validated_before, write_results
        from replimon.quality.suites import parameters

        batch_id = result.batch_id
        sample = self.sample(batch_id)
        frames = input_frames(sample.records) if sample is not None else {}
        if result.alerts:
            frames["monitor.alerts"] = alert_frame(result.alerts)
        frames.update(state_frames(result.snapshots))
        if not frames:
            return None
        dsn, pipeline = self.dsn, self.pipeline()
        if validated_before(dsn, self.run_id, pipeline, batch_id):
            return False
        now_ms = int(time.time() * 1000)
        params = parameters(self.settings, now_ms)
        outcomes = engine.validate(frames, params, sample_rows=self.q.sample_rows)
        if sample is not None:
            for o in outcomes:  # what the input suites saw of the batch
                if o.suite.startswith("replica."):
                    o.details["batch"] = {"records": sample.total, "read": sample.read,
                                          "groups": sample.groups, "invalid": sample.invalid,
                                          "complete": sample.complete}
        verdict = clockwatch.judge(self.clocks_off, frames, outcomes, params, now_ms, self.q.sample_rows)
        alerts = verdict.alerts
        if alerts and self.kafka is not None:
            self.kafka.send_alerts(alerts, batch_id)
        written = write_results(dsn, self.run_id, pipeline, batch_id, outcomes, alerts, now_ms)
        if written:
            self.validations += 1
            self.clocks_off = verdict.reported
            failed = [o.expectation for o in outcomes if not o.success]
            if failed:
                log.warning("data quality: batch %s: %d expectation(s) failed: %s", batch_id,
                            len(failed), ", ".join(failed[:5]))
        return written

    def spans(self, batch_id: int) -> dict[TP, tuple[int, int]]:
        """The batch's input offset ranges. Without the previous batch's entry (the first batch
        of a checkpoint: Spark does not keep a Python source's start), each partition's last
        ``sample_records`` records before the batch's end stand for it."""
        assert self.end_offsets is not None
        end = offsets_json(self.end_offsets(batch_id))
        start: Mapping[str, Mapping[str, int]] = {}
        if batch_id > 0:
            try:
                start = offsets_json(self.end_offsets(batch_id - 1))
            except OSError:
                start = {}
        if not start:
            start = {t: {p: max(0, o - self.q.sample_records) for p, o in parts.items()}
                     for t, parts in end.items()}
        return ranges(start, end)

    def sample(self, batch_id: int) -> Sample | None:
        """The batch's sampled input records; None without the offset log (nothing says where the
        batch's input is)."""
        if self.end_offsets is None:
            return None
        spans = self.spans(batch_id)
        types = self.settings.kafka.topics.input_families
        spans = {tp: r for tp, r in spans.items() if tp[0] in types}
        return read_sample(self.settings.kafka.bootstrap_servers, spans, types,
                           limit=self.q.sample_records, salt=batch_id,
                           since_ms=self.window_start_ms)
