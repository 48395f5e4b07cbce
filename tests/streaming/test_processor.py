"""The StatefulProcessor through PySpark's TwsTester: same alerts as the core (``replimon check``),
timers that fire with no input, state that survives as Spark keeps it."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest

from replimon.core import GroupMonitor, Monitor
from replimon.core.limits import Limits
from replimon.producers.simulator import SimOptions, Simulator, parse_injection
from replimon.streaming.processor import (
    LIVE,
    STATE_NAME,
    StateBucketsChanged,
    pandas_processor,
    parse_groups,
    row_processor,
)
from replimon.streaming.rows import CLOCK_KEY, DEAD_BUCKET, DEAD_KEY, bucket_of, pack
from tests.support.stateful import MemoryState, MemoryTimers

pytest.importorskip("pyspark.sql.streaming.tws_tester")
from pyspark.sql import Row  # noqa: E402
from pyspark.sql.streaming.tws_tester import TwsTester  # noqa: E402


def simulate(seconds: int, *faults: str, groups: int = 2, seed: int = 4) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    Simulator(SimOptions(duration_ms=seconds * 1000, groups=groups, seed=seed),
              [parse_injection(f) for f in faults], events.append).run()
    return events


def item(ev: dict[str, Any], offset: int) -> tuple[str, int, int, dict[str, Any]]:
    return (f"replica.{ev['type']}", 0, offset, ev)


BUCKETS = 2  # few buckets: groups share state keys


def packs_of(evs: list[tuple[int, dict[str, Any]]]) -> list[Row]:
    """A group's events of one micro-batch as packs, the way the decode stage packs them (one per
    Arrow batch: here two, split by parity, so a batch holds several packs out of order)."""
    out = []
    for part in (evs[0::2], evs[1::2]):
        if part:
            group = part[0][1]["group"]
            out.append(Row(bucket=bucket_of(group, BUCKETS), group=group,
                           items=pack([item(ev, i) for i, ev in part])))
    return out


def drive(tester: TwsTester, events: list[dict[str, Any]], batch_ms: int = 1000, tail_ms: int = 0,
          pandas: bool = False) -> list[Any]:
    """Micro-batches of ``batch_ms`` of event time; processing time = end of each batch."""
    out: list[Any] = []
    start = min(e["ts_ms"] for e in events)
    batches: dict[int, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for i, ev in enumerate(events):
        batches[(ev["ts_ms"] - start) // batch_ms].append((i, ev))
    last = max(batches)
    for b in range(last + 1 + tail_ms // batch_ms):
        now = start + (b + 1) * batch_ms
        fired = tester.setProcessingTime(now)
        if pandas:
            fired = [Row(**rec) for rec in fired.to_dict("records")] if len(fired) else []
        out.extend(fired)
        by_bucket: dict[int, list[Row]] = defaultdict(list)
        by_group: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        for i, ev in batches.get(b, []):
            by_group[ev["group"]].append((i, ev))
        for group, evs in sorted(by_group.items()):
            by_bucket[bucket_of(group, BUCKETS)].extend(packs_of(evs))
        for bucket, rows in sorted(by_bucket.items()):
            if pandas:
                import pandas as pd

                frame = tester.testInPandas(bucket, pd.DataFrame([r.asDict() for r in rows]))
                out.extend(Row(**rec) for rec in frame.to_dict("records"))
            else:
                out.extend(tester.test(bucket, rows))
    return out


def alert_keys(rows: list[Any]) -> set[tuple[str, str]]:
    return {(r.id, r.status) for r in rows if r.out == "alert"}


@pytest.mark.parametrize("make", [row_processor, pandas_processor], ids=["row", "pandas"])
def test_processor_gives_the_same_alerts_as_the_core(make: Any) -> None:
    events = simulate(120, "can_leave_unsafe:g1@20s", "node_silent:g2@30s", "horizon_wedge:g1@60s",
                      "divergent_decision:g2@80s")
    expected = {(a.alert_id, a.status) for a in Monitor().run(events)}
    tester = TwsTester(make(Limits(), LIVE, BUCKETS), timeMode="ProcessingTime")
    rows = drive(tester, events, pandas=make is pandas_processor)
    assert alert_keys(rows) == expected
    kinds = {json.loads(r.payload)["kind"] for r in rows if r.out == "alert"}
    assert {"CAN_LEAVE_UNSAFE", "NODE_SILENT", "HORIZON_WEDGE", "DIVERGENT_DECISION"} <= kinds
    states = [json.loads(r.payload) for r in rows if r.out == "state"]
    assert {s["group"] for s in states} == {"g1", "g2"}
    kept = tester.peekValueState(STATE_NAME, bucket_of("g1", BUCKETS))
    assert kept is not None and "g1" in parse_groups(kept[0]) and kept[2] == BUCKETS


def test_group_silent_fires_from_the_timer_with_no_input() -> None:
    events = simulate(30, groups=1)
    tester = TwsTester(row_processor(Limits(), LIVE, BUCKETS), timeMode="ProcessingTime")
    drive(tester, events)
    last = max(e["ts_ms"] for e in events)
    assert tester.setProcessingTime(last + 16_000) == []
    fired = tester.setProcessingTime(last + 17_000)
    alerts = [json.loads(r.payload) for r in fired if r.out == "alert"]
    assert [(a["kind"], a["status"], a["event_ts_ms"]) for a in alerts] == [("GROUP_SILENT", "firing", last)]
    assert alerts[0]["detected_ts_ms"] == last + 17_000


def test_node_silent_fires_with_no_input_at_all() -> None:
    events = simulate(40, "node_silent:g1@20s", groups=1)
    sim_start = min(e["ts_ms"] for e in events)
    cut = [e for e in events if e["ts_ms"] < sim_start + 23_000]  # n quiet from 20 s, all from 23 s
    tester = TwsTester(row_processor(Limits(), LIVE, BUCKETS), timeMode="ProcessingTime")
    out = drive(tester, cut)
    assert not [r for r in out if r.out == "alert" and "NODE_SILENT" in r.payload]
    fired = []
    for t in range(sim_start + 24_000, sim_start + 45_000, 1000):
        fired += [json.loads(r.payload) for r in tester.setProcessingTime(t) if r.out == "alert"]
    kinds = [a["kind"] for a in fired]
    assert kinds[0] == "NODE_SILENT" and fired[0]["detected_ts_ms"] <= fired[0]["event_ts_ms"] + 5_000 + 2_000 + 1000
    assert "GROUP_SILENT" in kinds


def test_dead_letters_pass_through_without_state() -> None:
    tester = TwsTester(row_processor(Limits(), LIVE, BUCKETS), timeMode="ProcessingTime")
    tester.setProcessingTime(1_000)
    letters = [("replica.decisions", 1, 7, b"not json", "not JSON", 900)]
    out = tester.test(DEAD_BUCKET, [Row(bucket=DEAD_BUCKET, group=DEAD_KEY, items=pack(letters))])
    assert [(r.out, r.id, r.ts_ms, r.payload, r.raw) for r in out] == [
        ("dead", "replica.decisions:1:7", 900, "not JSON", b"not json")]
    assert tester.peekValueState(STATE_NAME, DEAD_BUCKET) is None
    assert list(tester.handle._timers.listTimers(DEAD_BUCKET)) == []


def test_one_timer_per_bucket_known_to_its_state_and_rarely_moved() -> None:
    """The state remembers its bucket's one registered timer (no listing), at or before the
    earliest of its groups' next timers, and groups that keep publishing cost no timer call on most
    batches: an early timer is kept until it fires."""
    events = simulate(60, groups=4)
    tester = TwsTester(row_processor(Limits(), LIVE, BUCKETS), timeMode="ProcessingTime")
    calls: list[str] = []
    handle = tester.handle
    register, delete = handle.registerTimer, handle.deleteTimer
    handle.registerTimer = lambda ts: (calls.append("register"), register(ts))[1]  # type: ignore[method-assign]
    handle.deleteTimer = lambda ts: (calls.append("delete"), delete(ts))[1]  # type: ignore[method-assign]
    drive(tester, events)
    buckets = {bucket_of(g, BUCKETS) for g in ("g1", "g2", "g3", "g4")}
    for bucket in buckets:
        stored = tester.peekValueState(STATE_NAME, bucket)
        assert stored is not None and stored[1] is not None
        assert list(handle._timers.listTimers(bucket)) == [stored[1]]
        nexts = [kept[1] for kept in parse_groups(stored[0]).values()]
        assert stored[1] <= min(nexts)
    batches = 60
    assert len(buckets) <= calls.count("register") <= len(buckets) * batches // 4, calls


def test_a_changed_bucket_count_is_refused() -> None:
    events = simulate(5, groups=1)
    tester = TwsTester(row_processor(Limits(), LIVE, BUCKETS), timeMode="ProcessingTime")
    drive(tester, events)
    bucket = bucket_of("g1", BUCKETS)
    other = TwsTester(row_processor(Limits(), LIVE, BUCKETS + 1), timeMode="ProcessingTime")
    other.updateValueState(STATE_NAME, bucket, tester.peekValueState(STATE_NAME, bucket))
    with pytest.raises(StateBucketsChanged, match="state_buckets is 3 but .* written with 2"):
        other.test(bucket, packs_of([(0, events[-1])]))


def test_bucket_of_is_spark_sqls_crc32(spark: Any) -> None:
    """bucket_of is Spark SQL's pmod(crc32(group), buckets): a bucket can be computed either side."""
    from pyspark.sql import functions as F

    names = ["g1", "g2", "db-eu.1:a", "x" * 128, "Z9._:-"]
    df = spark.createDataFrame([(n,) for n in names], "group string")
    got = {r.group: r.b for r in df.select("group", F.pmod(F.crc32(F.col("group").cast("binary")), F.lit(7)).alias("b")).collect()}
    assert got == {n: bucket_of(n, 7) for n in names}


