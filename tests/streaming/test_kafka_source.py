"""The replimon-kafka Spark source (streaming/sources/kafka.py) against the embedded Tansu broker.

Records are produced with linger so that they land in multi-record batches: Tansu then reports a
short end offset (broker.py, "High-watermark quirk"), and every test still counts every record.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from replimon.embedded import EmbeddedBroker, true_end_offsets
from replimon.streaming.sources.kafka import (
    ARROW_SCHEMA,
    SCHEMA,
    KafkaOptionError,
    KafkaStreamReader,
    offsets_from_json,
    offsets_to_json,
    parse_options,
    rate_limit,
    split_ranges,
)
from replimon.streaming.sources.kafka_admission import (
    AlignStats,
    TimestampIndex,
    plan_aligned,
)
from tests.support import eventually

pytestmark = pytest.mark.broker

FORMAT = "replimon-kafka"
TIMEOUT = 90.0
Rec = tuple[str, int, int, bytes]  # topic, partition, offset, value


# -- helpers ------------------------------------------------------------------------------------

def produce(bootstrap: str, topic: str, items: Iterable[tuple[int, bytes | None, bytes]],
            timestamps: Iterable[int] | None = None, batch_records: int = 10_000) -> list[Rec]:
    """Produce (partition, key, value) items with linger (multi-record batches of up to
    ``batch_records``); the records as the broker stored them."""
    delivered: list[Rec] = []
    errors: list[Any] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.topic(), msg.partition(), msg.offset(), msg.value()))

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.num.messages": batch_records})
    stamps = iter(timestamps) if timestamps is not None else None
    for part, key, value in items:
        stamp = next(stamps) if stamps is not None else 0  # 0: now
        producer.produce(topic, key=key, value=value, partition=part, on_delivery=report,
                         timestamp=stamp)
    assert producer.flush(30) == 0
    assert not errors, errors
    return delivered


def fill(bootstrap: str, topic: str, partitions: int, count: int, tag: str = "") -> list[Rec]:
    return produce(bootstrap, topic,
                   ((i % partitions, None if i % 7 == 0 else f"k{i}".encode(),
                     f"{topic}:{tag}{i}".encode()) for i in range(count)))


def reader(spark: Any, bootstrap: str, stream: bool = True, **options: Any) -> Any:
    src = (spark.readStream if stream else spark.read).format(FORMAT)
    src = src.option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        src = src.option(key, str(value))
    return src.load()


def run_available_now(spark: Any, bootstrap: str, checkpoint: Path,
                      **options: Any) -> list[list[Rec]]:
    """One availableNow run into foreachBatch; the records of every non-empty micro-batch."""
    batches: dict[int, list[Rec]] = {}

    def collect(df: Any, batch_id: int) -> None:
        rows = df.select("topic", "partition", "offset", "value").collect()
        batches[batch_id] = [(r.topic, r.partition, r.offset, bytes(r.value)) for r in rows]

    query = (reader(spark, bootstrap, **options).writeStream.foreachBatch(collect)
             .trigger(availableNow=True).option("checkpointLocation", str(checkpoint)).start())
    assert query.awaitTermination(TIMEOUT), "availableNow query did not finish"
    assert query.exception() is None
    return [batches[b] for b in sorted(batches) if batches[b]]


def flat(batches: list[list[Rec]]) -> list[Rec]:
    return sorted(r for b in batches for r in b)


def reported_ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "t"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
    finally:
        consumer.close()


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    eventually(predicate, timeout=timeout, what=what)


# -- pure planning --------------------------------------------------------------------------------

def test_schema_is_the_builtin_kafka_schema() -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    assert SCHEMA.simpleString() == ("struct<key:binary,value:binary,topic:string,partition:int,"
                                     "offset:bigint,timestamp:timestamp,timestampType:int>")
    assert to_arrow_schema(SCHEMA, timezone="UTC").equals(ARROW_SCHEMA)


def test_offsets_json_is_deterministic() -> None:
    offsets = {("b", 10): 5, ("a", 2): 1, ("b", 2): 7, ("a", 0): 3}
    as_json = offsets_to_json(offsets)
    assert list(as_json) == ["a", "b"]
    assert list(as_json["b"]) == ["2", "10"]  # numeric partition order, string keys
    assert offsets_to_json(dict(reversed(list(offsets.items())))) == as_json
    assert offsets_from_json(as_json) == offsets


def test_rate_limit_is_exact_and_proportional() -> None:
    starts = {("t", 0): 0, ("t", 1): 10, ("t", 2): 5, ("u", 0): 3}
    ends = {("t", 0): 100, ("t", 1): 10, ("t", 2): 6, ("u", 0): 303}
    capped = rate_limit(starts, ends, 40)
    assert sum(capped[tp] - starts[tp] for tp in starts) == 40
    assert all(starts[tp] <= capped[tp] <= ends[tp] for tp in starts)
    assert capped[("t", 1)] == 10 and capped[("u", 0)] - 3 > capped[("t", 0)]
    assert rate_limit(starts, ends, 1000) == ends
    assert sum(rate_limit(starts, ends, 1)[tp] - starts[tp] for tp in starts) == 1


def test_split_ranges_like_spark() -> None:
    ranges = [("t", 0, 0, 100), ("t", 1, 0, 1), ("t", 2, 5, 5)]
    assert split_ranges(ranges) == [("t", 0, 0, 100), ("t", 1, 0, 1)]
    split = split_ranges(ranges, min_partitions=4)
    assert split == [("t", 0, 0, 33), ("t", 0, 33, 66), ("t", 0, 66, 100), ("t", 1, 0, 1)]
    assert split_ranges(ranges, max_records_per_partition=40) == [
        ("t", 0, 0, 33), ("t", 0, 33, 66), ("t", 0, 66, 100), ("t", 1, 0, 1)]


# -- options -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("options", "named"), [
    ({"maxOffsetsPerTrigger": "abc"}, "maxOffsetsPerTrigger"),
    ({"alignTimestamps": "yes"}, "alignTimestamps"),
    ({"minPartitions": "0"}, "minPartitions"),
    ({"failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({"startingOffsets": "{nope"}, "startingOffsets"),
    ({"startingOffsets": '{"other": {"0": 1}}'}, "startingOffsets"),
    ({"startingOffsets": '{"t": {"0": -5}}'}, "startingOffsets"),
    ({"startingTimestamp": "yesterday"}, "startingTimestamp"),
    ({"kafka.auto.offset.reset": "earliest"}, "kafka.auto.offset.reset"),
    ({"kafka.isolation.level": "dirty"}, "kafka.isolation.level"),
    ({"minOffsetsPerTrigger": "10"}, "minOffsetsPerTrigger"),
    ({"kafka.bootstrap.servers": ""}, "kafka.bootstrap.servers"),
    ({"subscribe": None, "assign": '{"t": "0"}'}, "assign"),
    ({"subscribePattern": "t.*"}, "subscribe"),
])
def test_bad_option_is_named(options: dict[str, str | None], named: str) -> None:
    base: dict[str, str | None] = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}
    base.update(options)
    with pytest.raises(KafkaOptionError, match=named.replace(".", r"\.")):
        parse_options({k: v for k, v in base.items() if v is not None})


def test_bad_option_fails_the_spark_query(spark: Any, broker: EmbeddedBroker,
                                          topic_prefix: str) -> None:
    bootstrap = broker.bootstrap_servers
    with pytest.raises(Exception, match="maxOffsetsPerTrigger") as info:
        reader(spark, bootstrap, subscribe=topic_prefix + "x", maxOffsetsPerTrigger="many")
    assert "positive integer" in str(info.value)
    with pytest.raises(Exception, match="startingOffsets.*cannot be latest"):
        reader(spark, bootstrap, stream=False, subscribe=topic_prefix + "x",
               startingOffsets="latest").collect()
    with pytest.raises(Exception, match="endingOffsets.*cannot be earliest"):
        reader(spark, bootstrap, subscribe=topic_prefix + "x", endingOffsets="earliest") \
            .writeStream.format("noop").start().awaitTermination(TIMEOUT)


# -- streaming -----------------------------------------------------------------------------------

def test_available_now_reads_every_record(spark: Any, broker: EmbeddedBroker, topic_prefix: str,
                                          tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    topics = [topic_prefix + "a", topic_prefix + "b"]
    broker.create_topics(topics, partitions=3)
    sent = sorted(fill(bootstrap, topics[0], 3, 900) + fill(bootstrap, topics[1], 3, 451))
    # The quirk bites: the reported end is short of the true end.
    reported = reported_ends(bootstrap, topics[0], 3)
    true = true_end_offsets(bootstrap, topics[0], isolation_level="read_uncommitted")
    assert any(reported[p] < true[p] for p in true), (reported, true)

    out = tmp_path / "out"
    query = (reader(spark, bootstrap, subscribe=",".join(topics), startingOffsets="earliest",
                    minPartitions=8)
             .writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(TIMEOUT)
    assert query.exception() is None
    df = spark.read.parquet(str(out))
    assert df.schema.simpleString() == SCHEMA.simpleString()
    rows = df.collect()
    got = sorted((r.topic, r.partition, r.offset, bytes(r.value)) for r in rows)
    assert got == sent
    nulls = [r for r in rows if r.key is None]
    assert nulls and all(bytes(r.value).split(b":")[1].isdigit() for r in rows)
    assert {r.timestampType for r in rows} == {0}


def test_max_offsets_per_trigger_splits_batches(spark: Any, broker: EmbeddedBroker,
                                                topic_prefix: str, tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    topic = topic_prefix + "limited"
    broker.create_topics([topic], partitions=3)
    sent = sorted(fill(bootstrap, topic, 3, 1000))
    batches = run_available_now(spark, bootstrap, tmp_path / "ckpt", subscribe=topic,
                                startingOffsets="earliest", maxOffsetsPerTrigger=250)
    assert [len(b) for b in batches] == [250, 250, 250, 250]
    assert flat(batches) == sent  # nothing lost, nothing twice


def test_failed_batch_is_rerun_with_the_same_records(spark: Any, broker: EmbeddedBroker,
                                                      topic_prefix: str, tmp_path: Path) -> None:
    """A batch whose sink failed is planned again from the offset log on restart: it must read
    exactly the same records even though more have arrived since."""
    bootstrap = broker.bootstrap_servers
    topic = topic_prefix + "rerun"
    broker.create_topics([topic], partitions=2)
    sent = fill(bootstrap, topic, 2, 300)
    seen: dict[int, list[Rec]] = {}
    calls: list[int] = []
    fail_at = [1]

    def sink(df: Any, batch_id: int) -> None:
        calls.append(batch_id)
        rows = sorted((r.topic, r.partition, r.offset, bytes(r.value)) for r in df.collect())
        if batch_id in seen:
            assert rows == seen[batch_id], f"batch {batch_id} re-read different records"
        seen[batch_id] = rows
        if batch_id in fail_at:
            fail_at.clear()
            raise RuntimeError("sink down")

    def run() -> Any:
        query = (reader(spark, bootstrap, subscribe=topic, startingOffsets="earliest",
                        maxOffsetsPerTrigger=100)
                 .writeStream.foreachBatch(sink).trigger(availableNow=True)
                 .option("checkpointLocation", str(tmp_path / "ckpt")).start())
        return query

    with pytest.raises(Exception, match="sink down"):
        run().awaitTermination(TIMEOUT)
    failed = list(seen[1])
    more = fill(bootstrap, topic, 2, 60, "more-")
    query = run()
    assert query.awaitTermination(TIMEOUT) and query.exception() is None
    assert seen[1] == failed and len(failed) == 100 and calls.count(1) == 2
    assert sorted(r for b in seen.values() for r in b) == sorted(sent + more)


def test_restart_reads_only_new_records_and_new_topics(spark: Any, broker: EmbeddedBroker,
                                                       topic_prefix: str,
                                                       tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    old, later = topic_prefix + "old", topic_prefix + "later"
    broker.create_topics([old], partitions=2)
    first = fill(bootstrap, old, 2, 300, "first-")
    options = {"subscribe": f"{old},{later}", "startingOffsets": "earliest"}
    ckpt = tmp_path / "ckpt"
    assert flat(run_available_now(spark, bootstrap, ckpt, **options)) == sorted(first)

    assert run_available_now(spark, bootstrap, ckpt, **options) == []  # nothing new
    second = fill(bootstrap, old, 2, 120, "second-")
    broker.create_topics([later], partitions=2)  # did not exist at the first runs
    third = fill(bootstrap, later, 2, 50)
    assert flat(run_available_now(spark, bootstrap, ckpt, **options)) == sorted(second + third)


def test_starting_offsets_latest_reads_only_later_records(spark: Any, broker: EmbeddedBroker,
                                                          topic_prefix: str,
                                                          tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    topic = topic_prefix + "latest"
    broker.create_topics([topic], partitions=2)
    fill(bootstrap, topic, 2, 40, "before-")
    got: list[Rec] = []

    def collect(df: Any, _batch_id: int) -> None:
        got.extend((r.topic, r.partition, r.offset, bytes(r.value)) for r in df.collect())

    query = (reader(spark, bootstrap, subscribe=topic, startingOffsets="latest")
             .writeStream.foreachBatch(collect).trigger(processingTime="200 milliseconds")
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        wait_for(lambda: query.lastProgress is not None, "the first trigger")
        after = fill(bootstrap, topic, 2, 25, "after-")
        wait_for(lambda: len(got) >= len(after), "the records produced after the start")
        time.sleep(0.5)  # nothing else may arrive
    finally:
        query.stop()
    assert sorted(got) == sorted(after)


def test_starting_offsets_json_and_timestamp(spark: Any, broker: EmbeddedBroker,
                                             topic_prefix: str, tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    topic = topic_prefix + "start"
    broker.create_topics([topic], partitions=3)
    base = 1_700_000_000_000
    sent = produce(bootstrap, topic, ((i % 3, None, f"v{i}".encode()) for i in range(60)),
                   timestamps=(base + i * 10 for i in range(60)))
    # partition 0 from offset 3, partition 1 from earliest, 2 not named: earliest
    spec = f'{{"{topic}": {{"1": -2, "0": 3}}}}'
    got = flat(run_available_now(spark, bootstrap, tmp_path / "c1", subscribe=topic,
                                 startingOffsets=spec))
    assert got == sorted(r for r in sent if r[1] != 0 or r[2] >= 3)
    got = flat(run_available_now(spark, bootstrap, tmp_path / "c2", subscribe=topic,
                                 startingOffsets=f'{{"{topic}": {{"0": -1, "1": 19}}}}'))
    assert got == sorted(r for r in sent if r[1] == 2 or (r[1] == 1 and r[2] >= 19))

    # Record i has timestamp base + 10 i: from 295 on means records 30..59 (Tansu answers the
    # earliest offset to every timestamp lookup; the source reads forward to the right one).
    got = flat(run_available_now(spark, bootstrap, tmp_path / "c3", subscribe=topic,
                                 startingTimestamp=base + 295))
    assert got == sorted(r for r in sent if int(r[3][1:]) >= 30)
    # A window [startingTimestamp, endingTimestamp) as a stream (Spark: batch only).
    got = flat(run_available_now(spark, bootstrap, tmp_path / "c6", subscribe=topic,
                                 startingTimestamp=base + 100, endingTimestamp=base + 300,
                                 maxOffsetsPerTrigger=7))
    assert got == sorted(r for r in sent if 10 <= int(r[3][1:]) < 30)
    with pytest.raises(Exception, match="no record in .* timestamp"):
        run_available_now(spark, bootstrap, tmp_path / "c4", subscribe=topic,
                          startingTimestamp=base + 10_000)
    assert run_available_now(spark, bootstrap, tmp_path / "c5", subscribe=topic,
                             startingTimestamp=base + 10_000,
                             startingOffsetsByTimestampStrategy="latest") == []


def test_batch_read_ranges(spark: Any, broker: EmbeddedBroker, topic_prefix: str) -> None:
    bootstrap = broker.bootstrap_servers
    topic, missing = topic_prefix + "replay", topic_prefix + "missing"
    broker.create_topics([topic], partitions=2)
    base = 1_700_000_000_000
    sent = sorted(produce(bootstrap, topic, ((i % 2, None, f"v{i}".encode()) for i in range(100)),
                          timestamps=(base + i for i in range(100))))

    def rows(**options: Any) -> list[Rec]:
        df = reader(spark, bootstrap, stream=False, **options)
        return sorted((r.topic, r.partition, r.offset, bytes(r.value)) for r in df.collect())

    assert rows(subscribe=f"{topic},{missing}") == sent  # to the true end; a missing topic is empty
    assert rows(subscribe=missing) == []
    assert rows(subscribe=topic, startingOffsets=f'{{"{topic}": {{"0": 10, "1": -2}}}}',
                endingOffsets=f'{{"{topic}": {{"0": 20, "1": 5}}}}') == [
        r for r in sent if (r[1] == 0 and 10 <= r[2] < 20) or (r[1] == 1 and r[2] < 5)]
    # records 40..69 (timestamps base+40 .. base+69)
    assert rows(subscribePattern=topic_prefix + "re.*", startingTimestamp=base + 40,
                endingTimestamp=base + 70) == [r for r in sent if 40 <= int(r[3][1:]) < 70]
    assert rows(subscribe=topic, endingOffsets="latest", minPartitions=7) == sent
    assert rows(assign=f'{{"{topic}": [1]}}') == [r for r in sent if r[1] == 1]
    # 2 x 50 records for at least 7 partitions: 4 slices of each (Spark's rounding)
    assert reader(spark, bootstrap, stream=False, subscribe=topic,
                  minPartitions=7).rdd.getNumPartitions() == 8


def test_fail_on_data_loss(spark: Any, broker: EmbeddedBroker, topic_prefix: str,
                           tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    topic = topic_prefix + "loss"
    broker.create_topics([topic], partitions=1)
    fill(bootstrap, topic, 1, 10)
    beyond = f'{{"{topic}": {{"0": 50}}}}'
    with pytest.raises(Exception, match="offset was changed from 50 to 10.*failOnDataLoss"):
        run_available_now(spark, bootstrap, tmp_path / "strict", subscribe=topic,
                          startingOffsets=beyond)
    with pytest.raises(Exception, match="failOnDataLoss"):
        reader(spark, bootstrap, stream=False, subscribe=topic, startingOffsets=beyond).collect()
    assert reader(spark, bootstrap, stream=False, subscribe=topic, startingOffsets=beyond,
                  failOnDataLoss="false").count() == 0

    lenient = {"subscribe": topic, "startingOffsets": beyond, "failOnDataLoss": "false"}
    ckpt = tmp_path / "lenient"
    assert run_available_now(spark, bootstrap, ckpt, **lenient) == []
    more = fill(bootstrap, topic, 1, 5, "more-")
    assert flat(run_available_now(spark, bootstrap, ckpt, **lenient)) == sorted(more)
    assert [r[2] for r in sorted(more)] == list(range(10, 15))



# -- timestamp-aligned admission (alignTimestamps) -----------------------------------------------

TPk = tuple[str, int]
Stamps = dict[TPk, list[int]]  # partition -> the timestamps of its records, offsets from 0


def memory_probe(stamps: Stamps, batch: int) -> Callable[[Mapping[TPk, int]],
                                                         dict[TPk, list[tuple[int, int]]]]:
    """A probe over records in memory that, like a Kafka fetch, also returns the rest of the
    record batch (of ``batch`` records) holding the wanted offset."""
    def probe(wanted: Mapping[TPk, int]) -> dict[TPk, list[tuple[int, int]]]:
        out = {}
        for tp, off in wanted.items():
            ts = stamps[tp]
            out[tp] = [(o, ts[o]) for o in range(off, min(off - off % batch + batch, len(ts)))]
        return out
    return probe


Planned = list[tuple[dict[TPk, int], dict[TPk, int], AlignStats]]  # (start, end, stats) a batch


def plan_all(stamps: Stamps, cap: int, batch: int) -> Planned:
    """Aligned batches from offset 0 until every record is admitted."""
    index = TimestampIndex()
    ends = {tp: len(ts) for tp, ts in stamps.items()}
    start = {tp: 0 for tp in stamps}
    out: Planned = []
    while start != ends:
        assert len(out) <= sum(ends.values()), "no progress"
        index.prune(start)
        end, stats = plan_aligned(start, ends, cap, index, memory_probe(stamps, batch))
        out.append((start, end, stats))
        start = end
    return out


def check_time_slices(stamps: Stamps, planned: Planned, cap: int) -> None:
    """Every batch holds 1..cap records and is a consistent prefix of what is left: all records
    up to its T, none later, and as large as that allows (the next timestamp would not fit);
    batches follow each other, so every record is admitted exactly once."""
    for start, end, stats in planned:
        assert all(start[tp] <= end[tp] <= len(ts) for tp, ts in stamps.items())
        admitted = [t for tp, ts in stamps.items() for t in ts[start[tp]:end[tp]]]
        later = [t for tp, ts in stamps.items() for t in ts[end[tp]:]]
        assert 1 <= len(admitted) <= cap
        assert stats.fallback is None
        if stats.tie_split:  # one timestamp alone holds more than the cap
            assert set(admitted) == {stats.timestamp}
            assert not later or min(later) >= stats.timestamp
        elif later:
            assert stats.timestamp is not None
            assert max(admitted) <= stats.timestamp < min(later)
            assert len(admitted) + later.count(min(later)) > cap
    assert all(a[1] == b[0] for a, b in zip(planned, planned[1:], strict=False))


def probe_bound(backlog: int) -> float:
    """Fetch rounds allowed per batch: logarithmic in the backlog."""
    return 3 * math.log2(backlog + 2) + 6


def monotone(deltas: st.SearchStrategy[int]) -> st.SearchStrategy[list[int]]:
    return st.tuples(st.integers(0, 5_000), st.lists(deltas, max_size=400)).map(
        lambda p: [p[0] + sum(p[1][:i + 1]) for i in range(len(p[1]))])


BURSTY = st.sampled_from([0, 0, 0, 1, 2, 700, 8_000])


@settings(max_examples=150, deadline=None)
@given(parts=st.lists(monotone(BURSTY), min_size=1, max_size=6), cap=st.integers(1, 300),
       batch=st.sampled_from([1, 7, 100]))
def test_aligned_batches_are_time_slices(parts: list[list[int]], cap: int, batch: int) -> None:
    stamps = {(f"t{i % 3}", i): ts for i, ts in enumerate(parts)}
    if not any(parts):
        return
    planned = plan_all(stamps, cap, batch)
    check_time_slices(stamps, planned, cap)
    for start, end, stats in planned:
        backlog = sum(len(ts) - start[tp] for tp, ts in stamps.items())
        assert stats.capped == (backlog > cap)
        assert stats.rounds <= probe_bound(backlog), stats
        if not stats.capped:
            assert stats.probes == 0 and end == {tp: len(ts) for tp, ts in stamps.items()}


@settings(max_examples=100, deadline=None)
@given(parts=st.lists(st.lists(st.integers(0, 60), max_size=120), min_size=1, max_size=5),
       cap=st.integers(1, 50), batch=st.sampled_from([1, 10]))
def test_aligned_batches_survive_out_of_order_timestamps(parts: list[list[int]], cap: int,
                                                         batch: int) -> None:
    """CreateTime need not be ordered: batches still hold 1..cap records, each record once."""
    stamps = {("t", i): ts for i, ts in enumerate(parts)}
    if not any(parts):
        return
    index = TimestampIndex()
    start = {tp: 0 for tp in stamps}
    seen = 0
    while start != {tp: len(ts) for tp, ts in stamps.items()}:
        end, _stats = plan_aligned(start, {tp: len(ts) for tp, ts in stamps.items()}, cap, index,
                                   memory_probe(stamps, batch))
        assert all(start[tp] <= end[tp] for tp in stamps)
        assert 1 <= sum(end[tp] - start[tp] for tp in stamps) <= cap
        seen += sum(end[tp] - start[tp] for tp in stamps)
        start = end
    assert seen == sum(len(ts) for ts in parts)


def test_aligned_batches_share_out_a_timestamp_larger_than_the_cap() -> None:
    stamps = {("a", 0): [5] * 50 + [9] * 15, ("b", 0): [5] * 30 + [6] * 10, ("c", 0): [7]}
    planned = plan_all(stamps, 20, 8)
    check_time_slices(stamps, planned, 20)
    assert [s.tie_split for _, _, s in planned] == [True] * 3 + [False] * 3  # the 4th: 20 fives
    assert planned[4][1] == {("a", 0): 50, ("b", 0): 40, ("c", 0): 1}  # 6s and 7: the 9s don't fit


def test_proportional_cut_is_not_a_time_slice() -> None:
    """Why the option exists: Spark's rule cuts a sparse partition far from a dense one."""
    stamps = {("dense", 0): list(range(0, 9_900, 10)), ("sparse", 0): list(range(9_000, 9_010))}
    start = {tp: 0 for tp in stamps}
    ends = {tp: len(ts) for tp, ts in stamps.items()}
    cut = rate_limit(start, ends, 100)
    assert cut == {("dense", 0): 99, ("sparse", 0): 1}  # 9.0 s in, 0.99 s out
    end, stats = plan_aligned(start, ends, 100, TimestampIndex(), memory_probe(stamps, 10))
    assert end == {("dense", 0): 100, ("sparse", 0): 0} and stats.timestamp == 999


