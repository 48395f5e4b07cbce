"""Reading a micro-batch's input records back from Kafka, and sampling them by group.

The ``foreachBatch`` writer only sees the stateful operator's output, so the data-quality sink
(``streaming/sinks/quality.py``) reads the batch's input again: the offsets a batch ends at are in
the checkpoint's offset log (``streaming/checkpoint.py``, ``Checkpoint.end_offsets``), the
previous batch's entry gives where it starts. Records are
read with ``replimon.kafka`` (``KafkaClient.read``), the reader the job's Kafka source uses:
assign-only, nothing committed, a range that ends early makes the sample incomplete.

Sampling keeps whole groups: the per-node checks (seq order, a node's clock against its group's)
need every record of a group in the batch, in offset order. A group is in the sample when a hash
of its key and the batch id falls below a threshold chosen so that about ``limit`` records are
kept; the groups with the lowest hashes are kept until ``limit`` records, so the sample is the
same for the same batch (a retried batch validates the same records) and moves to other groups
from batch to batch.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from replimon.contract import Invalid, parse_event
from replimon.contract.parse import event_to_dict
from replimon.kafka import TP, KafkaClient
from replimon.quality.derive import Record

log = logging.getLogger("replimon.quality")

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


def read_sample(bootstrap: str, spans: Mapping[TP, tuple[int, int]],
                topic_types: Mapping[str, str | Collection[str]],
                *, limit: int, salt: int, client: Mapping[str, Any] | None = None,
                timeout_s: float = 60.0, since_ms: int | None = None) -> Sample:
    """Read ``spans`` and keep the contract-valid records of a sample of groups (module
    docstring) of about ``limit`` records. ``topic_types``: topic -> the contract type(s) it carries
    (``Topics.input_families``: every family's type of the topic's role; a record of another type
    on a topic is a dead letter, as the job's decoder says). ``since_ms``: drop
    events older than this (a replay's window start: records the replay re-reads from before its
    window are not part of it). Gives up after ``timeout_s`` without progress and returns what it
    has (``complete`` False)."""
    allowed = {t: frozenset((v,) if isinstance(v, str) else v) for t, v in topic_types.items()}
    total = sum(u - f for f, u in spans.values())
    keep_below = _SCALE if total <= limit else min(_SCALE, int(_SCALE * _OVERSAMPLE * limit / total))
    kept: dict[bytes, list[tuple[str, int, int, bytes | None]]] = {}
    hashes: dict[bytes, int] = {}  # per group, computed once (a batch has many records per group)
    read = 0
    complete = True

    def gap(_tp: TP, _what: str) -> None:  # a range that ends early: the sample is incomplete
        nonlocal complete
        complete = False

    if spans:
        config = {"bootstrap.servers": bootstrap, "group.id": "replimon-quality",
                  "fetch.wait.max.ms": 50, **(client or {})}
        with KafkaClient(config, timeout_s=timeout_s) as kafka:
            try:
                for msgs in kafka.read(spans, on_gap=gap, reset="earliest"):
                    read += len(msgs)
                    for msg in msgs:
                        key = msg.key() or b""
                        h = hashes.get(key)
                        if h is None:
                            h = hashes[key] = group_hash(key, salt)
                        if h < keep_below:
                            kept.setdefault(key, []).append(
                                (msg.topic(), msg.partition(), msg.offset(), msg.value()))
            except TimeoutError as exc:
                log.warning("data quality: gave up reading the batch: %s", exc)
                complete = False
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
            if isinstance(parsed, Invalid) or parsed.type not in allowed.get(topic, ()):
                invalid += 1
                continue
            if since_ms is not None and parsed.ts_ms < since_ms:
                continue
            records.append(Record(topic, partition, offset, event_to_dict(parsed)))
    return Sample(records, total, read, groups, invalid, complete)

