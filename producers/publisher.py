"""Publishing contract-v1 events to Kafka: the transport.

Two layers (the second is ``node.py``):

* :class:`Publisher` is the Kafka transport (one ``confluent_kafka.Producer``): idempotent,
  ``acks=all``, key = group so one group's events stay in one partition, in order
  (docs/contract.md). It never drops an event silently: a full local queue blocks
  (back-pressure) and then raises, every delivery outcome is reported, and a failed delivery makes
  the next ``flush`` raise.
* ``NodePublisher`` (``node.py``) is what a replica integration holds for ONE node of one group:
  it owns the envelope (``v``, ``ts_ms``, ``seq``, ``incarnation``), validates each event against
  the contract before it leaves the process, and hands it to a shared :class:`Publisher`.

Exceptions (the whole tree)::

    PublishError(Exception)     a delivery failed (raised by flush/close), or librdkafka refused
    |                           a message outright (e.g. after a fatal producer error)
    +-- BufferFull              the local queue stayed full for ``block_timeout_s``; the message
                                was NOT queued (counted in ``stats().rejected``)

A contract violation by the caller is a plain :class:`ValueError` (with the parser's one-line
reason); using a closed publisher is a :class:`RuntimeError`.

Thread-safety: a :class:`Publisher` may be shared by any number of threads (confluent's Producer
is thread-safe; our counters are updated under a lock). Delivery callbacks, including the user's
``on_delivery``, run on whichever thread is inside ``send``/``poll``/``flush``; keep them short.
A ``NodePublisher`` is safe to call from several threads too: building, sending and
numbering one event happen under its lock, so ``seq`` order is the order handed to Kafka (a send
blocked by back-pressure holds that lock, which is what keeps the order).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import Producer as _KafkaProducer

from replimon.config import Producer, Topics

if TYPE_CHECKING:
    from replimon.config import Settings

__all__ = [
    "BufferFull",
    "DeliveryReport",
    "PublishError",
    "Publisher",
    "PublisherStats",
    "encode_event",
    "wall_clock_ms",
]

log = logging.getLogger(__name__)
_rdkafka_log = logging.getLogger(__name__ + ".librdkafka")

MAX_FAILURES_KEPT = 1000
_BLOCK_POLL_S = 0.05  # how often a blocked send retries while serving delivery reports


class PublishError(Exception):
    """A message was not (or may not have been) acknowledged by the broker."""


class BufferFull(PublishError):
    """The local queue stayed full for ``block_timeout_s``; the message was not queued."""


@dataclass(frozen=True, slots=True)
class DeliveryReport:
    """The outcome of one message: ``error`` is None when the broker acknowledged it.

    ``partition`` and ``offset`` are None when the message never reached a partition.
    """

    topic: str
    partition: int | None
    offset: int | None
    key: bytes | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class PublisherStats:
    """A snapshot of the publisher's counters.

    ``sent`` counts messages handed to librdkafka; each ends up ``delivered`` or ``failed``, the
    rest are ``in_flight``. ``rejected`` counts messages refused with an exception before they
    were queued (:class:`BufferFull`, or a :class:`PublishError` such as a message too large), so
    ``sent + rejected`` is every message a caller tried to send. ``blocked_s`` is the total time
    callers spent blocked on a full queue.
    """

    sent: int
    delivered: int
    failed: int
    in_flight: int
    rejected: int
    blocked_s: float
    renewed: int = 0  # producers replaced after a fatal error (fenced, broker restarted empty)


def wall_clock_ms() -> int:
    """Milliseconds since the epoch (the contract's ``ts_ms``)."""
    return time.time_ns() // 1_000_000


def encode_event(event: Mapping[str, Any]) -> bytes:
    """Compact JSON of an event, fields in the order given (the wire form of contract v1)."""
    return json.dumps(event, separators=(",", ":"), allow_nan=False).encode("utf-8")


class Publisher:
    """The Kafka transport for contract-v1 events (see the module docstring for guarantees).

    ``extra_config`` is merged last into the librdkafka configuration (tests use it to shorten
    ``message.timeout.ms``; operators for security settings).
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topics: Topics,
        producer_settings: Producer,
        client_id: str = "replimon",
        on_delivery: Callable[[DeliveryReport], None] | None = None,
        extra_config: dict[str, Any] | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topics = topics
        self.producer_settings = producer_settings
        self._on_delivery_user = on_delivery
        self._lock = threading.Lock()
        self._sent = 0
        self._delivered = 0
        self._failed = 0
        self._rejected = 0
        self._blocked_s = 0.0
        self._failures: deque[DeliveryReport] = deque(maxlen=MAX_FAILURES_KEPT)
        self._unflushed_failed = 0
        self._first_unflushed: DeliveryReport | None = None
        self._closed = False
        self._renewed = 0
        self._fatal: str | None = None  # set by error_cb; the next send replaces the producer
        self._broker_down = False
        self._renewed_at = time.monotonic()
        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap_servers,
            "client.id": client_id,
            # Idempotence gives per-partition order and no duplicates across retries, which is
            # what the monitor's (group, node, incarnation, seq) gap detection relies on.
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": producer_settings.linger_ms,
            "compression.type": producer_settings.compression,
            "delivery.timeout.ms": producer_settings.delivery_timeout_ms,
            "queue.buffering.max.messages": producer_settings.max_buffered_messages,
            "on_delivery": self._on_delivery,
            "error_cb": self._on_error,
            # librdkafka logs to stderr unless given a Python logger (served by poll()). Only its
            # critical lines: a broker that is down would log a FAIL line per connection attempt
            # (thousands a minute); error_cb says it once here ("all brokers down", "back").
            "logger": _rdkafka_log,
            "log_level": 2,
        }
        config.update(extra_config or {})
        self._config = config
        self._producer = _KafkaProducer(config)

    @classmethod
    def from_settings(cls, settings: Settings, **kw: Any) -> Publisher:
        """A publisher configured from ``settings.kafka``; keyword arguments override."""
        kafka = settings.kafka
        params: dict[str, Any] = {
            "bootstrap_servers": kafka.bootstrap_servers,
            "topics": kafka.topics,
            "producer_settings": kafka.producer,
            "client_id": kafka.client_id,
        }
        params.update(kw)
        return cls(**params)

    # -- sending ---------------------------------------------------------------------------------

    def send(self, event: Mapping[str, Any]) -> None:
        """Queue a complete contract-v1 event: topic from its type, key = its group, record
        timestamp = its ``ts_ms`` (Kafka's CreateTime: when the node created it), so the time
        windows of a replay (``replimon replay --from --to``) are event-time windows.

        Not validated here (:class:`NodePublisher` does that). Blocks while the local queue is
        full; raises :class:`BufferFull` after ``block_timeout_s``.
        """
        topic = self.topics.for_event_type(event["type"])
        ts = event.get("ts_ms")
        self.send_raw(topic, str(event["group"]).encode("utf-8"), encode_event(event),
                      timestamp=ts if isinstance(ts, int) and ts > 0 else None)

    def send_raw(self, topic: str, key: bytes | None, value: bytes, timestamp: int | None = None) -> None:
        """Queue arbitrary bytes (tools and tests: dead-letter probes, malformed records);
        ``timestamp``: the record's CreateTime in epoch ms (default: now)."""
        if self._closed:
            raise RuntimeError("publisher is closed")
        if self._fatal is not None:
            self._renew()
        try:
            self._produce(topic, key, value, timestamp)
        except KafkaException as exc:
            if not _is_fatal(exc):
                raise self._refused(exc) from exc
            # The producer died between its error callback and this call: a new one takes it.
            self._fatal = self._fatal or _describe(exc)
            self._renew()
            try:
                self._produce(topic, key, value, timestamp)
            except KafkaException as again:
                raise self._refused(again) from again
        with self._lock:
            self._sent += 1
        self._producer.poll(0)

    def _produce(self, topic: str, key: bytes | None, value: bytes, timestamp: int | None) -> None:
        try:
            self._producer.produce(topic, value, key, timestamp=timestamp or 0)
        except BufferError:
            self._produce_blocking(topic, key, value, timestamp)

    def _produce_blocking(self, topic: str, key: bytes | None, value: bytes, timestamp: int | None = None) -> None:
        """Back-pressure: serve delivery reports until the queue has room or time runs out."""
        start = time.monotonic()
        deadline = start + self.producer_settings.block_timeout_s
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    with self._lock:
                        self._rejected += 1
                    raise BufferFull(
                        f"local queue full ({self.producer_settings.max_buffered_messages} "
                        f"messages) for {self.producer_settings.block_timeout_s}s: the broker is "
                        f"unreachable or slower than the producers; message not queued"
                    )
                self._producer.poll(min(remaining, _BLOCK_POLL_S))
                try:
                    self._producer.produce(topic, value, key, timestamp=timestamp or 0)
                except BufferError:
                    continue
                except KafkaException as exc:
                    raise self._refused(exc) from exc
                return
        finally:
            with self._lock:
                self._blocked_s += time.monotonic() - start

    def _renew(self) -> None:
        """Replace a producer that hit a fatal error (fenced by the broker, or its idempotence
        state lost when the broker restarted empty: every later produce() would fail). The old
        producer's queued messages are purged, so each is reported (and counted) as failed: none
        is lost silently; messages the broker acknowledged stay acknowledged."""
        reason, self._fatal = self._fatal, None
        if reason == _TIMED_OUT:
            if not _reachable(self.bootstrap_servers):
                # The broker is down, not confused: the queued messages may still make it.
                self._renewed_at = time.monotonic()
                return
            reason = "messages timed out while the broker accepts connections"
        old = self._producer
        with self._lock:
            before = self._failed
        try:
            old.purge()
            old.flush(1.0)
        except KafkaException:  # pragma: no cover - a dead producer may refuse even this
            pass
        self._producer = _KafkaProducer(self._config)
        self._renewed_at = time.monotonic()
        with self._lock:
            self._renewed += 1
            lost = self._failed - before
        log.warning("Kafka producer replaced after %s; %d message(s) still queued in the old one failed",
                    reason, lost)

    def _refused(self, exc: KafkaException) -> PublishError:
        # e.g. MSG_SIZE_TOO_LARGE, or _FATAL after a fatal idempotence error: never queued.
        with self._lock:
            self._rejected += 1
        return PublishError(f"librdkafka refused the message: {_describe(exc)}")

    # -- callbacks -------------------------------------------------------------------------------

    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        report = DeliveryReport(
            topic=msg.topic(),
            partition=msg.partition() if err is None else _opt(msg.partition()),
            offset=msg.offset() if err is None else _opt(msg.offset()),
            key=msg.key(),
            error=None if err is None else f"{err.name()}: {err.str()}",
        )
        if err is None and self._broker_down:
            self._broker_down = False
            log.warning("Kafka: the broker at %s answers again", self.bootstrap_servers)
        with self._lock:
            if err is None:
                self._delivered += 1
            else:
                self._failed += 1
                self._failures.append(report)
                if (err.code() == KafkaError._MSG_TIMED_OUT and self._fatal is None
                        and time.monotonic() - self._renewed_at > self.producer_settings.delivery_timeout_ms / 1000):
                    # A broker that restarted empty hands out the same producer id again and
                    # drops the connection on the old sequence numbers instead of answering
                    # (Tansu does): no fatal error ever comes, every message times out. A new
                    # producer starts its sequences afresh. At most once per delivery timeout.
                    self._fatal = _TIMED_OUT
                self._unflushed_failed += 1
                if self._first_unflushed is None:
                    self._first_unflushed = report
        if self._on_delivery_user is not None:
            # An exception here would surface from an unrelated send()/poll() (confluent re-raises
            # callback errors from poll), after that message was already queued; log it instead.
            try:
                self._on_delivery_user(report)
            except Exception:
                log.exception("on_delivery callback failed for a message to %s", report.topic)

    def _on_error(self, err: KafkaError) -> None:
        # Transport errors are transient (librdkafka retries until delivery.timeout.ms and its
        # logger already reported them); a fatal error makes every later produce() fail.
        if err.fatal():
            # Not here: this runs inside the producer's poll(). The next send replaces it.
            self._fatal = f"{err.name()}: {err.str()}"
        elif err.code() == KafkaError._ALL_BROKERS_DOWN and not self._broker_down:
            self._broker_down = True
            log.warning("Kafka: no broker of %s answers; messages wait in the local queue (up to "
                        "%d ms each)", self.bootstrap_servers, self.producer_settings.delivery_timeout_ms)
        else:
            log.debug("Kafka producer error: %s: %s", err.name(), err.str())

    # -- observing and finishing -----------------------------------------------------------------

    def poll(self, timeout_s: float = 0.0) -> int:
        """Serve pending delivery reports (an idle publisher's callbacks wait for this)."""
        return int(self._producer.poll(timeout_s))

    def stats(self) -> PublisherStats:
        with self._lock:
            return PublisherStats(
                sent=self._sent,
                delivered=self._delivered,
                failed=self._failed,
                in_flight=self._sent - self._delivered - self._failed,
                rejected=self._rejected,
                blocked_s=self._blocked_s,
                renewed=self._renewed,
            )

    def failures(self) -> list[DeliveryReport]:
        """The last :data:`MAX_FAILURES_KEPT` failed deliveries, oldest first."""
        with self._lock:
            return list(self._failures)

    def flush(self, timeout_s: float | None = None) -> int:
        """Wait for delivery reports; return how many messages are still undelivered.

        ``None`` waits until every message is delivered or has timed out
        (``delivery_timeout_ms``). Raises :class:`PublishError` when any delivery failed since
        the previous flush, so a flush that returns 0 means every message sent so far was
        acknowledged by the broker.
        """
        if self._closed:
            raise RuntimeError("publisher is closed")
        remaining = self._flush(timeout_s)
        self._raise_failures(remaining)
        return remaining

    def _flush(self, timeout_s: float | None) -> int:
        if timeout_s is None:
            return int(self._producer.flush())
        return int(self._producer.flush(timeout_s))

    def _raise_failures(self, remaining: int) -> None:
        with self._lock:
            failed, first = self._unflushed_failed, self._first_unflushed
            self._unflushed_failed, self._first_unflushed = 0, None
        if failed:
            still = f"; {remaining} still undelivered" if remaining else ""
            assert first is not None
            raise PublishError(
                f"{failed} message(s) failed delivery since the last flush{still}; first: "
                f"{first.error} (topic {first.topic})"
            )

    def close(self, timeout_s: float | None = None) -> None:
        """Flush, then release the producer. Idempotent.

        Raises :class:`PublishError` if a delivery failed or, with a ``timeout_s``, if messages
        were still undelivered when it expired (those are purged and reported as failed).
        """
        if self._closed:
            return
        self._closed = True
        remaining = self._flush(timeout_s)
        if remaining:
            # Do not leave messages behind silently: purge them so their reports say so.
            self._producer.purge()
            self._producer.flush(1.0)
        self._producer.close()
        self._raise_failures(remaining)
        if remaining:
            raise PublishError(f"{remaining} message(s) undelivered when close timed out")

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _opt(value: int | None) -> int | None:
    return value if value is not None and value >= 0 else None


_TIMED_OUT = "timed out"


def _reachable(bootstrap: str, timeout_s: float = 1.0) -> bool:
    """Whether any bootstrap server accepts a TCP connection now."""
    import socket

    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]") or "localhost", int(port)), timeout=timeout_s):
                return True
        except (OSError, ValueError):
            continue
    return False


def _is_fatal(exc: KafkaException) -> bool:
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and (err.fatal() or err.code() == KafkaError._FATAL)


def _describe(exc: KafkaException) -> str:
    err = exc.args[0] if exc.args else None
    if isinstance(err, KafkaError):
        return f"{err.name()}: {err.str()}"
    return str(exc)