def timeline(base: int) -> dict[str, list[tuple[int, int]]]:
    """Topic suffix -> (partition, timestamp) of its records over 60 s, in time order within a
    partition: "dense" (2 partitions, a record every 10 ms each), "beats" (a burst of 20 records
    in one millisecond every second), "config" (5 records within 3 ms every 8 s)."""
    return {
        "dense": [(i % 2, base + (i // 2) * 10) for i in range(12_000)],
        "beats": [(0, base + s * 1000 + 500) for s in range(60) for _ in range(20)],
        "config": [(0, base + s * 1000 + k) for s in range(8, 60, 8) for k in (0, 0, 1, 2, 3)],
    }


def produce_timeline(broker: EmbeddedBroker, prefix: str, base: int) -> dict[tuple[str, int, int], int]:
    """The timeline produced with explicit timestamps, in record batches of up to 200 (so that
    a probe does not see a whole partition); (topic, partition, offset) -> timestamp."""
    sent: dict[tuple[str, int, int], int] = {}
    for suffix, items in timeline(base).items():
        topic = prefix + suffix
        broker.create_topics([topic], partitions=2 if suffix == "dense" else 1)
        recs = produce(broker.bootstrap_servers, topic,
                       ((p, None, f"{suffix}:{ts}".encode()) for p, ts in items),
                       timestamps=(ts for _, ts in items), batch_records=200)
        for t, p, off, value in recs:
            sent[(t, p, off)] = int(value.split(b":")[1])
    return sent


def drive(bootstrap: str, cap: int, after_prepare: Callable[[], Any] = lambda: None,
          **options: Any) -> tuple[list[dict[tuple[str, int, int], int]], list[AlignStats | None],
                                   list[float]]:
    """An availableNow run driving the reader as Spark does (prepare, initialOffset, then
    latestOffset / partitions / read per batch) without Spark: per batch the records read
    ((topic, partition, offset) -> timestamp ms), the alignment stats and the planning time."""
    from pyspark.sql.streaming.datasource import ReadMaxRows

    opts = parse_options({"kafka.bootstrap.servers": bootstrap, "startingOffsets": "earliest",
                          "maxOffsetsPerTrigger": str(cap), **options})
    src = KafkaStreamReader(opts)
    batches: list[dict[tuple[str, int, int], int]] = []
    stats: list[AlignStats | None] = []
    took: list[float] = []
    try:
        src.prepareForTriggerAvailableNow()
        after_prepare()
        start = src.initialOffset()
        while True:
            src.last_alignment = None
            began = time.perf_counter()
            end = src.latestOffset(start, ReadMaxRows(cap))
            took.append(time.perf_counter() - began)
            if end == start:
                break
            got: dict[tuple[str, int, int], int] = {}
            for part in src.partitions(start, end):
                for rb in src.read(part):
                    cols = [rb.column(c).to_pylist() for c in ("topic", "partition", "offset")]
                    micros = rb.column("timestamp").cast(pa.int64()).to_pylist()
                    for t, p, off, us in zip(*cols, micros, strict=True):
                        got[(t, p, off)] = us // 1000
            batches.append(got)
            stats.append(src.last_alignment)
            start = end
            assert len(batches) < 1000, "no progress"
    finally:
        src.stop()
    return batches, stats, took


def test_align_timestamps_reads_time_slices_of_all_topics(broker: EmbeddedBroker,
                                                          topic_prefix: str) -> None:
    bootstrap = broker.bootstrap_servers
    base = 1_700_000_000_000
    sent = produce_timeline(broker, topic_prefix, base)
    cap = 1000
    late = []

    def produce_late() -> None:  # after the availableNow target was fixed: not read in this run
        late.extend(produce(bootstrap, topic_prefix + "dense", ((0, None, b"late:0"),),
                            timestamps=(base + 61_000,)))

    batches, stats, took = drive(bootstrap, cap, produce_late, subscribePattern=topic_prefix + ".*",
                                 alignTimestamps="true")
    assert late and not any(k == late[0][:3] for b in batches for k in b)
    read = [k for b in batches for k in b]
    assert sorted(read) == sorted(sent) and len(read) == len(set(read))  # each record once
    assert all(b[k] == sent[k] for b in batches for k in b)  # timestamps as produced
    for i, batch in enumerate(batches):
        later = [ts for b in batches[i + 1:] for ts in b.values()]
        assert 1 <= len(batch) <= cap
        if later:
            assert max(batch.values()) < min(later), f"batch {i} is not a time slice"
            assert len(batch) + later.count(min(later)) > cap  # as large as alignment allows
    assert len(batches) == -(-len(sent) // cap)  # batches nearly full: > cap - a burst (22)
    capped = [s for s in stats if s is not None]
    assert len(capped) == len(batches) - 1 and not any(s.tie_split or s.fallback for s in capped)
    assert all(s.rounds <= probe_bound(s.backlog) for s in capped), capped
    print(f"\naligned: {len(batches)} batches of <= {cap}; probes per batch "
          f"{[s.probes for s in capped]}, rounds {[s.rounds for s in capped]}, planning ms "
          f"{[round(t * 1000) for t in took]}")


def test_without_align_timestamps_batches_are_proportional(broker: EmbeddedBroker,
                                                           topic_prefix: str) -> None:
    """The default is Spark's rule, unchanged: the cuts are not time slices."""
    bootstrap = broker.bootstrap_servers
    sent = produce_timeline(broker, topic_prefix, 1_700_000_000_000)
    batches, stats, _took = drive(bootstrap, 1000, subscribePattern=topic_prefix + ".*")
    assert sorted(k for b in batches for k in b) == sorted(sent)
    assert [len(b) for b in batches] == [1000] * 13 + [len(sent) - 13_000]
    assert stats == [None] * len(batches)  # nothing probed
    first, rest = batches[0], [ts for b in batches[1:] for ts in b.values()]
    assert max(first.values()) > min(rest)  # config at 8 s is in, dense at 4.6 s is not
    per_topic = {t: sum(1 for k in first if k[0] == topic_prefix + t) for t in ("dense", "beats",
                                                                             "config")}
    start = {tp: 0 for tp in {(k[0], k[1]) for k in sent}}
    ends = {tp: 1 + max(k[2] for k in sent if (k[0], k[1]) == tp) for tp in start}
    cut = rate_limit(start, ends, 1000)
    assert per_topic == {t: sum(cut[tp] for tp in cut if tp[0] == topic_prefix + t)
                         for t in per_topic}


def test_align_timestamps_with_spark_available_now(spark: Any, broker: EmbeddedBroker,
                                                   topic_prefix: str, tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    base = 1_700_000_000_000
    rng = random.Random(3)
    dense = [(i % 3, base + i * 4 + rng.choice([0, 0, 1])) for i in range(3_000)]
    sparse = [(0, base + s * 997) for s in range(12) for _ in range(rng.randint(1, 4))]
    sent: dict[tuple[str, int, int], int] = {}
    for suffix, items, parts in (("dense", dense, 3), ("sparse", sparse, 1)):
        broker.create_topics([topic_prefix + suffix], partitions=parts)
        for t, p, off, value in produce(bootstrap, topic_prefix + suffix,
                                        ((p, None, str(ts).encode()) for p, ts in items),
                                        timestamps=(ts for _, ts in items)):
            sent[(t, p, off)] = int(value)
    batches: dict[int, dict[tuple[str, int, int], int]] = {}

    def collect(df: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        rows = df.select("topic", "partition", "offset", F.unix_millis("timestamp").alias("ms"))
        batches[batch_id] = {(r.topic, r.partition, r.offset): r.ms for r in rows.collect()}

    query = (reader(spark, bootstrap, subscribe=f"{topic_prefix}dense,{topic_prefix}sparse",
                    startingOffsets="earliest", maxOffsetsPerTrigger=700, alignTimestamps="true")
             .writeStream.foreachBatch(collect).trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    assert query.awaitTermination(TIMEOUT) and query.exception() is None
    got = [batches[b] for b in sorted(batches) if batches[b]]
    assert sorted(k for b in got for k in b) == sorted(sent)
    assert all(b[k] == sent[k] for b in got for k in b)
    for i, batch in enumerate(got):
        later = [ts for b in got[i + 1:] for ts in b.values()]
        assert 1 <= len(batch) <= 700
        assert not later or max(batch.values()) < min(later), f"batch {i} is not a time slice"
    assert len(got) == -(-len(sent) // 700)


# -- maxPartitions: few tasks, each reading several topic-partitions --------------------------------
def test_pack_ranges_balances_and_keeps_every_range_once() -> None:
    from replimon.streaming.sources.kafka import pack_ranges

    ranges = [("a", p, 0, n) for p, n in enumerate((900, 10, 400, 400, 50, 1, 300))] + [("b", 0, 5, 505)]
    bins = pack_ranges(ranges, 3)
    assert len(bins) == 3
    assert sorted(r for b in bins for r in b) == sorted(ranges)
    loads = sorted(sum(r[3] - r[2] for r in b) for b in bins)
    assert loads == [811, 850, 900]  # largest first onto the lightest: as even as it gets here
    assert pack_ranges(ranges, 3) == bins  # deterministic
    assert pack_ranges(ranges[:2], 5) == [[ranges[0]], [ranges[1]]]


def test_max_partitions_reads_every_record_in_few_tasks(spark: Any, broker: EmbeddedBroker,
                                                       topic_prefix: str, tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    topics = [topic_prefix + "x", topic_prefix + "y"]
    broker.create_topics(topics, partitions=4)
    sent = sorted(fill(bootstrap, topics[0], 4, 800) + fill(bootstrap, topics[1], 4, 333))
    tasks: list[int] = []

    def collect(df: Any, batch_id: int) -> None:
        tasks.append(df.rdd.getNumPartitions())
        rows = df.select("topic", "partition", "offset", "value").collect()
        got.extend((r.topic, r.partition, r.offset, bytes(r.value)) for r in rows)

    got: list[Rec] = []
    query = (reader(spark, bootstrap, subscribe=",".join(topics), startingOffsets="earliest",
                    maxPartitions=2, maxOffsetsPerTrigger=600)
             .writeStream.foreachBatch(collect).trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    assert query.awaitTermination(TIMEOUT) and query.exception() is None
    assert sorted(got) == sent  # nothing lost, nothing twice
    assert len(tasks) >= 2 and max(tasks) <= 2  # 8 topic-partitions in at most 2 tasks per batch


def test_min_partitions_above_max_partitions_is_refused() -> None:
    with pytest.raises(KafkaOptionError, match="'minPartitions' .* larger than 'maxPartitions'"):
        parse_options({"subscribe": "t", "kafka.bootstrap.servers": "x:1", "minPartitions": "4",
                       "maxPartitions": "2"})