def spark_order(logic: Any, batches: list[tuple[int, list[dict[str, Any]]]], clock_rows: bool) -> list[tuple[Any, ...]]:
    """Micro-batches in Spark's order: each bucket's rows, then the timers due at the batch's
    processing time (``MonitorLogic`` with in-memory state and timers per bucket)."""
    states: dict[int, MemoryState] = defaultdict(MemoryState)
    handles: dict[int, MemoryTimers] = defaultdict(MemoryTimers)
    out: list[tuple[Any, ...]] = []
    for now, evs in batches:
        rows: dict[int, list[tuple[str, bytes]]] = defaultdict(list)
        for i, ev in enumerate(evs):
            rows[bucket_of(ev["group"], logic.buckets)].append((ev["group"], pack([item(ev, i)])))
        if clock_rows and evs:
            for b in range(logic.buckets):
                rows[b].append((CLOCK_KEY, pack(max(e["ts_ms"] for e in evs))))
        for b in sorted(rows):
            out += logic.on_rows(handles[b], states[b], rows[b], now)
        for b in sorted(handles):
            due = [t for t in handles[b].timers if t <= now]
            if due:
                handles[b].timers.difference_update(due)
                out += logic.on_timer(handles[b], states[b], now)
    return out


def test_a_backlog_after_an_outage_raises_no_false_silence() -> None:
    """Live, after an outage: 60 s of events read in 5 s micro-batches, ten minutes after they
    happened; g3 (alone in its bucket) paused 12 s, less than GROUP_SILENT's threshold, so two
    batches bring nothing of it. Each batch's outside clock is how far the input has been read
    (the clock rows every bucket gets), not the processing time, so no group is silent because
    its next events are still in the backlog: the alerts are check's. Without the clock rows the
    processing time makes g3 silent."""
    from replimon.streaming.processor import MonitorLogic

    buckets = 7  # g1, g2, g3 in buckets of their own
    assert len({bucket_of(g, buckets) for g in ("g1", "g2", "g3")}) == 3
    events = simulate(60, "beyond_horizon:g1@20s", groups=3)
    start = min(e["ts_ms"] for e in events)
    pause = (start + 25_000, 12_000)
    events = [{**e, "ts_ms": e["ts_ms"] + pause[1]} if e["group"] == "g3" and e["ts_ms"] >= pause[0] else e
              for e in events]
    events.sort(key=lambda e: e["ts_ms"])
    end = max(e["ts_ms"] for e in events)
    batches = [(end + 600_000 + b * 1000, [e for e in events if start + b * 5_000 <= e["ts_ms"] < start + (b + 1) * 5_000])
               for b in range(15)]  # to the end of the input: live would then find every group silent
    assert not [e for e in events if e["group"] == "g3" and start + 25_000 <= e["ts_ms"] < start + 35_000]
    want = {(a.alert_id, a.status) for a in Monitor().run(events)}
    assert "GROUP_SILENT" not in {a.kind for a in Monitor().run(events)}
    got = spark_order(MonitorLogic(Limits(), LIVE, buckets), batches, clock_rows=True)
    kinds = {(r[2], r[3]): json.loads(r[5])["kind"] for r in got if r[0] == "alert"}
    check = {(a.alert_id, a.status): a.kind for a in Monitor().run(events)}
    assert set(kinds) == want, ([kinds[k] for k in set(kinds) - want], [check[k] for k in want - set(kinds)])
    blind = spark_order(MonitorLogic(Limits(), LIVE, buckets), batches, clock_rows=False)
    assert "GROUP_SILENT" in {json.loads(r[5])["kind"] for r in blind if r[0] == "alert"}


