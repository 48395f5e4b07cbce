"""Every wedge heals when the group does (docs/rules.md, "Alert records": wedges resolve when the
condition clears and say so): for every wedge kind of every family, a simulated history where it
fires and the group then heals in the protocol's own way, and the alert is resolved under its id
with the resolving evidence (the events that show it cleared, never the firing's again). Plus the
quorum-log recovery abandoned because the old members came back (docs/rules.md,
QLOG_RECOVER_STUCK), and its near miss."""

from __future__ import annotations

import json
from typing import Any

import pytest

from replimon.core import GroupMonitor, Monitor
from replimon.core.alerts import WEDGES, Alert
from replimon.producers import simulator_chain, simulator_gen, simulator_qlog
from replimon.producers.simulator import SimOptions, Simulator, parse_injection
from tests.core.test_qlog_rules import Trace, reconf
from tests.support.families import simulated
from tests.support.family_trace import T0

# (family, fault, the group it is injected in): every wedge kind of every family
CASES = [
    ("xcom", "horizon_wedge"), ("xcom", "no_progress"), ("xcom", "pending_config_stuck"),
    ("xcom", "node_silent"), ("xcom", "group_silent"), ("xcom", "quorum_at_risk"),
    ("xcom", "quorum_lost"), ("xcom", "executor_lag"),
    ("gen", "gen_no_online"), ("gen", "gen_recovery_stuck"), ("gen", "gen_vote_stuck"),
    ("qlog", "qlog_no_leader"), ("qlog", "qlog_recover_stuck"),
    ("chain", "chain_wedge_not_replaced"), ("chain", "chain_lease_expired"), ("chain", "chain_view_stale"),
]
SIMS = {"gen": (simulator_gen, "pg1"), "qlog": (simulator_qlog, "ql1"), "chain": (simulator_chain, "ch1")}


def run(family: str, fault: str) -> tuple[str, list[Alert]]:
    if family == "xcom":
        events: list[dict[str, Any]] = []
        Simulator(SimOptions(duration_ms=200_000, groups=2, nodes=3, seed=1),
                  [parse_injection(f"{fault}:g2@20s")], events.append).run()
        return "g2", Monitor().run(events)
    sim, group = SIMS[family]
    lines = simulated(sim, fault, first=group, seed=2, groups=1, nodes=3, duration_ms=200_000)
    return group, Monitor().run([json.loads(line) for line in lines])


def _ts(evidence: list[dict[str, Any]]) -> int:
    return max(e["ts_ms"] for e in evidence)


@pytest.mark.parametrize(("family", "fault"), CASES, ids=[f for _, f in CASES])
def test_each_wedge_fires_then_resolves_with_what_healed_it(family: str, fault: str) -> None:
    group, alerts = run(family, fault)
    mine = [a for a in alerts if a.group == group and a.kind in WEDGES]
    want = fault.upper()
    assert want in {a.kind for a in mine if a.status == "firing"}
    fired = {a.alert_id: a for a in mine if a.status == "firing"}
    resolved = {a.alert_id: a for a in mine if a.status == "resolved"}
    # the group healed: every wedge it raised (its own and those its situation implies) cleared
    assert set(resolved) == set(fired), [fired[i].kind for i in set(fired) - set(resolved)]
    for aid, r in resolved.items():
        f = fired[aid]
        assert (r.kind, r.group, r.node, r.instance) == (f.kind, f.group, f.node, f.instance)
        assert r.message.startswith("Resolved: ")
        assert r.evidence and r.evidence != f.evidence, (r.kind, r.message)
        assert _ts(r.evidence) >= f.event_ts_ms, (r.kind, r.message)


# -------------------------------------------- QLOG_RECOVER_STUCK: the old members come back
ABC, NEW = ["A", "B", "C"], ["A", "B", "X"]


def abandoned(acked: list[str]) -> list[Alert]:
    """A recovers from {A, B, C} to {A, B, X}: B and C are down, the episode stays open 60 s and
    fires; then B and C come back and A, leading again, passes a lease renewal (a same-set
    Reconf) acked by ``acked``."""
    t = Trace()
    t.hb("A", 0, 5, ABC, 50)
    t.recover("A", 1_000, "started", 5, ABC, NEW)
    for ts in range(2_000, 80_000, 1_000):
        t.hb("A", ts, 5, ABC, 50)
        if ts % 10_000 == 2_000:
            t.recover("A", ts, "failed", 5, ABC, NEW)
    t.passed("A", 80_000, 50, 5, ABC, acked, reconf(6, ABC))
    t.decree("A", 80_100, 50, 5, reconf(6, ABC))
    g = GroupMonitor("ql1")
    out: list[Alert] = []
    for ev in t.events:
        out += g.on_event(ev)
        out += g.on_timer(ev["ts_ms"] + 1)
    return [a for a in out if a.kind == "QLOG_RECOVER_STUCK"]


def test_a_recovery_abandoned_because_the_old_members_came_back_resolves() -> None:
    stuck = abandoned(["A", "B", "C"])
    assert [a.status for a in stuck] == ["firing", "resolved"] and stuck[0].alert_id == stuck[1].alert_id
    (evidence,) = stuck[1].evidence
    assert (evidence["type"], evidence["ts_ms"]) == ("qlog.passed", T0 + 80_000)
    assert "abandoned" in stuck[1].message and stuck[1].event_ts_ms == T0 + 80_000


def test_near_miss_a_reconf_without_the_old_majority_does_not_end_the_recovery() -> None:
    # acked by A alone of the old three (and the new host X): no quorum of the old membership
    assert [a.status for a in abandoned(["A", "X"])] == ["firing"]
