"""The monitor core against the simulator: silent on clean fleets, exactly the right alert per fault.

The simulator (producers/simulator) makes legal XCom histories with restarts, concurrent and
refused reconfigurations and old nodes; its fault catalogue injects one illegal step each. These
tests are the false-positive guard of docs/rules.md ("No false alarm" of every kind) and the proof that each rule catches its
fault, also when arrival order is disturbed within the skew and when the state is saved and
restored (as Spark's state store does) at arbitrary points.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import pytest

from replimon.core import GroupMonitor, Monitor
from replimon.core.alerts import INFO, Alert
from replimon.producers.simulator import CATALOGUE, SimOptions, Simulator, parse_injection

INFO_KINDS = {"CONFIG_INSTALLED", "RECONFIG_REFUSED"}


def simulate(seconds: int, faults: tuple[str, ...] = (), **opts: Any) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    Simulator(SimOptions(duration_ms=seconds * 1000, **opts), [parse_injection(f) for f in faults], events.append).run()
    return events


def problems(alerts: list[Alert]) -> Counter[tuple[str, str]]:
    return Counter((a.group, a.kind) for a in alerts if a.category != INFO)


def jitter(events: list[dict[str, Any]], seed: int, max_ms: int, keep_node_order: bool) -> list[dict[str, Any]]:
    """Arrival order disturbed by up to ``max_ms`` per event (optionally keeping each node's order,
    as one Kafka partition per type still does)."""
    rng = random.Random(seed)
    keyed, last = [], {}
    for i, e in enumerate(events):
        at = e["ts_ms"] + rng.uniform(0, max_ms)
        if keep_node_order:
            key = (e["group"], e["node"])
            at = max(at, last.get(key, at))
            last[key] = at
        keyed.append((at, i, e))
    keyed.sort(key=lambda k: (k[0], k[1]))
    return [e for _, _, e in keyed]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clean_fleets_raise_no_violation_wedge_or_data_alert(seed: int) -> None:
    events = simulate(300, groups=4, nodes=3 + seed, seed=seed, old_node_fraction=0.4, restart_every_s=40)
    alerts = Monitor().run(events)
    assert not problems(alerts), problems(alerts)
    kinds = Counter(a.kind for a in alerts)
    assert kinds["CONFIG_INSTALLED"] > 4 and kinds["RECONFIG_REFUSED"] > 0


def test_clean_fleet_with_many_concurrent_reconfigurations_and_refusals() -> None:
    events = simulate(600, groups=6, nodes=3, seed=5, old_node_fraction=0.5, reconfig_every_s=8)
    alerts = Monitor().run(events)
    assert not problems(alerts)
    refused = {e["reason"] for e in events if e["type"] == "config" and e["outcome"] == "refused"}
    assert {"EVENT_HORIZON_INVALID", "EVENT_HORIZON_UNCHANGEABLE", "OLD_MEMBER_CUSTOM_EH"} <= refused
    assert sum(a.kind == "RECONFIG_REFUSED" for a in alerts) > 20


def test_clean_fast_groups_and_frequent_restarts() -> None:
    events = simulate(300, groups=3, nodes=5, seed=9, restart_every_s=10, reconfig_every_s=5, decisions_per_s=2000)
    assert not problems(Monitor().run(events))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10, 16))
def test_long_clean_runs(seed: int) -> None:
    events = simulate(1800, groups=5, nodes=3 + seed % 3, seed=seed, old_node_fraction=0.3, restart_every_s=30,
                      reconfig_every_s=10)
    assert not problems(Monitor().run(events))


@pytest.mark.parametrize("fault", sorted(CATALOGUE))
def test_each_fault_raises_exactly_its_alert(fault: str) -> None:
    events = simulate(150, (f"{fault}:g2@20s",), groups=3, nodes=3, seed=1)
    alerts = Monitor().run(events)
    assert set(problems(alerts)) == {("g2", CATALOGUE[fault].alert)}
    firing = [a for a in alerts if a.kind == CATALOGUE[fault].alert and a.status == "firing"]
    assert firing and all(a.evidence or a.kind in ("GROUP_SILENT", "HORIZON_WEDGE", "NO_PROGRESS", "PENDING_CONFIG_STUCK") for a in firing)


@pytest.mark.parametrize("nodes", [3, 5])
def test_faults_hold_for_other_seeds_and_sizes(nodes: int) -> None:
    wrong = {}
    for i, fault in enumerate(sorted(CATALOGUE)):
        alerts = Monitor().run(simulate(150, (f"{fault}:g1@15s",), groups=1, nodes=nodes, seed=100 + i))
        if set(problems(alerts)) != {("g1", CATALOGUE[fault].alert)}:
            wrong[fault] = problems(alerts)
    assert not wrong


@pytest.mark.parametrize("keep_node_order", [True, False])
def test_disorder_within_the_skew_changes_no_verdict(keep_node_order: bool) -> None:
    clean = simulate(240, groups=3, nodes=4, seed=21, restart_every_s=30, reconfig_every_s=6)
    assert not problems(Monitor().run(jitter(clean, 1, 1900, keep_node_order)))
    for i, fault in enumerate(sorted(CATALOGUE)):
        events = simulate(150, (f"{fault}:g1@20s",), groups=2, nodes=3, seed=4)
        alerts = Monitor().run(jitter(events, i, 1900, keep_node_order))
        assert set(problems(alerts)) == {("g1", CATALOGUE[fault].alert)}, fault


def test_state_saved_and_restored_anywhere_gives_the_same_alerts() -> None:
    faults = ("can_leave_unsafe:g1@20s", "horizon_wedge:g2@30s", "config_mismatch:g1@70s", "events_lost:g2@90s",
              "quorum_at_risk:g1@110s", "node_silent:g2@120s")
    events = simulate(160, faults, groups=2, nodes=3, seed=8)
    expected = [a.to_dict() for a in Monitor().run(events)]
    monitor, got = Monitor(), []
    rng = random.Random(0)
    for i, ev in enumerate(events):
        got += monitor.process(ev)
        if rng.random() < 0.002 or i == 5:
            for name, g in list(monitor.groups.items()):
                monitor.groups[name] = GroupMonitor.from_state(json.loads(json.dumps(g.to_state())), monitor.limits)
    got += monitor.finish()
    assert [a.to_dict() for a in got] == expected
    assert {a["kind"] for a in expected} >= {"CAN_LEAVE_UNSAFE", "HORIZON_WEDGE", "CONFIG_MISMATCH", "EVENTS_LOST",
                                            "QUORUM_AT_RISK", "NODE_SILENT"}


def test_same_history_same_alert_ids_and_duplicates_change_nothing() -> None:
    events = simulate(120, ("divergent_decision:g1@20s", "executor_lag:g2@30s"), groups=2, seed=3)
    first = [a.to_dict() for a in Monitor().run(events)]
    assert first == [a.to_dict() for a in Monitor().run(events)]
    doubled = [e for ev in events for e in (ev, dict(ev))]
    monitor = Monitor()
    assert [a.to_dict() for a in monitor.run(doubled)] == first
    assert sum(g.counts["duplicates"] for g in monitor.groups.values()) == len(events)


def test_group_silent_fires_from_the_timer_with_no_input() -> None:
    events = simulate(30, groups=1, seed=2)
    g = GroupMonitor("g1")
    for ev in events:
        g.on_event(ev)
    last = max(e["ts_ms"] for e in events)
    due = g.next_timer()
    assert due is not None and due == last + 15_000 + 2_000
    assert g.on_timer(due - 1) == []
    (alert,) = g.on_timer(due)
    assert (alert.kind, alert.status, alert.event_ts_ms, alert.detected_ts_ms) == ("GROUP_SILENT", "firing", last, due)
    assert g.next_timer() is None and g.on_timer(due + 60_000) == []
    resolved = g.on_event({**events[-1], "seq": events[-1]["seq"] + 1, "ts_ms": due + 1000})
    assert [(a.kind, a.status, a.alert_id) for a in resolved if a.kind == "GROUP_SILENT"] == [
        ("GROUP_SILENT", "resolved", alert.alert_id)]


def test_state_stays_bounded_on_a_long_run() -> None:
    events = simulate(900, groups=1, nodes=3, seed=6, decisions_per_s=500, reconfig_every_s=5)
    g, sizes = GroupMonitor("g1"), []
    for i, ev in enumerate(events):
        g.on_event(ev)
        if i % 20_000 == 0 and i:
            sizes.append(len(json.dumps(g.to_state())))
    assert g.family.decided > 200_000
    assert max(sizes) < 60_000, sizes
    assert len(g.family.cmap.configs) <= 8 and len(g.family.decisions.singles) < 2_000 and len(g.family.config.records) < 50


def test_node_silent_fires_from_the_timer_when_everything_then_stops() -> None:
    # A member goes quiet; the rest of the group publishes 3 s more; then nothing arrives at all.
    events: list[dict[str, Any]] = []
    sim = Simulator(SimOptions(duration_ms=40_000, groups=1, nodes=3, seed=2),
                    [parse_injection("node_silent:g1@20s")], events.append)
    sim.run()
    node = sim.manifest()[0]["node"]
    cut = sim.manifest()[0]["ts_ms"] + 3_000
    g = GroupMonitor("g1")
    for ev in events:
        if ev["ts_ms"] < cut:
            assert not [a for a in g.on_event(ev) if a.kind == "NODE_SILENT"]
    silent = max(e["ts_ms"] for e in events if e["node"] == node and e["ts_ms"] < cut)
    due = g.next_timer()
    assert due == silent + 5_000 + 2_000  # before GROUP_SILENT's deadline
    assert g.on_timer(due - 1) == []
    (alert,) = g.on_timer(due)
    assert (alert.kind, alert.node, alert.event_ts_ms) == ("NODE_SILENT", node, silent)
    later = g.on_timer(g.next_timer() or 0)
    assert [a.kind for a in later] == ["GROUP_SILENT"]
