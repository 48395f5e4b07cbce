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

A producer lives for one batch: flushed and dropped with it, so nothing lingers between batches
or after the query stops.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from replimon.streaming.sinks.base import BatchResult

DELIVERY_TIMEOUT_S = 30


class KafkaSink:
    """Writes each batch's result to the monitor topics (module docstring)."""

    def __init__(self, settings: Any, run_id: str,
                 end_offsets: Callable[[int], dict[str, dict[str, int]]] | None = None) -> None:
        self.bootstrap = settings.kafka.bootstrap_servers
        self.client_id = f"{settings.kafka.client_id}-job"
        self.topics = settings.kafka.topics
        self.run_id = run_id
        self.end_offsets = end_offsets  # the checkpoint's offset log: where a batch's input ends

    def _producer(self) -> Any:
        from confluent_kafka import Producer

        return Producer({"bootstrap.servers": self.bootstrap, "client.id": self.client_id,
                         "enable.idempotence": True, "linger.ms": 20, "compression.type": "lz4",
                         # librdkafka's own log to critical lines: a broker outage is one line of
                         # the source's, not a flood of FAIL lines (docs/operations.md).
                         "log_level": 2})

    def _headers(self, batch_id: int) -> dict[str, str]:
        return {"run_id": self.run_id, "batch_id": str(batch_id)}

    def write(self, result: BatchResult) -> None:
        if result.repeated:
            return
        batch = self._headers(result.batch_id)
        p = self._producer()
        self._alerts(p, ((a.group, a.alert_id, a.status, a.payload) for a in result.alert_rows), batch)
        for s in result.snapshot_rows:
            p.produce(self.topics.state, key=s.group.encode(), value=s.payload.encode(),
                      headers={"kind": "snapshot", **batch})
        if result.checkpoints:
            # A group's whole state, keyed by group and event time (compaction keeps each one), with
            # the input offsets the batch ended at: a replay starts from here (docs/replay.md).
            ends = self.end_offsets(result.batch_id) if self.end_offsets else {}
            offsets = json.dumps(ends, separators=(",", ":"), sort_keys=True)
            for group, clock_ms, state in result.checkpoints:
                value = (f'{{"kind":"checkpoint","group":{json.dumps(group)},"clock_ms":{clock_ms},'
                         f'"run_id":{json.dumps(self.run_id)},"batch_id":{result.batch_id},'
                         f'"offsets":{offsets},"state":{state}}}')
                p.produce(self.topics.state, key=f"{group}@{clock_ms}".encode(), value=value.encode(),
                          headers={"kind": "checkpoint", **batch})
        for d in result.dead_letters:
            p.produce(self.topics.dead_letters, key=f"{d['topic']}:{d['partition']}:{d['offset']}".encode(),
                      value=d["raw"], headers={"reason": d["reason"][:1000], "topic": d["topic"],
                                               "partition": str(d["partition"]), "offset": str(d["offset"]),
                                               **batch})
        self._flush(p, "monitor record(s)")

    def send_alerts(self, alerts: list[dict[str, Any]], batch_id: int) -> None:
        """Alerts raised beside the monitor's (the data-quality sink's) to ``monitor.alerts``."""
        p = self._producer()
        self._alerts(p, ((a["group"], a["alert_id"], a["status"], json.dumps(a, separators=(",", ":")))
                         for a in alerts), self._headers(batch_id))
        self._flush(p, "data-quality alert(s)")

    def _alerts(self, p: Any, alerts: Iterable[tuple[str, str, str, str]], batch: dict[str, str]) -> None:
        for group, alert_id, status, payload in alerts:
            p.produce(self.topics.alerts, key=group.encode(), value=payload.encode(),
                      headers={"alert_id": alert_id, "status": status, **batch})

    @staticmethod
    def _flush(p: Any, what: str) -> None:
        left = p.flush(DELIVERY_TIMEOUT_S)
        if left:
            raise RuntimeError(f"{left} {what} not delivered to Kafka within {DELIVERY_TIMEOUT_S} s")

    def close(self) -> None:
        pass
