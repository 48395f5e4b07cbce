"""The first offset of a partition whose record timestamp is at or after a time, without reading
the partition for every question: an index of its *record highs*.

Kafka's meaning (ListOffsets by timestamp, Spark's ``startingTimestamp``): the earliest offset
whose record timestamp is >= T, None when there is none. Timestamps need not grow within a
partition (CreateTime is the producer's clock: a node's clock may be ahead or behind), so a binary
search over record timestamps can land on a later record than that. What is exact for any order:
the first record at or after T is a *record high*, a record whose timestamp is above every
earlier record's of the partition (they are all older than T). The index keeps every record high
``(offset, timestamp)`` of a partition from its oldest record on; their timestamps strictly
increase, so the answer for any T is the first high at or after T, by binary search, and None
when none is. That is what reading forward from the oldest record answers (tested against it,
with records out of order, ``tests/kafka/test_timeindex.py``).

It is for brokers that ignore the timestamp in ListOffsets (the embedded broker, Tansu): there
`KafkaClient.timestamp_offsets` read every partition forward from its oldest record for every
question, ~10 s of a replay's planning at 1,000 groups (docs/performance.md, "Replay").
The index reads each partition once, then only what was appended since it last read; with a
directory it is kept between runs (a JSON file a topic), so a replay of an already indexed topic
reads nothing for its window.

Trusted only while the partition is the log it indexed: the same oldest offset, an end not below
the indexed one, and the same last record read (its fingerprint: offset, timestamp, CRC-32 of key
and value, as the Spark source tells a re-created log). Anything else rebuilds the partition's
index from its oldest record now, so retention (the oldest offset moves) costs a rebuild:
records deleted could have been highs, and no index entry says what the records after them held.

Its size is the number of highs: with CreateTime stamps that grow, at most one per distinct
millisecond of a partition (21,280 for the replay bench's 1,352,446 records, a 128 KB file). A
long retention at high rates would make it large; segment maxima (reading one segment per answer)
would bound it, at the cost of a read per question.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any

from replimon.kafka.offsets import TP

log = logging.getLogger("replimon.kafka")

# A record's fingerprint (``client.fingerprint``): (offset, timestamp, CRC-32 of key and value).
Print = tuple[int, int, int]


@dataclass
class PartitionIndex:
    """The record highs of one partition's offsets ``[base, end)``."""

    base: int  # the partition's oldest offset when it was indexed
    end: int  # offsets below it are indexed
    last: Print | None = None  # the last record read (None: none yet)
    offsets: list[int] = field(default_factory=list)
    stamps: list[int] = field(default_factory=list)  # strictly increasing

    def first_at(self, ts: int) -> int | None:
        """The first indexed offset whose record timestamp is >= ``ts``; None if none is."""
        k = bisect_left(self.stamps, ts)
        return self.offsets[k] if k < len(self.stamps) else None

    def to_json(self) -> dict[str, Any]:
        return {"base": self.base, "end": self.end, "last": self.last,
                "offsets": _deltas(self.offsets), "stamps": _deltas(self.stamps)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PartitionIndex:
        last = d.get("last")
        return cls(int(d["base"]), int(d["end"]), None if last is None else (last[0], last[1], last[2]),
                   list(accumulate(map(int, d["offsets"]))), list(accumulate(map(int, d["stamps"]))))


def _deltas(values: list[int]) -> list[int]:
    """Delta-encoded (a file of small numbers: about 3 bytes a high)."""
    return [b - a for a, b in zip([0, *values], values, strict=False)]


class TimeIndex:
    """The record-high indexes of one broker's partitions at one isolation level, kept in
    ``directory`` (one file a topic) when given, in memory otherwise. `KafkaClient.timestamp_offsets`
    brings them up to date (``index=``) and asks them."""

    def __init__(self, bootstrap: str, isolation: str, directory: str | Path | None = None) -> None:
        self.key = f"{bootstrap}|{isolation}"
        self.directory = None if directory is None else Path(directory)
        self.parts: dict[TP, PartitionIndex] = {}
        self._loaded: set[str] = set()
        self.records_read = 0  # what the last `update` read (tests, the bench)

    def _path(self, topic: str) -> Path:
        assert self.directory is not None
        digest = hashlib.sha1(self.key.encode()).hexdigest()[:12]
        return self.directory / f"{digest}-{topic}.json"

    def _load(self, topic: str) -> None:
        """The topic's file, once; an unreadable or foreign one is ignored (rebuilt)."""
        if topic in self._loaded or self.directory is None:
            return
        self._loaded.add(topic)
        try:
            data = json.loads(self._path(topic).read_text())
            if data.get("key") != self.key or data.get("topic") != topic:
                return
            for p, d in data["partitions"].items():
                self.parts[(topic, int(p))] = PartitionIndex.from_json(d)
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return

    def save(self, topics: Iterable[str]) -> None:
        """Write the topics' indexes (atomically: a concurrent planner reads the old or the new).
        A directory that cannot be written costs the next plan a read, not this one: a warning."""
        if self.directory is None:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            for topic in sorted(set(topics)):
                parts = {str(p): ix.to_json() for (t, p), ix in sorted(self.parts.items()) if t == topic}
                path = self._path(topic)
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps({"key": self.key, "topic": topic, "partitions": parts},
                                          separators=(",", ":")))
                os.replace(tmp, path)
        except OSError as exc:
            log.warning("timestamp index not kept in %s: %s", self.directory, exc)

    def held(self, tps: Iterable[TP], oldest: Mapping[TP, int], ends: Mapping[TP, int]) -> dict[TP, PartitionIndex]:
        """The indexes of ``tps`` that may still hold (same oldest offset, end not below theirs);
        the others start over empty from the oldest offset. The caller checks their last record."""
        out: dict[TP, PartitionIndex] = {}
        for tp in tps:
            self._load(tp[0])
            ix = self.parts.get(tp)
            if ix is None or ix.base != oldest[tp] or ix.end > ends[tp]:
                ix = self.parts[tp] = PartitionIndex(oldest[tp], oldest[tp])
            out[tp] = ix
        return out

    def restart(self, tp: TP, oldest: int) -> PartitionIndex:
        """Forget ``tp``'s index (its log is not the one indexed)."""
        ix = self.parts[tp] = PartitionIndex(oldest, oldest)
        return ix

    def take(self, msgs: list[Any], fingerprint: Callable[[Any], Print]) -> None:
        """Records read past the indexed ends (confluent-kafka messages, in offset order per
        partition); the hot loop of a first index (a million records at 1,000 groups)."""
        parts = self.parts
        lasts: dict[TP, Any] = {}
        for msg in msgs:
            tp = (msg.topic(), msg.partition())
            ix = parts[tp]
            stamp = msg.timestamp()[1]
            if not ix.stamps or stamp > ix.stamps[-1]:
                ix.offsets.append(msg.offset())
                ix.stamps.append(stamp)
            lasts[tp] = msg
        for tp, msg in lasts.items():
            parts[tp].last = fingerprint(msg)
            parts[tp].end = msg.offset() + 1
        self.records_read += len(msgs)
