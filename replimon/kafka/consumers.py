"""How the Kafka client configures librdkafka and which of its errors it survives.

Every consumer here is assign-only: it never joins its consumer group and never commits (offsets
live with the caller, e.g. in Spark's checkpoint), so ``group.id`` is only a name librdkafka
requires. ``enable.partition.eof`` is always on: the ``PARTITION_EOF`` event is how a reader
finds the true end of a partition (``client.py``, "The embedded broker's quirks").
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from replimon.kafka.offsets import TP

log = logging.getLogger("replimon.kafka")

DEFAULT_GROUP_ID = "replimon-kafka-client"  # required by librdkafka; never joined or committed
DEFAULT_TIMEOUT_S = 120.0  # how long a call may go without progress (Spark's pollTimeoutMs)
READER_ID = "replimon-reader"  # client.id of the consumers that read ranges
PLANNER_ID = "replimon-planner"  # client.id of those that find ends and probe timestamps
READ_UNCOMMITTED = "read_uncommitted"  # the Java client's default, which Spark uses
IDLE_CHECK_S = 1.0  # after this long without a record, ask the fetch high watermark

# Properties only consumers take, dropped from the AdminClient's config (it would warn).
_CONSUMER_ONLY = ("group.", "isolation.level", "enable.auto.", "auto.", "enable.partition.eof",
                  "fetch.", "queued.", "max.poll.interval.ms", "session.timeout.ms",
                  "heartbeat.interval.ms", "partition.assignment.strategy", "check.crcs",
                  "consume.callback.max.messages", "allow.auto.create.topics")

RETRIABLE = {KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION,
             KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT,
             KafkaError._TRANSPORT, KafkaError.OFFSET_NOT_AVAILABLE}
OUT_OF_RANGE = {KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE}
# What a broker that is down, restarting or hung answers. _NOENT is "No leaders found": metadata
# from a cluster whose brokers are gone names no partition leader, and a ListOffsets call fails
# with it before any connection is tried (it ended the query in a batch's planning).
_TRANSIENT = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT,
              KafkaError._RESOLVE, KafkaError._NOENT, KafkaError.BROKER_NOT_AVAILABLE,
              KafkaError.NETWORK_EXCEPTION, KafkaError._TIMED_OUT_QUEUE, KafkaError._MSG_TIMED_OUT}
# librdkafka's own log goes to stderr, one line per failed connection attempt (about 11 KB/s of
# "FAIL ... Connection refused" while a broker is down). Only its critical lines are kept; the
# readers report a broker lost and back themselves (docs/operations.md, "Broker outage"). A
# caller's ``log_level`` wins (e.g. ``kafka.log_level=7`` to debug a connection).
QUIET = {"log_level": 2}


def consumer_config(config: Mapping[str, Any], *, reset: str = "error",
                    probe: bool = False, reader: bool = False) -> dict[str, Any]:
    """librdkafka consumer config: defaults, then the caller's ``config``, then what the client
    owns. ``reset``: where a read whose offset is gone goes (``auto.offset.reset``): "error"
    reports it, "earliest" moves on from the oldest record still held. ``probe``: a consumer
    that reads single records near the end, where an empty fetch should answer quickly.
    ``client.id`` (unless the caller sets one) tells a broker's logs and quotas which of the
    client's consumers asks: ``replimon-reader`` reads ranges, ``replimon-planner`` plans."""
    conf: dict[str, Any] = {
        **QUIET,
        "client.id": READER_ID if reader else PLANNER_ID,
        "group.id": DEFAULT_GROUP_ID,
        "isolation.level": READ_UNCOMMITTED,
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 100,
        # librdkafka pauses fetching for fetch.queue.backoff.ms (default 1000) whenever its
        # queue passes queued.min.messages: with the default a reader got ~200k records/s,
        # with 10 ms ~1M (measured on Tansu, 130-byte records).
        "fetch.queue.backoff.ms": 10,
    }
    conf.update(config)
    conf.update({
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": reset,
    })
    if probe:
        conf["fetch.wait.max.ms"] = 50  # an empty fetch at the end answers after this long
    return conf


def admin_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The AdminClient's share of ``config`` (no consumer-only property), quiet as consumers are."""
    return {**QUIET, **{k: v for k, v in config.items() if not k.startswith(_CONSUMER_ONLY)}}


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says no broker answers (connection refused, timed out, all brokers down),
    which ends when the broker is back, rather than an error that will not go away."""
    if isinstance(exc, TimeoutError):
        return True
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        err = exc.args[0]
        return not err.fatal() and (err.code() in _TRANSIENT or err.code() in RETRIABLE)
    return False


def check_error(err: KafkaError) -> None:
    """Raise for a consumer error event unless librdkafka recovers from it by itself (a broker
    connection lost, ...); the callers' progress deadlines bound how long that may last."""
    if err.fatal() or not (err.retriable() or err.code() in _TRANSIENT):
        raise KafkaException(err)
    log.info("transient Kafka error %s", err)


def where(msg: Any) -> tuple[TP, int]:
    """A message's ``((topic, partition), offset)``; ("", -1) and -1 where it has none (a
    client-level event)."""
    topic, part, off = msg.topic(), msg.partition(), msg.offset()
    return (topic or "", -1 if part is None else part), -1 if off is None else off
