"""The per-group monitor as a ``transformWithState`` StatefulProcessor (Row and Pandas APIs).

Spark only carries events to ``replimon.core`` and keeps its state. Groups share state keys:
each group belongs to one of ``streaming.state_buckets`` buckets (``bucket_of``: CRC-32 of its
name), and each bucket has one ValueState (``monitor_v6``: its groups' ``to_state()`` JSON,
family and next timers, one line a group, the time of the bucket's registered timer, the bucket
count, which is pinned in the checkpoint, and the input clock of its last batch; the name changes
when the shape does: ``bucket_state.py``, which also migrates the shape before) and at most one
timer.

Input rows are the decode stage's packed rows (``rows.py``): a group and its decoded events
(topic, partition, offset, event dict), decoded once upstream and unpacked here without parsing
JSON again. Rows of ``DEAD_BUCKET`` carry dead letters instead, which pass through as ``dead``
output rows without touching state; clock rows carry the batch's latest event time.

Replays (``docs/replay.md``): a group whose event-time clock crosses a multiple of
``checkpoint_ms`` also emits a ``checkpoint`` row (its whole state), which the writer sends to
``monitor.state``; a replay brings such states back as the operator's initial state
(``handleInitialState``), each with its floors: the offsets below which its events are already in
that state and are skipped.

Cost. Every state call is a round trip to the JVM (about a millisecond here, nearly independent of
the value's size), and the Pandas API builds data frames per key: so a bucket costs one read and
one write per micro-batch however many of its groups published (measured: state calls were 60 %
of the operator's time with one key per group). The registered timer is remembered in the state
(no listing); a timer later than the earliest group needs is moved earlier, one earlier than needed
is kept (when it fires, nothing is due yet, and it is re-armed): buckets whose groups keep
publishing push their deadlines on every batch without a timer call.

Time. Live (``timeMode="ProcessingTime"``): the outside clock of GROUP_SILENT and NODE_SILENT is
the micro-batch's processing time (replica clocks and Spark's share the wall clock), so they fire
with no input at all. Replay (``timeMode="EventTime"``, a watermark on the event time): the outside
clock is the watermark, which is what ``replimon check`` does with the highest event time read.
Inside a batch, a group's own event time also fires what falls due before each event (as
``Monitor.process`` does). Everything else runs on the group's own event time inside the core, so
live, replay and check name the same occurrences with the same ``alert_id``s.

Determinism: a micro-batch retried after a crash has the same rows and the same timer values
(Spark stores both); groups are handled in name order and their events sorted by (ts_ms, node,
incarnation, seq, topic, partition, offset) before they reach the core, so the retried batch
yields the same output whatever order the shuffle delivered.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from replimon.core import GroupMonitor, clocks
from replimon.core.alerts import Alert
from replimon.core.group import conflict_reason
from replimon.core.limits import Limits
from replimon.core.rules.family import pinned
from replimon.streaming import data_loss
from replimon.streaming.bucket_state import (
    STATE_NAME,
    STATE_SCHEMA,
    Groups,
    format_groups,
    migrate_value,
    parse_groups,
    snapshot_due,
)
from replimon.streaming.rows import (
    ALERT,
    CHECKPOINT,
    CLOCK_KEY,
    DEAD,
    DEAD_BUCKET,
    OUTPUT_COLUMNS,
    STATE,
    dead_id,
    dead_rows,
    unpack,
)

INPUT_COLUMNS = ("bucket", "group", "items")
LIVE, REPLAY = "ProcessingTime", "EventTime"
DEFAULT_BUCKETS = 6  # as the settings' default (streaming.state_buckets)
# The live job's snapshot cadence when the settings name none (MonitorLogic, ``snapshot_ms``).
DEFAULT_SNAPSHOT_MS = 5_000

# Monitors kept alive in this Python worker between micro-batches, by (limits, group): the state
# text last saved for the group and the monitor it was saved from. A batch whose stored text is
# that text takes the monitor instead of rebuilding it with ``from_state`` (JSON and objects: the
# largest part of a bucket's cost per batch, docs/performance.md). Spark's state stays the truth:
# any other text (a retried batch, another worker, a restart) is rebuilt from the state, and an
# entry is taken out while its monitor is in use, so a batch that fails half way leaves none.
WARM_GROUPS = 20_000  # bound: about 27 KB of live objects a group (bench/README.md)
_warm: dict[tuple[Limits, str], tuple[str, GroupMonitor]] = {}


def _remember(limits: Limits, text: str, gm: GroupMonitor) -> None:
    _warm[(limits, gm.group)] = (text, gm)
    if len(_warm) > WARM_GROUPS:
        del _warm[next(iter(_warm))]


class StateBucketsChanged(RuntimeError):
    """The checkpoint's state was written with another bucket count."""


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


