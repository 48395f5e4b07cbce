"""The Kafka sink: alerts to ``monitor.alerts``, group snapshots and checkpoint records to
``monitor.state``, dead letters to ``monitor.dead_letters``. The job's one Kafka producer.

At least once, with identical records (docs/streaming.md, "Exactly once"): a batch that the
PostgreSQL guard has committed is not sent again, but a crash after the send and before the commit
sends that batch again, byte for byte (same rows, same timer values: Spark keeps both). Every record
carries the headers ``run_id`` and ``batch_id`` so that a consumer can drop a repeated batch;
alerts carry ``alert_id`` and ``status`` (an alert record never changes), ``monitor.state`` is
compacted by key. Kafka transactions are not used: the embedded broker (Tansu 0.6.0) shows aborted
transactions' records to ``read_committed`` consumers and did not time out an open one left by a
killed job.

One producer serves the query's batches: each batch is flushed (every record acknowledged) before
the sink returns, so nothing is in flight between batches or after the query stops; the producer
is kept only to save its start (connection, metadata, an idempotent producer id: 0.3-0.5 s a
batch on the embedded broker under load, on the alert's path: docs/performance.md, "Alert
latency"). A batch whose send fails drops it, and so does a fatal producer error (a broker that
restarted empty): the next batch starts a new one, as every batch did before.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from typing import Any

from replimon.streaming.sinks.base import BatchResult

DELIVERY_TIMEOUT_S = 30
REUSED_FLUSH_S = 5  # a kept producer gets this long before its records go again through a new one
# A monitor.state record larger than this is left out, with a warning (librdkafka refuses a message
# over its 1,000,000-byte message.max.bytes, and that refusal stopped the job: docs/operations.md).
MAX_STATE_RECORD_BYTES = 900_000

log = logging.getLogger("replimon.sinks.kafka")


class KafkaSink:
    """Writes each batch's result to the monitor topics (module docstring)."""

    # False: a new producer every batch, as the sink did before it kept one (bench/latency.py, "before").
    keep_producer = True

    def __init__(self, settings: Any, run_id: str,
                 end_offsets: Callable[[int], dict[str, dict[str, int]]] | None = None) -> None:
        self.bootstrap = settings.kafka.bootstrap_servers
        self.client_id = f"{settings.kafka.client_id}-job"
        self.topics = settings.kafka.topics
        self.run_id = run_id
        self.end_offsets = end_offsets  # the checkpoint's offset log: where a batch's input ends
        self._p: Any = None
        self._fatal = False

    def _producer(self) -> tuple[Any, bool]:
        """The producer for a batch, and whether it served an earlier one."""
        from confluent_kafka import Producer

        if self._p is not None and not self._fatal and self.keep_producer:
            return self._p, True
        self._fatal = False

        def on_error(err: Any) -> None:
            if err.fatal():  # every later produce would fail: the next batch starts a new producer
                self._fatal = True

        self._p = Producer({"bootstrap.servers": self.bootstrap, "client.id": self.client_id,
                            "enable.idempotence": True, "linger.ms": 20, "compression.type": "lz4",
                            # librdkafka's own log to critical lines: a broker outage is one line of
                            # the source's, not a flood of FAIL lines (docs/operations.md).
                            "log_level": 2, "error_cb": on_error})
        return self._p, False

    def _send(self, fill: Callable[[Any], None], what: str) -> None:
        """``fill`` a producer with a batch's records and wait until all are acknowledged. A kept
        producer that cannot deliver them within ``REUSED_FLUSH_S`` is dropped and the records go
        again through a new one (the broker may have restarted empty: it then drops a producer it
        no longer knows instead of answering, and only a new one gets through); some may then be
        in Kafka twice, identical, as after a retried batch."""
        p, reused = self._producer()
        try:
            fill(p)
            left = p.flush(REUSED_FLUSH_S if reused else DELIVERY_TIMEOUT_S)
            if left and reused:
                log.warning("Kafka sink: %d %s not acknowledged within %d s by the kept producer; "
                            "sending them again through a new one", left, what, REUSED_FLUSH_S)
                p.purge()
                self._p = None
                p, _ = self._producer()
                fill(p)
                left = p.flush(DELIVERY_TIMEOUT_S)
            if left:
                raise RuntimeError(f"{left} {what} not delivered to Kafka within {DELIVERY_TIMEOUT_S} s")
        except BaseException:
            self._p = None  # whatever it still holds is this batch's, which Spark runs again
            raise

    def _headers(self, batch_id: int) -> dict[str, str]:
        return {"run_id": self.run_id, "batch_id": str(batch_id)}

    def write(self, result: BatchResult) -> None:
        if result.repeated:
            return
        self._send(lambda p: self._fill(p, result), "monitor record(s)")

    def _state(self, p: Any, group: str, key: bytes, value: bytes, headers: dict[str, str]) -> None:
        """One ``monitor.state`` record, or a warning when it is too large to send: a snapshot is
        sent again at the group's next cadence, a replay starts from the group's previous
        checkpoint record; a monitor that cannot publish one group's state keeps watching all."""
        if len(value) > MAX_STATE_RECORD_BYTES:
            log.warning("Kafka sink: the %s record of group %s is %d bytes, over %d: left out of %s",
                        headers["kind"], group, len(value), MAX_STATE_RECORD_BYTES, self.topics.state)
            return
        p.produce(self.topics.state, key=key, value=value, headers=headers)

    def _fill(self, p: Any, result: BatchResult) -> None:
        batch = self._headers(result.batch_id)
        self._alerts(p, ((a.group, a.alert_id, a.status, a.payload) for a in result.alert_rows), batch)
        for s in result.snapshot_rows:
            self._state(p, s.group, s.group.encode(), s.payload.encode(), {"kind": "snapshot", **batch})
        if result.checkpoints:
            # A group's whole state, keyed by group and event time (compaction keeps each one), with
            # the input offsets the batch ended at: a replay starts from here (docs/replay.md).
            ends = self.end_offsets(result.batch_id) if self.end_offsets else {}
            offsets = json.dumps(ends, separators=(",", ":"), sort_keys=True)
            for group, clock_ms, state in result.checkpoints:
                value = (f'{{"kind":"checkpoint","group":{json.dumps(group)},"clock_ms":{clock_ms},'
                         f'"run_id":{json.dumps(self.run_id)},"batch_id":{result.batch_id},'
                         f'"offsets":{offsets},"state":{state}}}')
                self._state(p, group, f"{group}@{clock_ms}".encode(), value.encode(),
                            {"kind": "checkpoint", **batch})
        for d in result.dead_letters:
            p.produce(self.topics.dead_letters, key=f"{d['topic']}:{d['partition']}:{d['offset']}".encode(),
                      value=d["raw"], headers={"reason": d["reason"][:1000], "topic": d["topic"],
                                               "partition": str(d["partition"]), "offset": str(d["offset"]),
                                               **batch})

    def send_alerts(self, alerts: list[dict[str, Any]], batch_id: int) -> None:
        """Alerts raised beside the monitor's (the data-quality sink's) to ``monitor.alerts``."""
        rows = [(a["group"], a["alert_id"], a["status"], json.dumps(a, separators=(",", ":"))) for a in alerts]
        self._send(lambda p: self._alerts(p, rows, self._headers(batch_id)), "data-quality alert(s)")

    def _alerts(self, p: Any, alerts: Iterable[tuple[str, str, str, str]], batch: dict[str, str]) -> None:
        for group, alert_id, status, payload in alerts:
            p.produce(self.topics.alerts, key=group.encode(), value=payload.encode(),
                      headers={"alert_id": alert_id, "status": status, **batch})

    def close(self) -> None:
        self._p = None  # flushed with its last batch: nothing left to send
