"""Data-quality suites (docs/quality.md) without Spark: every expectation on data that passes and on data
that fails, the derived columns, the checked-in GX project, sampling from Kafka, the results'
exactly-once write, and ``replimon validate``.

The passing data is the simulator's trace with every fault of the catalogue (the one the e2e run
publishes): protocol faults are the monitor's business, not data-quality failures, so every
expectation passes on it, and each one is exercised (it evaluates rows that are not NULL). Each
expectation's failing data is that trace with one contract-valid mutation (``MUTATIONS``), which
must make that expectation fail and name the mutated row in its sample.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import psycopg
import pytest

from replimon.cli import main
from replimon.config import load_settings
from replimon.contract import Invalid, parse_event
from replimon.core import Monitor
from replimon.producers.simulator import Simulator, parse_injection
from replimon.quality import engine
from replimon.quality.derive import (
    Record,
    active_configs,
    alert_frame,
    clock_offsets,
    input_frames,
    seq_steps,
    state_frames,
)
from replimon.quality.engine import Outcome
from replimon.quality.suites import (
    ALERTS,
    CHAIN_SUITES,
    CONFIG,
    DECISIONS,
    EXECUTIONS,
    GEN_SUITES,
    HEARTBEATS,
    NODES,
    OUTPUT_SUITES,
    QLOG_SUITES,
    STATE,
    SUITES,
    XCOM_SUITES,
    parameters,
    specs,
)
from tests.support.e2e import FAULT_AT_S, FAULTS, OPTIONS, fault_group
from tests.support.quality import clock_ahead, seq_back
from tests.support.quality import pick as _pick
from tests.support.quality import who as _who

NOW_MS = OPTIONS.start_ms + 10 * 24 * 3600 * 1000  # "now" for the suites: 10 days after the trace
DAY_MS = 24 * 3600 * 1000
TYPE = {DECISIONS: "decision", EXECUTIONS: "execution", HEARTBEATS: "heartbeat", CONFIG: "config"}
SETTINGS = load_settings(None)
PARAMS = parameters(SETTINGS, NOW_MS)


@pytest.fixture(scope="module")
def trace() -> list[dict[str, Any]]:
    """The e2e trace: 24 groups x 120 s, every fault of the catalogue."""
    events: list[dict[str, Any]] = []
    injections = [parse_injection(f"{f}:{fault_group(i)}@{FAULT_AT_S}s") for i, f in enumerate(FAULTS)]
    Simulator(OPTIONS, injections, events.append).run()
    return events


@pytest.fixture(scope="module")
def small() -> list[dict[str, Any]]:
    """A clean fleet small enough to mutate and validate quickly, with every kind of record the
    mutations need (refusals, adds, reservations with a window base, views, versions)."""
    from tests.support import simulate

    return simulate(60, groups=6, seed=3)


@pytest.fixture(scope="module")
def outputs(trace: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What the monitor says about the trace: its alerts and every group's final snapshot."""
    m = Monitor()
    alerts = [a.to_dict() for e in trace for a in m.process(e)] + [a.to_dict() for a in m.finish()]
    return alerts, [g.snapshot() for g in m.groups.values()]


def records(events: list[dict[str, Any]]) -> list[Record]:
    """Events as read from one partition per topic, in list order."""
    return [Record(f"replica.{e['type']}", 0, i, e) for i, e in enumerate(events)]


def frame_of(suite: str, events: list[dict[str, Any]]) -> pd.DataFrame:
    """The input frame of one suite (only that type's events are turned into rows)."""
    return input_frames(r for r in records(events) if r.event["type"] == TYPE[suite])[suite]


def run(frames: dict[str, pd.DataFrame]) -> dict[tuple[str, str], Outcome]:
    return {(o.suite, o.expectation): o for o in engine.validate(frames, PARAMS, sample_rows=5)}


# -- passing data ----------------------------------------------------------------------------------
def test_every_expectation_passes_on_the_trace_with_every_fault(trace: list[dict[str, Any]],
                                                                 outputs: Any) -> None:
    alerts, snapshots = outputs
    frames = input_frames(records(trace))
    frames[ALERTS] = alert_frame(alerts)
    frames.update(state_frames(snapshots))
    results = run(frames)
    assert set(results) == {(s, spec.name) for s, ss in specs().items() for spec in ss
                            if s not in GEN_SUITES + QLOG_SUITES + CHAIN_SUITES}
    failed = {k: (o.unexpected, o.samples[:2], o.error) for k, o in results.items() if not o.success}
    assert failed == {}
    for key, o in results.items():  # each one judged real values, not only NULLs
        assert o.evaluated and o.evaluated - o.details.get("missing_count", 0) > 0, key
    assert {a["kind"] for a in alerts} >= {"BEYOND_HORIZON", "GROUP_SILENT", "EVENTS_LOST"}


