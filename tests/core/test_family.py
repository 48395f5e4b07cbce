"""The interface between the group monitor and a protocol family's rules (rules/family.py)."""

from __future__ import annotations

import pytest

from replimon.core import GroupMonitor, Monitor
from replimon.core.group import FAMILIES
from replimon.core.rules.family import XCOM, family_of
from replimon.core.rules.xcom.family import XComRules
from tests.support import simulate


@pytest.mark.parametrize(("event_type", "family"), [
    ("decision", "xcom"), ("execution", "xcom"), ("heartbeat", "xcom"), ("config", "xcom"),
    ("gen.state", "gen"), ("qlog.passed", "qlog"), ("chain.view", "chain"),
])
def test_an_event_type_names_its_family(event_type: str, family: str) -> None:
    assert family_of(event_type) == family


def test_each_known_family_owns_its_types() -> None:
    assert set(FAMILIES) == {XCOM, "gen", "qlog", "chain"}
    assert FAMILIES[XCOM] is XComRules
    for name, rules in FAMILIES.items():
        assert rules.name == name  # type: ignore[attr-defined]
        assert {family_of(t) for t in rules.types} == {name}  # type: ignore[attr-defined]


def test_an_unknown_family_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown protocol family 'nope' \\(known: xcom, gen, qlog, chain\\)"):
        GroupMonitor("g1", family="nope")
    state = GroupMonitor("g1").to_state()
    with pytest.raises(ValueError, match="unknown protocol family 'nope'"):
        GroupMonitor.from_state({**state, "family": "nope"})


def test_an_xcom_group_stores_no_family_and_restores_as_xcom() -> None:
    # The stored shape of an XCom group is the one earlier versions wrote: no "family" key.
    mon = Monitor()
    mon.run(simulate(20, groups=1, seed=3))
    (g,) = mon.groups.values()
    state = g.to_state()
    assert "family" not in state
    back = GroupMonitor.from_state(state)
    assert back.family.name == XCOM and back.to_state() == state


# ------------------------------------------------------------------ FAMILY_CONFLICT and pinning
def _gen_events(group: str = "pg1", seconds: int = 20) -> list[dict]:  # type: ignore[type-arg]
    from replimon.producers.simulator_gen import SimOptions, Simulator

    out: list[dict] = []  # type: ignore[type-arg]
    Simulator(SimOptions(groups=1, nodes=3, seed=3, duration_ms=seconds * 1000), [], out.append).run()
    return [{**e, "group": group} for e in out]


def test_a_group_takes_the_family_of_its_first_event() -> None:
    gm = GroupMonitor("pg1")
    for ev in _gen_events():
        gm.on_event(ev)
    assert gm.family.name == "gen" and gm.to_state()["family"] == "gen"
    assert GroupMonitor.from_state(gm.to_state()).family.name == "gen"


def test_an_event_of_another_family_is_one_family_conflict_and_changes_nothing() -> None:
    xcom = simulate(20, groups=1, seed=2)
    gen = _gen_events("g1")
    mon = Monitor()
    clean = [a.alert_id for a in Monitor().run(xcom)]
    # gen events arrive into the XCom group g1 once it has started: every one is a dead letter
    mixed = xcom[:50] + sorted(xcom[50:] + [{**e, "ts_ms": e["ts_ms"] - gen[0]["ts_ms"] + xcom[60]["ts_ms"]}
                                            for e in gen], key=lambda e: e["ts_ms"])
    reasons = set()
    alerts = []
    for ev in mixed:
        reason = mon.conflict(ev)
        if reason is not None:
            reasons.add(reason)
        alerts.extend(mon.process(ev))
    alerts.extend(mon.finish())
    conflicts = [a for a in alerts if a.kind == "FAMILY_CONFLICT"]
    assert len(conflicts) == 1 and conflicts[0].group == "g1" and conflicts[0].severity == "warning"
    assert "group g1 is xcom" in conflicts[0].message
    assert reasons == {"family conflict: group g1 is xcom"}
    assert [a.alert_id for a in alerts if a.kind != "FAMILY_CONFLICT"] == clean


def test_groups_of_two_families_side_by_side_raise_no_conflict() -> None:
    events = sorted(simulate(20, groups=2, seed=2) + _gen_events("pg1"), key=lambda e: e["ts_ms"])
    mon = Monitor()
    assert not [a for a in mon.run(events) if a.kind == "FAMILY_CONFLICT"]
    assert {g: m.family.name for g, m in mon.groups.items()} == {"g1": "xcom", "g2": "xcom", "pg1": "gen"}


def test_a_pinned_group_refuses_the_other_family_from_its_first_event() -> None:
    mon = Monitor(pins=(("pg*", "gen"),))
    xcom = [{**e, "group": "pg7"} for e in simulate(10, groups=1, seed=2)]
    assert mon.conflict(xcom[0]) == "family conflict: group pg7 is gen"
    alerts = mon.run(xcom)
    assert [a.kind for a in alerts] == ["FAMILY_CONFLICT"]
    assert mon.groups["pg7"].family.name == "gen"
    # a group no pin matches takes its first event's family
    assert Monitor(pins=(("pg*", "gen"),)).conflict(simulate(10, groups=1, seed=2)[0]) is None
