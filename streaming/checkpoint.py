"""What the writer and the sinks read from the query's checkpoint directory: the stream's id and
the input offsets a micro-batch ends at.

Spark writes ``offsets/<batch id>`` before it runs a batch; its third line is the sources'
offsets, which for both Kafka sources is ``{"topic": {"partition": offset}}``. A checkpoint on
HDFS or S3 (``docs/cluster.md``) is read through Spark's own file reader (``spark.read.text``), a
local one directly.
"""

from __future__ import annotations

import json
from typing import Any


class Checkpoint:
    """The checkpoint directory of one query (a path or a Hadoop URI)."""

    def __init__(self, location: str) -> None:
        self.location = location.rstrip("/")

    def _lines(self, name: str) -> list[str]:
        path = f"{self.location}/{name}"
        if "://" not in path or path.startswith("file://"):
            with open(path.removeprefix("file://"), encoding="utf-8") as f:
                return f.read().splitlines()
        from pyspark.sql import SparkSession  # pragma: no cover - a remote checkpoint

        spark = SparkSession.getActiveSession()
        if spark is None:
            raise OSError(f"no Spark session to read {path}")
        return [r.value for r in spark.read.text(path).collect()]

    def stream_id(self) -> str | None:
        """Spark's id of the stream (``metadata``); None before the query started."""
        try:
            first = self._lines("metadata")[:1]
        except OSError:
            return None
        return json.loads(first[0]).get("id") if first else None

    def end_offsets(self, batch_id: int) -> dict[str, dict[str, int]]:
        """The input offsets micro-batch ``batch_id`` ends at ({} when the log has none)."""
        lines = self._lines(f"offsets/{batch_id}")
        value: Any = json.loads(lines[2]) if len(lines) > 2 and lines[2].startswith("{") else {}
        return value if isinstance(value, dict) else {}

    def records_in(self, batch_id: int) -> int | None:
        """Input records micro-batch ``batch_id`` read: its end offsets minus the previous
        batch's (None when the offset log does not say, e.g. the first batch of a checkpoint that
        started at "latest")."""
        try:
            end = self.end_offsets(batch_id)
            start = self.end_offsets(batch_id - 1) if batch_id > 0 else None
        except (OSError, ValueError):
            return None
        if not end or start is None:
            return None
        total = 0
        for topic, parts in end.items():
            for part, offset in parts.items():
                before = start.get(topic, {}).get(part)
                if before is None:
                    return None
                total += max(0, int(offset) - int(before))
        return total
