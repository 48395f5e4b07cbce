"""Kafka in one place: the client every part of replimon reads Kafka with, and offsets in the
JSON form Spark stores.

* ``client.py``: `KafkaClient` (partitions, watermarks, true partition ends despite the embedded
  broker's quirks, timestamp lookups, record-timestamp probes, reading offset ranges); its
  docstring describes the quirks.
* ``reading.py``: the one loop that reads offset ranges, and what it guarantees.
* ``timeindex.py``: per partition, the records whose timestamp is above every earlier one: the
  exact first offset at or after a time without reading the partition again (a broker that
  ignores timestamps in ListOffsets, the replay's planning).
* ``consumers.py``: librdkafka configuration and which errors are survived.
* ``offsets.py``: ``{"topic": {"partition": offset}}`` and back, and its total.

No pyspark here: the Spark source (``replimon.streaming.sources.kafka``) builds on this.
Writing to Kafka is the publisher's (``replimon.producers.publisher``) and the streaming
job's sinks'.
"""

from __future__ import annotations

from replimon.kafka.client import INF, KafkaClient, Selection
from replimon.kafka.offsets import (
    TP,
    OffsetsJson,
    offsets_from_json,
    offsets_json,
    offsets_to_json,
    offsets_total,
)
from replimon.kafka.reading import BEGINNING, Gap, RecordsUnavailable, Span

__all__ = ["BEGINNING", "INF", "TP", "Gap", "KafkaClient", "OffsetsJson", "RecordsUnavailable",
           "Selection", "Span", "offsets_from_json", "offsets_json", "offsets_to_json",
           "offsets_total"]
