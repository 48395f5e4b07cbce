"""Kafka source for Spark written against PySpark's Python data source API (``replimon-kafka``).

Spark's own ``kafka`` connector needs a JVM jar that the embedded setup does not ship, and a
Python source cannot be registered under the name ``kafka``. This one reads with
``replimon.kafka`` (confluent-kafka) and takes the built-in connector's option names and output
columns (``docs/kafka-source.md``)::

    spark.readStream.format("replimon-kafka")
        .option("kafka.bootstrap.servers", "127.0.0.1:9092")
        .option("subscribe", "a,b")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 10000)
        .load()

Columns: ``key`` binary, ``value`` binary, ``topic`` string, ``partition`` int, ``offset`` long,
``timestamp`` timestamp, ``timestampType`` int.

The package, in the order a query uses it: ``options.py`` (parsing, errors, failOnDataLoss),
``reader.py`` (the driver-side stream and batch readers), ``planning.py`` (starting/ending
offsets, offset ranges and tasks), ``admission.py`` (how much a capped micro-batch admits),
``partitions.py`` (a task's input partition and the Arrow batches it reads), ``schema.py``.
End offsets are true partition ends, never the embedded broker's short ListOffsets answer
(``replimon/kafka/client.py``, "The embedded broker's quirks"). Clients never join a consumer
group (``assign()`` with explicit offsets, no commits).
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from replimon.streaming.sources.kafka.options import (
    SOURCE_NAME,
    KafkaDataLossError,
    KafkaOptionError,
    Options,
    parse_options,
)
from replimon.streaming.sources.kafka.reader import KafkaBatchReader, KafkaStreamReader
from replimon.streaming.sources.kafka.schema import SCHEMA

__all__ = ["SCHEMA", "SOURCE_NAME", "KafkaDataLossError", "KafkaDataSource", "KafkaOptionError"]


def _check_schema(schema: StructType | None) -> None:
    if schema is not None and [(f.name, f.dataType) for f in schema.fields] != [
            (f.name, f.dataType) for f in SCHEMA.fields]:
        raise KafkaOptionError(f"The {SOURCE_NAME} source has a fixed schema ({SCHEMA.simpleString()})"
                               f" and does not accept a user-specified one ({schema.simpleString()})")


class KafkaDataSource(DataSource):
    """``spark.read`` / ``spark.readStream`` ``.format("replimon-kafka")``; options as in Spark's
    Kafka source (docs/kafka-source.md)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def _opts(self) -> Options:
        return parse_options(self.options)

    def schema(self) -> StructType:
        self._opts()  # fail early, at load(), on a bad option
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_schema(schema)
        return KafkaBatchReader(self._opts())

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _check_schema(schema)
        return KafkaStreamReader(self._opts())
