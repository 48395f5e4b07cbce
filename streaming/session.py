"""The SparkSession the job and the tests use, configured the way SPARK-NOTES.md says PySpark 4.3
needs on these machines (RocksDB state store with changelog checkpointing, avro state encoding
pinned on a checkpoint's first run, few shuffle partitions, no UI, the driver's Python for
workers)."""

from __future__ import annotations

import os
import sys
from typing import Any

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def spark_conf(master: str = "local[2]", shuffle_partitions: int = 2, **extra: Any) -> dict[str, str]:
    conf = {
        "spark.master": master,
        "spark.app.name": "replimon",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.streaming.stateStore.encodingFormat": "avro",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": "1g",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.reuse": "true",
        "spark.sql.streaming.noDataMicroBatches.enabled": "true",
    }
    conf.update({k: str(v) for k, v in extra.items()})
    return conf


def prepare_env() -> None:
    """Environment the JVM and the Python workers must see before the JVM starts."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def get_session(master: str = "local[2]", shuffle_partitions: int = 2, **extra: Any) -> Any:
    """A SparkSession (created once per process), with the replimon data sources registered."""
    prepare_env()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in spark_conf(master, shuffle_partitions, **extra).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register_sources(spark)
    return spark


def register_sources(spark: Any) -> None:
    try:
        from replimon.streaming.sources.kafka import KafkaDataSource
    except ImportError:  # pragma: no cover - until the source exists
        return
    spark.dataSource.register(KafkaDataSource)