# -- failing data: one contract-valid mutation per expectation --------------------------------------
Events = list[dict[str, Any]]
Mutation = Callable[[Events], tuple[Events, dict[str, Any]]]


def future(type_: str) -> Mutation:
    def m(events: Events) -> tuple[Events, dict[str, Any]]:
        i = _pick(events, type_)
        events[i]["ts_ms"] = NOW_MS + DAY_MS  # a day in the future
        j = _pick(events, type_, lambda e: e is not events[i])
        events[j]["ts_ms"] //= 1000  # seconds instead of milliseconds
        return events, _who(events[i])
    return m


def _set(type_: str, ok: Callable[[dict[str, Any]], bool], change: Callable[[dict[str, Any]], None]) -> Mutation:
    def m(events: Events) -> tuple[Events, dict[str, Any]]:
        i = _pick(events, type_, ok)
        change(events[i])
        return events, _who(events[i])
    return m


TEN = [{"id": f"x{k}", "protocol": 9} for k in range(10)]
MUTATIONS: dict[tuple[str, str], Mutation] = {
    **{(s, "expect_column_values_to_be_between(ts_ms)"): future(TYPE[s]) for s in XCOM_SUITES},
    **{(s, "expect_column_values_to_be_between(seq_step)"): seq_back(TYPE[s]) for s in XCOM_SUITES},
    (DECISIONS, "expect_column_pair_values_a_to_be_greater_than_b(instance,window_base)"):
        _set("decision", lambda e: "window_base" in e, lambda e: e.update(window_base=e["instance"] + 3)),
    (DECISIONS, "expect_column_values_to_be_between(config_nodes)"):
        _set("decision", lambda e: e.get("config", {}).get("op") == "add_nodes",
             lambda e: e["config"].update(nodes=TEN)),
    (HEARTBEATS, "expect_column_values_to_be_between(clock_offset_ms)"): clock_ahead("heartbeat"),
    (HEARTBEATS, "expect_column_pair_values_a_to_be_greater_than_b(decided,executed)"):
        _set("heartbeat", lambda e: e["executed"] > 0, lambda e: e.update(decided=e["executed"] - 1)),
    (HEARTBEATS, "expect_column_values_to_be_in_set(protocol)"):
        _set("heartbeat", lambda e: True, lambda e: e.update(protocol=42)),
    (HEARTBEATS, "expect_column_values_to_be_between(view_members)"):
        _set("heartbeat", lambda e: "view" in e, lambda e: e["view"].update(members=TEN)),
    (HEARTBEATS, "expect_column_values_to_match_regex(version)"):
        _set("heartbeat", lambda e: "version" in e, lambda e: e.update(version="mysql-community")),
    (CONFIG, "expect_column_pair_values_a_to_be_greater_than_b(start,instance)"):
        _set("config", lambda e: e["outcome"] == "installed" and e["instance"] > 0,
             lambda e: e.update(start=e["instance"] - 1)),
    (CONFIG, "expect_column_values_to_be_between(members_count)"):
        _set("config", lambda e: e["outcome"] == "installed", lambda e: e.update(members=TEN)),
    (CONFIG, "expect_column_values_to_be_in_set(reason)"):
        _set("config", lambda e: e["outcome"] == "refused", lambda e: e.update(reason="the horizon looked odd")),
}


def _alert_mutation(column: str, value: Any) -> Callable[[list[dict[str, Any]]], dict[str, Any]]:
    """Set one alert's ``column``; the row is named by its group and id (whichever is intact)."""
    def m(alerts: list[dict[str, Any]]) -> dict[str, Any]:
        i = len(alerts) // 2
        alerts[i] = copy.deepcopy(alerts[i])
        who = {k: alerts[i][k] for k in ("group", "alert_id") if k != column}
        alerts[i][column] = value(alerts[i]) if callable(value) else value
        return who
    return m


