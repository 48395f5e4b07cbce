"""A node's events are judged in the node's own order, whatever its clock and whatever partition
lags (docs/rules.md, EVENTS_LOST; ``replimon.core.rules.admission``): live, an event held for an
earlier one of its node waits until a later micro-batch than the one that brought it has been
read, and for the skew of the group's time after it came in; so a partition whose writes lag the
others' by more than the skew (the 20-minute soak's false EVENTS_LOST) and a node whose clock
runs an hour behind its group-mates raise nothing, a node ten years ahead stays one CLOCK_SKEW,
and a real loss is still reported, with the id ``replimon check`` gives it, within the skew plus
one batch. Driven as Spark drives the processor: ``MonitorLogic`` over in-memory state, and the
Row processor through PySpark's TwsTester."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest

from replimon.core import Monitor
from replimon.core.limits import Limits
from replimon.producers.simulator import SimOptions, Simulator, parse_injection
from replimon.streaming.processor import LIVE, MonitorLogic, row_processor
from replimon.streaming.rows import CLOCK_KEY, bucket_of, pack
from tests.support.stateful import MemoryState, MemoryTimers

BATCH_MS = 4_000  # the soak's trigger
HOUR = 3_600_000
YEARS = 10 * 365 * 86_400_000
Shift = Callable[[dict[str, Any]], int]


def simulate(seconds: int, *faults: str, seed: int = 4) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    sim = Simulator(SimOptions(duration_ms=seconds * 1000, groups=2, nodes=3, seed=seed),
                    [parse_injection(f) for f in faults], events.append)
    sim.run()
    return events, sim.manifest()


def no_shift(ev: dict[str, Any]) -> int:
    return 0


def batches(events: list[dict[str, Any]], lag_ms: int, shift: Shift = no_shift
            ) -> list[tuple[int, list[tuple[str, int, int, dict[str, Any]]]]]:
    """Live micro-batches of ``BATCH_MS``, each reading what was published before it began:
    every topic up to its end, except ``replica.decisions``, whose writes lag the others' by
    ``lag_ms`` (a decision published in the last ``lag_ms`` of a batch's window is read by the
    next batch). An event's stamp is its publish time plus ``shift(event)`` (its node's clock);
    offsets count per topic, as Kafka's do."""
    start = min(e["ts_ms"] for e in events)
    out: dict[int, list[tuple[str, int, int, dict[str, Any]]]] = defaultdict(list)
    offsets: dict[str, int] = defaultdict(int)
    for ev in events:  # in publish order
        topic = "replica.decisions" if ev["type"] == "decision" else f"replica.{ev['type']}s"
        at = ev["ts_ms"] - start
        b = at // BATCH_MS + (1 if topic == "replica.decisions" and at % BATCH_MS >= BATCH_MS - lag_ms else 0)
        out[b].append((topic, 0, offsets[topic], {**ev, "ts_ms": ev["ts_ms"] + shift(ev)}))
        offsets[topic] += 1
    return [(start + (b + 1) * BATCH_MS + 250, out.get(b, [])) for b in range(max(out) + 3)]


def live(plan: list[tuple[int, list[tuple[str, int, int, dict[str, Any]]]]]) -> list[dict[str, Any]]:
    """The alerts of ``plan`` through ``MonitorLogic`` in Spark's order: each bucket's rows (with
    the clock rows the decode stage adds), then the timers due at the batch's processing time."""
    logic = MonitorLogic(Limits(), LIVE, 3)
    states: dict[int, MemoryState] = defaultdict(MemoryState)
    handles: dict[int, MemoryTimers] = defaultdict(MemoryTimers)
    out: list[tuple[Any, ...]] = []
    for now, items in plan:
        rows: dict[int, list[tuple[str, bytes]]] = defaultdict(list)
        for it in items:
            rows[bucket_of(it[3]["group"], logic.buckets)].append((it[3]["group"], pack([it])))
        if items:
            for b in range(logic.buckets):
                rows[b].append((CLOCK_KEY, pack(max(it[3]["ts_ms"] for it in items))))
        for b in sorted(rows):
            out += logic.on_rows(handles[b], states[b], rows[b], now)
        for b in sorted(handles):
            due = [t for t in handles[b].timers if t <= now]
            if due:
                handles[b].timers.difference_update(due)
                out += logic.on_timer(handles[b], states[b], now)
    return [json.loads(r[5]) for r in out if r[0] == "alert"]


def check(events: list[dict[str, Any]], shift: Shift = no_shift) -> list[dict[str, Any]]:
    """``replimon check`` over the events in publish order, stamped as their nodes stamp them."""
    return [a.to_dict() for a in Monitor().run([{**e, "ts_ms": e["ts_ms"] + shift(e)} for e in events])]


