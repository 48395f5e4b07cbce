"""The options of the ``replimon-kafka`` source: parsing, validation, and the errors it raises.

Option names and meanings are Spark's Kafka source's (case-insensitive), plus the extensions
``alignTimestamps`` and ``maxPartitions`` (``docs/kafka-source.md`` has the table). A bad value
raises `KafkaOptionError` naming the option, at ``load()``; the streaming-only and batch-only
checks (`check_ending`, `check_batch_start`) run when the readers are made. `data_loss` is
``failOnDataLoss``: raise `KafkaDataLossError`, or log and go on.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from replimon.kafka import TP, KafkaClient

logger = logging.getLogger("replimon.streaming.sources.kafka")

SOURCE_NAME = "replimon-kafka"
EARLIEST = -2  # Spark's JSON sentinels in startingOffsets / endingOffsets
LATEST = -1
DEFAULT_GROUP_ID = "replimon-kafka-source"  # required by librdkafka; never joined or committed
DEFAULT_POLL_TIMEOUT_MS = 120_000  # Spark's default for kafkaConsumer.pollTimeoutMs


class KafkaOptionError(ValueError):
    """An option of the replimon-kafka source is missing or has a bad value; names the option."""


class KafkaDataLossError(RuntimeError):
    """Records the query was planned to read are gone (and ``failOnDataLoss`` is true)."""


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
    """The source's options, parsed and checked (`parse_options`)."""

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
    data_loss_markers: bool = False  # markers.py: a marker row per partition that moved back
    poll_timeout_s: float = DEFAULT_POLL_TIMEOUT_MS / 1000
    # brokerOutageTimeoutMs: how long a task waits for a broker that stopped answering while it
    # read (None: as long as it takes, as planning does; docs/operations.md "Broker outage").
    broker_outage_s: float | None = None

    def subscribed(self, topic: str) -> bool:
        if self.strategy == "subscribe":
            return topic in self.topics
        if self.strategy == "subscribePattern":
            assert self.pattern is not None
            return not topic.startswith("__") and re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)

    def selects(self, tp: TP) -> bool:
        """Whether the source reads partition ``tp`` (a `KafkaClient.topic_partitions` test)."""
        if self.strategy == "assign":
            return tp in self.assigned
        return self.subscribed(tp[0])

    @property
    def reset(self) -> str:
        """Where a reader whose start is gone goes: reported as data loss, or on from the
        earliest record still held (``failOnDataLoss`` false)."""
        return "error" if self.fail_on_data_loss else "earliest"

    def new_client(self) -> KafkaClient:
        """A Kafka client with the user's ``kafka.*`` properties and ``pollTimeoutMs``."""
        return KafkaClient({"group.id": DEFAULT_GROUP_ID, **self.client},
                           timeout_s=self.poll_timeout_s,
                           timeout_hint=f" ({SOURCE_NAME}: see kafkaConsumer.pollTimeoutMs)")

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

    outage_raw = opts.get("brokeroutagetimeoutms")
    outage_s = None
    if outage_raw is not None:
        try:
            outage_s = float(outage_raw) / 1000
        except ValueError:
            outage_s = -1.0
        if not outage_s > 0 or outage_s == float("inf"):
            raise KafkaOptionError("Option 'brokerOutageTimeoutMs' must be a positive number of "
                                   f"milliseconds, got {outage_raw!r}")

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
        data_loss_markers=_bool(opts, "dataLossMarkers", False),
        poll_timeout_s=poll_ms / 1000,
        broker_outage_s=outage_s,
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


def check_ending(opts: Options) -> None:
    """The end of a read can be latest or offsets, never earliest."""
    ending = opts.ending
    if ending.kind == "earliest" or (ending.kind == "offsets"
                                     and EARLIEST in ending.offsets.values()):
        raise KafkaOptionError(f"Option '{ending.option}' cannot be earliest ({EARLIEST})")


def check_batch_start(opts: Options) -> None:
    """A batch query starts at earliest, offsets or a timestamp, never latest."""
    start = opts.starting
    if start.kind == "latest" or (start.kind == "offsets" and LATEST in start.offsets.values()):
        raise KafkaOptionError(f"Option '{start.option}' cannot be latest ({LATEST}) for "
                               "batch queries")


def data_loss(opts: Options, message: str) -> None:
    """Records the query was planned to read are gone: fail, or warn and go on
    (``failOnDataLoss``)."""
    if opts.fail_on_data_loss:
        raise KafkaDataLossError(
            f"{message}. Some data may have been lost because it is no longer available in "
            "Kafka (deleted by retention, topic re-created) or the requested offsets are out of "
            "range. If you want the query to go on anyway, set the source option "
            "failOnDataLoss to false.")
    logger.warning("%s. Some data may have been lost; going on because failOnDataLoss is false.",
                   message)


def worker_logging() -> None:
    """In a Python process Spark started (the source's planner, a task's reader), where nothing
    configured logging: the source's warnings with a time stamp, as the job's own lines are
    (Python's last-resort handler prints them bare). The job's own process is left alone."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.WARNING)
