"""The rows that pass between the job's Spark stages, their schemas and reserved keys: one place.

The job's graph (``job.py``) is source -> decode (``decode.py``, ``mapInArrow``) -> the
stateful monitor (``processor.py``, ``transformWithState`` grouped by ``bucket``) -> the
``foreachBatch`` writer (``writer.py``) -> the sinks. Between them:

**Packed rows** (decode -> monitor), ``PACKED_SCHEMA``: per Arrow batch of the source, one row per
group holding its valid events, one row of dead letters and, in live mode, one clock row per
bucket:

==================  ==========  ==================================================================
row                 ``group``   ``items``
==================  ==========  ==================================================================
events of a group   the group   ``pack([(topic, partition, offset, event dict), ...])``
dead letters        DEAD_KEY    ``pack([(topic, partition, offset, raw bytes, reason, kafka_ts)])``
clock               CLOCK_KEY   ``pack(latest event time of the Arrow batch)``
==================  ==========  ==================================================================

``bucket`` is the state key (``bucket_of``; DEAD_BUCKET for dead letters, which touch no state);
``event_ms`` the row's latest event time (the replay's watermark; 0 for dead letters and clock
rows). An event is decoded once, in the decode stage; the monitor gets the decoded dicts through
``unpack`` (``marshal``: the data is the job's own plain values, written and read by the same code
in one query, on executors that PySpark requires to run the same Python version; it packs and
unpacks them faster than pickle, bench/chain.py), never parsing the JSON again.

**Output rows** (monitor -> writer), ``OUTPUT_SCHEMA``:

==============  ===========  ===================  =========  ===============  ==============
``out``         ``group_id``  ``id``               ``status``  ``ts_ms``        payload / raw
==============  ===========  ===================  =========  ===============  ==============
``alert``       group        alert id             status     event time       alert JSON
``state``       group        group                -          group clock      snapshot JSON
``checkpoint``  group        group                -          group clock      state JSON
``dead``        -            topic:partition:off  -          Kafka timestamp  reason / raw
==============  ===========  ===================  =========  ===============  ==============

Each payload is encoded once, by the monitor, and goes out as it is (the Kafka record value; the
PostgreSQL row is read from it by PostgreSQL); a dead letter's raw bytes travel as bytes.
"""

from __future__ import annotations

import marshal
import zlib
from collections.abc import Iterable
from typing import Any

# -- packed rows ------------------------------------------------------------------------------------
PACKED_SCHEMA = "bucket int, group string, items binary, event_ms long"
DEAD_KEY = "#dead-letters"  # never a group id (contract ids are [A-Za-z0-9._:-])
DEAD_BUCKET = -1  # the dead letters' state key: it touches no state
CLOCK_KEY = "#clock"  # the latest event time of an Arrow batch, sent to every bucket (live mode:
# the outside clock while the job catches up on a backlog; processor.py, "Time")
# The source's columns the decode stage reads (the key: a record's key must be its group).
SOURCE_COLUMNS = ("value", "topic", "partition", "offset", "timestamp", "key")


def bucket_of(group: str, buckets: int) -> int:
    """A group's state key: CRC-32 of its UTF-8 name modulo ``buckets``."""
    return zlib.crc32(group.encode()) % buckets


def pack(value: Any) -> bytes:
    """A packed row's ``items``: plain values only (None, bool, int, str, bytes, tuple, list,
    dict), as the decode stage has them."""
    return marshal.dumps(value, 4)


def unpack(data: bytes) -> Any:
    """The value ``pack`` was given."""
    return marshal.loads(data)  # the job's own rows (module docstring)


# -- output rows ------------------------------------------------------------------------------------
OUTPUT_SCHEMA = ("out STRING, group_id STRING, id STRING, status STRING, ts_ms LONG, payload STRING, "
                 "raw BINARY")
OUTPUT_COLUMNS = ("out", "group_id", "id", "status", "ts_ms", "payload", "raw")
ALERT, STATE, CHECKPOINT, DEAD = "alert", "state", "checkpoint", "dead"


def dead_id(topic: str, partition: int, offset: int) -> str:
    """A dead letter's ``id`` (and its Kafka key): where the record was read."""
    return f"{topic}:{partition}:{offset}"


def dead_rows(packs: Iterable[bytes]) -> list[tuple[Any, ...]]:
    """The decode stage's dead letters as output rows: where they were read, the reason, the raw
    bytes. (The monitor adds one for an event of another family than its group's:
    ``processor.conflict_row``.)"""
    out: list[tuple[Any, ...]] = []
    for data in packs:
        for topic, partition, offset, raw, reason, kafka_ts in unpack(data):
            out.append((DEAD, None, dead_id(topic, partition, offset), None, kafka_ts, reason, raw))
    return out


def dead_where(dead_letter_id: str) -> tuple[str, int, int]:
    """``dead_id`` read back (Kafka topic names hold no ``:``)."""
    topic, partition, offset = dead_letter_id.rsplit(":", 2)
    return topic, int(partition), int(offset)


# -- a replay's initial state (the operator's initialState) -----------------------------------------
INITIAL_SCHEMA = "bucket int, group string, state string, floors string"
