"""The streaming job: Kafka -> validate (dead letters) -> per-group monitor -> sinks.

``read_source`` gives the four replica topics as a stream; ``build`` wires the DataFrame graph
from them to one DataFrame of output rows (alerts, group states, dead letters), which
``replimon.streaming.writer.BatchWriter`` sends on from ``foreachBatch``.
"""

from __future__ import annotations

from typing import Any

from replimon.core.limits import Limits
from replimon.streaming.processor import (
    LIVE,
    OUTPUT_SCHEMA,
    REPLAY,
    pandas_processor,
    row_processor,
)

QUERY_NAME = "replimon_monitor_v1"  # stable: the checkpoint belongs to it


def topic_types(settings: Any) -> dict[str, str]:
    t = settings.kafka.topics
    return {t.decisions: "decision", t.executions: "execution", t.heartbeats: "heartbeat", t.config: "config"}


def read_source(spark: Any, settings: Any, *, starting: str = "earliest", ending: str | None = None,
                max_offsets: int | None = None, fmt: str | None = None) -> Any:
    """The four replica topics as a stream with Spark's Kafka columns."""
    fmt = fmt or settings.streaming.source_format
    name = "replimon-kafka" if fmt == "replimon-kafka" else "kafka"
    reader = (spark.readStream.format(name)
              .option("subscribe", ",".join(topic_types(settings)))
              .option("kafka.bootstrap.servers", settings.kafka.bootstrap_servers)
              .option("startingOffsets", starting)
              .option("failOnDataLoss", "false"))
    limit = max_offsets if max_offsets is not None else settings.streaming.max_offsets_per_trigger
    if limit:
        reader = reader.option("maxOffsetsPerTrigger", str(limit))
    if ending is not None:
        reader = reader.option("endingOffsets", ending)
    return reader.load()


def build(spark: Any, raw: Any, settings: Any, *, time_mode: str = LIVE, api: str = "pandas") -> Any:
    """raw Kafka rows -> one DataFrame of output rows (alerts, group states, dead letters)."""
    from pyspark.sql import functions as F

    limits = Limits.from_settings(settings)
    if getattr(settings.streaming, "validator", "arrow") == "sql":
        from replimon.streaming.validate import split_events
    else:
        from replimon.streaming.validate_arrow import split_events
    valid, dead = split_events(raw, topic_types(settings))
    fields = [c for c in valid.columns if c not in ("topic", "partition", "offset", "key", "value", "timestamp")]
    # The validated event as contract JSON (absent optionals stay absent: to_json drops nulls).
    if "event" in valid.columns:
        event = F.col("event")
    elif "value" in valid.columns:
        event = F.col("value").cast("string")
    else:
        event = F.to_json(F.struct(*fields))
    events = valid.select(
        F.col("group"), F.col("ts_ms"), F.col("node"), F.col("incarnation"), F.col("seq"),
        event.alias("event"), F.col("topic"), F.col("partition"), F.col("offset"),
    )
    grouped_kwargs: dict[str, Any] = {}
    if time_mode == REPLAY:
        skew_s = max(1, int(round(limits.skew_ms / 1000)))
        events = (events.withColumn("event_time", F.timestamp_millis(F.col("ts_ms")))
                  .withWatermark("event_time", f"{skew_s} seconds"))
    grouped = events.groupBy("group")
    if api == "pandas":
        out = grouped.transformWithStateInPandas(
            pandas_processor(limits, time_mode), OUTPUT_SCHEMA, "Append", time_mode, **grouped_kwargs)
    else:
        out = grouped.transformWithState(
            row_processor(limits, time_mode), OUTPUT_SCHEMA, "Append", time_mode, **grouped_kwargs)
    dead_rows = dead.select(
        F.lit("dead").alias("out"), F.lit(None).cast("string").alias("group_id"),
        F.concat_ws(":", F.col("topic"), F.col("partition").cast("string"), F.col("offset").cast("string")).alias("id"),
        F.lit(None).cast("string").alias("status"),
        (F.unix_millis(F.col("timestamp"))).alias("ts_ms"),
        F.to_json(F.struct(
            F.col("topic"), F.col("partition"), F.col("offset"), F.base64(F.col("value")).alias("raw_b64"),
            F.col("reason"), F.unix_millis(F.col("timestamp")).alias("kafka_ts"))).alias("payload"),
    )
    return out.unionByName(dead_rows)
