"""In-memory stand-ins for what Spark hands a StatefulProcessor (``MonitorLogic``): one bucket's
ValueState and its timer handle, for tests that drive micro-batches by hand."""

from __future__ import annotations

from typing import Any


class MemoryState:
    """A ValueState: ``get`` / ``update``."""

    def __init__(self) -> None:
        self.value: tuple[Any, ...] | None = None

    def get(self) -> tuple[Any, ...] | None:
        return self.value

    def update(self, value: tuple[Any, ...]) -> None:
        self.value = value


class MemoryTimers:
    """A handle's processing-time timers: ``registerTimer`` / ``deleteTimer``."""

    def __init__(self) -> None:
        self.timers: set[int] = set()

    def registerTimer(self, ts: int) -> None:  # noqa: N802
        self.timers.add(ts)

    def deleteTimer(self, ts: int) -> None:  # noqa: N802
        self.timers.discard(ts)
