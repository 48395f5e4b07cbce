"""Many groups, one outside clock (``Monitor``): what ``replimon check`` and the benchmark run.

Pure, no I/O, no clock: the outside clock is the highest event time read so far. Each group's
``GroupMonitor`` is created at its first event; a group's timer (GROUP_SILENT, NODE_SILENT) fires
when the outside clock passes it (timers due before the last event's time fire; nothing is
invented after the last event). The streaming job keeps one ``GroupMonitor`` per group in Spark's
state instead (docs/streaming.md).

Clocks (docs/operations.md, "Clocks"): one node's clock must not drive the outside clock. An event
more than ``clock_skew_ms`` ahead of the latest trusted time of every *other* node read so far is
held with the rest of its node's events until another node is heard: if that node's time comes
within the bound of it, the jump is confirmed (a gap in the capture) and the held events go on as
they are; if not, the node is skewed: CLOCK_SKEW, and its events go on stamped at the outside
clock (``replimon.core.clocks``) until its clock comes back within the bound. The first node read
is held the same way (there is nothing to judge it by yet). Without a skewed clock, events are fed
in the same order at the same times as ever.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

import replimon.core.clocks as clocks
from replimon.core.alerts import Alert
from replimon.core.group import GroupMonitor, conflict_reason
from replimon.core.limits import Limits
from replimon.core.rules.base import Src
from replimon.core.rules.family import family_of, pinned


class Monitor:
    """Many groups, one outside clock."""

    def __init__(self, limits: Limits | None = None, pins: tuple[tuple[str, str], ...] = ()) -> None:
        """``pins``: configuration's ``families:`` (group id or glob -> family), in order."""
        self.limits = limits or Limits()
        self.pins = pins
        self.groups: dict[str, GroupMonitor] = {}
        self.families: dict[str, str] = {}  # group -> its family, fixed when it is first read
        self.clock = -1
        self._timers: list[tuple[int, str]] = []
        self._scheduled: set[str] = set()
        self._ref = clocks.Reference()
        self._skewed: set[tuple[str, str]] = set()  # nodes whose clock is far ahead now
        self._pending: list[tuple[dict[str, Any], Src]] = []  # held events of ``_suspect``
        self._suspect: tuple[str, str] | None = None

    def process(self, ev: dict[str, Any], src: Src = None) -> list[Alert]:
        """Take one event (arrival order): fire the timers it passes, then feed its group (an
        event whose time is not confirmed yet is held: module doc)."""
        group = ev["group"]
        key = (group, ev["node"])
        # The common case first, with nothing but lookups (every event passes here): nothing
        # held, a known group, a node within the bound of another node's time. ``_screen`` takes
        # the rest with the same verdicts.
        skewed = self._skewed
        if not self._pending and not (skewed and key in skewed) and group in self.families:
            top = self._ref.top
            if top and top[0][1] != key:
                reference = top[0][0]
            elif len(top) > 1:
                reference = top[1][0]
            else:
                return self._screen(ev, src, key)
            if reference < 0 or ev["ts_ms"] - reference <= self.limits.clock_skew_ms:
                return self._feed(ev, src, reference, key)
        return self._screen(ev, src, key)

    def _screen(self, ev: dict[str, Any], src: Src, key: tuple[str, str]) -> list[Alert]:
        """``process`` for an event that may be held or judged against the clock bound."""
        out: list[Alert] = []
        group = key[0]
        if group not in self.families:
            self.families[group] = pinned(group, self.pins) or family_of(ev["type"])
        if self._pending:
            if key == self._suspect:
                self._pending.append((ev, src))
                if len(self._pending) >= clocks.PENDING_MAX:
                    out.extend(self._decide(None))
                return out
            out.extend(self._decide(ev))
        ts, bound = ev["ts_ms"], self.limits.clock_skew_ms
        reference = self._ref.others(key)
        # clocks.judge, inline (every event passes here)
        ahead = reference is not None and reference >= 0 and ts - reference > bound
        if key in self._skewed:
            if ahead:
                out.extend(self._feed_skewed(ev, src, self.clock))
                return out
            self._skewed.discard(key)  # back within the bound
        elif ahead or (reference is None and key not in self._ref.latest):
            self._suspect, self._pending = key, [(ev, src)]
            return out
        out.extend(self._feed(ev, src, reference, key))
        return out

    def conflict(self, ev: dict[str, Any]) -> str | None:
        """The dead letter's reason when ``ev`` is of another family than its group's (the group's
        family is fixed by its pin or its first event read), else None. ``process`` then raises
        FAMILY_CONFLICT and leaves the event out."""
        family = self.families.get(ev["group"]) or pinned(ev["group"], self.pins)
        if family is None or family_of(ev["type"]) == family:
            return None
        return conflict_reason(ev["group"], family)

    def _decide(self, other: dict[str, Any] | None) -> list[Alert]:
        """The held events' node is confirmed or skewed, by ``other`` (another node's event) or,
        with None, by what is known (no other node at all: nothing to judge by, trusted)."""
        held, key = self._pending, self._suspect
        self._pending, self._suspect = [], None
        assert key is not None
        top = max(e["ts_ms"] for e, _ in held)
        bound = self.limits.clock_skew_ms
        if other is not None:
            skewed = top - other["ts_ms"] > bound
            reference = max(self.clock, other["ts_ms"])
        else:
            skewed = self._ref.others(key) is not None
            reference = self.clock
        out: list[Alert] = []
        if skewed:
            self._skewed.add(key)
        for e, s in held:
            if skewed and clocks.judge(e["ts_ms"], reference, bound):
                out.extend(self._feed_skewed(e, s, reference))
            else:
                out.extend(self._feed(e, s, self._ref.others((e["group"], e["node"]))))
        return out

    def _feed_skewed(self, ev: dict[str, Any], src: Src, reference: int) -> list[Alert]:
        g = self._group(ev)
        return clocks.report(g, ev, src, reference) + self._feed(clocks.restamp(ev, reference), src, None, trusted=False)

    def _group(self, ev: dict[str, Any]) -> GroupMonitor:
        name = ev["group"]
        g = self.groups.get(name)
        if g is None:
            g = self.groups[name] = GroupMonitor(name, self.limits, self.families[name])
        return g

    def _feed(self, ev: dict[str, Any], src: Src, reference: int | None, key: tuple[str, str] | None = None,
              *, trusted: bool = True) -> list[Alert]:
        """Feed one event to its group (``reference``: the other nodes' best time,
        ``Reference.others``; ``key``: its (group, node), if the caller has it; a restamped event
        is not trusted and moves no reference)."""
        out: list[Alert] = []
        ts = key_ts = ev["ts_ms"]
        if trusted:
            if key is None:
                key = (ev["group"], ev["node"])
            # Within the bound too, one node leads the outside clock by at most the skew: its
            # time is only the outside clock's once another node's comes near it.
            if reference is not None and reference + self.limits.skew_ms < ts:
                key_ts = reference + self.limits.skew_ms
            self._ref.note(key, ts)
        if key_ts > self.clock:
            self.clock = key_ts
            if self._timers and self._timers[0][0] <= key_ts:
                out.extend(self._fire_due())
        name = ev["group"]
        g = self.groups.get(name)
        if g is None:
            g = self._group(ev)
        if key_ts < ts and name in self._scheduled:
            # The event's own group sees its time at once, as before it is fed (a group that
            # resumes after a group-wide silence gets its GROUP_SILENT first, also when it is the
            # only group read): only the other groups wait for another node to confirm it.
            when = g.next_timer()
            if when is not None and when <= ts:
                out.extend(g.on_timer(ts))
        alerts = g.on_event(ev, src)
        if out:
            out.extend(alerts)
        else:
            out = alerts
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
        out: list[Alert] = self._decide(None) if self._pending else []
        for g in self.groups.values():
            out.extend(g.flush())
        return out
