"""What a micro-batch produced (``BatchResult``) and what a sink is (``Sink``).

The ``foreachBatch`` writer (``writer.py``) turns the monitor's output rows into one
``BatchResult`` and hands it to each sink in turn, then to the observers (the demo's live view,
tests). A sink never reaches into the writer: what it needs of the batch is here, what it needs of
the run (settings, where the checkpoint's offset log is) it is given when it is made.

Payloads stay as the monitor encoded them (``rows.py``, "Output rows"): ``alert_rows`` and
``snapshot_rows`` carry the JSON text a Kafka record's value or a PostgreSQL row is made from, and
``alerts``/``snapshots`` decode it only for a reader that asks (an observer, the data-quality
sink), once per batch.

Exactly once: the writer first asks the guard (the PostgreSQL sink) whether the batch was
committed before; if so ``repeated`` is True and every sink writes nothing (Spark retries a batch
after a crash with the same rows).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple, Protocol


class AlertRow(NamedTuple):
    group: str
    alert_id: str
    status: str
    event_ts_ms: int
    payload: str  # the alert as JSON (replimon.core.alerts.Alert.to_dict)


class SnapshotRow(NamedTuple):
    group: str
    clock_ms: int
    payload: str  # the group's snapshot as JSON (GroupMonitor.snapshot)


class CheckpointRow(NamedTuple):
    group: str
    clock_ms: int
    state: str  # the group's whole state as JSON (to_state), for replays to start from


@dataclass
class BatchResult:
    """One micro-batch's output, in the order the sinks need it."""

    batch_id: int
    alert_rows: list[AlertRow] = field(default_factory=list)  # by (event time, id, status)
    snapshot_rows: list[SnapshotRow] = field(default_factory=list)
    checkpoints: list[CheckpointRow] = field(default_factory=list)
    # {"topic", "partition", "offset", "raw" (bytes), "reason", "kafka_ts"}
    dead_letters: list[dict[str, Any]] = field(default_factory=list)
    repeated: bool = False  # committed before: a retried batch, nothing is written again
    written: bool = True  # False: nothing was written now (repeated, or another writer won)
    deferred: bool = False  # its PostgreSQL rows wait for the database (sinks/backlog.py)

    @cached_property
    def alerts(self) -> list[dict[str, Any]]:
        """The alerts as dicts (decoded on first use)."""
        return [json.loads(a.payload) for a in self.alert_rows]

    @cached_property
    def snapshots(self) -> list[dict[str, Any]]:
        """The group snapshots as dicts (decoded on first use)."""
        return [json.loads(s.payload) for s in self.snapshot_rows]


class Sink(Protocol):
    """Where a batch's result goes. ``write`` sees every batch, ``repeated`` ones too, and must
    leave what it writes unchanged by a retry (docs/streaming.md, "Exactly once")."""

    def write(self, result: BatchResult) -> None: ...

    def close(self) -> None: ...
