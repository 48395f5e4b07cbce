"""Planning a replay run: the window's offsets and start states (``window.py``), its run id, and
what a finished run reports. The run itself is the Spark job (``replimon.streaming.replay``).
``replimon replay`` is the command line for both."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from replimon.replay.window import (
    ReplayError,
    StartState,
    Window,
    choose_start,
    plan_window,
    read_checkpoints,
    time_index_dir,
)


def new_run_id(now: datetime | None = None) -> str:
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S")
    return f"replay-{stamp}-{uuid.uuid4().hex[:6]}"


@dataclass
class ReplayResult:
    run_id: str
    window: Window
    start: StartState
    records_total: int  # records between the starting and the ending offsets
    records_read: int = 0
    alerts: int = 0
    seconds: float = 0.0
    params: dict[str, Any] = field(default_factory=dict)


def input_topics(settings: Any) -> list[str]:
    t = settings.kafka.topics
    return [t.decisions, t.executions, t.heartbeats, t.config]


def plan(settings: Any, from_ms: int, to_ms: int, *, groups: Sequence[str] | None = None,
         state_from: str = "checkpoint", checkpoints_of: str | None = "live") -> tuple[Window, StartState]:
    """The window's offsets and the state the replay starts from (``checkpoints_of``: the run
    whose checkpoint records count, the live job's by default; None: any)."""
    bootstrap = settings.kafka.bootstrap_servers
    window = plan_window(bootstrap, input_topics(settings), from_ms, to_ms, index_dir=time_index_dir(settings))
    only = frozenset(groups) if groups else None
    checkpoints = (read_checkpoints(bootstrap, settings.kafka.topics.state, before_ms=from_ms, groups=only,
                                    run_id=checkpoints_of) if state_from == "checkpoint" else [])
    return window, choose_start(window, checkpoints, only, state_from, checkpoints_of)


__all__ = ["ReplayError", "ReplayResult", "input_topics", "new_run_id", "plan"]
