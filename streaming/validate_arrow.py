"""Contract validation in the Python workers, one Arrow batch at a time (``mapInArrow``).

The Spark-SQL validator (``replimon.streaming.validate``) gives the same verdicts with Spark
expressions only; it measured 50-136k records/s warm but pays ~1 s of planning per micro-batch; ``parse_event`` in the Python workers measured two orders of
magnitude faster. The job uses this one by default (``streaming.validator``), the SQL one on
request. Both produce the same columns: the event fields the job needs, ``event`` (the record's
JSON text, which is the contract event), and ``reason`` (null when valid).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

OUT_SCHEMA = ("group string, ts_ms long, node string, incarnation long, seq long, event string, "
              "topic string, partition int, offset long, timestamp timestamp, value binary, reason string")


def _validate_batches(topic_types: dict[str, str]) -> Any:
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from replimon.contract import Invalid, parse_event

        schema = pa.schema([
            ("group", pa.string()), ("ts_ms", pa.int64()), ("node", pa.string()), ("incarnation", pa.int64()),
            ("seq", pa.int64()), ("event", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
            ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")), ("value", pa.binary()),
            ("reason", pa.string()),
        ])
        for batch in batches:
            values = batch.column("value").to_pylist()
            topics = batch.column("topic").to_pylist()
            cols: dict[str, list[Any]] = {n: [] for n in ("group", "ts_ms", "node", "incarnation", "seq", "event", "reason")}
            keep_value: list[Any] = []
            for raw, topic in zip(values, topics, strict=True):
                parsed = parse_event(raw)
                reason = None
                if isinstance(parsed, Invalid):
                    reason = parsed.reason
                elif topic_types.get(topic) != parsed.type:
                    want = topic_types.get(topic)
                    reason = (f"type: {parsed.type!r} does not belong on topic {topic!r}"
                              + (f" (it carries {want} events)" if want else " (not a replica topic)"))
                if reason is None:
                    e: Any = parsed
                    cols["group"].append(e.group)
                    cols["ts_ms"].append(e.ts_ms)
                    cols["node"].append(e.node)
                    cols["incarnation"].append(e.incarnation)
                    cols["seq"].append(e.seq)
                    cols["event"].append(raw.decode() if isinstance(raw, bytes) else raw)
                    keep_value.append(None)
                else:
                    for n in ("group", "ts_ms", "node", "incarnation", "seq", "event"):
                        cols[n].append(None)
                    keep_value.append(raw)
                cols["reason"].append(reason)
            yield pa.RecordBatch.from_arrays([
                pa.array(cols["group"], pa.string()), pa.array(cols["ts_ms"], pa.int64()),
                pa.array(cols["node"], pa.string()), pa.array(cols["incarnation"], pa.int64()),
                pa.array(cols["seq"], pa.int64()), pa.array(cols["event"], pa.string()),
                batch.column("topic").cast(pa.string()), batch.column("partition").cast(pa.int32()),
                batch.column("offset").cast(pa.int64()),
                batch.column("timestamp").cast(pa.timestamp("us", tz="UTC")),
                pa.array(keep_value, pa.binary()), pa.array(cols["reason"], pa.string()),
            ], schema=schema)

    return run


def split_events(df: Any, topic_types: dict[str, str]) -> tuple[Any, Any]:
    """(valid, dead) like ``replimon.streaming.validate.split_events``; valid carries ``event``."""
    from pyspark.sql import functions as F

    checked = df.select("key", "value", "topic", "partition", "offset", "timestamp").mapInArrow(
        _validate_batches(dict(topic_types)), OUT_SCHEMA)
    valid = checked.where(F.col("reason").isNull()).drop("reason", "value", "timestamp")
    dead = checked.where(F.col("reason").isNotNull()).select("topic", "partition", "offset", "timestamp", "value", "reason")
    return valid, dead
