"""The chain rules over the chain simulator (docs/families.md 4.7, docs/rules.md, "The chain
family"): each fault of the catalogue raises exactly its alert in an otherwise clean run (and the
kinds its own requires: a view left stale has had its lease expired first), at 3 and 5 replicas,
and each legal near miss nothing, as the reference checker of the tests says; clean runs raise
nothing; every simulated event passes the contract; the state through JSON at a cut changes
nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from replimon.contract import decode_event
from replimon.core import Monitor
from replimon.producers import simulator_chain
from replimon.producers.simulator_chain import CATALOGUE, IMPLIED
from tests.producers.chain_check import check
from tests.support.families import kinds_by_group, simulated
from tests.support.family_trace import assert_state_through_json_changes_nothing


def sim_lines(fault: str | None, nodes: int = 5, seed: int = 2, groups: int = 2,
              duration_ms: int = 90_000) -> tuple[str, ...]:
    return simulated(simulator_chain, fault, first="ch1", seed=seed, groups=groups, nodes=nodes,
                     duration_ms=duration_ms)


def sim_events(*key: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in sim_lines(*key)]


def expected(fault: str) -> dict[str, set[str]]:
    alert = CATALOGUE[fault].alert
    return {"ch1": {alert, *IMPLIED.get(alert, ())}} if alert else {}


@pytest.mark.parametrize("nodes", [3, 5])
@pytest.mark.parametrize("fault", sorted(CATALOGUE))
def test_each_fault_raises_exactly_its_alert_and_each_near_miss_nothing(fault: str, nodes: int) -> None:
    events = sim_events(fault, nodes)
    assert kinds_by_group(Monitor().run(events)) == expected(fault)
    # the reference checker of the tests, written apart from the rules, agrees
    assert {g: k for g, k in check(events).items() if k} == expected(fault)


@pytest.mark.parametrize("fault", sorted(CATALOGUE))
def test_each_fault_late_in_a_run_whose_chain_has_changed(fault: str) -> None:
    """At 120 s, after crashes every 20 s have replaced replicas and changed the chain (a fault
    at 10 s meets the first chain only: the 20-minute demo soak, bench/demo_soak.py, found
    chain_epoch_regression stating an old epoch with a newer chain, a CHAIN_VIEW_CONFLICT too)."""
    events: list[dict[str, Any]] = []
    simulator_chain.Simulator(simulator_chain.SimOptions(duration_ms=220_000, groups=1, nodes=3, seed=1,
                                                         crash_every_s=20),
                              [simulator_chain.parse_injection(f"{fault}:ch1@120s")], events.append).run()
    assert kinds_by_group(Monitor().run(events)) == expected(fault)
    assert {g: k for g, k in check(events).items() if k} == expected(fault)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_clean_runs_raise_nothing(seed: int) -> None:
    assert kinds_by_group(Monitor().run(sim_events(None, 5, seed))) == {}


@pytest.mark.parametrize("fault", [None, "chain_wedged_write", "chain_view_stale"])
def test_every_simulated_event_passes_the_contract(fault: str | None) -> None:
    for line in sim_lines(fault):
        decode_event(line.encode())  # raises on any event the contract refuses


@pytest.mark.parametrize("fault", ["chain_wedge_not_replaced", "chain_view_stale", "chain_stale_epoch_write"])
def test_state_through_json_at_a_cut_changes_nothing(fault: str) -> None:
    events = [e for e in sim_events(fault) if e["group"] == "ch1"]
    assert_state_through_json_changes_nothing(events, "ch1", timer_after_ms=60_000,
                                              cuts=(len(events) // 3, 2 * len(events) // 3))
