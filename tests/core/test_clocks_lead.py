"""A node's clock within the bound but off its group-mates by more than ``skew_s`` (ahead or
behind) cannot make a member that keeps publishing look silent: a member's silence is measured
from when it was last heard on the group's clock (``replimon/core/rules/liveness.py``,
docs/operations.md "Clocks"). A member that really stops is still NODE_SILENT, also while another
member leads the group's clock, and the state keeps what the rule needs through a save."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from replimon.core import GroupMonitor, Monitor
from replimon.core.alerts import KINDS
from replimon.producers.simulator import SimOptions, Simulator, parse_injection


def trace(*faults: str, seed: int = 1) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    Simulator(SimOptions(duration_ms=90_000, groups=3, nodes=3, seed=seed),
              [parse_injection(f) for f in faults], events.append).run()
    return events


def shifted(events: list[dict[str, Any]], who: tuple[str, str], by: int) -> list[dict[str, Any]]:
    return [dict(e, ts_ms=e["ts_ms"] + by) if (e["group"], e["node"]) == who else e for e in events]


def kinds(alerts: list[Any]) -> Counter[tuple[str, str]]:
    return Counter((a.group, a.kind) for a in alerts if KINDS[a.kind][1] != "info")


@pytest.mark.parametrize("by", [8_000, 60_000, 299_000, -8_000, -60_000],
                         ids=["8s-ahead", "60s-ahead", "299s-ahead", "8s-behind", "60s-behind"])
def test_one_clock_off_its_group_mates_makes_nobody_silent(by: int) -> None:
    """One node of g2 stamps ``by`` off the others (within the clock-skew bound: no CLOCK_SKEW)
    from start to end: the alerts are exactly those of the clean trace, in every group (before,
    its group-mates, or the node itself when behind, were NODE_SILENT)."""
    clean = kinds(Monitor().run(trace()))
    got = kinds(Monitor().run(shifted(trace(), ("g2", "n1"), by)))
    assert got == clean


def test_near_miss_within_the_skew_is_as_before() -> None:
    """An offset within ``skew_s`` (2 s) keeps nothing and gives the very alerts (ids too) of
    the clean trace."""
    ids = {a.alert_id for a in Monitor().run(trace())}
    got = Monitor()
    assert {a.alert_id for a in got.run(shifted(trace(), ("g2", "n1"), 1_500))} == ids
    assert all(not g.live.behind for g in got.groups.values())


@pytest.mark.parametrize("by", [0, 60_000], ids=["no-lead", "60s-lead"])
def test_a_member_that_really_stops_is_still_silent_while_another_leads(by: int) -> None:
    """g1's member silenced by the fault stops for 12 s while the others go on, one of them (not
    the silent one) stamping 60 s ahead: NODE_SILENT fires for that member as without the lead,
    and nothing else changes."""
    events = trace("node_silent:g1@30s")
    clean = Monitor().run(events)
    (silent,) = [a for a in clean if a.kind == "NODE_SILENT" and a.status == "firing"]
    leader = next(n for n in ("n1", "n2", "n3") if n != silent.node)
    got = Monitor().run(shifted(events, ("g1", leader), by))
    fired = [a for a in got if a.kind == "NODE_SILENT" and a.status == "firing"]
    assert [a.node for a in fired] == [silent.node]
    assert kinds(got) == kinds(clean)


def test_what_the_rule_keeps_goes_through_a_save() -> None:
    """The group's state saved and restored after every event judges as the live monitor: the
    remembered clocks are in the saved state (only when there are any)."""
    events = [e for e in shifted(trace(), ("g2", "n1"), 60_000) if e["group"] == "g2"]
    straight = GroupMonitor("g2")
    saved = GroupMonitor("g2")
    a, b = [], []
    for ev in sorted(events, key=lambda e: e["ts_ms"] - (60_000 if e["node"] == "n1" else 0)):
        a += straight.on_event(ev)
        b += saved.on_event(ev)
        saved = GroupMonitor.from_state(json.loads(json.dumps(saved.to_state())))
    assert [x.alert_id for x in a] == [x.alert_id for x in b]
    assert "NODE_SILENT" not in {x.kind for x in a}
    assert "behind" in saved.to_state()
    clean = GroupMonitor("g2")
    for ev in [e for e in trace() if e["group"] == "g2"]:
        clean.on_event(ev)
    assert "behind" not in clean.to_state()
