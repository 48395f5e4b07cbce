"""Data-quality suites of the generations family (docs/quality.md): ``replica.gen.state``,
``replica.gen.xact`` and ``replica.gen.heartbeat``.

The passing data is the generations simulator's trace with every fault of its catalogue in a
group of its own (protocol faults are the monitor's business, not data-quality failures); each
expectation's failing data is a clean trace with one mutation, which must fail that expectation
and name the mutated row. A mixed stream leaves XCom's verdicts as they are alone, and the
sampler keeps the gen records each topic carries.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from replimon.cli import main
from replimon.config import load_settings
from replimon.contract import Invalid, parse_event
from replimon.core import Monitor
from replimon.producers.simulator_gen import CATALOGUE, SimOptions, Simulator, parse_injection
from replimon.quality import engine
from replimon.quality.derive import SUITE_OF_TYPE, Record, alert_frame, input_frames, state_frames
from replimon.quality.engine import Outcome
from replimon.quality.suites import (
    ALERTS,
    GEN_HEARTBEATS,
    GEN_STATE,
    GEN_SUITES,
    GEN_XACT,
    XCOM_SUITES,
    parameters,
    specs,
)
from tests.quality.test_quality import _pick, _who, seq_back

START_MS = 1_767_225_600_000  # 2026-01-01
NOW_MS = START_MS + 24 * 3600 * 1000
PARAMS = parameters(load_settings(None), NOW_MS)
TOPIC = {"gen.state": "replica.config", "gen.xact": "replica.decisions", "gen.heartbeat": "replica.heartbeats"}
TYPE = {GEN_STATE: "gen.state", GEN_XACT: "gen.xact", GEN_HEARTBEATS: "gen.heartbeat"}
FAULTS = sorted(name for name, spec in CATALOGUE.items() if spec.alert)

Events = list[dict[str, Any]]


def gen_trace(seconds: int, *faults: str, groups: int = 3, seed: int = 1) -> Events:
    events: Events = []
    Simulator(SimOptions(groups=groups, seed=seed, duration_ms=seconds * 1000, start_ms=START_MS),
              [parse_injection(f) for f in faults], events.append).run()
    return events


def records(events: Events) -> list[Record]:
    """Events as read from one partition per topic, in list order (each type on its topic)."""
    return [Record(TOPIC.get(e["type"], f"replica.{e['type']}"), 0, i, e) for i, e in enumerate(events)]


def run(frames: dict[str, Any]) -> dict[tuple[str, str], Outcome]:
    return {(o.suite, o.expectation): o for o in engine.validate(frames, PARAMS, sample_rows=5)}


@pytest.fixture(scope="module")
def every_fault() -> Events:
    """Every generations fault of the catalogue, each in a group of its own, 150 s."""
    return gen_trace(150, *(f"{f}:pg{i + 1}@10s" for i, f in enumerate(FAULTS)), groups=len(FAULTS))


@pytest.fixture(scope="module")
def clean() -> Events:
    return gen_trace(40, groups=3, seed=2)


def test_every_gen_expectation_passes_on_the_trace_with_every_fault(every_fault: Events) -> None:
    m = Monitor()
    alerts = [a.to_dict() for e in every_fault for a in m.process(e)] + [a.to_dict() for a in m.finish()]
    frames = input_frames(records(every_fault))
    assert set(frames) == set(GEN_SUITES)  # the sampler's types all land in their suites
    frames[ALERTS] = alert_frame(alerts)
    frames.update(state_frames([g.snapshot() for g in m.groups.values()]))
    results = run(frames)
    gen = {(s, spec.name) for s in GEN_SUITES for spec in specs()[s]}
    assert gen <= set(results)
    failed = {k: (o.unexpected, o.samples[:2], o.error) for k, o in results.items() if not o.success}
    assert failed == {}
    for key in gen:  # each one judged real values, not only NULLs
        o = results[key]
        assert o.evaluated and o.evaluated - o.details.get("missing_count", 0) > 0, key
    assert {CATALOGUE[f].alert for f in FAULTS} <= {a["kind"] for a in alerts}


# -- failing data -----------------------------------------------------------------------------------
Mutation = Callable[[Events], tuple[Events, dict[str, Any]]]


def _set(type_: str, change: Callable[[dict[str, Any]], None],
         ok: Callable[[dict[str, Any]], bool] = lambda e: True) -> Mutation:
    def m(events: Events) -> tuple[Events, dict[str, Any]]:
        i = _pick(events, type_, ok)
        change(events[i])
        return events, _who(events[i])
    return m


def future(type_: str) -> Mutation:
    return _set(type_, lambda e: e.update(ts_ms=NOW_MS + 24 * 3600 * 1000))


def clock_ahead(events: Events) -> tuple[Events, dict[str, Any]]:
    i = _pick(events, "gen.heartbeat")
    group, node = events[i]["group"], events[i]["node"]
    for k, e in enumerate(events):
        if (e["group"], e["node"]) == (group, node):
            events[k] = {**e, "ts_ms": e["ts_ms"] + 10 * 60_000}
    return events, {"group": group, "node": node}


def _stranger(e: dict[str, Any]) -> None:
    e["gen"]["members"] = [*e["gen"]["members"][1:], "n9"]  # n9 is not configured


# (mutation, whether the mutated record is still contract-valid: the status and role sets are
# the contract's too, so those records only reach a frame from a source that skipped parsing)
MUTATIONS: dict[tuple[str, str], tuple[Mutation, bool]] = {
    **{(s, "expect_column_values_to_be_between(ts_ms)"): (future(TYPE[s]), True) for s in GEN_SUITES},
    **{(s, "expect_column_values_to_be_between(seq_step)"): (seq_back(TYPE[s]), True) for s in GEN_SUITES},
    (GEN_STATE, "expect_column_pair_values_a_to_be_greater_than_b(gen_num,last_online_in)"):
        (_set("gen.state", lambda e: e.update(last_online_in=e["gen"]["num"] + 1)), True),
    (GEN_STATE, "expect_column_values_to_be_in_set(status)"):
        (_set("gen.state", lambda e: e.update(status="ACTIVE")), False),
    (GEN_STATE, "expect_column_values_to_be_between(members_outside)"): (_set("gen.state", _stranger), True),
    (GEN_XACT, "expect_column_values_to_be_in_set(phase)"):
        (_set("gen.xact", lambda e: e.update(phase="rolled_back")), False),
    (GEN_XACT, "expect_column_values_to_be_in_set(role)"):
        (_set("gen.xact", lambda e: e.update(role="observer")), False),
    (GEN_HEARTBEATS, "expect_column_values_to_be_between(clock_offset_ms)"): (clock_ahead, True),
    (GEN_HEARTBEATS, "expect_column_pair_values_a_to_be_greater_than_b(gen_num,last_online_in)"):
        (_set("gen.heartbeat", lambda e: e.update(last_online_in=e["gen_num"] + 2),
              lambda e: e["gen_num"] > 0), True),
    (GEN_HEARTBEATS, "expect_column_values_to_be_in_set(node_status)"):
        (_set("gen.heartbeat", lambda e: e.update(node_status="ONLINE")), False),
}


def test_every_gen_expectation_has_failing_data() -> None:
    assert set(MUTATIONS) == {(s, spec.name) for s in GEN_SUITES for spec in specs()[s]}


@pytest.mark.parametrize("key", sorted(MUTATIONS), ids=lambda k: f"{k[0]}:{k[1]}")
def test_gen_expectation_fails_on_its_mutation(clean: Events, key: tuple[str, str]) -> None:
    suite = key[0]
    only = [r for r in records(clean) if r.event["type"] == TYPE[suite]]
    assert run({suite: input_frames(only)[suite]})[key].success
    mutation, valid = MUTATIONS[key]
    events, who = mutation(list(clean))
    changed = [e for e, c in zip(events, clean, strict=True) if e is not c]
    assert changed and all(isinstance(parse_event(json.dumps(e)), Invalid) != valid for e in changed)
    frame = input_frames(r for r in records(events) if r.event["type"] == TYPE[suite])[suite]
    o = run({suite: frame})[key]
    assert not o.success and not o.error and o.unexpected and o.unexpected >= 1, (key, o)
    assert any(all(s.get(k) == v for k, v in who.items()) for s in o.samples), (key, who, o.samples)
    assert all(s["type"] == TYPE[suite] for s in o.samples)  # the evidence names the record's type


# -- beside XCom ------------------------------------------------------------------------------------
def test_a_mixed_stream_leaves_xcom_verdicts_as_they_are(clean: Events) -> None:
    from tests.support import simulate

    xcom = simulate(30, groups=3, seed=2)
    xcom_recs = [Record(f"replica.{e['type']}s" if e["type"] != "config" else "replica.config", 0, i, e)
                 for i, e in enumerate(xcom)]
    mixed_recs = [*xcom_recs, *(Record(r.source, 0, len(xcom) + r.offset, r.event) for r in records(clean))]

    def verdicts(recs: list[Record]) -> dict[tuple[str, str], tuple[bool, int | None, int | None]]:
        return {k: (o.success, o.evaluated, o.unexpected) for k, o in run(input_frames(recs)).items()
                if k[0] in XCOM_SUITES}

    alone = verdicts(xcom_recs)
    assert alone and all(ok for ok, _, _ in alone.values())
    assert verdicts(mixed_recs) == alone


@pytest.mark.usefixtures("clean_env")
def test_validate_a_mixed_file_names_the_bad_gen_record(clean: Events, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support import simulate

    events = [*simulate(20, groups=2, seed=2), *clean]
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "pass  replica.gen.state" in out and "pass  replica.heartbeats" in out and "FAIL" not in out
    i = next(k for k, e in enumerate(events) if e["type"] == "gen.state" and e["group"] == "pg2")
    events[i] = {**events[i], "last_online_in": events[i]["gen"]["num"] + 1}
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    assert main(["validate", str(path)]) == 1
    fails = [line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("FAIL")]
    assert len(fails) == 1, fails
    assert "replica.gen.state" in fails[0]
    assert "expect_column_pair_values_a_to_be_greater_than_b(gen_num,last_online_in)" in fails[0]
    assert f"mixed.jsonl:{i + 1}:" in fails[0]


# -- the sampler ------------------------------------------------------------------------------------
@pytest.mark.broker
def test_the_sampler_keeps_gen_records_and_drops_a_misplaced_one(broker: Any, topic_prefix: str,
                                                                tmp_path: Path) -> None:
    from replimon.kafka import KafkaClient
    from replimon.quality.records import read_sample
    from tests.support import publish, settings_for, simulate

    settings = settings_for(broker, SimpleNamespace(dsn=""), topic_prefix, tmp_path)
    xcom, gen = simulate(5, groups=2, seed=5), gen_trace(5, groups=2, seed=5)
    state = next(e for e in gen if e["type"] == "gen.state")
    publish(settings, [*xcom, *gen], [("heartbeats", json.dumps(state).encode())])  # on the wrong topic
    types = settings.kafka.topics.input_families
    with KafkaClient({"bootstrap.servers": broker.bootstrap_servers}) as client:
        _, _, ends = client.snapshot(list(types))
    spans = {tp: (0, end) for tp, end in ends.items() if end > 0}
    sample = read_sample(broker.bootstrap_servers, spans, types, limit=10**6, salt=1)
    assert sample.invalid == 1 and sample.complete
    got = sorted(r.event["type"] for r in sample.records)
    assert got == sorted(e["type"] for e in [*xcom, *gen])
    assert set(input_frames(sample.records)) == {SUITE_OF_TYPE[e["type"]] for e in [*xcom, *gen]}
