"""Kafka source for Spark written against PySpark's Python data source API (``replimon-kafka``).

Spark's own ``kafka`` connector needs a JVM jar that the embedded setup does not ship, and a
Python source cannot be registered under the name ``kafka``. This one uses confluent-kafka
(librdkafka) and takes the built-in connector's option names and output columns (see
``docs/kafka-source.md``)::

    spark.readStream.format("replimon-kafka")
        .option("kafka.bootstrap.servers", "127.0.0.1:9092")
        .option("subscribe", "a,b")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 10000)
        .load()

Columns: ``key`` binary, ``value`` binary, ``topic`` string, ``partition`` int, ``offset`` long,
``timestamp`` timestamp, ``timestampType`` int.

Offsets are ``{"topic": {"partition": next_offset}}`` with string partition keys, topics and
partitions in sorted order, so the JSON Spark stores in its offset log is deterministic. A
micro-batch is the half-open range ``[start, end)`` of every partition, and ``read`` returns
exactly the records in that range, so a batch re-run after a crash reads the same records.

End offsets are never taken from ListOffsets(latest) alone: Tansu (the embedded broker) answers it
with the base offset of the partition's last record batch + 1 (``replimon/embedded/broker.py``,
"High-watermark quirk"). The planner fetches from one record before the reported end up to
``PARTITION_EOF``, whose position is the true end, with the same isolation level the readers use
(``read_uncommitted`` unless ``kafka.isolation.level`` says otherwise). On Apache Kafka that
costs one record per partition and gives the same answer. Tansu also ignores the timestamp in
ListOffsets (every lookup answers the earliest offset), so timestamp options are resolved by
scanning forward from the broker's answer to the first record at or after the timestamp.

With ``maxOffsetsPerTrigger`` a batch is cut in proportion to the partitions' backlogs (Spark's
rule) or, with ``alignTimestamps``, at one record timestamp across all partitions, found by
probing single records (``kafka_admission.py``, ``KafkaClient.record_timestamps``).

Clients never join a consumer group (``assign()`` with explicit offsets, no commits).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from replimon.streaming.sources.kafka_admission import (
    INF,
    AlignStats,
    ProbeUnavailable,
    TimestampIndex,
    plan_aligned,
    rate_limit,
)

__all__ = ["KafkaDataSource", "KafkaDataLossError", "KafkaOptionError", "SCHEMA", "ARROW_SCHEMA",
           "rate_limit"]

logger = logging.getLogger(__name__)

SOURCE_NAME = "replimon-kafka"

SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
])
# What PySpark's to_arrow_schema(SCHEMA, timezone="UTC") gives; read() must yield exactly this.
ARROW_SCHEMA = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
])

# librdkafka timestamp types -> Kafka's TimestampType ids, as Spark reports them.
_TS_TYPES = {0: -1, 1: 0, 2: 1}
EARLIEST = -2  # Spark's JSON sentinels in startingOffsets / endingOffsets
LATEST = -1
ARROW_BATCH_ROWS = 10_000
DEFAULT_GROUP_ID = "replimon-kafka-source"  # required by librdkafka; never joined or committed
DEFAULT_POLL_TIMEOUT_MS = 120_000  # Spark's default for kafkaConsumer.pollTimeoutMs
_IDLE_CHECK_S = 1.0  # after this long without records, ask the fetch high watermark
PROBE_KEEP = 1024  # records a timestamp probe keeps per partition from what it fetched
# The prober's fetches: one record batch per partition per fetch (the broker sends at least one
# whole batch whatever the size limit), a new fetch only once the queue is drained, no waiting on
# the broker (a probe never reads at the end). Measured on Tansu, one round of 3 partitions with
# 100-record batches: ~4 ms keeping 256 records a partition, ~10 ms keeping 1024, ~35 ms keeping
# 4096 (Python's per-record cost dominates); a longer queue backoff (10, 50 ms) kept fewer
# records but made rounds slower (15-57 ms).
_PROBE_FETCH = {"max.partition.fetch.bytes": 1, "queued.min.messages": 1,
                "fetch.queue.backoff.ms": 1, "fetch.wait.max.ms": 1}

TP = tuple[str, int]


class KafkaOptionError(ValueError):
    """An option of the replimon-kafka source is missing or has a bad value; names the option."""


class KafkaDataLossError(RuntimeError):
    """Records the query was planned to read are gone (and ``failOnDataLoss`` is true)."""


# ------------------------------------------------------------------------------------------
# Options
# ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Endpoint:
    """A parsed startingX / endingX option: which kind, and its value.

    kind: "default" (option absent), "earliest", "latest", "offsets" ({tp: offset}, -2/-1
    sentinels allowed), "timestamp" (one ms value for every partition) or "timestamps" ({tp: ms}).
    """

    kind: str
    offsets: dict[TP, int] = field(default_factory=dict)
    timestamp: int | None = None
    option: str = ""  # the option it came from, for error messages


@dataclass(frozen=True)
class Options:
    client: dict[str, str]  # librdkafka config from kafka.* (prefix stripped)
    strategy: str  # subscribe | subscribePattern | assign
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TP, ...] = ()
    starting: Endpoint = Endpoint("default")
    ending: Endpoint = Endpoint("default")
    starting_ts_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    align_timestamps: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_partitions: int | None = None
    fail_on_data_loss: bool = True
    poll_timeout_s: float = DEFAULT_POLL_TIMEOUT_MS / 1000

    @property
    def isolation_level(self) -> str:
        return self.client.get("isolation.level", "read_uncommitted")

    def subscribed(self, topic: str) -> bool:
        if self.strategy == "subscribe":
            return topic in self.topics
        if self.strategy == "subscribePattern":
            assert self.pattern is not None
            return not topic.startswith("__") and re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)


# Consumer settings this source owns (Spark rejects the same ones).
_PROTECTED = {
    "auto.offset.reset": "set the source option 'startingOffsets' instead (and 'failOnDataLoss' "
                         "for what happens to offsets that are gone)",
    "enable.auto.commit": "the source never commits offsets",
    "enable.auto.offset.store": "the source never commits offsets",
    "enable.partition.eof": "the source needs partition EOF events to find the end",
    "key.deserializer": "keys are always returned as binary",
    "value.deserializer": "values are always returned as binary",
}
_UNSUPPORTED = {
    "minoffsetspertrigger": "minOffsetsPerTrigger",
    "maxtriggerdelay": "maxTriggerDelay",
    "maxbytespertrigger": "maxBytesPerTrigger",
}
# Consumer-only librdkafka properties, dropped from the AdminClient's config (it would warn).
_CONSUMER_ONLY = ("group.", "isolation.level", "enable.auto.", "auto.", "enable.partition.eof",
                  "fetch.", "queued.", "max.poll.interval.ms", "session.timeout.ms",
                  "heartbeat.interval.ms", "partition.assignment.strategy", "check.crcs",
                  "consume.callback.max.messages", "allow.auto.create.topics")


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value not in ("true", "false"):
        raise KafkaOptionError(f"Option '{name}' must be 'true' or 'false', got {raw!r}")
    return value == "true"


def _positive_int(opts: Mapping[str, str], name: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise KafkaOptionError(f"Option '{name}' must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise KafkaOptionError(f"Option '{name}' must be a positive integer, got {raw!r}")
    return value


def _long(raw: str, name: str) -> int:
    try:
        return int(str(raw).strip())
    except ValueError:
        raise KafkaOptionError(
            f"Option '{name}' must be an integer (milliseconds since the epoch), got {raw!r}"
        ) from None


def _tp_json(raw: str, name: str, example: str) -> dict[TP, int]:
    """{"topic": {"0": 23, "1": -2}} -> {(topic, 0): 23, (topic, 1): -2}."""
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        raise KafkaOptionError(f"Option '{name}' must be 'earliest', 'latest' or JSON like "
                               f"{example}, got {raw!r}")
    out: dict[TP, int] = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise KafkaOptionError(f"Option '{name}': topic {topic!r} must map to an object of "
                                   f"{{\"partition\": value}}, e.g. {example}; got {raw!r}")
        for part, value in parts.items():
            try:
                pnum = int(part)
            except (TypeError, ValueError):
                pnum = -1
            if pnum < 0:
                raise KafkaOptionError(f"Option '{name}': partition {part!r} of topic {topic!r} "
                                       f"is not a partition number")
            if not isinstance(value, int) or isinstance(value, bool):
                raise KafkaOptionError(f"Option '{name}': value for {topic}-{part} must be an "
                                       f"integer, got {value!r}")
            out[(topic, pnum)] = value
    return out


def _endpoint(opts: Mapping[str, str], which: str) -> Endpoint:
    """Spark's precedence: xTimestamp, then xOffsetsByTimestamp, then xOffsets."""
    ts_name, by_ts_name, off_name = f"{which}Timestamp", f"{which}OffsetsByTimestamp", f"{which}Offsets"
    if ts_name.lower() in opts:
        return Endpoint("timestamp", timestamp=_long(opts[ts_name.lower()], ts_name), option=ts_name)
    if by_ts_name.lower() in opts:
        parsed = _tp_json(opts[by_ts_name.lower()], by_ts_name, '{"topicA":{"0":1700000000000}}')
        return Endpoint("timestamps", offsets=parsed, option=by_ts_name)
    raw = opts.get(off_name.lower())
    if raw is None:
        return Endpoint("default", option=off_name)
    value = str(raw).strip()
    if value.lower() in ("earliest", "latest"):
        return Endpoint(value.lower(), option=off_name)
    parsed = _tp_json(value, off_name, '{"topicA":{"0":23,"1":-2},"topicB":{"0":-1}}')
    for (topic, part), off in parsed.items():
        if off < EARLIEST:
            raise KafkaOptionError(f"Option '{off_name}': offset for {topic}-{part} must be >= 0, "
                                   f"-2 (earliest) or -1 (latest), got {off}")
    return Endpoint("offsets", offsets=parsed, option=off_name)


