"""The decode stage: every record of the source decoded and checked against contract v1 once, in
the Python workers, one Arrow batch at a time (``mapInArrow``), and packed for the monitor.

Per Arrow batch it yields (``rows.py``, "Packed rows"): one row per group with that group's valid
events (decoded dicts, with the topic, partition and offset they were read at), one row with the
batch's dead letters (raw bytes and the reason: a record that does not decode, breaks the
contract, or sits on a topic that does not carry its type), and in live mode one clock row per
bucket. A data-loss marker of the source (offset -1, ``streaming/sources/kafka/markers.py``)
goes to every bucket under ``LOSS_KEY`` (``data_loss.py``). Packing cuts the rows the stateful operator handles (its cost is per row and per key, not
per byte), and the source is read once (a union of a valid and a dead branch would read it twice).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from replimon.streaming.data_loss import LOSS_KEY
from replimon.streaming.rows import (
    CLOCK_KEY,
    DEAD_BUCKET,
    DEAD_KEY,
    PACKED_SCHEMA,
    SOURCE_COLUMNS,
    bucket_of,
    pack,
)

_UNCHECKED = object()  # the key of a record whose batch has no key column


def misplaced(event_type: str, topic: str, want: str | Collection[str] | None) -> str:
    """The reason of an event on a topic that does not carry its type."""
    if want is not None and not isinstance(want, str):
        want = " or ".join(sorted(want))
    return (f"type: {event_type!r} does not belong on topic {topic!r}"
            + (f" (it carries {want} events)" if want else " (not a replica topic)"))


def key_problem(key: bytes | None, group: str) -> str | None:
    """Why a valid event's Kafka key is wrong, None when it is its group. The contract keys every
    record by its group, so that a group's events share one partition and keep their order; a
    record without a key was placed by the producer's partitioner, one with another group's key
    went to that group's partition: either can reach the monitor out of order with its group's
    other events, so it is a dead letter (kept whole, with this reason) rather than an event
    judged out of order (docs/contract.md, docs/operations.md "Bad records")."""
    if key is None:
        return f"key: the record has no key; the contract keys every record by its group ({group!r})"
    if key != group.encode():
        shown = key[:130].decode("utf-8", "replace")
        return f"key: the record's key {shown!r} is not its group {group!r} (the contract keys records by group)"
    return None


def decode_batches(topic_types: Mapping[str, str | Collection[str]], buckets: int, clock: bool,
                   only: frozenset[str] | None = None, bound: int = 0) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function. ``topic_types``: topic -> the event type(s) it carries (every
    family's: docs/contract.md, "Protocol families"); ``clock``: send every bucket the batch's
    latest event time; ``only``: keep the valid events of these groups only (a replay of selected
    groups; the others are valid, just not asked for); ``bound``: a group's event time for the
    watermark leaves out events more than this far ahead of every other node's in the batch (a
    clock far ahead must not move a replay's watermark: docs/operations.md, "Clocks"; 0: off)."""
    types = {t: frozenset((v,) if isinstance(v, str) else v) for t, v in topic_types.items()}

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from replimon.contract import Invalid, decode_event
        from replimon.streaming.sources.kafka.markers import MARKER_OFFSET, read_marker

        schema = pa.schema([("bucket", pa.int32()), ("group", pa.string()), ("items", pa.binary()),
                            ("event_ms", pa.int64())])
        for batch in batches:
            values = batch.column("value").to_pylist()
            topics = batch.column("topic").to_pylist()
            partitions = batch.column("partition").to_pylist()
            offsets = batch.column("offset").to_pylist()
            stamps = batch.column("timestamp").cast(pa.int64()).to_pylist()  # epoch microseconds
            # Without a key column (a caller's own batches) keys are not checked.
            keys = batch.column("key").to_pylist() if "key" in batch.schema.names else [_UNCHECKED] * len(offsets)
            events: dict[str, list[tuple[str, int, int, dict[str, Any]]]] = {}
            latest: dict[str, int] = {}
            dead: list[tuple[str, int, int, bytes | None, str, int | None]] = []
            losses: list[bytes] = []
            for raw, topic, partition, offset, stamp, key in zip(values, topics, partitions, offsets, stamps,
                                                                 keys, strict=True):
                if offset == MARKER_OFFSET:  # the source's data-loss marker, never a record
                    losses.append(pack(read_marker(raw)))
                    continue
                ev = decode_event(raw)
                if isinstance(ev, Invalid):
                    reason = ev.reason
                elif ev["type"] not in types.get(topic, ()):
                    reason = misplaced(ev["type"], topic, types.get(topic))
                elif key is not _UNCHECKED and (reason := key_problem(key, ev["group"])) is not None:  # type: ignore[arg-type]
                    pass
                else:
                    group = ev["group"]
                    if only is not None and group not in only:
                        continue
                    events.setdefault(group, []).append((topic, partition, offset, ev))
                    if ev["ts_ms"] > latest.get(group, -1):
                        latest[group] = ev["ts_ms"]
                    continue
                dead.append((topic, partition, offset, raw, reason, None if stamp is None else stamp // 1000))
            groups = list(events)
            keys = [bucket_of(g, buckets) for g in groups]
            items = [pack(events[g]) for g in groups]
            if bound > 0 and groups:
                from replimon.core.clocks import trusted_latest

                latest = trusted_latest((i[3] for g in groups for i in events[g]), bound)
            times = [latest.get(g, 0) for g in groups]
            if clock and times:
                read = pack(max(times))
                keys.extend(range(buckets))
                groups.extend([CLOCK_KEY] * buckets)
                items.extend([read] * buckets)
                times.extend([0] * buckets)
            for loss in losses:  # every bucket: any group may have been cut (data_loss.py)
                keys.extend(range(buckets))
                groups.extend([LOSS_KEY] * buckets)
                items.extend([loss] * buckets)
                times.extend([0] * buckets)
            if dead:
                keys.append(DEAD_BUCKET)
                groups.append(DEAD_KEY)
                items.append(pack(dead))
                times.append(0)  # never moves the watermark
            if groups:
                yield pa.RecordBatch.from_arrays(
                    [pa.array(keys, pa.int32()), pa.array(groups, pa.string()), pa.array(items, pa.binary()),
                     pa.array(times, pa.int64())], schema=schema)

    return run


def decode(df: Any, topic_types: Mapping[str, str | Collection[str]], buckets: int, clock: bool = False,
           only: frozenset[str] | None = None, bound: int = 0) -> Any:
    """The source's rows as packed rows (module docstring)."""
    return df.select(*SOURCE_COLUMNS).mapInArrow(decode_batches(topic_types, buckets, clock, only, bound),
                                                 PACKED_SCHEMA)
