"""The streaming job's DataFrame graph: Kafka -> decode (dead letters) -> per-group monitor.

``read_source`` gives the four replica topics as a stream; ``build`` wires the graph from them to
one DataFrame of output rows (``rows.py``: alerts, group states, checkpoints, dead letters), which
``replimon.streaming.writer.BatchWriter`` hands to the sinks from ``foreachBatch``.
"""

from __future__ import annotations

from typing import Any

from replimon.core.limits import Limits
from replimon.streaming.decode import decode
from replimon.streaming.processor import (
    INPUT_COLUMNS,
    LIVE,
    REPLAY,
    pandas_processor,
    row_processor,
)
from replimon.streaming.rows import OUTPUT_SCHEMA

QUERY_NAME = "replimon_monitor_v1"  # stable: the checkpoint belongs to it


def read_source(spark: Any, settings: Any, *, starting: str = "earliest", ending: str | None = None,
                max_offsets: int | None = None, fmt: str | None = None) -> Any:
    """The four replica topics as a stream with Spark's Kafka columns."""
    fmt = fmt or settings.streaming.source_format
    name = "replimon-kafka" if fmt == "replimon-kafka" else "kafka"
    reader = (spark.readStream.format(name)
              .option("subscribe", ",".join(settings.kafka.topics.input_types))
              .option("kafka.bootstrap.servers", settings.kafka.bootstrap_servers)
              .option("startingOffsets", starting)
              .option("failOnDataLoss", "false"))
    if name == "replimon-kafka":
        # Capped batches cut all topics at one record time; few tasks, each reading several
        # topic-partitions (docs/kafka-source.md).
        tasks = settings.streaming.source_partitions or spark.sparkContext.defaultParallelism
        reader = reader.option("alignTimestamps", "true").option("maxPartitions", str(tasks))
        # A partition whose offsets moved back is read from its new start, after a marker that
        # resets the groups it cut (streaming/data_loss.py, docs/operations.md "Data loss").
        reader = reader.option("dataLossMarkers", "true")
    limit = max_offsets if max_offsets is not None else settings.streaming.max_offsets_per_trigger
    if limit:
        reader = reader.option("maxOffsetsPerTrigger", str(limit))
    if ending is not None:
        reader = reader.option("endingOffsets", ending)
    return reader.load()


def build(spark: Any, raw: Any, settings: Any, *, time_mode: str = LIVE, api: str = "pandas",
          initial: Any = None, floors: dict[str, dict[str, int]] | None = None,
          only_groups: frozenset[str] | None = None, migrate_from: str | None = None) -> Any:
    """raw Kafka rows -> one DataFrame of output rows (alerts, group states, dead letters).

    One pass: the decode stage packs each Arrow batch into one row per group (and one of dead
    letters, keyed ``DEAD_KEY``), all through the stateful operator, which passes dead letters on
    untouched.
    In replay the watermark is taken on the packed rows' latest event time and that column is
    dropped before the operator: Spark then has no input column to drop "late" rows by (it would
    silently drop events older than the watermark: a topic read behind the others), while the
    watermark still advances and fires the event-time timers.

    A replay (``replimon.replay``) also passes ``initial``: a DataFrame (bucket, group, state,
    floors) of the checkpoint records it starts from, ``floors``: where a group with no such
    record starts (the window's start offsets), and ``only_groups``: the groups to replay
    (the others' events are left out when they are packed). ``migrate_from``: the state name of
    the shape before, when the checkpoint still holds some (``bucket_state.legacy_in``)."""
    from pyspark.sql import functions as F

    limits = Limits.from_settings(settings)
    buckets = settings.streaming.state_buckets
    packed = decode(raw, settings.kafka.topics.input_families, buckets, clock=time_mode == LIVE, only=only_groups,
                    bound=limits.clock_skew_ms)
    if time_mode == REPLAY:
        skew_s = max(1, int(round(limits.skew_ms / 1000)))
        packed = (packed.withColumn("event_time", F.timestamp_millis(F.col("event_ms")))
                  .withWatermark("event_time", f"{skew_s} seconds"))
    grouped = packed.select(*INPUT_COLUMNS).groupBy("bucket")
    # Live, group snapshots go out at their own cadence, not every batch (processor.py,
    # MonitorLogic); a replay snapshots every batch, as it always has.
    snapshot_ms = int(settings.streaming.snapshot_interval_s * 1000)
    options = {"checkpoint_ms": int(settings.streaming.replay_checkpoint_s * 1000), "floors": floors,
               "snapshot_ms": snapshot_ms if time_mode == LIVE else 0, "pins": settings.family_pins,
               "migrate_from": migrate_from}
    start = None if initial is None else initial.groupBy("bucket")
    if api == "pandas":
        return grouped.transformWithStateInPandas(
            pandas_processor(limits, time_mode, buckets, **options), OUTPUT_SCHEMA, "Append", time_mode,
            initialState=start)
    return grouped.transformWithState(
        row_processor(limits, time_mode, buckets, **options), OUTPUT_SCHEMA, "Append", time_mode,
        initialState=start)
