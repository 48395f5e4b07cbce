"""The per-group monitor as a ``transformWithState`` StatefulProcessor (Row and Pandas APIs).

Spark only carries events to ``replimon.core`` and keeps its state: one ValueState per group
(``monitor_v1``: the core's ``to_state()`` as JSON; the name changes when its shape does) and at
most one timer per group, at the core's ``next_timer()``.

Time. Live (``timeMode="ProcessingTime"``): the outside clock of GROUP_SILENT and NODE_SILENT is
the micro-batch's processing time (replica clocks and Spark's share the wall clock), so they fire
with no input at all. Replay (``timeMode="EventTime"``, a watermark on the event time): the outside
clock is the watermark, which is what ``replimon check`` does with the highest event time read.
Everything else runs on the group's own event time inside the core, so live, replay and check
name the same occurrences with the same ``alert_id``s.

Determinism: a micro-batch retried after a crash has the same rows and the same timer values
(Spark stores both); rows are sorted by (ts_ms, node, incarnation, seq) before they reach the
core, so the retried batch yields the same output whatever order the shuffle delivered.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from replimon.core.alerts import Alert
from replimon.core.limits import Limits
from replimon.core.monitor import GroupMonitor

STATE_NAME = "monitor_v1"
STATE_SCHEMA = "state STRING"
INPUT_COLUMNS = ("group", "ts_ms", "node", "incarnation", "seq", "event", "topic", "partition", "offset")
OUTPUT_SCHEMA = "out STRING, group_id STRING, id STRING, status STRING, ts_ms LONG, payload STRING"
LIVE, REPLAY = "ProcessingTime", "EventTime"


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


class MonitorLogic:
    """What both adapters do for one group: load, feed, emit, save, re-arm the timer."""

    def __init__(self, limits: Limits, time_mode: str = LIVE) -> None:
        self.limits = limits
        self.time_mode = time_mode

    def now(self, timer_values: Any) -> int:
        if self.time_mode == LIVE:
            return int(timer_values.getCurrentProcessingTimeInMs())
        return int(timer_values.getCurrentWatermarkInMs())

    def load(self, state: Any, group: str) -> GroupMonitor:
        if state.exists():
            value = state.get()
            if value is not None and value[0]:
                return GroupMonitor.from_state(json.loads(value[0]), self.limits)
        return GroupMonitor(group, self.limits)

    def save(self, state: Any, gm: GroupMonitor) -> None:
        state.update((_dumps(gm.to_state()),))

    def feed(self, gm: GroupMonitor, rows: Iterable[tuple[Any, ...]], now: int) -> list[Alert]:
        """``rows``: (ts_ms, node, incarnation, seq, event_json, topic, partition, offset)."""
        out: list[Alert] = []
        live_now = now if self.time_mode == LIVE else None
        for _, _, _, _, event, topic, partition, offset in sorted(rows, key=lambda r: (r[0], r[1], r[2], r[3])):
            src = {"topic": topic, "partition": int(partition), "offset": int(offset)}
            out.extend(gm.on_event(json.loads(event), src, live_now))
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

    def arm(self, handle: Any, gm: GroupMonitor, now: int) -> None:
        """Keep exactly one timer, at the core's next_timer (strictly after ``now``)."""
        want = gm.next_timer()
        if want is not None:
            want = max(want, now + 1)
        for existing in list(handle.listTimers()):
            if existing != want:
                handle.deleteTimer(existing)
            else:
                want = None  # already registered
        if want is not None:
            handle.registerTimer(want)

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

    def _on_rows(self, key: Any, rows: list[tuple[Any, ...]], timer_values: Any) -> list[tuple[Any, ...]]:
        group = key[0]
        logic = self.logic
        now = logic.now(timer_values)
        gm = logic.load(self.state, group)
        alerts = logic.feed(gm, rows, now)
        alerts += logic.due(gm, now)
        logic.save(self.state, gm)
        logic.arm(self.handle, gm, now)
        return logic.rows(group, gm, alerts, snapshot=True)

    def _on_timer(self, key: Any, timer_values: Any) -> list[tuple[Any, ...]]:
        group = key[0]
        logic = self.logic
        now = logic.now(timer_values)
        gm = logic.load(self.state, group)
        alerts = gm.on_timer(now)
        alerts += logic.due(gm, now)
        logic.save(self.state, gm)
        logic.arm(self.handle, gm, now)
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
            data = [(r.ts_ms, r.node, r.incarnation, r.seq, r.event, r.topic, r.partition, r.offset) for r in rows]
            for t in self._on_rows(key, data, timerValues):
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
            data: list[tuple[Any, ...]] = []
            for pdf in rows:
                data.extend(zip(pdf["ts_ms"], pdf["node"], pdf["incarnation"], pdf["seq"], pdf["event"],
                                pdf["topic"], pdf["partition"], pdf["offset"], strict=True))
            out = self._on_rows(key, data, timerValues)
            if out:
                yield frame(out)

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Any]:  # noqa: N802, N803
            out = self._on_timer(key, timerValues)
            if out:
                yield frame(out)

    return MonitorPandasProcessor()