def test_groups_text_round_trips_and_passes_untouched_groups_through() -> None:
    from replimon.streaming.processor import format_groups

    groups = {"g1": ['{"v":1,"a":"x\\ty"}', 123, "", "xcom"], "db.eu-2:a": ["{}", None, '{"t":{"0":5}}', "gen"],
              "g3": ["", None, "", ""]}
    text = format_groups(groups)
    assert parse_groups(text) == groups and format_groups(parse_groups(text)) == text
    assert parse_groups("") == {}


def test_live_snapshots_come_at_their_cadence_and_the_last_one_is_complete() -> None:
    """Live with a 5 s snapshot cadence: the same alerts as the core; a group is snapshotted in
    its first batch, with its alerts, and then about once a period instead of once a batch; after
    the input stops the bucket's timer brings each group's last snapshot within two periods, with
    every event counted."""
    events = simulate(60, "beyond_horizon:g1@20s", groups=3)
    period = 5_000
    tester = TwsTester(row_processor(Limits(), LIVE, BUCKETS, snapshot_ms=period), timeMode="ProcessingTime")
    rows = drive(tester, events)
    assert alert_keys(rows) == {(a.alert_id, a.status) for a in Monitor().run(events)}
    states = [json.loads(r.payload) for r in rows if r.out == "state"]
    per_group = {g: sum(1 for s in states if s["group"] == g) for g in ("g1", "g2", "g3")}
    alerting = {r.group_id for r in rows if r.out == "alert"}
    for group, count in per_group.items():
        assert 1 <= count <= 60 // 5 + 3 + (20 if group in alerting else 0), per_group
    assert sum(per_group.values()) < 60  # every batch would be 3 x 60
    pending = 0
    for bucket in {bucket_of(g, BUCKETS) for g in per_group}:  # a pending snapshot holds the timer
        stored = tester.peekValueState(STATE_NAME, bucket)
        dues = [kept[4] for kept in parse_groups(stored[0]).values() if len(kept) > 4]
        pending += len(dues)
        assert not dues or stored[1] <= min(dues) + period
    assert pending  # the last batches were not all snapshot batches
    last = max(e["ts_ms"] for e in events)
    tail = [json.loads(r.payload) for t in range(last + 1000, last + 2 * period + 2000, 1000)
            for r in tester.setProcessingTime(t) if r.out == "state"]
    want = {g: sum(1 for e in events if e["group"] == g) for g in ("g1", "g2", "g3")}
    final = {s["group"]: s["counts"]["events"] for s in [*states, *tail]}
    assert final == want
    for bucket in {bucket_of(g, BUCKETS) for g in want}:
        stored = tester.peekValueState(STATE_NAME, bucket)
        assert stored is not None
        assert all(len(kept) == 4 for kept in parse_groups(stored[0]).values())  # nothing pending


