"""The per-group monitor as a ``transformWithState`` StatefulProcessor (Row and Pandas APIs).

Spark only carries events to ``replimon.core`` and keeps its state: one ValueState per group
(``monitor_v2``: the core's ``to_state()`` as JSON and the time of the group's registered timer;
the name changes when its shape does) and at most one timer per group.

Input rows are packs (``replimon.streaming.validate_arrow.pack_events``): ``events`` is a JSON
array of ``{"t": topic, "p": partition, "o": offset, "e": event}``; rows keyed ``DEAD_KEY`` carry
dead letters instead, which pass through as ``dead`` output rows without touching state.

Cost. Every state call is a round trip to the JVM, so each group costs one read and one write per
micro-batch: the registered timer is remembered in the state (no listing), and a timer later than
the core needs is moved earlier, but one earlier than needed is kept (when it fires, nothing is
due yet, and it is re-armed at the core's ``next_timer()``): groups that keep publishing push their
deadlines on every batch without a timer call.

Time. Live (``timeMode="ProcessingTime"``): the outside clock of GROUP_SILENT and NODE_SILENT is
the micro-batch's processing time (replica clocks and Spark's share the wall clock), so they fire
with no input at all. Replay (``timeMode="EventTime"``, a watermark on the event time): the outside
clock is the watermark, which is what ``replimon check`` does with the highest event time read.
Everything else runs on the group's own event time inside the core, so live, replay and check
name the same occurrences with the same ``alert_id``s.

Determinism: a micro-batch retried after a crash has the same rows and the same timer values
(Spark stores both); events are sorted by (ts_ms, node, incarnation, seq, topic, partition,
offset) before they reach the core, so the retried batch yields the same output whatever order
the shuffle delivered.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from replimon.core.alerts import Alert
from replimon.core.limits import Limits
from replimon.core.monitor import GroupMonitor
from replimon.streaming.validate_arrow import DEAD_KEY

STATE_NAME = "monitor_v2"
STATE_SCHEMA = "state STRING, timer LONG"
INPUT_COLUMNS = ("group", "events")
OUTPUT_SCHEMA = "out STRING, group_id STRING, id STRING, status STRING, ts_ms LONG, payload STRING"
LIVE, REPLAY = "ProcessingTime", "EventTime"


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _order(item: dict[str, Any]) -> tuple[Any, ...]:
    e = item["e"]
    return (e["ts_ms"], e["node"], e["incarnation"], e["seq"], item["t"], item["p"], item["o"])


def dead_rows(packs: Iterable[str]) -> list[tuple[Any, ...]]:
    """Dead letters, as the writer takes them (``payload``: topic, partition, offset, raw_b64,
    reason, kafka_ts)."""
    out: list[tuple[Any, ...]] = []
    for text in packs:
        for d in json.loads(text):
            out.append(("dead", None, f"{d['topic']}:{d['partition']}:{d['offset']}", None,
                        d.get("kafka_ts"), _dumps(d)))
    return out


class MonitorLogic:
    """What both adapters do for one group: load, feed, emit, save, re-arm the timer."""

    def __init__(self, limits: Limits, time_mode: str = LIVE) -> None:
        self.limits = limits
        self.time_mode = time_mode

    def now(self, timer_values: Any) -> int:
        if self.time_mode == LIVE:
            return int(timer_values.getCurrentProcessingTimeInMs())
        return int(timer_values.getCurrentWatermarkInMs())

    def load(self, state: Any, group: str) -> tuple[GroupMonitor, int | None]:
        """The group's monitor and its registered timer (one state call)."""
        value = state.get()
        if value is not None and value[0]:
            timer = value[1] if len(value) > 1 else None
            return GroupMonitor.from_state(json.loads(value[0]), self.limits), timer
        return GroupMonitor(group, self.limits), None

    def save(self, state: Any, gm: GroupMonitor, timer: int | None) -> None:
        state.update((_dumps(gm.to_state()), timer))

    def feed(self, gm: GroupMonitor, packs: Iterable[str], now: int) -> list[Alert]:
        """``packs``: JSON arrays of ``{"t", "p", "o", "e"}`` items."""
        items: list[dict[str, Any]] = []
        for text in packs:
            items.extend(json.loads(text))
        items.sort(key=_order)
        out: list[Alert] = []
        live_now = now if self.time_mode == LIVE else None
        on_event, clock = gm.on_event, gm.clock
        for item in items:
            e = item["e"]
            ts = e["ts_ms"]
            if ts > clock:
                # The group's own event time is an outside clock too, as in ``Monitor.process``:
                # what falls due before an event fires before it, so a silence that begins and
                # ends inside one micro-batch (a backlog, a replay) is still reported.
                clock = ts
                when = gm.next_timer()
                if when is not None and when <= ts:
                    out.extend(gm.on_timer(ts))
            out.extend(on_event(e, {"topic": item["t"], "partition": item["p"], "offset": item["o"]}, live_now))
        return out

    def due(self, gm: GroupMonitor, now: int) -> list[Alert]:
        """Fire what is due at ``now`` (a timer that is already due never waits a batch)."""
        out: list[Alert] = []
        for _ in range(3):
            when = gm.next_timer()
            if when is None or when > now or now < 0:
                break
            out.extend(gm.on_timer(now))
        return out

    def arm(self, handle: Any, gm: GroupMonitor, now: int, timer: int | None) -> int | None:
        """The timer to keep after this call (``timer``: the one registered, if any). Only a
        missing or too late timer costs a call; an early one is kept (see the module's doc)."""
        want = gm.next_timer()
        if want is None:
            if timer is not None:
                handle.deleteTimer(timer)
            return None
        want = max(want, now + 1)  # strictly in the future (SPARK-NOTES: SPARK-56566)
        if timer is not None and timer <= want:
            return timer
        if timer is not None:
            handle.deleteTimer(timer)
        handle.registerTimer(want)
        return want

    @staticmethod
    def rows(group: str, gm: GroupMonitor, alerts: list[Alert], snapshot: bool) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = [
            ("alert", group, a.alert_id, a.status, a.event_ts_ms, _dumps(a.to_dict())) for a in alerts
        ]
        if snapshot:
            out.append(("state", group, group, None, gm.clock, _dumps(gm.snapshot())))
        return out


