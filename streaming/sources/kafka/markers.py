"""Data-loss markers: an extension of the ``replimon-kafka`` source (option ``dataLossMarkers``).

With ``failOnDataLoss=false`` a partition whose offset moved back (the topic re-created, a broker
restarted without its data) is only logged by Spark's rule, and the query reads on from the new
end; records deleted from the front of a partition before the query read them (retention) are
skipped in silence: a consumer that keeps state across records cannot tell that its history was
cut. With ``dataLossMarkers=true`` the micro-batch that sees such a loss carries one marker row
per partition, and reads on from the partition's earliest offset:

* ``offset`` -1 (never a record's offset), ``key`` `MARKER_KEY`, ``timestamp`` the epoch,
  ``timestampType`` -1, ``topic`` / ``partition`` the partition that moved;
* ``value``: JSON ``{"topic", "partition", "from", "to", "earliest"}``. Moved back: the offset
  the query had read up to (records of the old log at and after it, if any, were never read),
  the partition's new end and the earliest offset of the new log (read in the same micro-batch).
  Truncated at the front, with ``"cause": "truncated"``: the lost records are offsets
  ``[from, to)``, and the batch reads on from ``earliest`` (= ``to``).

* A new log already past the offset read (``"cause": "recreated"``): the offsets do not show it;
  the record last seen at the previous planning is read again and differs (``reader.py``). Its
  ``from`` is the offset read up to, ``to`` the batch's end, ``earliest`` where the new log is
  read from.

A move back is computed from the batch's start and end offsets alone (Spark's offset log), so a
re-run batch carries the same marker; a truncation from the earliest offset when the batch is
planned (a re-run after more was deleted names the longer range); a re-created log from what the
running query remembered (a batch re-planned after a restart has nothing to compare: no marker,
docs/operations.md).
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from replimon.streaming.sources.kafka.schema import ARROW_SCHEMA

MARKER_KEY = b"replimon-kafka:data-loss"
MARKER_OFFSET = -1
TRUNCATED = "truncated"  # a marker's "cause" when records were deleted from the front
RECREATED = "recreated"  # ... when the log is another one already past the offset read


def loss(topic: str, partition: int, start: int, end: int, earliest: int) -> dict[str, Any]:
    """What a marker says: ``topic``-``partition`` moved back from ``start`` to ``end``."""
    return {"topic": topic, "partition": partition, "from": start, "to": end, "earliest": earliest}


def truncation(topic: str, partition: int, start: int, earliest: int) -> dict[str, Any]:
    """What a marker says: offsets ``[start, earliest)`` of ``topic``-``partition`` were deleted
    before the query read them; it reads on from ``earliest``."""
    return {**loss(topic, partition, start, earliest, earliest), "cause": TRUNCATED}


def recreated(topic: str, partition: int, start: int, end: int, earliest: int) -> dict[str, Any]:
    """What a marker says: ``topic``-``partition`` is a new log (re-created, or a broker back
    without its data) that had already grown past ``start``, the offset the query had read up
    to: the old log's records from ``start`` were never read; the batch reads the new log from
    ``earliest`` to ``end``."""
    return {**loss(topic, partition, start, end, earliest), "cause": RECREATED}


def marker_batch(losses: list[dict[str, Any]]) -> pa.RecordBatch:
    """The marker rows of ``losses`` (`loss`) as one Arrow batch of the source's schema."""
    n = len(losses)
    return pa.RecordBatch.from_arrays([
        pa.array([MARKER_KEY] * n, pa.binary()),
        pa.array([json.dumps(x, sort_keys=True).encode() for x in losses], pa.binary()),
        pa.array([x["topic"] for x in losses], pa.string()),
        pa.array([x["partition"] for x in losses], pa.int32()),
        pa.array([MARKER_OFFSET] * n, pa.int64()),
        pa.array([0] * n, pa.timestamp("us", tz="UTC")),
        pa.array([-1] * n, pa.int32()),
    ], schema=ARROW_SCHEMA)


def read_marker(value: bytes) -> dict[str, Any]:
    """A marker row's ``value`` back as `loss` made it."""
    out: dict[str, Any] = json.loads(value)
    return out
