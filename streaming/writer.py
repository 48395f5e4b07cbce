"""The ``foreachBatch`` writer: every micro-batch to Kafka (``monitor.alerts``, ``monitor.state``,
``monitor.dead_letters``) and to PostgreSQL in one transaction guarded by the batch id.

Guarantees (``docs/streaming.md``, "Exactly once" and "Recovery"; measured by
``tests/streaming/test_recovery.py``):

* PostgreSQL: exactly-once effect. A batch Spark runs again after a crash finds its id already
  committed (``pipeline_batches``) and writes nothing, or finds it not committed and writes it
  whole.
* Kafka: at least once, with identical records. Kafka is written first, then PostgreSQL; a
  retried batch that PostgreSQL has committed is not sent again, but a crash after the Kafka send
  and before the PostgreSQL commit sends that one batch again, byte for byte (same rows, same
  timer values: Spark keeps both in the checkpoint). Every record carries the headers ``run_id``
  and ``batch_id``, so a consumer can drop a repeated batch, and alerts carry ``alert_id`` and
  ``status`` (an alert row never changes); ``monitor.state`` is compacted by group.
* Kafka transactions are not used: the embedded broker (Tansu 0.6.0) accepts them but shows the
  records of aborted transactions to ``read_committed`` consumers, and an open one left by a
  killed job was not timed out (measurements in ``docs/streaming.md``, "Exactly once").
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("replimon.job")


@dataclass
class BatchResult:
    """What one micro-batch produced (handed to observers such as the live view)."""

    batch_id: int
    alerts: list[dict[str, Any]] = field(default_factory=list)
    snapshots: list[dict[str, Any]] = field(default_factory=list)
    dead_letters: list[dict[str, Any]] = field(default_factory=list)
    # (group, clock_ms, the group's whole state as JSON text): to monitor.state for replays
    checkpoints: list[tuple[str, int, str]] = field(default_factory=list)
    written: bool = True  # False: a retried batch PostgreSQL had already committed



class BatchWriter:
    """The ``foreachBatch`` function: Kafka and PostgreSQL, exactly-once effect in PostgreSQL."""

    def __init__(self, settings: Any, run_id: str = "live", *, pg: Any = None, kafka: bool = True,
                 observers: list[Callable[[BatchResult], None]] | None = None,
                 checkpoint: str | None = None, window_start_ms: int | None = None) -> None:
        self.settings = settings
        # A replay that starts from checkpoint records before its window re-reads events before
        # the window: what they produce is left out (docs/replay.md).
        self.window_start_ms = window_start_ms
        self.checkpoint = checkpoint
        self.run_id = run_id
        self.pg = pg
        self.kafka = kafka
        self.observers = observers or []
        from replimon.quality.hook import QualityHook

        # Data quality (issue 7, docs/quality.md): None when quality is off or there is no sink.
        self.quality = QualityHook.for_writer(self)

    def producer(self) -> Any:
        """A producer for one batch (flushed and dropped with it: nothing lingers between batches
        or after the query stops)."""
        from confluent_kafka import Producer

        return Producer({
            "bootstrap.servers": self.settings.kafka.bootstrap_servers,
            "client.id": f"{self.settings.kafka.client_id}-job",
            "enable.idempotence": True, "linger.ms": 20, "compression.type": "lz4",
        })

    def _bind_pipeline(self) -> None:
        """Batch ids restart at 0 with a new checkpoint: the exactly-once guard row is per
        checkpoint (Spark's stream id in ``metadata``), so a fresh checkpoint never finds its
        batches already "committed" by an older one."""
        if self.pg is None or self.checkpoint is None or getattr(self, "_bound", False):
            return
        from pathlib import Path

        meta = Path(self.checkpoint) / "metadata"
        if meta.exists():
            stream_id = json.loads(meta.read_text().splitlines()[0]).get("id")
            if stream_id:
                self.pg.pipeline = f"monitor:{stream_id}"
        self._bound = True

    def batch_offsets(self, batch_id: int) -> dict[str, dict[str, int]]:
        """The input offsets micro-batch ``batch_id`` ends at, from the checkpoint's offset log
        (Spark writes it before the batch runs; the third line is the Kafka source's offsets,
        ``{"topic": {"partition": offset}}`` for both Kafka sources). Read through Hadoop's
        file system API, so a checkpoint on HDFS or S3 works as a local one does."""
        if self.checkpoint is None:
            return {}
        from pyspark.sql import SparkSession

        path = f"{self.checkpoint.rstrip('/')}/offsets/{batch_id}"
        spark = SparkSession.getActiveSession()
        if spark is None or "://" not in path:
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        else:  # pragma: no cover - a remote checkpoint (docs/cluster.md)
            jvm: Any = spark._jvm
            hpath = jvm.org.apache.hadoop.fs.Path(path)
            fs = hpath.getFileSystem(spark._jsc.hadoopConfiguration())
            stream = fs.open(hpath)
            try:
                text = jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
            finally:
                stream.close()
            lines = str(text).splitlines()
        return json.loads(lines[2]) if len(lines) > 2 and lines[2].startswith("{") else {}

    def __call__(self, df: Any, batch_id: int) -> None:
        started = time.monotonic()
        self._bind_pipeline()
        rows = df.collect()
        result = BatchResult(batch_id)
        start = self.window_start_ms
        for r in rows:
            if r.out == "checkpoint":
                result.checkpoints.append((r.group_id, r.ts_ms, r.payload))
                continue
            if start is not None and r.out in ("alert", "state") and r.ts_ms < start:
                continue
            payload = json.loads(r.payload)
            if r.out == "alert":
                result.alerts.append(payload)
            elif r.out == "state":
                result.snapshots.append(payload)
            else:
                payload["raw"] = base64.b64decode(payload.pop("raw_b64") or "")
                result.dead_letters.append(payload)
        result.alerts.sort(key=lambda a: (a["event_ts_ms"], a["alert_id"], a["status"]))
        last = self.pg.last_batch_id() if self.pg is not None else None
        if last is not None and batch_id <= last:
            result.written = False  # a retried batch: everything already went out
        else:
            if self.kafka:
                self._to_kafka(result)
            if self.pg is not None:
                # False: another writer of this pipeline committed it meanwhile (nothing written)
                result.written = self.pg.write_batch(
                    batch_id, alerts=result.alerts, snapshots=result.snapshots,
                    dead_letters=result.dead_letters, metrics={})  # counts now; the listener adds durations and rates
        log.info("batch %s: %s rows, %s alerts, %s states, %s dead letters in %.2fs%s", batch_id, len(rows),
                 len(result.alerts), len(result.snapshots), len(result.dead_letters), time.monotonic() - started,
                 "" if result.written else " (committed before: a retried batch, not written again)")
        if self.quality is not None:
            self.quality(result)  # validates some batches; its own exactly-once guard
        for observer in self.observers:
            observer(result)

    def _to_kafka(self, result: BatchResult) -> None:
        topics = self.settings.kafka.topics
        # Where a record comes from: a batch sent again after a crash repeats these too.
        batch = {"run_id": self.run_id, "batch_id": str(result.batch_id)}
        p = self.producer()
        for a in result.alerts:
            p.produce(topics.alerts, key=a["group"].encode(), value=json.dumps(a, separators=(",", ":")).encode(),
                      headers={"alert_id": a["alert_id"], "status": a["status"], **batch})
        for s in result.snapshots:
            p.produce(topics.state, key=s["group"].encode(), value=json.dumps(s, separators=(",", ":")).encode(),
                      headers={"kind": "snapshot", **batch})
        if result.checkpoints:
            # A group's whole state, keyed by group and event time (compaction keeps each one),
            # with the input offsets the batch ended at: a replay starts from here.
            offsets = json.dumps(self.batch_offsets(result.batch_id), separators=(",", ":"), sort_keys=True)
            for group, clock_ms, text in result.checkpoints:
                value = (f'{{"kind":"checkpoint","group":{json.dumps(group)},"clock_ms":{clock_ms},'
                         f'"run_id":{json.dumps(self.run_id)},"batch_id":{result.batch_id},'
                         f'"offsets":{offsets},"state":{text}}}')
                p.produce(topics.state, key=f"{group}@{clock_ms}".encode(), value=value.encode(),
                          headers={"kind": "checkpoint", **batch})
        for d in result.dead_letters:
            p.produce(topics.dead_letters, key=f"{d['topic']}:{d['partition']}:{d['offset']}".encode(),
                      value=d["raw"], headers={"reason": d["reason"][:1000], "topic": d["topic"],
                                               "partition": str(d["partition"]), "offset": str(d["offset"]),
                                               **batch})
        left = p.flush(30)
        del p
        if left:
            raise RuntimeError(f"{left} monitor record(s) not delivered to Kafka within 30 s")
