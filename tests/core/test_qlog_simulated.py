"""The quorum-log rules over the quorum-log simulator (docs/families.md 3.7, docs/rules.md, "The
quorum-log family"): each fault of the catalogue raises exactly its alert in an otherwise clean
run, at 3 and 5 replicas, and each legal near miss nothing, as the reference checker of the tests
says; clean runs raise nothing; the state through JSON at a cut changes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from replimon.core import Monitor
from replimon.producers import simulator_qlog
from replimon.producers.simulator_qlog import CATALOGUE, IMPLIED
from tests.producers.qlog_check import check
from tests.support.families import kinds_by_group, simulated
from tests.support.family_trace import assert_state_through_json_changes_nothing


def sim_lines(fault: str | None, nodes: int = 5, seed: int = 2, groups: int = 2,
              duration_ms: int = 90_000) -> tuple[str, ...]:
    return simulated(simulator_qlog, fault, first="ql1", seed=seed, groups=groups, nodes=nodes,
                     duration_ms=duration_ms)


def sim_events(*key: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in sim_lines(*key)]


@pytest.mark.parametrize("nodes", [3, 5])
@pytest.mark.parametrize("fault", sorted(CATALOGUE))
def test_each_fault_raises_exactly_its_alert_and_each_near_miss_nothing(fault: str, nodes: int) -> None:
    events = sim_events(fault, nodes)
    alert = CATALOGUE[fault].alert
    assert kinds_by_group(Monitor().run(events)) == ({"ql1": {alert, *IMPLIED.get(alert, ())}} if alert else {})
    # the reference checker of the tests, written apart from the rules, agrees
    family = {k for k in IMPLIED.get(alert or "", ()) if k.startswith("QLOG_")}
    assert {g: k for g, k in check(events).items() if k} == ({"ql1": {alert, *family}} if alert else {})


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_clean_runs_raise_nothing(seed: int) -> None:
    assert kinds_by_group(Monitor().run(sim_events(None, 5, seed))) == {}


@pytest.mark.parametrize("fault", ["qlog_recover_stuck", "qlog_no_leader", "qlog_divergent_decree"])
def test_state_through_json_at_a_cut_changes_nothing(fault: str) -> None:
    events = [e for e in sim_events(fault) if e["group"] == "ql1"]
    assert_state_through_json_changes_nothing(events, "ql1", timer_after_ms=60_000,
                                              cuts=(len(events) // 3, 2 * len(events) // 3))