def test_a_pending_snapshot_is_kept_in_the_groups_text() -> None:
    groups = {"g1": ['{"v":1}', 123, "", "xcom", 5000], "g2": ["{}", None, "", "gen"]}
    from replimon.streaming.processor import format_groups

    text = format_groups(groups)
    assert text == 'g1\t123\t\txcom\t5000\t{"v":1}\ng2\t\t\tgen\t\t{}'
    assert parse_groups(text) == groups


def test_a_retried_batch_gives_the_same_rows_with_warm_monitors() -> None:
    """Monitors kept warm between batches are used only when the stored state is the one they
    were saved as: a batch run again from the state before it (a retry after a crash) gives the
    same rows as the first time, though the warm monitor has moved on."""
    from replimon.streaming.processor import MonitorLogic

    events = simulate(20, "beyond_horizon:g1@8s", groups=2)
    start = min(e["ts_ms"] for e in events)
    logic = MonitorLogic(Limits(), LIVE, BUCKETS, snapshot_ms=3_000)
    states: dict[int, MemoryState] = defaultdict(MemoryState)
    handles: dict[int, MemoryTimers] = defaultdict(MemoryTimers)
    for b in range(20):
        now = start + (b + 1) * 1000
        rows: dict[int, list[tuple[str, bytes]]] = defaultdict(list)
        for i, ev in enumerate(events):
            if start + b * 1000 <= ev["ts_ms"] < start + (b + 1) * 1000:
                rows[bucket_of(ev["group"], BUCKETS)].append((ev["group"], pack([item(ev, i)])))
        for bucket, got in sorted(rows.items()):
            before = states[bucket].value
            first = logic.on_rows(handles[bucket], states[bucket], got, now)
            after = states[bucket].value
            states[bucket].value = before
            again = logic.on_rows(handles[bucket], states[bucket], got, now)
            assert again == first and states[bucket].value == after