def keys(alerts: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(a["kind"], a["alert_id"], a["status"]) for a in alerts}


def kinds(alerts: list[dict[str, Any]]) -> set[str]:
    return {a["kind"] for a in alerts if a["severity"] != "info"}


def test_the_soaks_case_a_partition_lagging_by_more_than_the_skew_loses_nothing() -> None:
    # Decisions read a batch late when published in the last 2.5 s of a 4 s batch: the batch
    # brings a node's later execution and heartbeats, and the group's clock moves 2.5 s past
    # them, before the decision arrives.
    events, _ = simulate(60)
    plan = batches(events, lag_ms=2_500)
    late = {(it[3]["group"], it[3]["node"], it[3]["seq"]) for _, items in plan for it in items}
    assert len(late) == len(events)
    got = live(plan)
    assert "EVENTS_LOST" not in kinds(got), [a["message"] for a in got if a["kind"] == "EVENTS_LOST"]
    assert keys(got) == keys(check(events))


def test_the_soaks_case_with_event_time_alone_is_a_false_loss() -> None:
    # What the job did before: the same batches judged on event time alone (a replay's
    # processor, which reports no reads) declare the late decisions lost.
    events, _ = simulate(60)
    logic = MonitorLogic(Limits(), "EventTime", 3)
    plan = batches(events, lag_ms=2_500)
    states: dict[int, MemoryState] = defaultdict(MemoryState)
    handles: dict[int, MemoryTimers] = defaultdict(MemoryTimers)
    alerts = []
    for now, items in plan:
        rows: dict[int, list[tuple[str, bytes]]] = defaultdict(list)
        for it in items:
            rows[bucket_of(it[3]["group"], 3)].append((it[3]["group"], pack([it])))
        for b in sorted(rows):
            alerts += [json.loads(r[5]) for r in logic.on_rows(handles[b], states[b], rows[b], now)
                       if r[0] == "alert"]
    assert "EVENTS_LOST" in kinds(alerts)


def test_a_real_loss_behind_a_lagging_partition_is_reported_within_the_skew_and_a_batch() -> None:
    events, manifest = simulate(60, "events_lost:g1@20s")
    got = live(batches(events, lag_ms=2_500))
    assert keys(got) == keys(check(events))
    (lost,) = [a for a in got if a["kind"] == "EVENTS_LOST"]
    fault = manifest[0]
    after = next(e for e in events if e["node"] == fault["node"] and e["seq"] == fault["from_seq"] + 3)
    # the held event came in with the batch after its publication; the loss is declared at the
    # end of the batch after that one, once the group's time is the skew past it
    assert lost["node"] == fault["node"] and lost["event_ts_ms"] == after["ts_ms"]
    assert lost["detected_ts_ms"] - after["ts_ms"] <= 2_000 + 3 * BATCH_MS


def test_a_real_loss_as_the_input_ends_is_reported_by_the_idle_batches_after_it() -> None:
    """The input stops a few seconds after the lost events: only empty micro-batches follow, and
    their timers must give up on the held events (an idle job still reports a loss)."""
    events, manifest = simulate(30, "events_lost:g1@20s")
    fault = manifest[0]
    after = next(e for e in events if e["node"] == fault["node"] and e["seq"] == fault["from_seq"] + 3)
    events = [e for e in events if e["ts_ms"] <= after["ts_ms"] + 500]  # it arrives with the last input
    plan = batches(events, lag_ms=0)
    assert after in plan[-3][1][-1] or any(it[3] == after for it in plan[-3][1])
    assert all(not items for _, items in plan[-2:])  # the input has ended by then
    got = live(plan)
    assert keys(got) == keys(check(events))
    (lost,) = [a for a in got if a["kind"] == "EVENTS_LOST"]
    assert lost["event_ts_ms"] == after["ts_ms"]
    assert lost["detected_ts_ms"] - after["ts_ms"] <= 2_000 + 3 * BATCH_MS


def hour_behind(node: str, group: str = "g1", after_ms: int = 0) -> Shift:
    """``node``'s clock an hour behind its group-mates' (from ``after_ms`` into the run on)."""
    def shift(e: dict[str, Any]) -> int:
        return -HOUR if (e["group"], e["node"]) == (group, node) and e["ts_ms"] >= START + after_ms else 0
    return shift


START = min(e["ts_ms"] for e in simulate(1)[0])  # the simulator's runs all start here

FALSE = {"EVENTS_LOST", "GROUP_SILENT", "PENDING_CONFIG_STUCK", "NODE_SILENT", "CAN_LEAVE_UNSAFE"}