def _processor_base() -> Any:
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    return StatefulProcessor


class _Common:
    logic: MonitorLogic

    def init(self, handle: Any) -> None:
        self.handle = handle
        self.state = handle.getValueState(STATE_NAME, STATE_SCHEMA)

    def _on_rows(self, key: Any, packs: list[str], timer_values: Any) -> list[tuple[Any, ...]]:
        group = key[0]
        if group == DEAD_KEY:
            return dead_rows(packs)
        logic = self.logic
        now = logic.now(timer_values)
        gm, timer = logic.load(self.state, group)
        alerts = logic.feed(gm, packs, now)
        alerts += logic.due(gm, now)
        # A registered timer at or before ``now`` fires after this data (Spark's order), and is
        # re-armed there; it is kept as registered until then.
        timer = logic.arm(self.handle, gm, now, timer)
        logic.save(self.state, gm, timer)
        return logic.rows(group, gm, alerts, snapshot=True)

    def _on_timer(self, key: Any, timer_values: Any) -> list[tuple[Any, ...]]:
        group = key[0]
        logic = self.logic
        now = logic.now(timer_values)
        gm, _ = logic.load(self.state, group)
        alerts = gm.on_timer(now)
        alerts += logic.due(gm, now)
        timer = logic.arm(self.handle, gm, now, None)  # the one that fired is gone
        logic.save(self.state, gm, timer)
        return logic.rows(group, gm, alerts, snapshot=bool(alerts))

    def close(self) -> None:
        pass


def row_processor(limits: Limits, time_mode: str = LIVE) -> Any:
    """A Row-API StatefulProcessor (``transformWithState``)."""
    from pyspark.sql import Row

    base = _processor_base()

    class MonitorProcessor(_Common, base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            self.logic = MonitorLogic(limits, time_mode)

        def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:  # noqa: N802, N803
            for t in self._on_rows(key, [r.events for r in rows], timerValues):
                yield Row(out=t[0], group_id=t[1], id=t[2], status=t[3], ts_ms=t[4], payload=t[5])

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Any]:  # noqa: N802, N803
            for t in self._on_timer(key, timerValues):
                yield Row(out=t[0], group_id=t[1], id=t[2], status=t[3], ts_ms=t[4], payload=t[5])

    return MonitorProcessor()


def pandas_processor(limits: Limits, time_mode: str = LIVE) -> Any:
    """A Pandas-API StatefulProcessor (``transformWithStateInPandas``)."""
    import pandas as pd

    base = _processor_base()
    columns = ["out", "group_id", "id", "status", "ts_ms", "payload"]

    def frame(rows: list[tuple[Any, ...]]) -> Any:
        return pd.DataFrame(rows, columns=columns)

    class MonitorPandasProcessor(_Common, base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            self.logic = MonitorLogic(limits, time_mode)

        def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:  # noqa: N802, N803
            packs: list[str] = []
            for pdf in rows:
                packs.extend(pdf["events"])
            out = self._on_rows(key, packs, timerValues)
            if out:
                yield frame(out)

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Any]:  # noqa: N802, N803
            out = self._on_timer(key, timerValues)
            if out:
                yield frame(out)

    return MonitorPandasProcessor()
