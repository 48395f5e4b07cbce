"""Many groups, one outside clock (``Monitor``): what ``replimon check`` and the benchmark run.

Pure, no I/O, no clock: the outside clock is the highest event time read so far. Each group's
``GroupMonitor`` is created at its first event; a group's timer (GROUP_SILENT, NODE_SILENT) fires
when the outside clock passes it (timers due before the last event's time fire; nothing is
invented after the last event). The streaming job keeps one ``GroupMonitor`` per group in Spark's
state instead (docs/streaming.md).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

from replimon.core.alerts import Alert
from replimon.core.group import GroupMonitor
from replimon.core.limits import Limits
from replimon.core.rules.base import Src
from replimon.core.rules.family import family_of


class Monitor:
    """Many groups, one outside clock."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.groups: dict[str, GroupMonitor] = {}
        self.clock = -1
        self._timers: list[tuple[int, str]] = []
        self._scheduled: set[str] = set()

    def process(self, ev: dict[str, Any], src: Src = None) -> list[Alert]:
        """Take one event (arrival order): fire the timers it passes, then feed its group."""
        out: list[Alert] = []
        ts = ev["ts_ms"]
        if ts > self.clock:
            self.clock = ts
            if self._timers and self._timers[0][0] <= ts:
                out.extend(self._fire_due())
        name = ev["group"]
        g = self.groups.get(name)
        if g is None:
            g = self.groups[name] = GroupMonitor(name, self.limits, family_of(ev["type"]))
        out.extend(g.on_event(ev, src))
        if name not in self._scheduled:
            when = g.next_timer()
            if when is not None:
                heapq.heappush(self._timers, (when, name))
                self._scheduled.add(name)
        return out

    def _fire_due(self) -> list[Alert]:
        out: list[Alert] = []
        while self._timers and self._timers[0][0] <= self.clock:
            _, name = heapq.heappop(self._timers)
            self._scheduled.discard(name)
            g = self.groups[name]
            out.extend(g.on_timer(self.clock))
            when = g.next_timer()
            if when is not None:
                when = max(when, self.clock + 1)  # strictly later: a timer never re-fires at once
                heapq.heappush(self._timers, (when, name))
                self._scheduled.add(name)
        return out

    def run(self, events: Iterable[dict[str, Any]]) -> list[Alert]:
        """Every event, then the end of input."""
        out: list[Alert] = []
        for ev in events:
            out.extend(self.process(ev))
        out.extend(self.finish())
        return out

    def finish(self) -> list[Alert]:
        """End of input: complete what was held back (no time passes)."""
        out: list[Alert] = []
        for g in self.groups.values():
            out.extend(g.flush())
        return out