def test_a_node_an_hour_behind_raises_nothing_live() -> None:
    # n2's decisions (on the lagging partition) come after its own later executions, which are
    # stamped an hour before the group's clock: holding them by their own stamp expired at once,
    # the decisions were then dropped as duplicates, and the group's clock jumped an hour within
    # its first batch. Live gives what check gives for the same history with true clocks.
    events, _ = simulate(60)
    got = live(batches(events, lag_ms=1_000, shift=hour_behind("n2")))
    assert not kinds(got) & FALSE, kinds(got)
    assert keys(got) == keys(check(events))


def test_a_clock_that_steps_an_hour_back_raises_nothing_live_and_in_check() -> None:
    events, _ = simulate(60)
    shift = hour_behind("n2", after_ms=10_000)
    got = live(batches(events, lag_ms=2_500, shift=shift))
    assert not kinds(got) & FALSE, kinds(got)
    assert keys(got) == keys(check(events, shift)) == keys(check(events))


def test_a_real_loss_of_a_node_an_hour_behind_is_reported_and_dated_now() -> None:
    events, manifest = simulate(60, "events_lost:g1@20s")
    node = manifest[0]["node"]
    shift = hour_behind(node)
    plan = batches(events, lag_ms=1_000, shift=shift)
    got = live(plan)
    assert keys(got) == keys(check(events))
    (lost,) = [a for a in got if a["kind"] == "EVENTS_LOST"]
    assert lost["node"] == node and lost["event_ts_ms"] < min(e["ts_ms"] for e in events)  # its own stamp
    # the detection time is the batch's, on the wall clock: what dashboards window on
    assert lost["detected_ts_ms"] in {now for now, _ in plan}
    assert not kinds(got) - {"EVENTS_LOST"}


@pytest.mark.parametrize("fault", [(), ("events_lost:g2@20s",)], ids=["clean", "loss"])
def test_a_node_ten_years_ahead_stays_one_clock_skew(fault: tuple[str, ...]) -> None:
    events, manifest = simulate(60, *fault)
    node = manifest[0]["node"] if manifest else "n1"
    ahead: Shift = lambda e: YEARS if (e["group"], e["node"]) == ("g2", node) else 0  # noqa: E731
    got = live(batches(events, lag_ms=1_000, shift=ahead))
    want = kinds(check(events))
    assert kinds(got) == want | {"CLOCK_SKEW"}
    assert {a["alert_id"] for a in got if a["kind"] == "EVENTS_LOST"} == {
        a["alert_id"] for a in check(events) if a["kind"] == "EVENTS_LOST"}
    assert max(a["detected_ts_ms"] for a in got) < max(e["ts_ms"] for e in events) + 60_000


def test_check_holds_a_node_an_hour_behind_from_its_arrival() -> None:
    # replimon check over the live arrival order (n2's decisions after its later executions):
    # the hold counts the skew from when the event came in, not from its own stamp.
    events, _ = simulate(40)
    shift = hour_behind("n2", after_ms=10_000)
    arrival = [it[3] for _, items in batches(events, lag_ms=1_000, shift=shift) for it in items]
    alerts = [a.to_dict() for a in Monitor().run(arrival)]
    assert "EVENTS_LOST" not in kinds(alerts)
    assert keys(alerts) == keys(check(events, shift))


def test_through_sparks_processor_the_lagging_partition_and_the_slow_clock_match_check() -> None:
    pytest.importorskip("pyspark.sql.streaming.tws_tester")
    from pyspark.sql import Row
    from pyspark.sql.streaming.tws_tester import TwsTester

    events, _ = simulate(60, "events_lost:g2@20s")
    shift = hour_behind("n2")
    tester = TwsTester(row_processor(Limits(), LIVE, 3), timeMode="ProcessingTime")
    rows: list[Any] = []
    for now, items in batches(events, lag_ms=2_500, shift=shift):
        # Spark's order in a micro-batch: each key's rows, then the timers due at the batch's
        # time, with the same time. TwsTester's setProcessingTime fires the timers due at the new
        # time at once, before the batch's rows: the batch's time is set without firing, and the
        # timers fire after the rows (its private step; PySpark 4.3).
        tester._currentProcessingTimeMs = now
        by_bucket: dict[int, list[Row]] = defaultdict(list)
        for it in items:
            g = it[3]["group"]
            by_bucket[bucket_of(g, 3)].append(Row(bucket=bucket_of(g, 3), group=g, items=pack([it])))
        for bucket, part in sorted(by_bucket.items()):
            clock = max(r for r in (it[3]["ts_ms"] for it in items))
            part.append(Row(bucket=bucket, group=CLOCK_KEY, items=pack(clock)))
            rows += tester.test(bucket, part)
        rows += tester._handleExpiredTimers()
    got = [json.loads(r.payload) for r in rows if r.out == "alert"]
    assert keys(got) == keys(check(events))
    assert kinds(got) == {"EVENTS_LOST"}
