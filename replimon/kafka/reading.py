"""Reading offset ranges of Kafka partitions: the records at ``[from, until)`` of each, or from
``from`` to the partition's true end.

`read_ranges` is the one read loop of replimon: the Spark source's tasks, the data-quality
sample, the replay's checkpoint records and the tests all read through it (by way of
`KafkaClient.read`). It guarantees, per partition:

* every record it yields lies in the range, each at most once, in offset order;
* the range is done when its last offset has been read, when a record at or past ``until``
  arrives (a compacted or transactional partition may have no record at ``until - 1``), or at
  ``PARTITION_EOF``: librdkafka raises it once every record before it has been delivered, so its
  position is the true end of the partition (``client.py``, "The embedded broker's quirks");
* what cannot be read is reported, never skipped in silence: a range that ends early (EOF, or
  the broker's silence past the end, below) or whose offset is out of range goes to ``on_gap``
  (default: raise `RecordsUnavailable`); a read that makes no progress for ``timeout_s`` raises
  TimeoutError;
* a record above the next offset wanted (offsets skipped: records deleted while the read went on,
  which a consumer with ``auto.offset.reset=earliest`` passes over, but also the holes of a
  compacted or transactional partition) goes to ``on_jump`` with the skipped range, when given:
  only the caller can tell a deletion from a hole (it asks where the partition starts now);
* with a ``watch`` (`replimon.kafka.outage.BrokerWatch`), time during which no broker answers
  does not count against ``timeout_s``: the read waits for the broker (librdkafka reconnects by
  itself) and goes on where it stood, with one line when the broker is lost and one when back.

A fetch past the end of a partition gets neither records nor an error nor EOF on the embedded
broker (Apache Kafka answers OFFSET_OUT_OF_RANGE). A read that gets nothing for
``IDLE_CHECK_S`` compares its position with the cached fetch high watermark instead; that check
changes nothing against Apache Kafka, which never reaches it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

from replimon.kafka.consumers import IDLE_CHECK_S, OUT_OF_RANGE, check_error, where
from replimon.kafka.offsets import TP
from replimon.kafka.outage import BrokerWatch

BEGINNING = OFFSET_BEGINNING  # a range's start: the oldest record the partition still holds
Span = tuple[int, int | None]  # from (inclusive, or BEGINNING), until (exclusive; None: the end)
Gap = Callable[[TP, str], None]  # on_gap(partition, what could not be read)
Jump = Callable[[TP, int, int], None]  # on_jump(partition, [first, upto) skipped)
_OPEN = 2**63 - 1  # the `until` of a range read to the end


class RecordsUnavailable(RuntimeError):
    """Records a read or a probe was planned to get are gone: out of range or past the end of
    their partition (deleted by retention, the topic re-created)."""


def _raise(_tp: TP, message: str) -> None:
    raise RecordsUnavailable(message)


def read_ranges(consumer: Any, spans: Mapping[TP, Span], *, timeout_s: float,
                on_gap: Gap | None = None, chunk: int = 10_000, timeout_hint: str = "",
                watch: BrokerWatch | None = None,
                on_jump: Jump | None = None) -> Iterator[list[Any]]:
    """The records of ``spans`` (module docstring) as lists of confluent-kafka messages (no
    error events), read with ``consumer`` (assigned here, left assigned). ``chunk``: at most
    this many messages a consume call; ``timeout_hint`` ends the timeout's message; ``watch``:
    waits out a broker outage; ``on_jump``: offsets skipped (module docstring)."""
    report = on_gap or _raise
    # tp -> [next offset wanted, until]: mutated in place, one lookup a record.
    pending = {tp: [start, _OPEN if until is None else until]
               for tp, (start, until) in sorted(spans.items()) if until is None or until > start}
    if not pending:
        return
    consumer.assign([TopicPartition(t, p, state[0]) for (t, p), state in pending.items()])
    last_progress = quiet = time.monotonic()  # quiet: the last record, outages included
    probed = last_progress  # the watch's last question
    while pending:
        # No more than the ranges still hold (+1 a partition for its EOF event): what a read
        # takes past its end would be fetched for nothing.
        left = sum(min(u - max(n, 0), chunk) for n, u in pending.values()) + len(pending)
        msgs = consumer.consume(min(chunk, left), timeout=0.2)
        if not msgs:
            idle = time.monotonic() - last_progress
            if idle > IDLE_CHECK_S:
                _past_the_end(consumer, pending, report)
            now = time.monotonic()
            if pending and watch is not None and min(idle, now - probed) > watch.probe_s:
                probed = now
                if watch.stalled(consumer, quiet):
                    last_progress = now  # an outage: its time is not the read's timeout
                    continue
            if pending and idle > timeout_s:
                raise TimeoutError(
                    f"no record from {_describe(pending)} for {timeout_s:g} s" + timeout_hint)
            continue
        if any(msg.topic() is not None for msg in msgs):  # not only client-level errors
            last_progress = quiet = time.monotonic()
            if watch is not None:
                watch.back()
        out: list[Any] = []
        for msg in msgs:
            err = msg.error()
            if err is not None:
                _event(msg, err, pending, report)
                continue
            tp = (msg.topic(), msg.partition())
            state = pending.get(tp)
            if state is None:
                continue
            off = msg.offset()
            if off < state[0]:
                continue
            if off > state[0] and on_jump is not None and state[0] >= 0:
                on_jump(tp, state[0], min(off, state[1]))
            if off >= state[1]:
                del pending[tp]
                continue
            out.append(msg)
            state[0] = off + 1
            if state[0] >= state[1]:
                del pending[tp]
        if out:
            yield out


def _event(msg: Any, err: KafkaError, pending: dict[TP, list[int]], report: Gap) -> None:
    """An error event of the consumer: a partition's end, an offset out of range, or a client
    error (raised unless librdkafka recovers by itself)."""
    if msg.topic() is None:  # a client-level event
        check_error(err)
        return
    tp, off = where(msg)
    state = pending.get(tp)
    if state is None:
        return
    nxt, until = state
    code = err.code()
    if code == KafkaError._PARTITION_EOF:
        del pending[tp]  # every record before the EOF position has been delivered already
        if until != _OPEN and off < until:
            report(tp, f"Cannot read {tp[0]}-{tp[1]} offsets [{max(nxt, off)}, {until}): the "
                       f"partition ends at {off}")
    elif code in OUT_OF_RANGE:
        del pending[tp]
        report(tp, f"Offset {nxt} of {tp[0]}-{tp[1]} is out of range ({err.str()})")
    else:
        check_error(err)


def _past_the_end(consumer: Any, pending: dict[TP, list[int]], report: Gap) -> None:
    """After a silence: the partitions whose reads stand at or past the end (the fetch high
    watermark a fetch response left in the cache) are done; short of their range, a gap."""
    for tp in sorted(pending):
        nxt, until = pending[tp]
        high = consumer.get_watermark_offsets(TopicPartition(*tp), cached=True)[1]
        if not 0 <= high <= nxt:
            continue
        del pending[tp]
        if until != _OPEN or high < nxt:
            report(tp, f"Cannot read {tp[0]}-{tp[1]} offsets [{nxt}, "
                       f"{'the end' if until == _OPEN else until}): the partition ends at {high}")


def _describe(pending: Mapping[TP, list[int]]) -> str:
    return ", ".join(f"{t}-{p} at offset {n}" + ("" if u == _OPEN else f" (reading up to {u})")
                     for (t, p), (n, u) in sorted(pending.items())[:4])