def _duplicate(alerts: list[dict[str, Any]]) -> dict[str, Any]:
    alerts.append(copy.deepcopy(alerts[3]))
    return {"group": alerts[3]["group"], "alert_id": alerts[3]["alert_id"]}


ALERT_MUTATIONS: dict[str, Callable[[list[dict[str, Any]]], dict[str, Any]]] = {
    **{f"expect_column_values_to_not_be_null({c})": _alert_mutation(c, None)
       for c in ("alert_id", "group", "kind", "severity", "category", "status", "event_ts_ms",
                 "detected_ts_ms", "message")},
    "expect_column_values_to_match_regex(alert_id)": _alert_mutation("alert_id", "A-17"),
    "expect_column_values_to_be_in_set(kind_class)": _alert_mutation(
        "severity", lambda a: "critical" if a["severity"] != "critical" else "info"),
    "expect_column_values_to_be_in_set(status)": _alert_mutation("status", "open"),
    "expect_column_value_lengths_to_be_between(message)": _alert_mutation("message", ""),
    "expect_compound_columns_to_be_unique(alert_id,status)": _duplicate,
}


def _horizon_below(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
    i = next(k for k, s in enumerate(snapshots) if s.get("effective_horizon") is not None)
    snapshots[i] = copy.deepcopy(snapshots[i])
    snapshots[i]["effective_horizon"] = snapshots[i]["executed_majority"] - 1
    return {"group": snapshots[i]["group"]}


def _two_active(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
    i = next(k for k, s in enumerate(snapshots) if s.get("active"))
    snapshots[i] = copy.deepcopy(snapshots[i])
    snapshots[i]["pending"] = [dict(snapshots[i]["active"]), *snapshots[i]["pending"]]
    return {"group": snapshots[i]["group"]}


def _node_horizon_below(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
    for k, s in enumerate(snapshots):
        for node, n in s["nodes"].items():
            if n["effective_horizon"] is not None and n["executed"] > 0:
                snapshots[k] = copy.deepcopy(s)
                snapshots[k]["nodes"][node]["effective_horizon"] = n["executed"] - 1
                return {"group": s["group"], "node": node}
    raise AssertionError("no node with an effective horizon")


STATE_MUTATIONS = {
    (STATE, "expect_column_pair_values_a_to_be_greater_than_b(effective_horizon,executed_majority)"): _horizon_below,
    (STATE, "expect_column_values_to_be_between(active_configs)"): _two_active,
    (NODES, "expect_column_pair_values_a_to_be_greater_than_b(effective_horizon,executed)"): _node_horizon_below,
}


def test_every_expectation_has_failing_data() -> None:
    """(The other families' failing data: tests/quality/test_quality_gen.py, test_quality_qlog.py, test_quality_chain.py.)"""
    mutated = set(MUTATIONS) | {(ALERTS, n) for n in ALERT_MUTATIONS} | set(STATE_MUTATIONS)
    assert mutated == {(s, spec.name) for s, ss in specs().items() for spec in ss
                       if s not in GEN_SUITES + QLOG_SUITES + CHAIN_SUITES}


def _fails(results: dict[tuple[str, str], Outcome], key: tuple[str, str], who: dict[str, Any]) -> None:
    o = results[key]
    assert not o.success and not o.error and o.unexpected and o.unexpected >= 1, (key, o)
    assert any(all(s.get(k) == v for k, v in who.items()) for s in o.samples), (key, who, o.samples)


@pytest.mark.parametrize("key", sorted(MUTATIONS), ids=lambda k: f"{k[0]}:{k[1]}")
def test_input_expectation_fails_on_its_mutation(small: list[dict[str, Any]], key: tuple[str, str]) -> None:
    clean = run({key[0]: frame_of(key[0], small)})
    assert clean[key].success
    events, who = MUTATIONS[key](list(small))
    changed = [e for e, c in zip(events, small, strict=True) if e is not c]
    assert changed and all(not isinstance(parse_event(json.dumps(e)), Invalid) for e in changed)  # contract-valid
    _fails(run({key[0]: frame_of(key[0], events)}), key, who)


@pytest.mark.parametrize("name", sorted(ALERT_MUTATIONS))
def test_alert_expectation_fails_on_its_mutation(outputs: Any, name: str) -> None:
    alerts = list(outputs[0])
    who = ALERT_MUTATIONS[name](alerts)
    _fails(run({ALERTS: alert_frame(alerts)}), (ALERTS, name), who)


@pytest.mark.parametrize("key", sorted(STATE_MUTATIONS), ids=lambda k: f"{k[0]}:{k[1]}")
def test_state_expectation_fails_on_its_mutation(outputs: Any, key: tuple[str, str]) -> None:
    snapshots = list(outputs[1])
    who = STATE_MUTATIONS[key](snapshots)
    _fails(run(state_frames(snapshots)), key, who)


# -- derived columns -------------------------------------------------------------------------------
def _hb(node: str, ts: int, seq: int, inc: int = 0, group: str = "g") -> dict[str, Any]:
    return {"group": group, "node": node, "ts_ms": ts, "seq": seq, "incarnation": inc}


def test_seq_step_per_node_incarnation_and_partition() -> None:
    rows = [_hb("a", 0, 0), _hb("b", 0, 5), _hb("a", 1, 2), _hb("a", 2, 1), _hb("a", 3, 0, inc=1),
            _hb("a", 4, 1, group="h")]
    df = pd.DataFrame([{"source": "t", "partition": 0, "offset": i, **r} for i, r in enumerate(rows)])
    steps = seq_steps(df).tolist()
    assert pd.isna(steps[0]) and pd.isna(steps[1])  # the first of a and of b
    assert steps[2:4] == [2, -1]  # a: 0 -> 2 -> 1 (back)
    assert pd.isna(steps[4]) and pd.isna(steps[5])  # a new incarnation, another group: first ones


def test_clock_offset_names_the_node_whose_clock_is_ahead_and_ignores_a_silence() -> None:
    rows = []
    for t in range(0, 30_000, 1000):
        for node, lead in (("a", 0), ("b", 40), ("c", 600_000)):
            if 10_000 <= t < 20_000:
                continue  # the whole group silent for 10 s: no false skew when it comes back
            rows.append(_hb(node, 1_000_000 + t + lead, t // 1000))
    df = pd.DataFrame([{"source": "t", "partition": 0, "offset": i, **r} for i, r in enumerate(rows)])
    offsets = dict(zip(df["node"], clock_offsets(df), strict=True))
    assert offsets["c"] == pytest.approx(600_000, abs=1_000)
    assert abs(offsets["a"]) < 1_000 and abs(offsets["b"]) < 1_000


def test_active_configs() -> None:
    active = {"start": 10, "event_horizon": 10, "members": []}
    assert active_configs({"active": None}) is None
    assert active_configs({"active": active, "decided": 20, "pending": [{"start": 31}]}) == 1
    assert active_configs({"active": active, "decided": 20, "pending": [{"start": 10}]}) == 2
    assert active_configs({"active": active, "decided": 20, "pending": [{"start": 21}]}) == 2


# -- the checked-in GX project ---------------------------------------------------------------------
def test_checked_in_suites_are_what_the_code_generates_and_load_in_gx(tmp_path: Path) -> None:
    import great_expectations as gx

    from replimon.quality.project import DEFAULT_ROOT, differences

    assert differences(DEFAULT_ROOT) == []  # regenerate: python -m replimon.quality.project --write
    copy_root = tmp_path / "expectations"
    shutil.copytree(DEFAULT_ROOT, copy_root)  # GX may write into a project it opens
    context = gx.get_context(mode="file", project_root_dir=str(copy_root))
    assert sorted(s.name for s in context.suites.all()) == sorted(SUITES)
    for name in SUITES:
        stored = [(e.configuration.type, {k: v for k, v in e.configuration.kwargs.items()})
                  for e in context.suites.get(name).expectations]
        assert [t for t, _ in stored] == [s.type for s in specs()[name]]
        for (t, kwargs), spec in zip(stored, specs()[name], strict=True):
            assert {k: kwargs[k] for k in spec.kwargs} == dict(spec.kwargs), (name, t)
    assert context.variables.analytics_enabled is False


def test_the_documentation_names_every_expectation_and_derived_column() -> None:
    from replimon.quality.suites import DERIVED

    text = (Path(__file__).resolve().parents[2] / "docs" / "quality.md").read_text(encoding="utf-8")
    names = {spec.name for ss in specs().values() for spec in ss
             if not spec.name.startswith("expect_column_values_to_not_be_null(")}
    assert sorted(n for n in names if f"`{n}`" not in text) == []
    assert sorted(c for c in DERIVED if f"| `{c}` |" not in text) == []


# -- cadence, alerts and the exactly-once write ----------------------------------------------------
def test_cadence() -> None:
    from replimon.streaming.sinks.quality import QualitySink

    def hook(**q: Any) -> QualitySink:
        settings = SETTINGS.model_copy(update={"quality": SETTINGS.quality.model_copy(update=q)})
        return QualitySink(settings, "live", "", lambda: "monitor")

    h = hook(every_batches=3, every_s=0)
    assert h.due(7)  # the first batch after a start
    h.last_batch, h.last_time = 7, 100.0
    assert [b for b in range(8, 14) if h.due(b, now=10_000.0)] == [10, 11, 12, 13]
    h = hook(every_batches=0, every_s=30)
    h.last_batch, h.last_time = 7, 100.0
    assert not h.due(50, now=129.0) and h.due(8, now=130.0)
    off = SETTINGS.model_copy(update={"quality": SETTINGS.quality.model_copy(update={"enabled": False})})
    assert QualitySink.wanted(SETTINGS) and not QualitySink.wanted(off)


def _failing() -> list[Outcome]:
    sample = {"type": "heartbeat", "group": "g7", "node": "n3", "ts_ms": 1_767_225_600_000, "seq": 4,
              "incarnation": 0, "topic": "replica.heartbeats", "partition": 2, "offset": 41,
              "clock_offset_ms": 600_000}
    name = "expect_column_values_to_be_between(clock_offset_ms)"
    return [Outcome(HEARTBEATS, name, False, 90, 3, {"sample": [sample]}, [sample]),
            Outcome(HEARTBEATS, "expect_column_values_to_be_in_set(protocol)", True, 90, 0, {}),
            Outcome(HEARTBEATS, "expect_column_values_to_match_regex(version)", False, 90, None,
                    {"error": "boom"}, [], "boom")]


def test_alerts_for_failed_expectations() -> None:
    from replimon.core.alerts import KINDS
    from replimon.quality.results import alerts_for

    (a,) = alerts_for(_failing(), now_ms=NOW_MS)  # a raising expectation is ours to fix: no alert
    assert (a["kind"], a["group"], a["node"], a["status"]) == ("DATA_QUALITY_FAILED", "g7", "n3", "firing")
    assert (a["severity"], a["category"]) == KINDS["DATA_QUALITY_FAILED"] == ("warning", "data")
    assert a["event_ts_ms"] == 1_767_225_600_000 and a["detected_ts_ms"] == NOW_MS
    assert "expect_column_values_to_be_between(clock_offset_ms)" in a["message"] and "3 of 90" in a["message"]
    assert a["evidence"][0]["offset"] == 41
    assert alerts_for(_failing(), now_ms=NOW_MS + 1)[0]["alert_id"] == a["alert_id"]  # facts, not time
    assert re.fullmatch(r"[0-9a-f]{20}", a["alert_id"])


@pytest.mark.postgres
def test_results_are_written_once(postgres: Any) -> None:
    from replimon.quality.results import alerts_for, validated_before, write_results
    from replimon.store.schema import migrate

    dsn = postgres.dsn
    migrate(dsn)
    run_id = f"dq-{uuid.uuid4().hex[:8]}"
    outcomes = _failing()
    alerts = alerts_for(outcomes, NOW_MS)
    assert not validated_before(dsn, run_id, "monitor", 3)
    assert write_results(dsn, run_id, "monitor", 3, outcomes, alerts, NOW_MS)
    assert validated_before(dsn, run_id, "monitor", 3)
    assert not write_results(dsn, run_id, "monitor", 3, outcomes, alerts, NOW_MS + 5)  # a retry
    assert not write_results(dsn, run_id, "monitor", 2, outcomes, alerts, NOW_MS)  # an older batch
    assert write_results(dsn, run_id, "monitor", 4, outcomes[1:2], [], NOW_MS)
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT batch_id, expectation, success, unexpected, details FROM dq_results"
                            " WHERE run_id = %s ORDER BY 1, 2", (run_id,)).fetchall()
        stored = conn.execute("SELECT alert_id, kind, batch_id, evidence FROM alerts WHERE run_id = %s",
                              (run_id,)).fetchall()
        guard = conn.execute("SELECT pipeline, last_batch_id FROM pipeline_batches WHERE run_id = %s",
                             (run_id,)).fetchall()
    assert [(b, e, s, u) for b, e, s, u, _ in rows] == [
        (3, "expect_column_values_to_be_between(clock_offset_ms)", False, 3),
        (3, "expect_column_values_to_be_in_set(protocol)", True, 0),
        (3, "expect_column_values_to_match_regex(version)", False, None),
        (4, "expect_column_values_to_be_in_set(protocol)", True, 0)]
    assert rows[0][4]["sample"][0]["node"] == "n3" and rows[2][4]["error"] == "boom"
    assert [(a, k, b) for a, k, b, _ in stored] == [(alerts[0]["alert_id"], "DATA_QUALITY_FAILED", 3)]
    assert guard == [("monitor:quality", 4)]  # its own guard row: the batch's is untouched


# -- sampling a batch from Kafka -------------------------------------------------------------------
@pytest.mark.broker
def test_sampling_keeps_whole_groups_deterministically(broker: Any, topic_prefix: str, tmp_path: Path) -> None:
    from replimon.kafka import KafkaClient
    from replimon.quality.records import read_sample
    from tests.support import publish, settings_for, simulate

    settings = settings_for(broker, SimpleNamespace(dsn=""), topic_prefix, tmp_path)
    events = simulate(10, groups=20, seed=5)
    publish(settings, events, [("decisions", b"not json"), ("heartbeats", json.dumps(events[0]).encode())])
    types = settings.kafka.topics.input_types
    with KafkaClient({"bootstrap.servers": broker.bootstrap_servers}) as client:
        _, _, ends = client.snapshot(types)  # the true end of each partition
    spans = {tp: (0, end) for tp, end in ends.items() if end > 0}
    total = sum(u for _, u in spans.values())
    assert total == len(events) + 2
    everything = read_sample(broker.bootstrap_servers, spans, types, limit=10**6, salt=1)
    assert (everything.total, everything.read, everything.invalid, everything.groups) == (total, total, 2, 20)
    assert len(everything.records) == len(events) and everything.complete
    per_group = {g: sum(1 for e in events if e["group"] == g) for g in {e["group"] for e in events}}
    small = read_sample(broker.bootstrap_servers, spans, types, limit=len(events) // 4, salt=1)
    got = {g: sum(1 for r in small.records if r.event["group"] == g) for g in {r.event["group"] for r in small.records}}
    assert got and all(n == per_group[g] for g, n in got.items())  # whole groups ...
    assert len(small.records) <= len(events) // 4  # ... up to the limit
    again = read_sample(broker.bootstrap_servers, spans, types, limit=len(events) // 4, salt=1)
    assert [(r.source, r.partition, r.offset) for r in again.records] == [(r.source, r.partition, r.offset) for r in small.records]
    other = read_sample(broker.bootstrap_servers, spans, types, limit=len(events) // 4, salt=2)
    assert {r.event["group"] for r in other.records} != set(got)  # another batch, other groups
    since = min(e["ts_ms"] for e in events) + 5_000
    late = read_sample(broker.bootstrap_servers, spans, types, limit=10**6, salt=1, since_ms=since)
    assert len(late.records) == sum(1 for e in events if e["ts_ms"] >= since)


# -- replimon validate ---------------------------------------------------------------------------
def _write(path: Path, events: list[dict[str, Any]], extra: list[str] = ()) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events) + "".join(x + "\n" for x in extra),
                    encoding="utf-8")
    return path


@pytest.mark.usefixtures("clean_env")
def test_validate_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support import simulate

    events = simulate(20, groups=3, seed=2)
    assert main(["validate", str(_write(tmp_path / "clean.jsonl", events))]) == 0
    out = capsys.readouterr().out
    assert f"{len(events)} events of 3 group(s)" in out and "result: ok: all" in out
    assert "FAIL" not in out and "pass  replica.heartbeats" in out
    # A node reports a version that is not MySQL's (and a line breaks the contract).
    bad, who = MUTATIONS[(HEARTBEATS, "expect_column_values_to_match_regex(version)")](list(events))
    path = _write(tmp_path / "bad.jsonl", bad, ['{"v": 1, "type": "heartbeat"}'])
    docs = tmp_path / "docs"
    assert main(["validate", str(path), "--docs", str(docs)]) == 1
    captured = capsys.readouterr()
    fail_lines = [line for line in captured.out.splitlines() if line.strip().startswith("FAIL")]
    assert len(fail_lines) == 1 and "expect_column_values_to_match_regex(version)" in fail_lines[0]
    line = bad.index(next(e for e in bad if _who(e) == who)) + 1
    assert f"{who['group']} heartbeat {who['node']} " in fail_lines[0]  # the sample row, and where it is
    assert f"bad.jsonl:{line}: version=mysql-community" in fail_lines[0]
    assert "1 not validated (break contract v1)" in captured.out and "bad.jsonl:" in captured.err
    assert "result: FAILED: 1 of" in captured.out and f"data docs: {docs / 'index.html'}" in captured.out
    _check_docs(docs)


def _check_docs(docs: Path) -> None:
    """GX's data docs: an index, a page per suite and per validation; local links resolve inside
    the folder; nothing is fetched from GX's servers."""
    pages = sorted(p.relative_to(docs).as_posix() for p in docs.rglob("*.html"))
    assert "index.html" in pages
    for name in (*XCOM_SUITES, *OUTPUT_SUITES):  # the suites the file had rows for
        assert f"expectations/{name.replace('.', '/')}.html" in pages
        assert any(p.startswith(f"validations/{name.replace('.', '/')}/") for p in pages), name
    for page in docs.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "great-expectations-web-assets" not in text, page
        for link in re.findall(r'(?:src|href)="([^"#:]+)"', text):
            assert (page.parent / link).resolve().is_file(), (page, link)
            assert docs.resolve() in (page.parent / link).resolve().parents
    heartbeats = next(docs.glob("validations/replica/heartbeats/**/*.html")).read_text(encoding="utf-8")
    assert "mysql-community" in heartbeats and "Failed" in heartbeats  # the unexpected value shown


@pytest.mark.usefixtures("clean_env")
def test_validate_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support import one_error_line

    assert main(["validate"]) == 2
    assert "give JSONL files, or --from and --to" in one_error_line(capsys)
    assert main(["validate", "x.jsonl", "--from", "0", "--to", "5"]) == 2
    assert "not both" in one_error_line(capsys)
    assert main(["validate", "--from", "2026-01-01T00:00:00Z"]) == 2
    assert "needs both --from and --to" in one_error_line(capsys)
    assert main(["validate", "missing.jsonl"]) == 2
    assert one_error_line(capsys) == "replimon: validate: cannot read missing.jsonl: No such file or directory"
    (tmp_path / "junk.jsonl").write_text("{\n[]\n", encoding="utf-8")
    assert main(["validate", "junk.jsonl"]) == 2
    assert "no contract-valid event in junk.jsonl (2 line(s) break contract v1)" in one_error_line(capsys)
    assert main(["validate", "--from", "yesterday", "--to", "5"]) == 2
    assert "--from: not ISO-8601 or epoch ms" in one_error_line(capsys)


@pytest.mark.broker
@pytest.mark.usefixtures("clean_env")
def test_validate_a_window_of_the_topics(broker: Any, topic_prefix: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from replimon.replay.window import plan_window
    from tests.support import publish, simulate

    topics = {n: f"{topic_prefix}{n}" for n in ("decisions", "executions", "heartbeats", "config")}
    config = tmp_path / "replimon.yaml"
    config.write_text(json.dumps({"kafka": {"bootstrap_servers": broker.bootstrap_servers, "topics": topics}}),
                      encoding="utf-8")
    settings = load_settings(config)
    events = simulate(20, groups=3, seed=9)
    bad, who = seq_back("decision")(list(events))
    publish(settings, bad)
    start = min(e["ts_ms"] for e in events)
    args = ["--config", str(config), "validate", "--from", str(start + 5_000), "--to", str(start + 15_000)]
    assert main(args) == 1
    out = capsys.readouterr().out
    fail_lines = [line for line in out.splitlines() if line.strip().startswith("FAIL")]
    in_window = start + 5_000 <= next(e for e in bad if _who(e) == who)["ts_ms"] < start + 15_000
    assert in_window and len(fail_lines) == 1 and "replica.decisions" in fail_lines[0]
    assert "expect_column_values_to_be_between(seq_step)" in fail_lines[0]
    assert f"{topics['decisions']}/" in fail_lines[0]  # the sample says where the record is
    window = plan_window(broker.bootstrap_servers, list(topics.values()), start + 5_000, start + 15_000)
    assert f"({window.records} records)" in out  # the window the replay would read
    assert main(["--config", str(config), "validate", "--from", str(start + 10**9), "--to", str(start + 10**9 + 5)]) == 2
    assert "no record was published between" in capsys.readouterr().err