Item = tuple[str, int, int, dict[str, Any]]  # topic, partition, offset, event


def _order(item: Item) -> tuple[Any, ...]:
    e = item[3]
    return (e["ts_ms"], e["node"], e["incarnation"], e["seq"], item[0], item[1], item[2])


def _aligned(items: list[Item], bound: int) -> Any:
    """The order a group's events of one batch are fed in: ``_order``, except that a node whose
    latest event in the batch is more than ``bound`` (``clock_skew_ms``) behind the batch's
    latest has its events placed as if its clock were set to the others' (its own order kept):
    they were all read together, and fed first by their stamps they would make the group's clock
    jump from the slow node's time to the others' within the batch, a silence of the whole
    group that never was (docs/rules.md, "Time"). A clock far ahead was restamped already
    (``clocks.screen``); with every node within the bound this is ``_order``."""
    latest: dict[str, int] = {}
    for it in items:
        e = it[3]
        if e["ts_ms"] > latest.get(e["node"], -1):
            latest[e["node"]] = e["ts_ms"]
    top = max(latest.values(), default=-1)
    shift = {n: top - t for n, t in latest.items() if top - t > bound}
    if not shift:
        return _order

    def order(item: Item) -> tuple[Any, ...]:
        e = item[3]
        return (e["ts_ms"] + shift.get(e["node"], 0), e["node"], e["incarnation"], e["seq"], item[0], item[1], item[2])

    return order


def conflict_row(gm: GroupMonitor, item: Item, read: list[Item]) -> tuple[Any, ...]:
    """The dead letter of an event of another family than its group's (XCom, generations,
    quorum-log or chain, in either direction; ``check`` counts it as a bad line with the same reason). Its id is where it was read, so a retried batch gives the
    same one. The monitor holds the record's event, not its bytes: ``raw`` is that JSON object
    re-encoded as the publisher encodes it (compact, keys in the order sent; byte for byte the
    record for ``NodePublisher``), as read (``read``: before a far-ahead clock was restamped), and
    its time is the event's ``ts_ms`` (the record's Kafka timestamp is not carried this far)."""
    topic, partition, offset, ev = item
    where = item[:3]
    ev = next((i[3] for i in read if i[:3] == where), ev)
    reason = conflict_reason(gm.group, gm.family.name)
    return (DEAD, None, dead_id(topic, partition, offset), None, ev["ts_ms"], reason, _dumps(ev).encode())


