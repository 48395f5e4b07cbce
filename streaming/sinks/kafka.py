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
latency"). A fatal producer error (a broker that restarted empty) drops it: the next attempt
starts a new one.

Nothing the sink is given stops the job (docs/operations.md, "A record too large for Kafka" and
"Broker outage"):

* **Too large.** librdkafka refuses a message over its ``message.max.bytes`` (1,000,000), and the
  refusal failed the batch, and every restart on the checkpoint failed the same way. A record
  value over ``MAX_RECORD_BYTES`` is made smaller before it is produced: a dead letter keeps the
  first ``DEAD_PREFIX_BYTES`` bytes of the record, with headers naming its full size; an alert
  leaves its evidence out (saying so in the payload); a ``monitor.state`` record is left out (a
  snapshot goes again at its group's next cadence). A record the broker still refuses for its
  size is made smaller the same way and sent again, or left out, with a warning either way.
* **Broker down, hung or restarted.** Records not acknowledged within the flush timeout (or
  refused with any error but a permission or configuration error) are sent again through a new
  producer, waiting 1, 2, 5, 10 then 30 s between attempts, until they are acknowledged: the batch
  waits, with one line when the broker is lost, one a minute while it stays lost and one when
  it is back (``OutageNotice``). A stop request (``stop``) ends the wait (the batch is then not
  committed and runs again at the next start).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from replimon.kafka.outage import OutageNotice
from replimon.streaming.sinks.base import BatchResult

DELIVERY_TIMEOUT_S = 30
REUSED_FLUSH_S = 5  # a kept producer gets this long before its records go again through a new one
# A record value larger than this is made smaller before it is produced (module docstring).
MAX_RECORD_BYTES = 900_000
MAX_STATE_RECORD_BYTES = MAX_RECORD_BYTES  # the name tests and docs used for monitor.state
DEAD_PREFIX_BYTES = 65_536  # what a dead letter too large for Kafka keeps of its record
RETRY_S = (1.0, 2.0, 5.0, 10.0, 30.0)
LOST = ("Kafka: the broker at {servers} does not take the micro-batch's records ({reason}); the "
        "batch waits and sends them again")
STILL = ("Kafka: the broker at {servers} still does not take the micro-batch's records after "
         "{down} s ({reason}); {left} record(s) wait")
BACK = "Kafka: the broker at {servers} takes records again after {down} s; the job goes on"

log = logging.getLogger("replimon.sinks.kafka")


class Stopped(RuntimeError):
    """The job was asked to stop while the sink waited for the broker."""


@dataclass(frozen=True)
class Record:
    """One record to produce; ``kind``: alert, snapshot, checkpoint or dead (how it shrinks)."""

    kind: str
    topic: str
    key: bytes
    value: bytes
    headers: dict[str, str]
    group: str = ""


def shrink(rec: Record, limit: int = MAX_RECORD_BYTES) -> Record | None:
    """``rec`` made to fit ``limit`` bytes of value (module docstring), None: left out."""
    size = len(rec.value)
    if rec.kind == "dead":
        keep = min(DEAD_PREFIX_BYTES, limit)
        return replace(rec, value=rec.value[:keep],
                       headers={**rec.headers, "size": str(size), "truncated": f"first {keep} bytes"})
    if rec.kind == "alert":
        try:
            alert = json.loads(rec.value)
        except ValueError:
            return None
        alert["evidence"] = {"left_out": f"the alert was {size} bytes, over the {limit}-byte limit of a "
                                         "Kafka record; its evidence is in PostgreSQL"}
        if len(str(alert.get("message", ""))) > 2000:
            alert["message"] = str(alert["message"])[:2000] + "..."
        value = json.dumps(alert, separators=(",", ":")).encode()
        return replace(rec, value=value, headers={**rec.headers, "size": str(size)}) if len(value) <= limit else None
    return None


def _code(err: Any) -> Any:
    return err.code() if hasattr(err, "code") else None


def _permanent(err: Any) -> bool:
    """An error that no retry mends: the configuration or the broker's permissions are wrong."""
    from confluent_kafka import KafkaError

    return _code(err) in {KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                          KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, KafkaError._INVALID_ARG,
                          KafkaError.INVALID_CONFIG, KafkaError.SASL_AUTHENTICATION_FAILED,
                          KafkaError._AUTHENTICATION}


def _too_large(err: Any) -> bool:
    from confluent_kafka import KafkaError

    return _code(err) in {KafkaError.MSG_SIZE_TOO_LARGE,
                          KafkaError.RECORD_LIST_TOO_LARGE}


class KafkaSink:
    """Writes each batch's result to the monitor topics (module docstring)."""

    # False: a new producer every batch, as the sink did before it kept one (bench/latency.py, "before").
    keep_producer = True

    def __init__(self, settings: Any, run_id: str,
                 end_offsets: Callable[[int], dict[str, dict[str, int]]] | None = None,
                 stop: threading.Event | None = None) -> None:
        self.bootstrap = settings.kafka.bootstrap_servers
        self.client_id = f"{settings.kafka.client_id}-job"
        self.topics = settings.kafka.topics
        self.run_id = run_id
        self.end_offsets = end_offsets  # the checkpoint's offset log: where a batch's input ends
        self.stop = stop if stop is not None else threading.Event()
        self.outage = OutageNotice(log, LOST, STILL, BACK)
        self.retry_s = RETRY_S
        self.flush_s = DELIVERY_TIMEOUT_S
        self._p: Any = None
        self._fatal = False

    def _producer(self) -> tuple[Any, bool]:
        """The producer for a batch, and whether it served an earlier one."""
        from confluent_kafka import Producer

        if self._p is not None and not self._fatal and self.keep_producer:
            return self._p, True
        self._fatal = False

        def on_error(err: Any) -> None:
            if err.fatal():  # every later produce would fail: the next attempt starts a new producer
                self._fatal = True

        self._p = Producer({"bootstrap.servers": self.bootstrap, "client.id": self.client_id,
                            "enable.idempotence": True, "linger.ms": 20, "compression.type": "lz4",
                            # librdkafka's own log to critical lines: a broker outage is the
                            # sink's lines, not a flood of FAIL lines (docs/operations.md).
                            "log_level": 2, "error_cb": on_error})
        return self._p, False

    # -- sending ------------------------------------------------------------------------------------
    def _send(self, records: list[Record], what: str) -> None:
        """Produce ``records`` and wait until every one is acknowledged, sending the ones that
        were not again, with backoff, for as long as it takes (module docstring)."""
        pending = [r for r in (self._fit(r) for r in records) if r is not None]
        attempt = 0
        while pending:
            began = self.outage.clock()
            pending, reason = self._attempt(pending)
            if not pending:
                break
            self.outage.failed(reason, began=began, servers=self.bootstrap, left=len(pending))
            delay = self.retry_s[min(attempt, len(self.retry_s) - 1)]
            attempt += 1
            if self.stop.wait(delay):
                raise Stopped(f"stopped while {len(pending)} {what} waited for the broker at {self.bootstrap}")
        self.outage.ok(servers=self.bootstrap)

    def _fit(self, rec: Record, limit: int = MAX_RECORD_BYTES) -> Record | None:
        """``rec``, or a smaller form of it when its value is over ``limit`` (None: left out),
        with a warning."""
        if len(rec.value) <= limit:
            return rec
        small = shrink(rec, limit)
        if rec.kind in ("snapshot", "checkpoint"):
            log.warning("Kafka sink: the %s record of group %s is %d bytes, over %d: left out of %s",
                        rec.kind, rec.group, len(rec.value), limit, rec.topic)
        elif small is None:
            log.warning("Kafka sink: a %s record of %d bytes (key %s) is over %d and cannot be made "
                        "smaller: left out of %s", rec.kind, len(rec.value), rec.key[:200].decode(errors="replace"),
                        limit, rec.topic)
        else:
            log.warning("Kafka sink: a %s record of %d bytes (key %s) is over %d: sent as %d bytes to %s "
                        "(header size: the whole record's)", rec.kind, len(rec.value),
                        rec.key[:200].decode(errors="replace"), limit, len(small.value), rec.topic)
        return small

    def _attempt(self, records: list[Record]) -> tuple[list[Record], str]:
        """One attempt: the records not acknowledged, and why (the first error)."""
        p, reused = self._producer()
        again: list[Record] = []
        reasons: list[str] = []

        def report(rec: Record) -> Callable[[Any, Any], None]:
            def done(err: Any, _msg: Any) -> None:
                if err is None:
                    return
                if _permanent(err):
                    raise_later.append(err)
                elif _too_large(err):
                    small = self._fit(rec, min(len(rec.value) - 1, DEAD_PREFIX_BYTES))
                    if small is not None:
                        again.append(small)
                else:
                    again.append(rec)
                    reasons.append(err.str() if hasattr(err, "str") else str(err))
            return done

        raise_later: list[Any] = []
        for i, rec in enumerate(records):
            if not self._produce(p, rec, report(rec)):
                again.extend(records[i:])  # the local queue stays full: the broker takes nothing
                reasons.append("the producer's queue is full")
                break
        wait = min(REUSED_FLUSH_S, self.flush_s) if reused else self.flush_s
        left = p.flush(wait)
        if left:
            reasons.append(f"{left} record(s) not acknowledged within {wait} s")
            p.purge()
            p.flush(1)  # the purged records' reports: they go again through a new producer
            self._p = None
        if raise_later:
            self._p = None
            from confluent_kafka import KafkaException

            raise KafkaException(raise_later[0])
        if again:
            self._p = None
        return again, (reasons[0] if reasons else "")

    def _produce(self, p: Any, rec: Record, on_delivery: Callable[[Any, Any], None]) -> bool:
        """Queue one record; False when the producer's queue stays full."""
        from confluent_kafka import KafkaException

        for _ in range(3):
            try:
                p.produce(rec.topic, key=rec.key, value=rec.value, headers=rec.headers, on_delivery=on_delivery)
                return True
            except BufferError:
                p.flush(1)
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if not _too_large(err):
                    raise
                small = self._fit(rec, min(len(rec.value) - 1, DEAD_PREFIX_BYTES))
                if small is None:
                    return True
                rec = small
        return False

    # -- a batch's records --------------------------------------------------------------------------
    def _headers(self, batch_id: int) -> dict[str, str]:
        return {"run_id": self.run_id, "batch_id": str(batch_id)}

    def write(self, result: BatchResult) -> None:
        if result.repeated:
            return
        self._send(self.records(result), "monitor record(s)")

    def records(self, result: BatchResult) -> list[Record]:
        """A batch's records, in the order they are produced."""
        batch = self._headers(result.batch_id)
        out = self._alerts(((a.group, a.alert_id, a.status, a.payload) for a in result.alert_rows), batch)
        for s in result.snapshot_rows:
            out.append(Record("snapshot", self.topics.state, s.group.encode(), s.payload.encode(),
                              {"kind": "snapshot", **batch}, s.group))
        if result.checkpoints:
            # A group's whole state, keyed by group and event time (compaction keeps each one), with
            # the input offsets the batch ended at: a replay starts from here (docs/replay.md).
            ends = self.end_offsets(result.batch_id) if self.end_offsets else {}
            offsets = json.dumps(ends, separators=(",", ":"), sort_keys=True)
            for group, clock_ms, state in result.checkpoints:
                value = (f'{{"kind":"checkpoint","group":{json.dumps(group)},"clock_ms":{clock_ms},'
                         f'"run_id":{json.dumps(self.run_id)},"batch_id":{result.batch_id},'
                         f'"offsets":{offsets},"state":{state}}}')
                out.append(Record("checkpoint", self.topics.state, f"{group}@{clock_ms}".encode(),
                                  value.encode(), {"kind": "checkpoint", **batch}, group))
        for d in result.dead_letters:
            raw = d["raw"] if d["raw"] is not None else b""
            out.append(Record("dead", self.topics.dead_letters,
                              f"{d['topic']}:{d['partition']}:{d['offset']}".encode(), bytes(raw),
                              {"reason": d["reason"][:1000], "topic": d["topic"],
                               "partition": str(d["partition"]), "offset": str(d["offset"]), **batch}))
        return out

    def send_alerts(self, alerts: list[dict[str, Any]], batch_id: int) -> None:
        """Alerts raised beside the monitor's (the data-quality sink's) to ``monitor.alerts``."""
        rows = [(a["group"], a["alert_id"], a["status"], json.dumps(a, separators=(",", ":"))) for a in alerts]
        self._send(self._alerts(rows, self._headers(batch_id)), "data-quality alert(s)")

    def _alerts(self, alerts: Iterable[tuple[str, str, str, str]], batch: dict[str, str]) -> list[Record]:
        return [Record("alert", self.topics.alerts, group.encode(), payload.encode(),
                       {"alert_id": alert_id, "status": status, **batch}, group)
                for group, alert_id, status, payload in alerts]

    def close(self) -> None:
        self._p = None  # flushed with its last batch: nothing left to send
