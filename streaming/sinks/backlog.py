"""Micro-batches written to Kafka whose PostgreSQL write waits for the database to come back
(docs/operations.md, "PostgreSQL outage").

While PostgreSQL is down the job keeps running: each batch still goes to Kafka, and its PostgreSQL
part (alerts, snapshots, dead letters) joins this backlog, in batch order. The backlog is written
oldest first once PostgreSQL answers again, each batch through the same exactly-once guard as
always (``PostgresSink.write_batch``: a batch id at or below the committed one writes nothing).

Spark commits a batch's offsets when ``foreachBatch`` returns, so a backlogged batch is never read
again: the backlog is also kept on disk (one JSON file per batch in ``<checkpoint>/pg-backlog/``,
written and synced before the batch returns) and reloaded when the job starts again. A checkpoint
that is not a local directory (HDFS, S3) keeps the backlog in memory only.
"""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Pending:
    """What ``PostgresSink.write_batch`` needs of one batch."""

    batch_id: int
    alerts: list[str]  # the alerts' JSON text
    snapshots: list[dict[str, Any]]
    dead_letters: list[dict[str, Any]]

    def to_json(self) -> str:
        dead = [{**d, "raw": None if d.get("raw") is None else base64.b64encode(bytes(d["raw"])).decode()}
                for d in self.dead_letters]
        return json.dumps({"batch_id": self.batch_id, "alerts": self.alerts, "snapshots": self.snapshots,
                           "dead_letters": dead}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Pending:
        value = json.loads(text)
        dead = [{**d, "raw": None if d.get("raw") is None else base64.b64decode(d["raw"])}
                for d in value["dead_letters"]]
        return cls(int(value["batch_id"]), list(value["alerts"]), list(value["snapshots"]), dead)


@dataclass
class Backoff:
    """When to try PostgreSQL again: ``first_s``, doubling up to ``max_s``."""

    first_s: float = 1.0
    max_s: float = 30.0
    delay_s: float = 0.0
    next_at: float = 0.0

    def due(self, now: float | None = None) -> bool:
        return (time.monotonic() if now is None else now) >= self.next_at

    def failed(self, now: float | None = None) -> float:
        """Record a failed attempt; return the delay until the next one."""
        self.delay_s = self.first_s if self.delay_s == 0 else min(self.max_s, self.delay_s * 2)
        self.next_at = (time.monotonic() if now is None else now) + self.delay_s
        return self.delay_s

    def reset(self) -> None:
        self.delay_s = self.next_at = 0.0


@dataclass
class Backlog:
    """Batches waiting for PostgreSQL, oldest first; mirrored in ``folder`` when given."""

    folder: Path | None = None
    items: list[Pending] = field(default_factory=list)

    @classmethod
    def at(cls, checkpoint_location: str | None) -> Backlog:
        """The backlog of a query's checkpoint (on disk for a local one), with what an earlier
        run of the job left in it."""
        if not checkpoint_location or ("://" in checkpoint_location
                                       and not checkpoint_location.startswith("file://")):
            return cls()
        folder = Path(checkpoint_location.removeprefix("file://")) / "pg-backlog"
        backlog = cls(folder)
        if folder.is_dir():
            files = sorted(folder.glob("*.json"), key=lambda p: int(p.stem))
            backlog.items = [Pending.from_json(p.read_text(encoding="utf-8")) for p in files]
        return backlog

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, batch_id: object) -> bool:
        return any(p.batch_id == batch_id for p in self.items)

    @property
    def last_id(self) -> int | None:
        return self.items[-1].batch_id if self.items else None

    def add(self, pending: Pending) -> None:
        if pending.batch_id in self:
            return
        self.items.append(pending)
        if self.folder is not None:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / f"{pending.batch_id}.json"
            tmp = path.with_suffix(".tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(pending.to_json())
                f.flush()
                os.fsync(f.fileno())
            tmp.replace(path)

    def pop_first(self) -> None:
        done = self.items.pop(0)
        if self.folder is not None:
            (self.folder / f"{done.batch_id}.json").unlink(missing_ok=True)
