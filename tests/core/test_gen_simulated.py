"""The generations rules over the generations simulator (docs/families.md 2.7, docs/rules.md,
"Generations"): each fault of the catalogue raises exactly its alert in an otherwise clean run and
each legal near miss nothing, as the reference checker of the tests says; clean runs raise nothing
whatever the arrival order within the skew; the state through JSON at any cut changes nothing."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replimon.core import GroupMonitor, Monitor
from replimon.core.alerts import KINDS
from replimon.core.limits import Limits
from replimon.producers import simulator_gen
from replimon.producers.simulator_gen import CATALOGUE
from tests.core.test_properties import _settings, drive, shuffle_within
from tests.producers.gen_check import check
from tests.support.families import NOT_INFO, kinds_by_group, simulated

SKEW_MS = Limits().skew_ms


def sim_lines(fault: str | None, seed: int = 5, groups: int = 2, nodes: int = 3,
              duration_ms: int = 150_000) -> tuple[str, ...]:
    return simulated(simulator_gen, fault, first="pg1", seed=seed, groups=groups, nodes=nodes,
                     duration_ms=duration_ms)


def sim_events(*key: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in sim_lines(*key)]


@pytest.mark.parametrize("fault", sorted(CATALOGUE))
def test_each_fault_raises_exactly_its_alert_and_each_near_miss_nothing(fault: str) -> None:
    events = sim_events(fault)
    alert = CATALOGUE[fault].alert
    want = {"pg1": {alert}} if alert else {}
    assert kinds_by_group(Monitor().run(events)) == want
    # the reference checker of the tests agrees (it is pinned by the worked examples)
    assert check(events) == {"pg1": {alert} if alert else set(), "pg2": set()}


def test_every_generations_alert_has_a_fault_and_a_near_miss() -> None:
    """With the test above, each kind the family raises (info aside) has a history that fires it
    and a legal one that must not."""
    kinds = {k for k in NOT_INFO if k.startswith("GEN_")}
    assert {spec.alert for spec in CATALOGUE.values()} - {None} == kinds
    for name, spec in CATALOGUE.items():
        if spec.alert is not None:
            assert CATALOGUE[f"{name}_near_miss"].alert is None


@pytest.mark.parametrize("fault", ["gen_no_online", "gen_recovery_stuck", "gen_vote_stuck"])
def test_each_wedge_resolves_under_the_same_id_when_the_fault_ends(fault: str) -> None:
    alert = CATALOGUE[fault].alert
    mine = [a for a in Monitor().run(sim_events(fault)) if a.kind == alert]
    assert [a.status for a in mine] == ["firing", "resolved"]
    assert mine[0].alert_id == mine[1].alert_id and mine[1].message.startswith("Resolved:")
    assert (mine[1].severity, mine[1].category) == KINDS[alert]


@pytest.mark.parametrize("fault", ["gen_no_online", "gen_recovery_stuck", "gen_vote_stuck"])
def test_each_wedge_fires_with_no_input_at_all(fault: str) -> None:
    """The events up to the fault's start plus a little, then nothing: the group's timer alone
    opens the wedge (GROUP_SILENT comes too: no node publishes any more)."""
    events = sim_events(fault)
    alert = CATALOGUE[fault].alert
    gm = GroupMonitor("pg1", Limits(), "gen")
    out = []
    mine = [e for e in events if e["group"] == "pg1"]
    # cut where the wedge's condition holds but well before its threshold is reached
    whole = [a for a in Monitor().run(events) if a.kind == alert]
    start = whole[0].event_ts_ms
    cut = [e for e in mine if e["ts_ms"] <= start + 1_000]
    for ev in cut:
        out.extend(gm.on_event(ev))
    assert alert not in {a.kind for a in out}
    when = gm.next_timer()
    assert when is not None
    for _ in range(20):  # the timers as a stream processor fires them
        if when is None:
            break
        out.extend(gm.on_timer(when))
        if alert in {a.kind for a in out}:
            break
        when = gm.next_timer()
    assert alert in {a.kind for a in out}


@_settings(10)
@given(st.integers(0, 3), st.sampled_from([2, 3, 4, 5]), st.integers(0, 2**32 - 1), st.booleans())
def test_arrival_shuffled_within_the_skew_changes_nothing(seed: int, nodes: int, shuffle_seed: int,
                                                          keep_node_order: bool) -> None:
    events = sim_events(None, seed, 2, nodes, 90_000)
    base = Monitor().run(events)
    assert not kinds_by_group(base)
    shuffled = shuffle_within(events, random.Random(shuffle_seed), SKEW_MS - 100,
                              keep_node_order=keep_node_order)
    alerts = Monitor().run(shuffled)
    assert not kinds_by_group(alerts)
    assert sorted(a.alert_id for a in alerts) == sorted(a.alert_id for a in base)


@_settings(12)
@given(st.sampled_from([None, *sorted(CATALOGUE)]), st.integers(0, 2**32 - 1),
       st.lists(st.floats(0, 1), min_size=1, max_size=6), st.booleans())
def test_state_round_trip_at_cut_points_changes_no_alert(fault: str | None, shuffle_seed: int,
                                                         cut_at: list[float], shuffle: bool) -> None:
    limits = Limits()
    events = [e for e in sim_events(fault) if e["group"] == "pg1"]
    if shuffle:
        events = shuffle_within(events, random.Random(shuffle_seed), SKEW_MS - 100, keep_node_order=False)
    cuts = {int(f * len(events)) for f in cut_at}
    whole, _ = drive(GroupMonitor("pg1", limits, "gen"), events, set(), limits)
    cut, _ = drive(GroupMonitor("pg1", limits, "gen"), events, cuts, limits)
    assert json.dumps(cut, sort_keys=True) == json.dumps(whole, sort_keys=True)


def test_the_snapshot_has_every_familys_node_fields_and_the_generation() -> None:
    """The tables take member, incarnation, status, last event, suspects and silent from every
    family's snapshot (docs/postgres.md); a generations group adds its generation."""
    mon = Monitor()
    mon.run(sim_events(None))
    snap = mon.groups["pg1"].snapshot()
    assert snap["family"] == "gen" and snap["config"]["configured"] == ["n1", "n2", "n3"]
    assert snap["decided"] == -1 and "active" not in snap
    for n in snap["nodes"].values():
        assert {"member", "incarnation", "status", "last_ts_ms", "suspects", "silent", "gen",
                "node_status", "last_online_in", "last_vote"} <= set(n)
        assert n["member"] and n["last_ts_ms"] > 0 and n["status"] in ("ONLINE", "RECOVERY", "DEAD")
