"""The simulator: reproducible to the byte, contract-valid, clean when clean, one alert per fault.

``trace_check`` is a batch reference checker (tests/support/trace_check.py): it names the alert
conditions (docs/rules.md, "The alerts") a whole trace contains. A clean run must contain none; each catalogued fault must
contain exactly the alert kind the catalogue promises.
"""

from __future__ import annotations

import io
import json
from typing import Any

import jsonschema
import pytest

from replimon.contract import Invalid, parse_event
from replimon.contract.parse import SCHEMA_PATH
from replimon.producers.simulator import (
    CATALOGUE,
    JsonlSink,
    SimOptions,
    Simulator,
    parse_duration_ms,
    parse_injection,
)
from tests.support.trace_check import check


def run(duration_ms: int = 60_000, faults: tuple[str, ...] = (), **opts: Any) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    options = SimOptions(duration_ms=duration_ms, **opts)
    Simulator(options, [parse_injection(f) for f in faults], events.append).run()
    return events


def jsonl(**opts: Any) -> str:
    buf = io.StringIO()
    sink = JsonlSink(buf)
    Simulator(SimOptions(**opts), [parse_injection("beyond_horizon:g2@10s")], sink).run()
    return buf.getvalue()


def test_same_seed_same_bytes_other_seed_other_bytes() -> None:
    a = jsonl(seed=7, groups=3, nodes=3, duration_ms=30_000)
    assert a == jsonl(seed=7, groups=3, nodes=3, duration_ms=30_000)
    assert a != jsonl(seed=8, groups=3, nodes=3, duration_ms=30_000)
    assert len(a.splitlines()) > 1_000


def test_every_event_is_contract_valid_and_matches_the_schema() -> None:
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))
    faults = tuple(f"{name}:g{1 + i % 3}@{5 + 5 * i}s" for i, name in enumerate(CATALOGUE))
    events = run(150_000, faults, groups=3, nodes=3, seed=3)
    types = set()
    for event in events:
        raw = json.dumps(event, separators=(",", ":"))
        parsed = parse_event(raw)
        assert not isinstance(parsed, Invalid), (parsed, raw)
        validator.validate(event)
        types.add(event["type"])
    assert types == {"decision", "execution", "heartbeat", "config"}


def test_seq_counts_per_incarnation_and_events_are_keyed_by_group() -> None:
    events = run(120_000, groups=2, nodes=5, seed=11, restart_every_s=10)
    seqs: dict[tuple[str, str, int], list[int]] = {}
    for e in events:
        seqs.setdefault((e["group"], e["node"], e["incarnation"]), []).append(e["seq"])
    assert any(inc > 0 for _, _, inc in seqs), "restarts must start new incarnations"
    for key, values in seqs.items():
        assert values == list(range(len(values))), key


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clean_runs_raise_nothing(seed: int) -> None:
    # Restarts, legal and refused reconfigurations, old nodes, 3 to 5 members: no alert condition.
    events = run(300_000, groups=4, nodes=3 + seed, seed=seed, old_node_fraction=0.4, restart_every_s=40)
    assert sum(e["type"] == "config" for e in events) > 4 * (3 + seed)  # reconfigurations happened
    assert any(e["incarnation"] > 0 for e in events)  # and restarts
    found = check(events)
    assert all(not k for k in found.values()), found


def test_clean_runs_exercise_refusals_and_concurrent_reconfigurations() -> None:
    events = run(600_000, groups=6, nodes=3, seed=5, old_node_fraction=0.5, reconfig_every_s=8)
    reasons = {e["reason"] for e in events if e["type"] == "config" and e["outcome"] == "refused"}
    assert {"EVENT_HORIZON_INVALID", "EVENT_HORIZON_UNCHANGEABLE", "OLD_MEMBER_CUSTOM_EH"} <= reasons
    assert any(e["type"] == "heartbeat" and e["protocol"] < 5 for e in events)
    assert not any(check(events).values())


@pytest.mark.parametrize("fault", sorted(CATALOGUE))
def test_each_fault_produces_exactly_its_alert(fault: str) -> None:
    events = run(150_000, (f"{fault}:g2@20s",), groups=3, nodes=3, seed=1)
    found = check(events)
    assert found.get("g2") == {CATALOGUE[fault].alert}
    assert not found.get("g1") and not found.get("g3")


@pytest.mark.parametrize("nodes", [3, 5])
def test_faults_hold_for_other_seeds_and_sizes(nodes: int) -> None:
    for i, fault in enumerate(sorted(CATALOGUE)):
        events = run(150_000, (f"{fault}:g1@15s",), groups=1, nodes=nodes, seed=100 + i)
        assert check(events).get("g1") == {CATALOGUE[fault].alert}, fault


def test_manifest_names_the_fault_alert_and_evidence() -> None:
    sim = Simulator(SimOptions(duration_ms=40_000), [parse_injection("beyond_horizon:g2@10s")])
    sim.run()
    (record,) = sim.manifest()
    assert record["alert"] == "BEYOND_HORIZON" and record["group"] == "g2"
    assert record["last"] > record["window_base"] + 10


def test_injection_and_duration_parsing() -> None:
    assert parse_duration_ms("500ms") == 500 and parse_duration_ms("2m") == 120_000
    assert parse_duration_ms("1.5") == 1_500
    inj = parse_injection("node_silent:g3@45s")
    assert (inj.fault, inj.group, inj.at_ms) == ("node_silent", "g3", 45_000)
    assert parse_injection("events_lost").group == "g1"
    with pytest.raises(ValueError, match="unknown fault"):
        parse_injection("nosuch")
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration_ms("3x")
    with pytest.raises(ValueError, match="no group"):
        Simulator(SimOptions(groups=2), [parse_injection("events_lost:g3")])
