"""Reading a micro-batch's input records back from Kafka, and sampling them by group.

The ``foreachBatch`` writer only sees the stateful operator's output, so the data-quality hook
reads the batch's input again: the offsets a batch ends at are in the checkpoint's offset log
(``BatchWriter.batch_offsets``), the previous batch's entry gives where it starts. Records are
read with an assign-only consumer (no consumer group offsets are committed), as the job's Kafka
source reads them.

Sampling keeps whole groups: the per-node checks (seq order, a node's clock against its group's)
need every record of a group in the batch, in offset order. A group is in the sample when a hash
of its key and the batch id falls below a threshold chosen so that about ``limit`` records are
kept; the groups with the lowest hashes are kept until ``limit`` records, so the sample is the
same for the same batch (a retried batch validates the same records) and moves to other groups
from batch to batch.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from replimon.contract import Invalid, parse_event
from replimon.contract.parse import event_to_dict
from replimon.quality.derive import Record

log = logging.getLogger("replimon.quality")

TP = tuple[str, int]
_SCALE = 1 << 32
_OVERSAMPLE = 2  # keep twice the expected share while reading, cut to ``limit`` at the end


@dataclass
class Sample:
    """The validated part of a batch: its contract-valid records of the sampled groups."""

    records: list[Record]
    total: int  # records in the batch's offset ranges
    read: int  # records read from Kafka
    groups: int  # groups in the sample
    invalid: int  # records of the sampled groups that break contract v1 (dead letters)
    complete: bool  # every range was read to its end


def ranges(start: Mapping[str, Mapping[str, int]], end: Mapping[str, Mapping[str, int]],
           low: Mapping[TP, int] | None = None) -> dict[TP, tuple[int, int]]:
    """``{(topic, partition): (from, until)}`` between two Kafka source offsets (Spark's JSON
    form ``{"topic": {"partition": offset}}``); a partition missing from ``start`` starts at
    ``low`` (the oldest offset Kafka holds; 0 if unknown). Empty ranges are left out."""
    out = {}
    for topic, parts in end.items():
        for p, until in parts.items():
            tp = (topic, int(p))
            since = start.get(topic, {}).get(p)
            begin = int(since) if since is not None else (low or {}).get(tp, 0)
            if int(until) > begin:
                out[tp] = (begin, int(until))
    return out


def group_hash(key: bytes | None, salt: int) -> int:
    """Where a group falls in [0, 2**32) for batch ``salt``: 4 bytes of BLAKE2b of the salt and
    the key (not CRC-32: a CRC of a salted key is the unsalted one XOR a constant per key length,
    so every batch would sample nearly the same groups)."""
    digest = hashlib.blake2b(key or b"", digest_size=4, salt=salt.to_bytes(8, "big", signed=True))
    return int.from_bytes(digest.digest(), "big")


def read_sample(bootstrap: str, spans: Mapping[TP, tuple[int, int]], topic_types: Mapping[str, str],
                *, limit: int, salt: int, client: Mapping[str, Any] | None = None,
                timeout_s: float = 60.0, since_ms: int | None = None) -> Sample:
    """Read ``spans`` and keep the contract-valid records of a sample of groups (module
    docstring) of about ``limit`` records. ``topic_types``: topic -> contract type (a record of
    another type on a topic is a dead letter, as the job's validator says). ``since_ms``: drop
    events older than this (a replay's window start: records the replay re-reads from before its
    window are not part of it). Gives up after ``timeout_s`` without progress and returns what it
    has (``complete`` False)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    total = sum(u - f for f, u in spans.values())
    keep_below = _SCALE if total <= limit else min(_SCALE, int(_SCALE * _OVERSAMPLE * limit / total))
    kept: dict[bytes, list[tuple[str, int, int, bytes | None]]] = {}
    hashes: dict[bytes, int] = {}  # per group, computed once (a batch has many records per group)
    read = 0
    complete = True
    if spans:
        consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": "replimon-quality",
            "enable.auto.commit": False, "enable.auto.offset.store": False,
            "enable.partition.eof": True, "auto.offset.reset": "earliest",
            "isolation.level": "read_uncommitted", "fetch.wait.max.ms": 50, **(client or {})})
        try:
            consumer.assign([TopicPartition(t, p, f) for (t, p), (f, _) in spans.items()])
            pending = dict(spans)
            last_progress = time.monotonic()
            while pending:
                msgs = consumer.consume(10_000, timeout=0.2)
                if not msgs and time.monotonic() - last_progress > timeout_s:
                    log.warning("data quality: gave up reading %s after %.0f s without a record",
                                ", ".join(f"{t}-{p}" for t, p in sorted(pending)), timeout_s)
                    complete = False
                    break
                for msg in msgs:
                    err = msg.error()
                    tp = (msg.topic() or "", msg.partition() if msg.partition() is not None else -1)
                    if tp not in pending:
                        continue
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:  # nothing more to read there
                            complete = complete and (msg.offset() or 0) >= pending[tp][1]
                            pending.pop(tp)
                        continue
                    last_progress = time.monotonic()
                    offset = msg.offset()
                    if offset is None:  # pragma: no cover - a record always has one
                        continue
                    until = pending[tp][1]
                    if offset >= until:
                        pending.pop(tp)
                        continue
                    read += 1
                    if offset == until - 1:
                        pending.pop(tp)
                    key = msg.key() or b""
                    h = hashes.get(key)
                    if h is None:
                        h = hashes[key] = group_hash(key, salt)
                    if h < keep_below:
                        kept.setdefault(key, []).append((tp[0], tp[1], offset, msg.value()))
        finally:
            consumer.close()
    # The groups with the lowest hashes, up to ``limit`` records (at least one group).
    records: list[Record] = []
    invalid = groups = 0
    for key in sorted(kept, key=hashes.__getitem__):
        rows = kept[key]
        if groups and len(records) + len(rows) > limit:
            break
        groups += 1
        for topic, partition, offset, value in rows:
            parsed = parse_event(value)
            if isinstance(parsed, Invalid) or topic_types.get(topic) != parsed.type:
                invalid += 1
                continue
            if since_ms is not None and parsed.ts_ms < since_ms:
                continue
            records.append(Record(topic, partition, offset, event_to_dict(parsed)))
    return Sample(records, total, read, groups, invalid, complete)


def offsets_json(value: Any) -> dict[str, dict[str, int]]:
    """A Kafka source offset (dict or JSON text) as ``{"topic": {"partition": offset}}``."""
    if isinstance(value, str):
        value = json.loads(value) if value.strip().startswith("{") else {}
    return {str(t): {str(p): int(o) for p, o in parts.items()} for t, parts in (value or {}).items()}