def parse_options(options: Mapping[str, str]) -> Options:
    """Validate the user's options (case-insensitive names); raise KafkaOptionError naming one."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}

    client = {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}
    if not client.get("bootstrap.servers", "").strip():
        raise KafkaOptionError("Option 'kafka.bootstrap.servers' is required (the Kafka brokers, "
                               "host:port[,host:port])")
    for name, why in _PROTECTED.items():
        if name in client:
            raise KafkaOptionError(f"Kafka option 'kafka.{name}' is not supported: {why}")
    if client.get("isolation.level", "read_uncommitted") not in ("read_uncommitted", "read_committed"):
        raise KafkaOptionError("Option 'kafka.isolation.level' must be 'read_uncommitted' or "
                               f"'read_committed', got {client['isolation.level']!r}")
    for key, name in _UNSUPPORTED.items():
        if key in opts:
            raise KafkaOptionError(f"Option '{name}' is not supported by the {SOURCE_NAME} source")
    if _bool(opts, "includeHeaders", False):
        raise KafkaOptionError(f"Option 'includeHeaders' = true is not supported by the "
                               f"{SOURCE_NAME} source (no headers column)")

    present = [n for n in ("subscribe", "subscribePattern", "assign") if n.lower() in opts]
    if len(present) != 1:
        raise KafkaOptionError("Exactly one of the options 'subscribe', 'subscribePattern', "
                               f"'assign' must be given, got {present or 'none'}")
    strategy = present[0]
    raw = opts[strategy.lower()]
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TP, ...] = ()
    if strategy == "subscribe":
        topics = tuple(sorted({t.strip() for t in raw.split(",") if t.strip()}))
        if not topics:
            raise KafkaOptionError(f"Option 'subscribe' must list at least one topic, got {raw!r}")
    elif strategy == "subscribePattern":
        pattern = raw.strip()
        try:
            re.compile(pattern)
        except re.error as exc:
            raise KafkaOptionError(f"Option 'subscribePattern' is not a valid regular expression: "
                                   f"{raw!r} ({exc})") from None
        if not pattern:
            raise KafkaOptionError("Option 'subscribePattern' must not be empty")
    else:
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError:
            parsed = None
        ok = isinstance(parsed, dict) and parsed and all(
            isinstance(ps, list) and ps and all(isinstance(p, int) and not isinstance(p, bool)
                                                and p >= 0 for p in ps)
            for ps in parsed.values())
        if not ok:
            raise KafkaOptionError("Option 'assign' must be JSON like {\"topicA\":[0,1],"
                                   f"\"topicB\":[2,4]}}, got {raw!r}")
        assert isinstance(parsed, dict)
        assigned = tuple(sorted({(t, p) for t, ps in parsed.items() for p in ps}))

    ts_strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if ts_strategy not in ("error", "latest"):
        raise KafkaOptionError("Option 'startingOffsetsByTimestampStrategy' must be 'error' or "
                               f"'latest', got {opts['startingoffsetsbytimestampstrategy']!r}")

    poll_raw = opts.get("kafkaconsumer.polltimeoutms", str(DEFAULT_POLL_TIMEOUT_MS))
    try:
        poll_ms = float(poll_raw)
    except ValueError:
        poll_ms = -1.0
    if not poll_ms > 0 or poll_ms == float("inf"):
        raise KafkaOptionError("Option 'kafkaConsumer.pollTimeoutMs' must be a positive number of "
                               f"milliseconds, got {poll_raw!r}")

    result = Options(
        client=client, strategy=strategy, topics=topics, pattern=pattern, assigned=assigned,
        starting=_endpoint(opts, "starting"), ending=_endpoint(opts, "ending"),
        starting_ts_strategy=ts_strategy,
        max_offsets_per_trigger=_positive_int(opts, "maxOffsetsPerTrigger"),
        align_timestamps=_bool(opts, "alignTimestamps", False),
        min_partitions=_positive_int(opts, "minPartitions"),
        max_records_per_partition=_positive_int(opts, "maxRecordsPerPartition"),
        max_partitions=_positive_int(opts, "maxPartitions"),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        poll_timeout_s=poll_ms / 1000,
    )
    if result.max_partitions and result.min_partitions and result.min_partitions > result.max_partitions:
        raise KafkaOptionError(f"Option 'minPartitions' ({result.min_partitions}) is larger than "
                               f"'maxPartitions' ({result.max_partitions})")
    for endpoint in (result.starting, result.ending):
        for topic, _part in endpoint.offsets:
            if not result.subscribed(topic):
                raise KafkaOptionError(f"Option '{endpoint.option}' names topic {topic!r}, which "
                                       f"is not in the {strategy} option")
    return result


# ------------------------------------------------------------------------------------------
# Offsets JSON, range planning (pure functions)
# ------------------------------------------------------------------------------------------

def offsets_to_json(offsets: Mapping[TP, int]) -> dict[str, dict[str, int]]:
    """{(topic, p): off} -> {"topic": {"p": off}}, topics and partitions sorted (deterministic)."""
    out: dict[str, dict[str, int]] = {}
    for topic, part in sorted(offsets):
        out.setdefault(topic, {})[str(part)] = int(offsets[(topic, part)])
    return out


def offsets_from_json(value: Mapping[str, Any] | None) -> dict[TP, int]:
    if not value:
        return {}
    return {(topic, int(p)): int(off) for topic, parts in value.items() for p, off in parts.items()}


Range = tuple[str, int, int, int]  # topic, partition, from (inclusive), until (exclusive)


def _divide(rng: Range, parts: int) -> list[Range]:
    topic, part, start, until = rng
    remaining = until - start
    out = []
    pos = start
    for i in range(parts):
        size = remaining // (parts - i)
        remaining -= size
        end = min(pos + size, until)
        if end > pos:
            out.append((topic, part, pos, end))
        pos = end
    return out


def split_ranges(ranges: Sequence[Range], min_partitions: int | None = None,
                 max_records_per_partition: int | None = None) -> list[Range]:
    """Spark's KafkaOffsetRangeCalculator: drop empty ranges, cut ranges at
    ``maxRecordsPerPartition``, then split the large ones further in proportion to their size
    until there are about ``minPartitions``. Deterministic for given ranges."""
    out = [r for r in sorted(ranges) if r[3] > r[2]]
    if max_records_per_partition:
        out = [piece for r in out
               for piece in _divide(r, -(-(r[3] - r[2]) // max_records_per_partition))]
    if not min_partitions or len(out) >= min_partitions:
        return out
    total = sum(r[3] - r[2] for r in out)

    def parts_for(size: int, total_size: int, min_parts: int) -> int:
        return max(int(size / total_size * min_parts + 0.5), 1)  # Scala's math.round

    unsplit = [r for r in out if parts_for(r[3] - r[2], total, min_partitions) == 1]
    unsplit_tps = {(r[0], r[1]) for r in unsplit}
    split_total = total - sum(r[3] - r[2] for r in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    result: list[Range] = []
    for r in out:
        n = 1 if (r[0], r[1]) in unsplit_tps else parts_for(r[3] - r[2], split_total, split_min)
        result.extend(_divide(r, n))
    return result


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


def pack_ranges(ranges: Sequence[Range], max_partitions: int) -> list[list[Range]]:
    """At most ``max_partitions`` lists of ranges with about equal record counts: the largest
    range first, each onto the lightest list so far (ties: the lowest index). Deterministic."""
    bins: list[list[Range]] = [[] for _ in range(min(max_partitions, len(ranges)))]
    loads = [0] * len(bins)
    for r in sorted(ranges, key=lambda r: (-(r[3] - r[2]), r)):
        i = min(range(len(bins)), key=lambda k: (loads[k], k))
        bins[i].append(r)
        loads[i] += r[3] - r[2]
    return [sorted(b) for b in bins if b]


def _input_partitions(ranges: Sequence[Range], max_partitions: int | None = None) -> list[InputPartition]:
    """One task per range (Spark's Kafka source), or with ``maxPartitions`` the ranges packed
    into at most that many tasks: each task of a Python source has a cost of its own (a
    consumer, its connection and first fetch, the Python worker's round trip), which on a small
    machine outweighs reading a few thousand records; measured on 2 cores: 60,000 records of 16
    topic-partitions in 2-3 s as 16 tasks, 0.7-1.3 s as 2."""
    if not max_partitions or len(ranges) <= max_partitions:
        return [KafkaInputPartition(i, t, p, s, u) for i, (t, p, s, u) in enumerate(ranges)]
    return [KafkaRangesPartition(i, [KafkaInputPartition(0, t, p, s, u) for t, p, s, u in group])
            for i, group in enumerate(pack_ranges(ranges, max_partitions))]


def _read_partition(opts: Options, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if isinstance(partition, KafkaRangesPartition):
        for part in partition.ranges:
            yield from read_range(opts, part)
    elif isinstance(partition, KafkaInputPartition):
        yield from read_range(opts, partition)
    # else: Spark's stand-in when no partition was planned (batch reads): nothing to read


def _data_loss(opts: Options, message: str) -> None:
    if opts.fail_on_data_loss:
        raise KafkaDataLossError(
            f"{message}. Some data may have been lost because it is no longer available in "
            "Kafka (deleted by retention, topic re-created) or the requested offsets are out of "
            "range. If you want the query to go on anyway, set the source option "
            "failOnDataLoss to false.")
    logger.warning("%s. Some data may have been lost; going on because failOnDataLoss is false.",
                   message)


# ------------------------------------------------------------------------------------------
# Kafka clients
# ------------------------------------------------------------------------------------------

def consumer_config(opts: Options, *, probe: bool = False) -> dict[str, Any]:
    """librdkafka consumer config: defaults, then the user's kafka.*, then what the source owns."""
    conf: dict[str, Any] = {
        "group.id": DEFAULT_GROUP_ID,
        "isolation.level": "read_uncommitted",  # the Java client's default, which Spark uses
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 100,
        # librdkafka pauses fetching for fetch.queue.backoff.ms (default 1000) whenever its
        # queue passes queued.min.messages: with the default a reader got ~200k records/s,
        # with 10 ms ~1M (measured on Tansu, 130-byte records).
        "fetch.queue.backoff.ms": 10,
    }
    conf.update(opts.client)
    conf.update({
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error" if probe or opts.fail_on_data_loss else "earliest",
    })
    if probe:
        conf["fetch.wait.max.ms"] = 50  # an empty fetch at the end answers after this long
    return conf


def admin_config(opts: Options) -> dict[str, Any]:
    return {k: v for k, v in opts.client.items() if not k.startswith(_CONSUMER_ONLY)}


def _isolation(opts: Options) -> Any:
    from confluent_kafka import IsolationLevel

    return (IsolationLevel.READ_COMMITTED if opts.isolation_level == "read_committed"
            else IsolationLevel.READ_UNCOMMITTED)


_RETRIABLE = {KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION,
              KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT,
              KafkaError._TRANSPORT, KafkaError.OFFSET_NOT_AVAILABLE}
_OUT_OF_RANGE = {KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE}
_TRANSIENT = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT,
              KafkaError._RESOLVE}


def _check_error(err: KafkaError) -> None:
    """Raise for a consumer error event unless librdkafka recovers from it by itself (a broker
    connection lost, ...); the callers' progress deadlines bound how long that may last."""
    if err.fatal() or not (err.retriable() or err.code() in _TRANSIENT):
        raise KafkaException(err)
    logger.info("%s: transient Kafka error %s", SOURCE_NAME, err)


def _where(msg: Any) -> tuple[TP, int]:
    topic, part, off = msg.topic(), msg.partition(), msg.offset()
    return (topic or "", -1 if part is None else part), -1 if off is None else off


class KafkaClient:
    """The driver's Kafka clients (an AdminClient, an assign-only Consumer for ends and timestamp
    lookups, another for alignment probes), created lazily.

    Used by the streaming reader for its whole life and by the batch reader for one plan.
    """

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self._admin: AdminClient | None = None
        self._consumer: Consumer | None = None
        self._prober: Consumer | None = None

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(admin_config(self.opts))
        return self._admin

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(consumer_config(self.opts, probe=True))
        return self._consumer

    @property
    def prober(self) -> Consumer:
        """The consumer of `record_timestamps`: one record batch per partition per fetch and no
        read-ahead, so reading one record costs one small fetch."""
        if self._prober is None:
            self._prober = Consumer({**consumer_config(self.opts, probe=True), **_PROBE_FETCH})
        return self._prober

    def close(self) -> None:
        consumers = (self._consumer, self._prober)
        self._consumer = self._prober = self._admin = None
        for consumer in consumers:
            if consumer is not None:
                consumer.close()

    def _deadline(self) -> float:
        return time.monotonic() + self.opts.poll_timeout_s

    # -- metadata and offsets ---------------------------------------------------------------

    def topic_partitions(self) -> list[TP]:
        """Subscribed partitions that exist now, sorted. Asks for the whole cluster's metadata:
        asking for a named topic could auto-create it on some brokers."""
        md = self.admin.list_topics(timeout=self.opts.poll_timeout_s)
        out: list[TP] = []
        for name, meta in md.topics.items():
            if meta.error is not None or not self.opts.subscribed(name):
                continue
            out.extend((name, p) for p in meta.partitions)
        if self.opts.strategy == "assign":
            wanted = set(self.opts.assigned)
            out = [tp for tp in out if tp in wanted]
        return sorted(out)

    def _list_offsets(self, tps: Sequence[TP], spec: Any) -> dict[TP, int]:
        deadline = self._deadline()
        todo = list(tps)
        out: dict[TP, int] = {}
        while todo:
            futures = self.admin.list_offsets(
                {TopicPartition(t, p): spec for t, p in todo}, isolation_level=_isolation(self.opts),
                request_timeout=max(deadline - time.monotonic(), 1.0))
            retry: list[TP] = []
            for tpo, fut in futures.items():
                key = (tpo.topic, tpo.partition)
                try:
                    out[key] = fut.result(timeout=max(deadline - time.monotonic(), 1.0)).offset
                except KafkaException as exc:
                    if exc.args[0].code() not in _RETRIABLE or time.monotonic() > deadline:
                        raise
                    retry.append(key)
            todo = sorted(retry)
            if todo:
                time.sleep(0.1)
        return out

    def watermarks(self, tps: Sequence[TP]) -> dict[TP, tuple[int, int]]:
        """(earliest, reported latest) per partition. The reported latest may be short of the
        true end (Tansu); use `true_ends` for planning."""
        if not tps:
            return {}
        lows = self._list_offsets(tps, OffsetSpec.earliest())
        highs = self._list_offsets(tps, OffsetSpec.latest())
        return {tp: (lows[tp], highs[tp]) for tp in tps}

    def _read_until(self, starts: Mapping[TP, int],
                    on_record: Callable[[TP, int, Any, Any], bool], what: str,
                    on_idle: Callable[[set[TP]], None] | None = None) -> None:
        """Read the partitions from ``starts`` until ``on_record(tp, offset, error, msg)`` has
        said True (done) for each; ``on_idle(pending)`` after ``_IDLE_CHECK_S`` without a record
        (it may drop partitions from ``pending``). Client-level errors raise; so does no end
        within ``kafkaConsumer.pollTimeoutMs``."""
        consumer = self.consumer
        consumer.assign([TopicPartition(t, p, off) for (t, p), off in sorted(starts.items())])
        try:
            pending = set(starts)
            deadline = self._deadline()
            last_progress = time.monotonic()
            while pending:
                msgs = consumer.consume(10_000, timeout=0.05)
                for msg in msgs:
                    tp, off = _where(msg)
                    err = msg.error()
                    if tp not in pending:
                        if err is not None and msg.topic() is None:  # a client-level event
                            _check_error(err)
                        continue
                    if on_record(tp, off, err, msg):
                        pending.discard(tp)
                now = time.monotonic()
                if msgs:
                    last_progress = now
                elif on_idle is not None and now - last_progress > _IDLE_CHECK_S:
                    on_idle(pending)
                    last_progress = now
                if pending and now > deadline:
                    raise TimeoutError(f"{SOURCE_NAME}: {what} within {self.opts.poll_timeout_s} s "
                                       f"for {sorted(pending)} (see kafkaConsumer.pollTimeoutMs)")
        finally:
            consumer.unassign()

    def true_ends(self, marks: Mapping[TP, tuple[int, int]]) -> dict[TP, int]:
        """The offset after the last readable record of every partition (isolation level as
        configured): fetch from one record before the reported end until PARTITION_EOF."""
        ends: dict[TP, int] = {}
        starts: dict[TP, int] = {}
        for tp, (low, high) in marks.items():
            if high <= low:  # empty; a non-empty partition always reports > low
                ends[tp] = max(low, high)
            else:
                starts[tp] = max(low, high - 1)
        if not starts:
            return ends
        def on_record(tp: TP, off: int, err: Any, msg: Any) -> bool:
            if err is None:
                ends[tp] = max(ends.get(tp, starts[tp]), off + 1)
                return False
            if err.code() == KafkaError._PARTITION_EOF:
                if off < starts[tp]:
                    return False  # not from this assignment (a truncation shows below)
                ends[tp] = max(ends.get(tp, off), off)
                return True
            if err.code() in _OUT_OF_RANGE:  # truncated under us
                ends[tp] = marks[tp][1]
                return True
            _check_error(err)
            return False

        def on_idle(pending: set[TP]) -> None:
            # A fetch past the end gets neither records nor EOF on Tansu: the cached high
            # watermark (from the fetch response) tells.
            for tp in sorted(pending):
                high = self.consumer.get_watermark_offsets(TopicPartition(*tp), cached=True)[1]
                if 0 <= high <= starts[tp]:
                    ends[tp] = high
                    pending.discard(tp)

        self._read_until(starts, on_record, "no end of partition reached", on_idle)
        return ends

    def timestamp_offsets(self, wanted: Mapping[TP, int], marks: Mapping[TP, tuple[int, int]],
                          ends: Mapping[TP, int]) -> dict[TP, int | None]:
        """Earliest offset whose record timestamp is >= the given ms, None when there is none.

        Asks the broker (offsets_for_times), then reads forward from its answer to the first
        record at or after the timestamp: on Apache Kafka that is the answer itself (one
        record read); Tansu answers the earliest offset whatever the timestamp."""
        out: dict[TP, int | None] = {}
        if not wanted:
            return out
        answers = self.consumer.offsets_for_times(
            [TopicPartition(t, p, ts) for (t, p), ts in sorted(wanted.items())],
            timeout=self.opts.poll_timeout_s)
        starts: dict[TP, int] = {}
        for tpo in answers:
            tp = (tpo.topic, tpo.partition)
            if tpo.error is not None:
                raise KafkaException(tpo.error)
            low, end = marks[tp][0], ends[tp]
            if tpo.offset < 0 or max(tpo.offset, low) >= end:
                out[tp] = None
            else:
                starts[tp] = max(tpo.offset, low)
        if not starts:
            return out
        def on_record(tp: TP, off: int, err: Any, msg: Any) -> bool:
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF and off < starts[tp]:
                    return False  # not from this assignment
                if err.code() == KafkaError._PARTITION_EOF or err.code() in _OUT_OF_RANGE:
                    out[tp] = None
                    return True
                _check_error(err)
                return False
            if off < starts[tp]:
                return False
            if msg.timestamp()[1] >= wanted[tp]:
                out[tp] = off
                return True
            if off + 1 >= ends[tp]:
                out[tp] = None
                return True
            return False

        self._read_until(starts, on_record, "timestamp lookup did not finish")
        return out

    def record_timestamps(self, wanted: Mapping[TP, int],
                          keep: int = PROBE_KEEP) -> dict[TP, list[tuple[int, int]]]:
        """The timestamp of the record at each wanted offset, all partitions in one fetch round
        (timestamp alignment's probe, ``kafka_admission.Probe``): per partition, first
        ``(offset, timestamp)`` of the wanted offset (an offset without a record, e.g. a
        transaction marker, gets the next record's timestamp, INF if none before the end), then
        the records after it that the same fetch brought, up to ``keep``. The wanted offsets must
        lie below the partitions' ends. Raises ProbeUnavailable when one is out of range."""
        out: dict[TP, list[tuple[int, int]]] = {tp: [] for tp in wanted}
        if not wanted:
            return out
        consumer = self.prober
        consumer.assign([TopicPartition(t, p, off) for (t, p), off in sorted(wanted.items())])
        pending = set(wanted)

        def take(msgs: Sequence[Any]) -> None:
            for msg in msgs:
                err = msg.error()
                if err is None:
                    tp = (msg.topic(), msg.partition())
                    points = out.get(tp)
                    if points is None or len(points) >= keep:  # the hot path: skip fast
                        continue
                    off = msg.offset()
                    if off < wanted[tp] or (points and off <= points[-1][0]):
                        continue
                    stamp = msg.timestamp()[1]
                    if tp in pending:
                        pending.discard(tp)
                        if off > wanted[tp]:
                            points.append((wanted[tp], stamp))
                    points.append((off, stamp))
                    continue
                tp, off = _where(msg)
                if tp not in out:
                    if msg.topic() is None:  # a client-level event
                        _check_error(err)
                elif err.code() == KafkaError._PARTITION_EOF:
                    if tp in pending and off >= wanted[tp]:  # nothing readable up to the end
                        out[tp].append((wanted[tp], INF))
                        pending.discard(tp)
                elif err.code() in _OUT_OF_RANGE:
                    raise ProbeUnavailable(f"{tp[0]}-{tp[1]} offset {wanted[tp]}: {err.str()}")
                else:
                    _check_error(err)

        try:
            deadline = self._deadline()
            last_progress = time.monotonic()
            while pending:
                msgs = consumer.consume(keep, timeout=0.05)
                take(msgs)
                now = time.monotonic()
                if msgs:
                    last_progress = now
                elif now - last_progress > _IDLE_CHECK_S:
                    for tp in sorted(pending):  # Tansu: silence past the end (see true_ends)
                        high = consumer.get_watermark_offsets(TopicPartition(*tp), cached=True)[1]
                        if 0 <= high <= wanted[tp]:
                            raise ProbeUnavailable(f"{tp[0]}-{tp[1]} offset {wanted[tp]} is past "
                                                   f"the end {high}")
                    last_progress = now
                if pending and now > deadline:
                    raise TimeoutError(f"{SOURCE_NAME}: no record read at {sorted(wanted.items())} "
                                       f"within {self.opts.poll_timeout_s} s (see "
                                       "kafkaConsumer.pollTimeoutMs)")
            take(consumer.consume(keep * len(wanted), timeout=0))  # what is queued, no waiting
        finally:
            consumer.unassign()
        return out

    # -- planning -----------------------------------------------------------------------------

    def snapshot(self) -> tuple[list[TP], dict[TP, tuple[int, int]], dict[TP, int]]:
        """Partitions, their watermarks, and their true ends, now."""
        tps = self.topic_partitions()
        marks = self.watermarks(tps)
        return tps, marks, self.true_ends(marks)

    def resolve(self, endpoint: Endpoint, which: str, tps: Sequence[TP],
                marks: Mapping[TP, tuple[int, int]], ends: Mapping[TP, int]) -> dict[TP, int]:
        """Concrete offsets for a starting/ending option. Partitions an offsets/timestamps JSON
        leaves out get the default: earliest for starting, latest for ending."""
        default_latest = which == "ending"
        kind = endpoint.kind
        if kind == "default":
            kind = "latest" if default_latest else "earliest"
        if kind == "earliest":
            return {tp: marks[tp][0] for tp in tps}
        if kind == "latest":
            return {tp: ends[tp] for tp in tps}
        out: dict[TP, int] = {}
        if kind == "offsets":
            for tp in tps:
                off = endpoint.offsets.get(tp, LATEST if default_latest else EARLIEST)
                out[tp] = marks[tp][0] if off == EARLIEST else ends[tp] if off == LATEST else off
            return out
        if endpoint.timestamp is not None:
            wanted = {tp: endpoint.timestamp for tp in tps}
        else:
            wanted = {tp: ts for tp, ts in endpoint.offsets.items() if tp in marks}
        found = self.timestamp_offsets(wanted, marks, ends)
        for tp in tps:
            if tp not in wanted:
                out[tp] = ends[tp] if default_latest else marks[tp][0]
                continue
            hit = found.get(tp)
            if hit is None:
                if which == "starting" and self.opts.starting_ts_strategy == "error":
                    raise KafkaOptionError(
                        f"Option '{endpoint.option}': no record in {tp[0]}-{tp[1]} has a "
                        f"timestamp >= {wanted[tp]}. Set 'startingOffsetsByTimestampStrategy' "
                        "to 'latest' to start at the end of such partitions instead.")
                hit = ends[tp]
            out[tp] = hit
        return out


# ------------------------------------------------------------------------------------------
# Reading one range (executors)
# ------------------------------------------------------------------------------------------

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


def read_range(opts: Options, part: KafkaInputPartition,
               batch_rows: int = ARROW_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Exactly the records at offsets [part.start, part.until) as Arrow batches."""
    if part.until <= part.start:
        return
    topic, partition, until = part.topic, part.partition, part.until
    consumer = Consumer(consumer_config(opts))
    try:
        consumer.assign([TopicPartition(topic, partition, part.start)])
        nxt = part.start
        keys: list[Any] = []
        values: list[Any] = []
        offsets: list[int] = []
        stamps: list[int] = []
        types: list[int] = []
        ts_types = _TS_TYPES
        last_progress = time.monotonic()
        while nxt < until:
            msgs = consumer.consume(min(batch_rows, until - nxt + 1), timeout=0.2)
            if not msgs:
                idle = time.monotonic() - last_progress
                if idle > _IDLE_CHECK_S:
                    high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                          cached=True)[1]
                    if 0 <= high <= nxt:  # nothing left to fetch below `until` (Tansu is silent)
                        _data_loss(opts, f"Cannot read {topic}-{partition} offsets [{nxt}, "
                                         f"{until}): the partition ends at {high}")
                        break
                if idle > opts.poll_timeout_s:
                    raise TimeoutError(f"{SOURCE_NAME}: no record from {topic}-{partition} at "
                                       f"offset {nxt} (reading up to {until}) for "
                                       f"{opts.poll_timeout_s} s (kafkaConsumer.pollTimeoutMs)")
                continue
            last_progress = time.monotonic()
            add_key, add_value, add_offset = keys.append, values.append, offsets.append
            add_stamp, add_type = stamps.append, types.append
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    code = err.code()
                    if msg.topic() is None:  # a client-level event
                        _check_error(err)
                        continue
                    if code == KafkaError._PARTITION_EOF:
                        # Every record before the EOF position has been delivered already.
                        eof = _where(msg)[1]
                        if eof < until:
                            _data_loss(opts, f"Cannot read {topic}-{partition} offsets "
                                             f"[{max(nxt, eof)}, {until}): the partition ends "
                                             f"at {eof}")
                        nxt = until
                        break
                    if code in _OUT_OF_RANGE:
                        _data_loss(opts, f"Offset {nxt} of {topic}-{partition} is out of range "
                                         f"({err.str()})")
                        nxt = until
                        break
                    _check_error(err)
                    continue
                off = _where(msg)[1]
                if off < nxt:
                    continue
                if off >= until:
                    nxt = until
                    break
                ts_type, ts = msg.timestamp()
                add_key(msg.key())
                add_value(msg.value())
                add_offset(off)
                add_stamp(ts * 1000)
                add_type(ts_types.get(ts_type, -1))
                nxt = off + 1
            if len(offsets) >= batch_rows:
                yield _arrow(topic, partition, keys, values, offsets, stamps, types)
                keys, values, offsets, stamps, types = [], [], [], [], []
        if offsets:
            yield _arrow(topic, partition, keys, values, offsets, stamps, types)
    finally:
        consumer.close()


# ------------------------------------------------------------------------------------------
# Spark readers
# ------------------------------------------------------------------------------------------

class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader. Lives in one long-lived driver-side Python process (one KafkaClient);
    a copy is pickled to the executors, where only `read` runs."""

    def __init__(self, opts: Options) -> None:
        _check_ending(opts)
        self.opts = opts
        self._client: KafkaClient | None = None
        self._target: dict[TP, int] | None = None  # availableNow: nothing past this
        self._bound: dict[TP, int] | None = None  # endingOffsets/endingTimestamp, once resolved
        self._latest: dict[TP, int] | None = None  # last true ends seen, for reportLatestOffset
        self._stamps = TimestampIndex()  # alignTimestamps: record timestamps probed so far
        self.last_alignment: AlignStats | None = None  # alignTimestamps: the last capped plan

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None
        state["_stamps"] = TimestampIndex()  # executors only read
        return state

    @property
    def client(self) -> KafkaClient:
        if self._client is None:
            self._client = KafkaClient(self.opts)
        return self._client

    def _resolve_bound(self, tps: Sequence[TP], marks: Mapping[TP, tuple[int, int]],
                       ends: Mapping[TP, int]) -> None:
        """endingOffsets / endingTimestamp (an extension: Spark allows them in batch only) are
        resolved once per run, the first time partitions are looked at."""
        if self._bound is None and self.opts.ending.kind != "default":
            self._bound = self.client.resolve(self.opts.ending, "ending", tps, marks, ends)
            logger.info("%s: ending at %s", SOURCE_NAME, offsets_to_json(self._bound))

    def initialOffset(self) -> dict:
        tps, marks, ends = self.client.snapshot()
        self._latest = ends
        self._resolve_bound(tps, marks, ends)
        kind = self.opts.starting.kind
        endpoint = self.opts.starting if kind != "default" else Endpoint("latest",
                                                                         option="startingOffsets")
        return offsets_to_json(self.client.resolve(endpoint, "starting", tps, marks, ends))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        _tps, _marks, ends = self.client.snapshot()
        self._target = dict(ends)
        logger.info("%s: availableNow target %s", SOURCE_NAME, offsets_to_json(ends))

    def _present(self, start: Mapping[TP, int]) -> tuple[list[TP], set[TP]]:
        """Current partitions, and those of `start` that are gone (checked twice)."""
        tps = self.client.topic_partitions()
        gone = set(start) - set(tps)
        if gone:
            time.sleep(0.5)  # metadata of a topic being created can lag: ask again
            tps = self.client.topic_partitions()
            gone = set(start) - set(tps)
        return tps, gone

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets_from_json(start)
        tps, gone = self._present(begin)
        for tp in sorted(gone):
            _data_loss(self.opts, f"Partition {tp[0]}-{tp[1]} is gone (was at offset {begin[tp]})")
        marks = self.client.watermarks(tps)
        avail = self.client.true_ends(marks)
        self._latest = dict(avail)
        self._resolve_bound(tps, marks, avail)
        limits = [lim for lim in (self._target, self._bound) if lim is not None]
        result: dict[TP, int] = {tp: begin[tp] for tp in gone}  # carried forward
        starts: dict[TP, int] = {}
        for tp in tps:
            if tp in begin:
                first = begin[tp]
            else:
                if any(tp not in lim for lim in limits):
                    continue  # appeared after the availableNow target / the end was fixed
                first = marks[tp][0]  # a new partition starts at earliest
                if first != 0:
                    _data_loss(self.opts, f"Added partition {tp[0]}-{tp[1]} starts from offset "
                                          f"{first} instead of 0")
            if first > avail[tp]:
                _data_loss(self.opts, f"Partition {tp[0]}-{tp[1]}'s offset was changed from "
                                      f"{first} to {avail[tp]}")
                result[tp] = avail[tp]  # skip to the current end (partitions() skips the range)
                continue
            end = avail[tp]
            for lim in limits:  # availableNow target, ending offsets: never past them
                end = max(first, min(end, lim.get(tp, first)))
            starts[tp] = first
            result[tp] = end
        if isinstance(limit, ReadMaxRows):
            tops = {tp: result[tp] for tp in starts}
            if self.opts.align_timestamps:
                result.update(self._aligned(starts, tops, limit.max_rows))
            else:
                result.update(rate_limit(starts, tops, limit.max_rows))
        elif not isinstance(limit, ReadAllAvailable):
            raise NotImplementedError(f"{SOURCE_NAME}: read limit {limit!r} is not supported")
        return offsets_to_json(result)

    def _aligned(self, starts: Mapping[TP, int], ends: Mapping[TP, int],
                 cap: int) -> dict[TP, int]:
        """alignTimestamps: cut every partition at one record timestamp (kafka_admission)."""
        self._stamps.prune(starts)
        try:
            out, stats = plan_aligned(starts, ends, cap, self._stamps,
                                      self.client.record_timestamps)
        except ProbeUnavailable as exc:  # data loss under way: reading will report it
            logger.warning("%s: alignTimestamps: %s; this batch is cut in proportion to the "
                           "backlogs instead", SOURCE_NAME, exc)
            return rate_limit(starts, ends, cap)
        if stats.capped:
            self.last_alignment = stats
            log = logger.warning if stats.fallback else logger.info
            log("%s: aligned batch at timestamp %s: %d of %d offsets (cap %d)%s%s, %d probes in "
                "%d rounds, %d pivots, %.0f ms", SOURCE_NAME, stats.timestamp, stats.records,
                stats.backlog, cap, ", earliest timestamp split" if stats.tie_split else "",
                f", proportional cut ({stats.fallback})" if stats.fallback else "", stats.probes,
                stats.rounds, stats.pivots, stats.seconds * 1000)
        return out

    def reportLatestOffset(self) -> dict | None:
        return offsets_to_json(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, finish = offsets_from_json(start), offsets_from_json(end)
        new = sorted(tp for tp in finish if tp not in begin)
        lows = {tp: m[0] for tp, m in self.client.watermarks(new).items()} if new else {}
        ranges: list[Range] = []
        for tp, until in sorted(finish.items()):
            first = begin[tp] if tp in begin else lows[tp]
            if until < first:
                # latestOffset reported this already (and failed if failOnDataLoss); a re-run
                # of the batch after the option changed must not read it either.
                logger.warning("%s: skipping %s-%s, offset moved back from %s to %s",
                               SOURCE_NAME, tp[0], tp[1], first, until)
                continue
            ranges.append((tp[0], tp[1], first, until))
        ranges = split_ranges(ranges, self.opts.min_partitions, self.opts.max_records_per_partition)
        return _input_partitions(ranges, self.opts.max_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, (KafkaInputPartition, KafkaRangesPartition)), partition
        return _read_partition(self.opts, partition)

    def commit(self, end: dict) -> None:
        # Nothing to do: offsets live in Spark's checkpoint, no consumer group is used.
        logger.debug("%s: committed %s", SOURCE_NAME, end)

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _check_ending(opts: Options) -> None:
    ending = opts.ending
    if ending.kind == "earliest" or (ending.kind == "offsets"
                                     and EARLIEST in ending.offsets.values()):
        raise KafkaOptionError(f"Option '{ending.option}' cannot be earliest ({EARLIEST})")


class KafkaBatchReader(DataSourceReader):
    """spark.read: [startingOffsets, endingOffsets) fixed when the query is planned."""

    def __init__(self, opts: Options) -> None:
        start = opts.starting
        if start.kind == "latest" or (start.kind == "offsets" and LATEST in start.offsets.values()):
            raise KafkaOptionError(f"Option '{start.option}' cannot be latest ({LATEST}) for "
                                   "batch queries")
        _check_ending(opts)
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        client = KafkaClient(self.opts)
        try:
            tps, marks, ends = client.snapshot()
            starts = client.resolve(self.opts.starting, "starting", tps, marks, ends)
            finals = client.resolve(self.opts.ending, "ending", tps, marks, ends)
        finally:
            client.close()
        ranges: list[Range] = []
        for tp in tps:
            first, until = starts[tp], finals[tp]
            if until > ends[tp]:
                _data_loss(self.opts, f"endingOffsets {until} of {tp[0]}-{tp[1]} is past the end "
                                      f"of the partition ({ends[tp]})")
                until = ends[tp]
            if first > until:
                _data_loss(self.opts, f"The offset range of {tp[0]}-{tp[1]} is empty: start "
                                      f"{first} is past the end {until}")
                continue
            ranges.append((tp[0], tp[1], first, until))
        ranges = split_ranges(ranges, self.opts.min_partitions, self.opts.max_records_per_partition)
        return _input_partitions(ranges, self.opts.max_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read_partition(self.opts, partition)


def _check_schema(schema: StructType | None) -> None:
    if schema is not None and [(f.name, f.dataType) for f in schema.fields] != [
            (f.name, f.dataType) for f in SCHEMA.fields]:
        raise KafkaOptionError(f"The {SOURCE_NAME} source has a fixed schema ({SCHEMA.simpleString()})"
                               f" and does not accept a user-specified one ({schema.simpleString()})")


class KafkaDataSource(DataSource):
    """``spark.read`` / ``spark.readStream`` ``.format("replimon-kafka")``; options as in Spark's
    Kafka source (docs/kafka-source.md)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def _opts(self) -> Options:
        return parse_options(self.options)

    def schema(self) -> StructType:
        self._opts()  # fail early, at load(), on a bad option
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_schema(schema)
        return KafkaBatchReader(self._opts())

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _check_schema(schema)
        return KafkaStreamReader(self._opts())
