"""What a Spark task of the ``replimon-kafka`` source gets, and the Arrow batches it reads.

A task reads one offset range of one topic-partition (`KafkaInputPartition`) or, with
``maxPartitions``, several one after another (`KafkaRangesPartition`). It reads exactly the
records at ``[start, until)`` (``replimon.kafka``'s range reader), so a batch re-run after a
crash reads the same records; records that are gone are data loss (``failOnDataLoss``). With
``dataLossMarkers``, records deleted while the task reads (planned, then deleted from the front
of the partition before the task fetched them: the consumer goes on from the oldest record held)
give a marker naming the skipped offsets (``markers.py``), not a silent skip.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from replimon.kafka.outage import BrokerWatch
from replimon.streaming.sources.kafka.markers import marker_batch, truncation
from replimon.streaming.sources.kafka.options import Options, data_loss, worker_logging
from replimon.streaming.sources.kafka.planning import Range, pack_ranges
from replimon.streaming.sources.kafka.schema import ARROW_SCHEMA

logger = logging.getLogger("replimon.streaming.sources.kafka")

# librdkafka timestamp types -> Kafka's TimestampType ids, as Spark reports them.
_TS_TYPES = {0: -1, 1: 0, 2: 1}
ARROW_BATCH_ROWS = 10_000


class KafkaInputPartition(InputPartition):
    """One contiguous offset range of one Kafka topic-partition."""

    def __init__(self, index: int, topic: str, partition: int, start: int, until: int) -> None:
        super().__init__(index)
        self.topic = topic
        self.partition = partition
        self.start = start
        self.until = until


class KafkaRangesPartition(InputPartition):
    """Several offset ranges read one after another by one task (``maxPartitions``)."""

    def __init__(self, index: int, ranges: list[KafkaInputPartition]) -> None:
        super().__init__(index)
        self.ranges = ranges


def input_partitions(ranges: Sequence[Range], max_partitions: int | None = None) -> list[InputPartition]:
    """One task per range (Spark's Kafka source), or with ``maxPartitions`` the ranges packed
    into at most that many tasks: each task of a Python source has a cost of its own (a
    consumer, its connection and first fetch, the Python worker's round trip), which on a small
    machine outweighs reading a few thousand records; measured on 2 cores: 60,000 records of 16
    topic-partitions in 2-3 s as 16 tasks, 0.7-1.3 s as 2."""
    if not max_partitions or len(ranges) <= max_partitions:
        return [KafkaInputPartition(i, t, p, s, u) for i, (t, p, s, u) in enumerate(ranges)]
    return [KafkaRangesPartition(i, [KafkaInputPartition(0, t, p, s, u) for t, p, s, u in group])
            for i, group in enumerate(pack_ranges(ranges, max_partitions))]


def read_partition(opts: Options, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """The Arrow batches of a task: its data-loss markers first (``markers.py``; planned on the
    first task of a batch), then its range, or its ranges one after another."""
    worker_logging()
    losses = getattr(partition, "losses", None)
    if losses:
        yield marker_batch(losses)
    if isinstance(partition, KafkaRangesPartition):
        for part in partition.ranges:
            yield from read_range(opts, part)
    elif isinstance(partition, KafkaInputPartition):
        yield from read_range(opts, partition)
    # else: Spark's stand-in when no partition was planned (batch reads): nothing to read


def _arrow(topic: str, partition: int, keys: list[Any], values: list[Any], offsets: list[int],
           stamps: list[int], types: list[int]) -> pa.RecordBatch:
    n = len(offsets)
    return pa.RecordBatch.from_arrays([
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array(offsets, pa.int64()),
        pa.array(stamps, pa.timestamp("us", tz="UTC")),
        pa.array(types, pa.int32()),
    ], schema=ARROW_SCHEMA)


def deleted(client: Any, topic: str, partition: int,
            skipped: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """The markers for offsets a read skipped (``[first, read)`` each) that were deleted: the
    partition now starts above the first of them. A skip over offsets the partition still
    starts below is a hole (a compacted partition, a transaction's control record), no loss;
    this asks the broker once per skip, and reads skip only on such holes or deletions."""
    low = client.earliest([(topic, partition)])[(topic, partition)]
    out = []
    for first, read in skipped:
        if low > first:
            end = min(low, read)
            logger.warning("%s-%s lost offsets %s..%s while the micro-batch read them: deleted "
                           "after it was planned (retention, deleted records); read on from %s",
                           topic, partition, first, end - 1, read)
            out.append(truncation(topic, partition, first, end))
    return out


def read_range(opts: Options, part: KafkaInputPartition,
               batch_rows: int = ARROW_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Exactly the records at offsets [part.start, part.until) as Arrow batches of up to
    ``batch_rows`` rows."""
    if part.until <= part.start:
        return
    topic, partition = part.topic, part.partition
    keys: list[Any] = []
    values: list[Any] = []
    offsets: list[int] = []
    stamps: list[int] = []
    types: list[int] = []
    ts_types = _TS_TYPES
    client = opts.new_client()
    # A broker lost while the task reads: the task waits for it and reads on (docs/operations.md,
    # "Broker outage"), instead of failing the query after pollTimeoutMs.
    watch = BrokerWatch(str(opts.client.get("bootstrap.servers", "?")), bound_s=opts.broker_outage_s,
                        what="the micro-batch that was reading")
    skipped: list[tuple[int, int]] = []

    def on_jump(_tp: tuple[str, int], first: int, read: int) -> None:
        skipped.append((first, read))

    chunks = client.read({(topic, partition): (part.start, part.until)}, reset=opts.reset,
                         chunk=batch_rows, on_gap=lambda _tp, message: data_loss(opts, message),
                         watch=watch, on_jump=on_jump if opts.data_loss_markers else None)
    with contextlib.closing(chunks):
        for msgs in chunks:
            if skipped:
                lost = deleted(client, topic, partition, skipped)
                skipped.clear()
                if lost:
                    yield marker_batch(lost)
            add_key, add_value, add_offset = keys.append, values.append, offsets.append
            add_stamp, add_type = stamps.append, types.append
            for msg in msgs:
                ts_type, ts = msg.timestamp()
                add_key(msg.key())
                add_value(msg.value())
                add_offset(msg.offset())
                add_stamp(ts * 1000)
                add_type(ts_types.get(ts_type, -1))
            if len(offsets) >= batch_rows:
                yield _arrow(topic, partition, keys, values, offsets, stamps, types)
                keys, values, offsets, stamps, types = [], [], [], [], []
    if skipped:  # the range's end itself was deleted: no record came after the skip
        lost = deleted(client, topic, partition, skipped)
        if lost:
            yield marker_batch(lost)
    if offsets:
        yield _arrow(topic, partition, keys, values, offsets, stamps, types)