@pytest.mark.parametrize("mode", [LIVE, "EventTime"])
def test_one_node_ten_years_ahead_live_and_replayed_is_one_clock_skew(mode: str) -> None:
    """docs/operations.md, "Clocks": live the reference is the batch's processing time, replayed
    the group's other nodes; either way one CLOCK_SKEW, no alert dated in the future, and the
    other groups' alerts are the clean run's."""
    from replimon.streaming.processor import MonitorLogic

    years = 10 * 365 * 86_400_000
    events = simulate(40, groups=3)
    start, end = min(e["ts_ms"] for e in events), max(e["ts_ms"] for e in events)
    bad = [{**e, "ts_ms": e["ts_ms"] + years} if (e["group"], e["node"]) == ("g2", "n1") else e for e in events]

    def run(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        batches = [(start + (b + 1) * 1000, [e for e in events_in(evs, b)]) for b in range(45)]
        rows = spark_order(MonitorLogic(Limits(), mode, 7), batches, clock_rows=mode == LIVE)
        return [json.loads(r[5]) for r in rows if r[0] == "alert"]

    def events_in(evs: list[dict[str, Any]], b: int) -> list[dict[str, Any]]:
        # a batch holds what was published in its second (the bad node's by its true time)
        return [e for e in evs if start + b * 1000 <= (e["ts_ms"] - years if e["ts_ms"] > end else e["ts_ms"]) < start + (b + 1) * 1000]

    def kinds(alerts: list[dict[str, Any]]) -> dict[tuple[str, str, str], int]:
        from collections import Counter
        return dict(Counter((a["group"], a["kind"], a["status"]) for a in alerts if a["severity"] != "info"))

    clean, skewed = run(events), run(bad)
    want = kinds(clean)
    want[("g2", "CLOCK_SKEW", "firing")] = 1
    assert kinds(skewed) == want
    assert max(a["event_ts_ms"] for a in skewed) < end + 60_000


def family_events(family: str, seconds: int, group: str, seed: int, *faults: str) -> list[dict[str, Any]]:
    """A one-group run of ``family``'s simulator (faults named as its catalogue names them),
    the group renamed ``group``."""
    from replimon.producers import simulator_chain, simulator_gen, simulator_qlog

    if family == "xcom":
        events = simulate(seconds, *faults, groups=1, seed=seed)
    else:
        sim = {"gen": simulator_gen, "qlog": simulator_qlog, "chain": simulator_chain}[family]
        events = []
        sim.Simulator(sim.SimOptions(groups=1, nodes=3, seed=seed, duration_ms=seconds * 1000),
                      [sim.parse_injection(f) for f in faults], events.append).run()
    return [{**e, "group": group} for e in events]


def test_a_quorum_log_group_goes_through_the_state_as_it_does_in_the_core() -> None:
    """A qlog group's state line carries family "qlog"; its alerts through the processor are
    the core's, the wedge QLOG_NO_LEADER included (fired by the bucket's timer), and the state
    kept between batches loads back as a qlog group (docs/streaming.md, "State")."""
    events = family_events("qlog", 60, "ql1", 2, "qlog_no_leader:ql1@10s")
    expected = {(a.alert_id, a.status) for a in Monitor().run(events)}
    tester = TwsTester(row_processor(Limits(), LIVE, BUCKETS), timeMode="ProcessingTime")
    rows = drive(tester, events, tail_ms=5_000)
    assert alert_keys(rows) == expected
    kinds = {json.loads(r.payload)["kind"] for r in rows if r.out == "alert"}
    assert {"QLOG_NO_LEADER", "QLOG_RECONFIGURED"} <= kinds
    states = [json.loads(r.payload) for r in rows if r.out == "state"]
    assert states and {(s["group"], s["family"]) for s in states} == {("ql1", "qlog")}
    assert states[-1]["config"]["legislature"] == states[-1]["config_version"] >= 1
    kept = tester.peekValueState(STATE_NAME, bucket_of("ql1", BUCKETS))
    assert kept is not None
    line = parse_groups(kept[0])["ql1"]
    assert line[3] == "qlog"
    back = GroupMonitor.from_state(json.loads(line[0]))
    assert back.family.name == "qlog" and back.snapshot()["config"] == states[-1]["config"]


def test_a_chain_group_goes_through_the_state_as_it_does_in_the_core() -> None:
    """A chain group's state line carries family "chain"; its alerts through the processor are
    the core's, the wedge CHAIN_WEDGE_NOT_REPLACED included, which the bucket's timer fires with
    no input at all once the group's events stop after the wedge; the state kept between batches
    loads back as a chain group (docs/streaming.md, "State")."""
    events = family_events("chain", 60, "ch1", 2, "chain_wedge_not_replaced:ch1@10s")
    expected = {(a.alert_id, a.status) for a in Monitor().run(events)}
    tester = TwsTester(row_processor(Limits(), LIVE, BUCKETS), timeMode="ProcessingTime")
    # (a tail shorter than a lease: past it, the timers rightly expire every member's lease,
    # which the core's run, ending with the events, never sees)
    rows = drive(tester, events, tail_ms=2_000)
    assert alert_keys(rows) == expected
    alerts = [json.loads(r.payload) for r in rows if r.out == "alert"]
    assert {"CHAIN_WEDGE_NOT_REPLACED", "CHAIN_VIEW_INSTALLED"} <= {a["kind"] for a in alerts}
    assert [a["status"] for a in alerts if a["kind"] == "CHAIN_WEDGE_NOT_REPLACED"] == ["firing", "resolved"]
    states = [json.loads(r.payload) for r in rows if r.out == "state"]
    assert states and {(s["group"], s["family"]) for s in states} == {("ch1", "chain")}
    assert states[-1]["config"]["epoch"] == states[-1]["config_version"] >= 1
    kept = tester.peekValueState(STATE_NAME, bucket_of("ch1", BUCKETS))
    assert kept is not None
    line = parse_groups(kept[0])["ch1"]
    assert line[3] == "chain"
    back = GroupMonitor.from_state(json.loads(line[0]))
    assert back.family.name == "chain" and back.snapshot()["config"] == states[-1]["config"]

    # The group's events stop a second after the first wedge: nothing replaces it, and the
    # bucket's timer alone raises CHAIN_WEDGE_NOT_REPLACED once processing time passes the bound.
    wedged = min(e["ts_ms"] for e in events if e["type"] == "chain.wedge")
    cut = [e for e in events if e["ts_ms"] <= wedged + 1_000]
    quiet = TwsTester(row_processor(Limits(), LIVE, BUCKETS), timeMode="ProcessingTime")
    before = drive(quiet, cut)
    assert "CHAIN_WEDGE_NOT_REPLACED" not in {json.loads(r.payload)["kind"] for r in before if r.out == "alert"}
    fired = quiet.setProcessingTime(wedged + 30_000)
    late = [json.loads(r.payload) for r in fired if r.out == "alert"]
    assert [(a["kind"], a["status"], a["group"]) for a in late if a["kind"] == "CHAIN_WEDGE_NOT_REPLACED"] == [
        ("CHAIN_WEDGE_NOT_REPLACED", "firing", "ch1")]


# (the group's family, the intruder's): each family's events into a group of each other one
CONFLICTS = [("xcom", "gen"), ("xcom", "qlog"), ("gen", "qlog"), ("qlog", "gen"), ("qlog", "xcom"),
             ("chain", "xcom"), ("chain", "gen"), ("chain", "qlog"),
             ("xcom", "chain"), ("gen", "chain"), ("qlog", "chain")]


@pytest.mark.parametrize(("own", "other"), CONFLICTS, ids=[f"{a}-{b}" for a, b in CONFLICTS])
def test_an_event_of_another_family_is_a_dead_letter_with_checks_reason(own: str, other: str) -> None:
    """``other``'s events into a group of family ``own``: each is left out, FAMILY_CONFLICT is
    raised once (as the core does), and each becomes a dead letter where it was read with the
    reason ``replimon check`` gives, its event re-encoded as the publisher sent it; a retried
    batch gives the same."""
    from replimon.producers.publisher import encode_event

    mine = family_events(own, 20, "g1", 2)
    theirs = family_events(other, 5, "g1", 3)
    shift = mine[60]["ts_ms"] - theirs[0]["ts_ms"]
    mixed = sorted(mine + [{**e, "ts_ms": e["ts_ms"] + shift} for e in theirs[:8]],
                   key=lambda e: e["ts_ms"])
    check = Monitor()
    reasons: dict[int, str] = {}
    expected = set()
    for i, ev in enumerate(mixed):  # as replimon check does
        if (reason := check.conflict(ev)) is not None:
            reasons[i] = reason
        expected |= {(a.alert_id, a.status) for a in check.process(ev)}
    assert len(reasons) == 8 and set(reasons.values()) == {f"family conflict: group g1 is {own}"}

    tester = TwsTester(row_processor(Limits(), LIVE, BUCKETS), timeMode="ProcessingTime")
    rows = drive(tester, mixed)
    assert alert_keys(rows) == expected
    assert sum(1 for r in rows if r.out == "alert" and json.loads(r.payload)["kind"] == "FAMILY_CONFLICT") == 1
    dead = {r.id: r for r in rows if r.out == "dead"}
    assert set(dead) == {f"replica.{mixed[i]['type']}:0:{i}" for i in reasons}
    for i, reason in reasons.items():
        d = dead[f"replica.{mixed[i]['type']}:0:{i}"]
        assert (d.payload, d.raw, d.ts_ms, d.group_id) == (reason, encode_event(mixed[i]), mixed[i]["ts_ms"], None)

    # A retried batch (the same rows from the same state) gives the same dead letters.
    first = min(reasons)
    batch = [(i, ev) for i, ev in enumerate(mixed) if ev["ts_ms"] // 1000 == mixed[first]["ts_ms"] // 1000]
    again = TwsTester(row_processor(Limits(), LIVE, BUCKETS), timeMode="ProcessingTime")
    drive(again, [ev for ev in mixed if ev["ts_ms"] < batch[0][1]["ts_ms"]])
    bucket = bucket_of("g1", BUCKETS)
    saved = again.peekValueState(STATE_NAME, bucket)
    ids = []
    for _ in range(2):
        again.updateValueState(STATE_NAME, bucket, saved)
        ids.append(sorted(r.id for r in again.test(bucket, packs_of(batch)) if r.out == "dead"))
    assert ids[0] and ids[0] == ids[1] and set(ids[0]) <= set(dead)
