"""Contract validation in the Python workers, one Arrow batch at a time (``mapInArrow``), and
the packing of what the stateful operator takes (``pack_events``).

The Spark-SQL validator (``replimon.streaming.validate``) gives the same verdicts with Spark
expressions only; it measured 50-136k records/s warm but pays ~1 s of planning per micro-batch,
so ``parse_event`` in the Python workers is the default (``streaming.validator``). Both produce
the same packed columns (``PACKED_SCHEMA``).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

DEAD_KEY = "#dead-letters"  # the group of dead-letter rows: never a group id (contract ids are
# [A-Za-z0-9._:-])
DEAD_BUCKET = -1  # their state key: it touches no state
CLOCK_KEY = "#clock"  # the group of clock rows: the latest event time of an Arrow batch, sent to
# every bucket (live mode: the outside clock while the job catches up on a backlog)
PACKED_SCHEMA = "bucket int, group string, events string, event_ms long"


def bucket_of(group: str, buckets: int) -> int:
    """A group's state key: CRC-32 of its UTF-8 name modulo ``buckets`` (the same as Spark SQL's
    ``pmod(crc32(cast(group as binary)), buckets)``, which the SQL validator uses)."""
    return zlib.crc32(group.encode()) % buckets


def _pack_batches(topic_types: dict[str, str], buckets: int, clock: bool,
                  only: frozenset[str] | None = None) -> Any:
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import base64
        import json

        import pyarrow as pa

        from replimon.contract import Invalid, parse_event

        schema = pa.schema([("bucket", pa.int32()), ("group", pa.string()), ("events", pa.string()),
                            ("event_ms", pa.int64())])
        quoted: dict[str, str] = {}
        for batch in batches:
            values = batch.column("value").to_pylist()
            topics = batch.column("topic").to_pylist()
            partitions = batch.column("partition").to_pylist()
            offsets = batch.column("offset").to_pylist()
            stamps = batch.column("timestamp").cast(pa.int64()).to_pylist()  # epoch microseconds
            packs: dict[str, list[str]] = {}
            latest: dict[str, int] = {}
            dead: list[str] = []
            for raw, topic, partition, offset, stamp in zip(values, topics, partitions, offsets, stamps,
                                                            strict=True):
                parsed = parse_event(raw)
                if isinstance(parsed, Invalid):
                    reason: str | None = parsed.reason
                elif topic_types.get(topic) != parsed.type:
                    want = topic_types.get(topic)
                    reason = (f"type: {parsed.type!r} does not belong on topic {topic!r}"
                              + (f" (it carries {want} events)" if want else " (not a replica topic)"))
                else:
                    reason = None
                if reason is None:
                    e: Any = parsed
                    if only is not None and e.group not in only:
                        continue  # a replay of selected groups: valid, just not asked for
                    q = quoted.get(topic)
                    if q is None:
                        q = quoted[topic] = json.dumps(topic)
                    text = raw.decode() if isinstance(raw, bytes) else raw
                    # The record's own JSON text (validated: one JSON value) goes in unchanged.
                    packs.setdefault(e.group, []).append(
                        f'{{"t":{q},"p":{partition},"o":{offset},"e":{text}}}')
                    if e.ts_ms > latest.get(e.group, -1):
                        latest[e.group] = e.ts_ms
                else:
                    dead.append(json.dumps({
                        "topic": topic, "partition": partition, "offset": offset,
                        "raw_b64": base64.b64encode(raw).decode() if raw is not None else None,
                        "reason": reason, "kafka_ts": None if stamp is None else stamp // 1000,
                    }, separators=(",", ":")))
            groups = list(packs)
            keys = [bucket_of(g, buckets) for g in groups]
            texts = ["[" + ",".join(packs[g]) + "]" for g in groups]
            times = [latest[g] for g in groups]
            if clock and times:
                latest_ms = str(max(times))
                keys.extend(range(buckets))
                groups.extend([CLOCK_KEY] * buckets)
                texts.extend([latest_ms] * buckets)
                times.extend([0] * buckets)
            if dead:
                keys.append(DEAD_BUCKET)
                groups.append(DEAD_KEY)
                texts.append("[" + ",".join(dead) + "]")
                times.append(0)  # never moves the watermark
            if groups:
                yield pa.RecordBatch.from_arrays(
                    [pa.array(keys, pa.int32()), pa.array(groups, pa.string()), pa.array(texts, pa.string()),
                     pa.array(times, pa.int64())], schema=schema)

    return run


def pack_events(df: Any, topic_types: dict[str, str], buckets: int, clock: bool = False,
                only: frozenset[str] | None = None) -> Any:
    """One pass over the Kafka rows: per Arrow batch, one row per group with its valid events
    (``events``: a JSON array of ``{"t": topic, "p": partition, "o": offset, "e": event}``) and
    its state ``bucket`` (``bucket_of``), and one row with the dead letters (``{topic, partition,
    offset, raw_b64, reason, kafka_ts}``; group ``DEAD_KEY``, bucket ``DEAD_BUCKET``);
    ``event_ms``: the latest event time of the row (0 for dead letters). With ``clock``, each Arrow
    batch with valid events also sends every bucket a row ``(bucket, CLOCK_KEY, "<its latest event
    time>")``: how far the input has been read, which the live processor uses as its outside clock
    while that is behind the processing time (a backlog).

    Packing cuts the rows the stateful operator handles (its cost is per row and per key, not per
    byte) and the source is read once (a union of a valid and a dead branch read it twice).
    ``only``: keep the valid events of these groups only (a replay of selected groups)."""
    return df.select("value", "topic", "partition", "offset", "timestamp").mapInArrow(
        _pack_batches(dict(topic_types), buckets, clock, only), PACKED_SCHEMA)