class MonitorLogic:
    """What both adapters do for one bucket: load, feed its groups, emit, save, re-arm.

    ``checkpoint_ms``: a group whose event-time clock crosses a multiple of it emits a
    ``checkpoint`` row (its whole state, for replays to start from; 0: never). ``floors``: the
    floors of a group that first appears (a replay's window start; None: none).

    ``snapshot_ms`` (live only; 0: every batch, as a replay always does): the cadence of a group's
    ``state`` rows. A group's first batch, and any batch that raises or resolves an alert, snapshot
    it at once; otherwise its changes are snapshotted in the first batch at or after the next
    multiple of ``snapshot_ms`` of processing time that brings it input, or by the bucket's timer
    one period later when it has no more input (``arm``). So the stored snapshot of a publishing
    group is at most about one period behind its state, of a group that stopped at most two, and
    a busy fleet's snapshots cost one period's worth, not one a batch (docs/performance.md)."""

    def __init__(self, limits: Limits, time_mode: str = LIVE, buckets: int = DEFAULT_BUCKETS,
                 checkpoint_ms: int = 0, floors: dict[str, dict[str, int]] | None = None,
                 snapshot_ms: int = 0, pins: tuple[tuple[str, str], ...] = (),
                 migrate_from: str | None = None) -> None:
        self.limits = limits
        # The state of the shape before (``bucket_state.py``), while the checkpoint still has some:
        # a bucket found empty is looked up there once, migrated and written back.
        self.migrate_from = migrate_from
        self.legacy: Any = None  # its ValueState, set in ``init``
        self.pins = pins  # families: group id or glob -> family (else its first event's family)
        self.time_mode = time_mode
        self.buckets = buckets
        self.checkpoint_ms = checkpoint_ms
        self.new_floors = _dumps(floors) if floors else ""
        self.snapshot_ms = snapshot_ms if time_mode == LIVE else 0

    def now(self, timer_values: Any) -> int:
        if self.time_mode == LIVE:
            return int(timer_values.getCurrentProcessingTimeInMs())
        return int(timer_values.getCurrentWatermarkInMs())

    # -- state ------------------------------------------------------------------------------------
    def load(self, state: Any) -> tuple[Groups, int | None, tuple[int, int] | None]:
        """The bucket's groups, its registered timer and the input clock of the batch that last
        brought rows (``(processing time, latest event time read)``): one state call."""
        value = self.read(state)
        if value is None or not value[0]:
            return {}, None, None
        if value[2] != self.buckets:
            raise StateBucketsChanged(
                f"streaming.state_buckets is {self.buckets} but this checkpoint's state was written "
                f"with {value[2]}: it is pinned in the checkpoint (set it back, or start a new "
                "checkpoint)")
        clock = None if value[3] is None or value[4] is None else (value[3], value[4])
        return parse_groups(value[0]), value[1], clock

    def read(self, state: Any) -> Any:
        """The bucket's stored value; a bucket that still is in the state of the shape before is
        migrated (``bucket_state.migrate_value``) and written in today's at once (so whatever the
        batch does next, nothing of it is left behind), and the old value cleared."""
        value = state.get()
        if value is None and self.legacy is not None:
            old = self.legacy.get()
            if old is not None:
                value = migrate_value(old)
                state.update(value)
                self.legacy.clear()
        return value

    def save(self, state: Any, groups: Groups, timer: int | None, clock: tuple[int, int] | None) -> None:
        state.update((format_groups(groups), timer, self.buckets, *(clock or (None, None))))

    def outside(self, now: int, clock: tuple[int, int] | None) -> int:
        """The outside clock of this batch: in live mode the processing time, except while the
        input read in this batch is behind it (a backlog after an outage or a restart): then the
        latest event time read, as ``replimon check`` does, so a group whose events are still
        in the backlog is not silent. A batch that brings no input at all keeps the processing
        time: silences fire with no input."""
        if self.time_mode == LIVE and clock is not None and clock[0] == now:
            return min(now, clock[1])
        return now

    def monitor(self, groups: Groups, name: str) -> GroupMonitor:
        kept = groups.get(name)
        if kept is None:
            groups[name] = ["", None, self.new_floors, ""]
            return GroupMonitor(name, self.limits, pinned(name, self.pins))
        if not kept[0]:
            return GroupMonitor(name, self.limits, pinned(name, self.pins))
        warm = _warm.pop((self.limits, name), None)
        if warm is not None and warm[0] == kept[0]:
            return warm[1]
        return GroupMonitor.from_state(json.loads(kept[0]), self.limits)

    def keep(self, groups: Groups, gm: GroupMonitor) -> None:
        """Save ``gm`` into ``groups`` (its snapshot due, if any, is dropped: see ``settle``)."""
        kept = groups.get(gm.group)
        text = _dumps(gm.to_state())
        groups[gm.group] = [text, gm.next_timer(), kept[2] if kept else "", gm.family.name]
        _remember(self.limits, text, gm)

    def settle(self, groups: Groups, gm: GroupMonitor, now: int, due: int | None, emit: bool) -> None:
        """After ``keep``: a group snapshotted now has none due; one with changes not snapshotted
        keeps its due time, or gets the next multiple of ``snapshot_ms`` after ``now``."""
        kept = groups[gm.group]
        del kept[4:]
        if not emit and self.snapshot_ms > 0:  # (0: every batch that touches it snapshots it)
            kept.append(due if due is not None else (now // self.snapshot_ms + 1) * self.snapshot_ms)

    def wants_snapshot(self, fresh: bool, alerts: list[Alert], due: int | None, now: int) -> bool:
        return self.snapshot_ms <= 0 or fresh or bool(alerts) or (due is not None and due <= now)

    def crossed(self, before: int, after: int) -> bool:
        """Whether a group clock that moved from ``before`` to ``after`` passed a checkpoint."""
        p = self.checkpoint_ms
        return p > 0 and after >= 0 and (before < 0 or after // p > before // p)

    # -- the core ---------------------------------------------------------------------------------
    def feed(self, gm: GroupMonitor, packs: Iterable[bytes], now: int, floors: str = "",
             dead: list[tuple[Any, ...]] | None = None) -> list[Alert]:
        """``packs``: the group's packed events; with ``floors``, the events below them are already
        in the group's state and skipped. An event of another family than the group's is left out
        by the core (FAMILY_CONFLICT) and, with ``dead``, becomes a dead letter there
        (``conflict_row``)."""
        items: list[Item] = []
        for data in packs:
            items.extend(unpack(data))
        if floors:
            below = json.loads(floors)
            items = [i for i in items if i[2] >= below.get(i[0], {}).get(str(i[1]), 0)]
        live_now = now if self.time_mode == LIVE else None
        # A clock far ahead drives no timer (docs/operations.md, "Clocks"): restamped first.
        read = items
        items, out = clocks.screen(gm, items, self.limits.clock_skew_ms, live_now)
        items.sort(key=_aligned(items, self.limits.clock_skew_ms))
        if live_now is not None and items:
            # a node's missing events are waited for past this batch (``read_through``), and
            # every event of the batch was heard at its latest time at the earliest
            gm.reading(live_now, max(i[3]["ts_ms"] for i in items))
        on_event, clock, belongs = gm.on_event, gm.clock, gm.belongs
        for topic, partition, offset, e in items:
            if dead is not None and not belongs(e["type"]):
                dead.append(conflict_row(gm, (topic, partition, offset, e), read))
            ts = e["ts_ms"]
            if ts > clock:
                # The group's own event time is an outside clock too, as in ``Monitor.process``:
                # what falls due before an event fires before it, so a silence that begins and
                # ends inside one micro-batch (a backlog, a replay) is still reported.
                clock = ts
                when = gm.next_timer()
                if when is not None and when <= ts:
                    out.extend(gm.on_timer(ts))
            out.extend(on_event(e, {"topic": topic, "partition": partition, "offset": offset}, live_now))
        return out

    def read_through(self, gm: GroupMonitor, now: int) -> list[Alert]:
        """Live: this batch has been read to its end on every partition (``GroupMonitor.
        read_through``): a live batch reads each partition up to where it stood when the batch
        was planned, or, capped, all of them up to one record time (docs/kafka-source.md). An
        event held for earlier ones of its node is given up on only after a later batch than the
        one that brought it, so a partition whose writes lag the others' cannot make its events
        look lost (docs/rules.md, EVENTS_LOST). Replay reads bounded ranges and judges holds on
        event time alone, as ``replimon check`` does."""
        return gm.read_through(now) if self.time_mode == LIVE else []

    def due(self, gm: GroupMonitor, now: int) -> list[Alert]:
        """Fire what is due at ``now`` (a timer that is already due never waits a batch)."""
        out: list[Alert] = []
        for _ in range(3):
            when = gm.next_timer()
            if when is None or when > now or now < 0:
                break
            out.extend(gm.on_timer(now))
        return out

    # -- timers -----------------------------------------------------------------------------------
    def arm(self, handle: Any, groups: Groups, now: int, timer: int | None) -> int | None:
        """The bucket's timer after this call (``timer``: the one registered, if any), at the
        earliest of its groups' next timers. Only a missing or too late timer costs a call; an
        early one is kept (see the module's doc). A pending snapshot asks for the timer one period
        after it is due: a group that keeps publishing is snapshotted by its own batches, so the
        timer is only the backstop for one that stopped, and rarely moves for it."""
        wants = [kept[1] for kept in groups.values() if kept[1] is not None]
        wants += [due + self.snapshot_ms for kept in groups.values() if (due := snapshot_due(kept)) is not None]
        if not wants:
            if timer is not None:
                handle.deleteTimer(timer)
            return None
        # Strictly in the future: Spark can skip a timer registered at or below the previous
        # batch time (SPARK-56566).
        want = max(min(wants), now + 1)
        if timer is not None and timer <= want:
            return timer
        if timer is not None:
            handle.deleteTimer(timer)
        handle.registerTimer(want)
        return want

    # -- one bucket per call ----------------------------------------------------------------------
    def on_rows(self, handle: Any, state: Any, rows: Iterable[tuple[str, bytes]], now: int) -> list[tuple[Any, ...]]:
        """``rows``: (group, packed events) of one bucket in one micro-batch, and clock rows
        (``CLOCK_KEY``, latest event time read). Data-loss markers (``LOSS_KEY``) reset the
        groups they cut before the events are fed (``data_loss.py``)."""
        rows, head = data_loss.take(self, state, rows, now)
        by_group: dict[str, list[bytes]] = {}
        read = -1
        for group, items in rows:
            if group == CLOCK_KEY:
                read = max(read, unpack(items))
            else:
                by_group.setdefault(group, []).append(items)
        if not by_group:
            return head + self._clock_only(state, now, read)
        groups, timer, _ = self.load(state)
        out: list[tuple[Any, ...]] = []
        gms = []
        for name in sorted(by_group):
            fresh = not groups.get(name, ("",))[0]
            gm = self.monitor(groups, name)
            before = gm.clock
            out_alerts = self.feed(gm, by_group[name], now, groups[name][2], out)
            read = max(read, gm.clock)
            gms.append((gm, out_alerts, before, fresh))
        clock = (now, read) if read >= 0 else None
        outside = self.outside(now, clock)
        for gm, alerts, before, fresh in gms:
            alerts += self.due(gm, outside)
            alerts += self.read_through(gm, now)
            due = snapshot_due(groups[gm.group])
            self.keep(groups, gm)
            emit = self.wants_snapshot(fresh, alerts, due, now)
            self.settle(groups, gm, now, due, emit)
            out.extend(self.rows(gm, alerts, snapshot=emit))
            if self.crossed(before, gm.clock):
                out.append((CHECKPOINT, gm.group, gm.group, None, gm.clock, groups[gm.group][0], None))
        # A registered timer at or before ``now`` fires after this data (Spark's order) and is
        # re-armed there; it counts as registered until then.
        timer = self.arm(handle, groups, now, timer)
        self.save(state, groups, timer, clock)
        return head + out

    def _clock_only(self, state: Any, now: int, read: int) -> list[tuple[Any, ...]]:
        """Only clock rows for this bucket: keep the input clock for this batch's timers; the
        groups and the timer are unchanged (their text is not even parsed). Only a bucket whose
        timer fires in this batch needs it (``outside`` ignores a clock of another batch), so the
        others cost a read and no write."""
        value = self.read(state)
        if value is None or not value[0]:
            return []  # no group yet: no timer to judge
        if value[2] != self.buckets:
            self.load(state)  # raises StateBucketsChanged
        if value[1] is not None and value[1] <= now:
            state.update((value[0], value[1], self.buckets, now, read))
        return []

    def on_initial(self, handle: Any, state: Any, rows: Iterable[tuple[str, str, str]], now: int) -> None:
        """A replay's starting state for one bucket: (group, to_state() JSON text or "", floors
        JSON text), from the checkpoint records it starts from (``replimon.replay``)."""
        groups, timer, clock = self.load(state)
        for name, kept, floors in rows:
            if kept:
                gm = GroupMonitor.from_state(json.loads(kept), self.limits)
                groups[name] = [kept, gm.next_timer(), floors, gm.family.name]
            else:
                groups[name] = ["", None, floors, ""]
        timer = self.arm(handle, groups, now, timer)
        self.save(state, groups, timer, clock)

    def on_timer(self, handle: Any, state: Any, now: int) -> list[tuple[Any, ...]]:
        groups, _, clock = self.load(state)
        outside = self.outside(now, clock)
        out: list[tuple[Any, ...]] = []
        for name in sorted(groups):
            kept = groups[name]
            when, due = kept[1], snapshot_due(kept)
            fires = when is not None and when <= outside
            if not fires and (due is None or due > now):
                continue
            gm = self.monitor(groups, name)
            alerts: list[Alert] = []
            if fires:
                alerts = gm.on_timer(outside)
                alerts += self.due(gm, outside)
                # This batch came after every batch that brought this bucket rows, and it read
                # every partition to its own end too: events held for missing earlier ones of
                # their node can be given up on (an idle job must still report a loss).
                alerts += self.read_through(gm, now)
                self.keep(groups, gm)
            else:  # only its snapshot is due: the state is unchanged
                _remember(self.limits, kept[0], gm)
            emit = bool(alerts) or (due is not None and due <= now)
            self.settle(groups, gm, now, due, emit)
            out.extend(self.rows(gm, alerts, snapshot=emit))
        timer = self.arm(handle, groups, now, None)  # the one that fired is gone
        self.save(state, groups, timer, clock)
        return out

    @staticmethod
    def rows(gm: GroupMonitor, alerts: list[Alert], snapshot: bool) -> list[tuple[Any, ...]]:
        group = gm.group
        out: list[tuple[Any, ...]] = [
            (ALERT, group, a.alert_id, a.status, a.event_ts_ms, _dumps(a.to_dict()), None) for a in alerts
        ]
        if snapshot:
            out.append((STATE, group, group, None, gm.clock, _dumps(gm.snapshot()), None))
        return out


def _processor_base() -> Any:
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    return StatefulProcessor


class _Common:
    logic: MonitorLogic

    def init(self, handle: Any) -> None:
        self.handle = handle
        self.state = handle.getValueState(STATE_NAME, STATE_SCHEMA)
        if self.logic.migrate_from:
            self.logic.legacy = handle.getValueState(self.logic.migrate_from, STATE_SCHEMA)

    def _on_rows(self, key: Any, rows: list[tuple[str, bytes]], timer_values: Any) -> list[tuple[Any, ...]]:
        if key[0] == DEAD_BUCKET:
            return dead_rows(pack for _, pack in rows)
        logic = self.logic
        return logic.on_rows(self.handle, self.state, rows, logic.now(timer_values))

    def _on_initial(self, key: Any, rows: list[tuple[str, str, str]], timer_values: Any) -> None:
        logic = self.logic
        logic.on_initial(self.handle, self.state, rows, logic.now(timer_values))

    def _on_timer(self, key: Any, timer_values: Any) -> list[tuple[Any, ...]]:
        logic = self.logic
        return logic.on_timer(self.handle, self.state, logic.now(timer_values))

    def close(self) -> None:
        pass


def row_processor(limits: Limits, time_mode: str = LIVE, buckets: int = DEFAULT_BUCKETS, **options: Any) -> Any:
    """A Row-API StatefulProcessor (``transformWithState``); ``options``: MonitorLogic's."""
    from pyspark.sql import Row

    base = _processor_base()

    class MonitorProcessor(_Common, base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            self.logic = MonitorLogic(limits, time_mode, buckets, **options)

        def handleInitialState(self, key: Any, initialState: Any, timerValues: Any) -> None:  # noqa: N802, N803
            self._on_initial(key, [(initialState.group, initialState.state, initialState.floors)], timerValues)

        def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:  # noqa: N802, N803
            for t in self._on_rows(key, [(r.group, r.items) for r in rows], timerValues):
                yield Row(**dict(zip(OUTPUT_COLUMNS, t, strict=True)))

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Any]:  # noqa: N802, N803
            for t in self._on_timer(key, timerValues):
                yield Row(**dict(zip(OUTPUT_COLUMNS, t, strict=True)))

    return MonitorProcessor()


def pandas_processor(limits: Limits, time_mode: str = LIVE, buckets: int = DEFAULT_BUCKETS, **options: Any) -> Any:
    """A Pandas-API StatefulProcessor (``transformWithStateInPandas``); ``options``: MonitorLogic's."""
    import pandas as pd

    base = _processor_base()
    columns = list(OUTPUT_COLUMNS)

    def frame(rows: list[tuple[Any, ...]]) -> Any:
        return pd.DataFrame(rows, columns=columns)

    class MonitorPandasProcessor(_Common, base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            self.logic = MonitorLogic(limits, time_mode, buckets, **options)

        def handleInitialState(self, key: Any, initialState: Any, timerValues: Any) -> None:  # noqa: N802, N803
            rows = list(zip(initialState["group"], initialState["state"], initialState["floors"], strict=True))
            self._on_initial(key, rows, timerValues)

        def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:  # noqa: N802, N803
            data: list[tuple[str, bytes]] = []
            for pdf in rows:
                data.extend(zip(pdf["group"], pdf["items"], strict=True))
            out = self._on_rows(key, data, timerValues)
            if out:
                yield frame(out)

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Any]:  # noqa: N802, N803
            out = self._on_timer(key, timerValues)
            if out:
                yield frame(out)

    return MonitorPandasProcessor()
