"""The replimon-kafka Spark source (streaming/sources/kafka/) against the embedded Tansu broker:
options, Spark streaming and batch queries, task planning. Admission of capped batches is
``test_kafka_admission.py``'s; the Kafka client under it is ``tests/kafka/``'s.

Records are produced with linger so that they land in multi-record batches: Tansu then reports a
short end offset (replimon/kafka/client.py, "The embedded broker's quirks"), and every test
still counts every record.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replimon.embedded import EmbeddedBroker
from replimon.kafka import KafkaClient
from replimon.streaming.sources.kafka import SCHEMA, KafkaOptionError
from replimon.streaming.sources.kafka.options import parse_options
from replimon.streaming.sources.kafka.planning import pack_ranges, split_ranges
from replimon.streaming.sources.kafka.schema import ARROW_SCHEMA
from tests.support import Rec, eventually, produce, true_end_offsets

pytestmark = pytest.mark.broker

FORMAT = "replimon-kafka"
TIMEOUT = 90.0


# -- helpers ------------------------------------------------------------------------------------

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


def reported_ends(bootstrap: str, topic: str) -> dict[int, int]:
    """What ListOffsets(latest) says the partitions' ends are (short on Tansu)."""
    with KafkaClient({"bootstrap.servers": bootstrap}) as client:
        marks = client.watermarks(client.topic_partitions([topic]))
    return {p: high for (_, p), (_, high) in marks.items()}


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    eventually(predicate, timeout=timeout, what=what)


# -- pure planning --------------------------------------------------------------------------------

def test_schema_is_the_builtin_kafka_schema() -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    assert SCHEMA.simpleString() == ("struct<key:binary,value:binary,topic:string,partition:int,"
                                     "offset:bigint,timestamp:timestamp,timestampType:int>")
    assert to_arrow_schema(SCHEMA, timezone="UTC").equals(ARROW_SCHEMA)


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
    reported = reported_ends(bootstrap, topics[0])
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


def test_data_loss_markers(spark: Any, broker: EmbeddedBroker, topic_prefix: str,
                           tmp_path: Path) -> None:
    """dataLossMarkers (docs/operations.md, "Data loss"): a partition whose offset moved back is
    read from its new start, after one marker row (offset -1) saying where it moved from and to;
    the other partitions are read as usual; the next run has no marker."""
    bootstrap = broker.bootstrap_servers
    topic = topic_prefix + "marked"
    broker.create_topics([topic], partitions=2)
    sent = fill(bootstrap, topic, 2, 20)  # 10 records a partition
    options = {"subscribe": topic, "startingOffsets": f'{{"{topic}": {{"0": 50, "1": 3}}}}',
               "failOnDataLoss": "false", "dataLossMarkers": "true"}
    ckpt = tmp_path / "marked"
    got = flat(run_available_now(spark, bootstrap, ckpt, **options))
    marks = [r for r in got if r[2] == -1]
    assert [(t, p) for t, p, _, _ in marks] == [(topic, 0)]
    assert json.loads(marks[0][3]) == {"topic": topic, "partition": 0, "from": 50, "to": 10, "earliest": 0}
    # sorted: the order of ``sent`` is the order delivery reports came back in, across partitions
    assert [r for r in got if r[2] >= 0] == sorted(r for r in sent if r[1] == 0 or r[2] >= 3)
    more = fill(bootstrap, topic, 2, 4, "more-")
    assert flat(run_available_now(spark, bootstrap, ckpt, **options)) == sorted(more)


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
