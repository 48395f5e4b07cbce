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
    assert set(FAMILIES) == {XCOM, "gen"}
    assert FAMILIES[XCOM] is XComRules
    for name, rules in FAMILIES.items():
        assert rules.name == name  # type: ignore[attr-defined]
        assert {family_of(t) for t in rules.types} == {name}  # type: ignore[attr-defined]


def test_an_unknown_family_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown protocol family 'nope' \\(known: xcom, gen\\)"):
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
