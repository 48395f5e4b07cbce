"""The quorum-log family's rules (docs/families.md 3.4, 3.5, 3.7, 3.8; docs/rules.md, "The
quorum-log family"): each alert kind fires on its history and stays silent on its legal near miss;
the worked examples E4 and E5; the wedges fire with no input at all; the state saved and restored
at any cut changes nothing. Events are written as the contract's dicts, and each is checked by
the contract's parser as it is written."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replimon.core import GroupMonitor, Monitor
from replimon.core.alerts import INFO, KINDS, Alert
from replimon.core.limits import Limits
from tests.core.test_properties import _settings
from tests.support.family_trace import (
    T0,
    EventTrace,
    assert_same_ids_whatever_the_arrival_order,
    assert_state_through_json_changes_nothing,
    in_time_order,
    info_only_whatever_the_arrival_order,
)

SKEW_MS = Limits().skew_ms
ABCDE = ["A", "B", "C", "D", "E"]


def digest(*parts: object) -> str:
    return hashlib.blake2b(repr(parts).encode(), digest_size=6).hexdigest()


def reconf(new_leg: int, members: list[str]) -> dict[str, Any]:
    return {"kind": "reconf", "digest": digest(new_leg, sorted(members)), "new_leg": new_leg,
            "members": list(members)}


def values(d: str = "aa") -> dict[str, Any]:
    return {"kind": "values", "digest": d}


class Trace(EventTrace):
    """Events of one group ``ql1``, each replica with its own seq (one seq space per node and
    incarnation, duty 1)."""

    def __init__(self) -> None:
        super().__init__("ql1")

    def hb(self, node: str, ts: int, leg: int, members: list[str], wm: int, *,
           leader: str | None = None, suspects: list[str] = ()) -> None:  # type: ignore[assignment]
        extra = {} if leader is None else {"leader": leader}
        self._emit(node, "qlog.heartbeat", ts, leg=leg, members=list(members), watermark=wm,
                   status="ok", suspects=list(suspects), **extra)

    def passed(self, node: str, ts: int, num: int, leg: int, acceptors: list[str], acked: list[str],
               value: dict[str, Any], *, recovery: bool = False, n: int = 1) -> None:
        self._emit(node, "qlog.passed", ts, num=num, leg=leg, ballot={"n": n, "proposer": node},
                   acceptors=list(acceptors), acked=list(acked), recovery=recovery, **value)

    def decree(self, node: str, ts: int, num: int, leg: int | None, value: dict[str, Any],
               outcome: str = "executed") -> None:
        extra = {} if leg is None else {"leg": leg}
        self._emit(node, "qlog.decree", ts, num=num, outcome=outcome, **extra, **value)

    def recover(self, node: str, ts: int, phase: str, leg: int, old: list[str], new: list[str], *,
                relocated: dict[str, str] | None = None, synced_with: list[str] | None = None) -> None:
        extra: dict[str, Any] = {}
        if relocated:
            extra["relocated"] = [{"node": n, "from": f} for n, f in relocated.items()]
        if synced_with is not None:
            extra["synced_with"] = list(synced_with)
        self._emit(node, "qlog.recover", ts, phase=phase, leg=leg, old=list(old), new=list(new),
                   **extra)

    def alerts(self) -> list[Alert]:
        return Monitor().run(self.events)

    def kinds(self) -> set[str]:
        return {a.kind for a in self.alerts() if a.severity != INFO}


def legislature(t: Trace, leg: int = 3, members: list[str] = ABCDE, wm: int = 36, ts: int = 0,
                leader: str = "A") -> None:
    """Every member reports legislature ``leg`` at watermark ``wm``, ``leader`` holding the lease."""
    for i, n in enumerate(members):
        t.hb(n, ts + i, leg, members, wm, leader=leader)


# ------------------------------------------------------------------------------- clean histories
def test_a_clean_history_raises_nothing_but_the_reconfiguration() -> None:
    t = Trace()
    legislature(t)
    t.passed("A", 100, 36, 3, ABCDE, ["A", "B", "C"], values("aa"))
    for n in ABCDE:
        t.decree(n, 110, 36, 3, values("aa"))
    # a lease handover to B: a same-set Reconf opening 4 with B at the head
    order = ["B", "A", "C", "D", "E"]
    t.passed("B", 200, 37, 3, ABCDE, ["B", "C", "D"], reconf(4, order))
    for n in ABCDE:
        t.decree(n, 210, 37, 3, reconf(4, order))
    for i, n in enumerate(ABCDE):
        t.hb(n, 1000 + i, 4, order, 38, leader="B")
    alerts = t.alerts()
    assert [(a.kind, a.instance) for a in alerts] == [("QLOG_RECONFIGURED", 4)]


def test_a_lease_renewal_is_not_a_reconfiguration_on_the_timeline() -> None:
    # halon renews A's lease by a Reconf to the same ordered list (proposeLeaseRequest): it opens
    # legislature 4 but changes nothing an operator needs marked; B taking over at 5 does.
    t = Trace()
    legislature(t)
    t.passed("A", 200, 36, 3, ABCDE, ["A", "B", "C"], reconf(4, ABCDE))
    for n in ABCDE:
        t.decree(n, 210, 36, 3, reconf(4, ABCDE))
    order = ["B", "A", "C", "D", "E"]
    t.passed("B", 300, 37, 4, ABCDE, ["B", "C", "D"], reconf(5, order))
    for n in ABCDE:
        t.decree(n, 310, 37, 4, reconf(5, order))
    alerts = t.alerts()
    assert [(a.kind, a.instance) for a in alerts] == [("QLOG_RECONFIGURED", 5)]
    assert "legislature 4 had A, B, C, D, E" in alerts[0].message


# ------------------------------------------------------------------------------- E4 (3.8)
def e4(near_miss: bool = False) -> Trace:
    """docs/families.md 3.8 E4: M(3) = [A..E]; D and E are delayed at watermark 36."""
    t = Trace()
    legislature(t, wm=36)
    t.passed("A", 1000, 36, 3, ABCDE, ["A", "B", "C"], values("aa"))
    for n in "ABC":
        t.decree(n, 1010, 36, 3, values("aa"))
    cde = ["C", "D", "E"]
    if not near_miss:
        t.passed("D", 2000, 36, 3, cde, ["D", "E"], reconf(4, cde))
        t.decree("D", 2010, 36, 3, reconf(4, cde))
        t.decree("E", 2010, 36, 3, reconf(4, cde))
        return t
    # D catches up first, then passes the Reconf at 41 with the old membership's majority
    for k in range(36, 41):
        if k > 36:
            t.passed("A", 1000 + 10 * k, k, 3, ABCDE, ["A", "B", "C"], values(f"{k:x}"))
        for n in "ABCDE":
            if k > 36 or n in "DE":
                t.decree(n, 1005 + 10 * k, k, 3, values("aa" if k == 36 else f"{k:x}"))
    t.passed("D", 2000, 41, 3, ABCDE, cde, reconf(4, cde))
    for n in ABCDE:
        t.decree(n, 2010, 41, 3, reconf(4, cde))
    return t


def test_e4_the_rfc_situation_2() -> None:
    alerts = [a for a in e4().alerts() if a.severity != INFO]
    got = [(a.kind, a.instance, a.node, a.event_ts_ms - T0) for a in alerts]
    assert sorted(got) == sorted([
        ("QLOG_RECONF_WITHOUT_OLD_QUORUM", 36, "D", 2000),
        ("QLOG_DIVERGENT_DECREE", 36, "D", 2000),  # ("passed", 3, 36): aa vs the Reconf
        ("QLOG_DIVERGENT_DECREE", 36, "D", 2010),  # ("decree", 36); E's raises nothing new
    ])


def test_e4_near_miss_d_catches_up_first() -> None:
    t = e4(near_miss=True)
    assert t.kinds() == set()
    assert [a.instance for a in t.alerts() if a.kind == "QLOG_RECONFIGURED"] == [4]


# ------------------------------------------------------------------------------- E5 (3.8)
def e5(new: list[str], relocated: dict[str, str] | None) -> Trace:
    """docs/families.md 3.8 E5: M(5) = [A,B,C,D]; A and B crashed; C serves the recovery."""
    t = Trace()
    abcd = ["A", "B", "C", "D"]
    t.hb("C", 1000, 5, abcd, 90)
    t.recover("C", 2000, "started", 5, abcd, new, relocated=relocated)
    t.recover("C", 2500, "synced", 5, abcd, new, relocated=relocated, synced_with=new)
    t.passed("C", 2600, 90, 5, new, ["C", new[1]], reconf(6, new), recovery=True)
    for n in new:
        t.decree(n, 2700, 90, None if n != "C" else 5, reconf(6, new))
    return t


def test_e5_recover_with_relocation_raises_only_the_reconfiguration() -> None:
    alerts = e5(["C", "D", "X"], {"X": "A"}).alerts()
    assert [(a.kind, a.instance) for a in alerts] == [("QLOG_RECONFIGURED", 6)]


def test_e5_fault_no_relocation_is_unsafe() -> None:
    alerts = [a for a in e5(["C", "X", "Y"], None).alerts() if a.severity != INFO]
    assert [(a.kind, a.node, a.event_ts_ms - T0) for a in alerts] == [("QLOG_RECOVER_UNSAFE", "C", 2500)]


def test_e5_near_miss_exactly_half() -> None:
    assert e5(["C", "D", "Y"], None).kinds() == set()


# ------------------------------------------------------------------------------- each kind
def test_divergent_decree_executed_and_the_skipped_unreachable_decree() -> None:
    t = Trace()
    legislature(t)
    t.decree("A", 100, 36, 3, values("aa"))
    t.decree("B", 110, 36, 3, values("bb"))
    assert t.kinds() == {"QLOG_DIVERGENT_DECREE"}
    # near miss (3.7): D and E pass a values decree in the old legislature 3 at a number that is
    # unreachable once legislature 4 is open; every replica skips it (no decree event at all)
    ok = Trace()
    legislature(ok)
    ok.passed("A", 100, 36, 3, ABCDE, ["A", "B", "C"], reconf(4, ABCDE))
    for n in ABCDE:
        ok.decree(n, 110, 36, 3, reconf(4, ABCDE))
    ok.passed("D", 120, 37, 3, ABCDE, ["C", "D", "E"], values("dd"))
    ok.passed("A", 130, 37, 4, ABCDE, ["A", "B", "C"], values("ee"))
    for n in ABCDE:
        ok.decree(n, 140, 37, 4, values("ee"))
    assert ok.kinds() == set()


def test_divergent_passed_values_for_one_decree_id() -> None:
    t = Trace()
    legislature(t)
    t.passed("A", 100, 36, 3, ABCDE, ["A", "B", "C"], values("aa"))
    t.passed("B", 200, 36, 3, ABCDE, ["B", "C", "D"], values("bb"), n=2)
    assert t.kinds() == {"QLOG_DIVERGENT_DECREE"}
    ok = Trace()  # a later ballot chooses the value already chosen
    legislature(ok)
    ok.passed("A", 100, 36, 3, ABCDE, ["A", "B", "C"], values("aa"))
    ok.passed("B", 200, 36, 3, ABCDE, ["B", "C", "D"], values("aa"), n=2)
    assert ok.kinds() == set()


def test_divergent_memberships_of_one_legislature_and_the_skipped_reconf() -> None:
    t = Trace()
    legislature(t)
    t.hb("A", 100, 4, ["A", "B", "C"], 40)
    t.hb("D", 110, 4, ["C", "D", "E"], 40)
    assert "QLOG_DIVERGENT_DECREE" in t.kinds()
    # near miss: a Reconf to 3 with another set is passed and skipped (it opens no newer
    # legislature), and a same-set Reconf only reorders the members
    ok = Trace()
    legislature(ok)
    ok.passed("A", 100, 36, 3, ABCDE, ["A", "B", "C"], reconf(3, ["A", "B"]))
    for n in ABCDE:
        ok.decree(n, 110, 36, 3, reconf(3, ["A", "B"]), outcome="skipped")
    ok.hb("B", 200, 3, ["B", "A", "E", "D", "C"], 37, leader="B")
    assert ok.kinds() == set()


def test_reconf_without_old_quorum_and_with_it() -> None:
    def run(acked: list[str]) -> set[str]:
        t = Trace()
        legislature(t)
        t.passed("C", 100, 36, 3, ABCDE, acked, reconf(4, ["C", "D", "E"]))
        for n in ABCDE:
            t.decree(n, 110, 36, 3, reconf(4, ["C", "D", "E"]))
        return t.kinds()

    assert run(["D", "E"]) == {"QLOG_RECONF_WITHOUT_OLD_QUORUM"}
    assert run(["C", "D", "E"]) == set()


def test_decree_without_quorum_and_the_stale_proposer() -> None:
    t = Trace()
    legislature(t)
    t.passed("A", 100, 36, 3, ABCDE, ["A", "B"], values("aa"))
    assert t.kinds() == {"QLOG_DECREE_WITHOUT_QUORUM"}
    # near miss: a stale proposer passes in the old legislature 3 with 3 of its 5 acceptors,
    # after legislature 4 = [A, B, C] was installed; every replica skips it
    ok = Trace()
    legislature(ok)
    ok.passed("A", 100, 36, 3, ABCDE, ["A", "B", "C"], reconf(4, ["A", "B", "C"]))
    for n in ABCDE:
        ok.decree(n, 110, 36, 3, reconf(4, ["A", "B", "C"]))
    ok.passed("E", 200, 37, 3, ABCDE, ["C", "D", "E"], values("ee"))
    assert ok.kinds() == set()


def test_quorum_verdict_waits_for_the_legislature() -> None:
    # the proposer's report arrives before anyone reported legislature 3: held, then judged
    t = Trace()
    t.passed("A", 100, 36, 3, ABCDE, ["A", "B"], values("aa"))
    legislature(t, ts=900)
    assert t.kinds() == {"QLOG_DECREE_WITHOUT_QUORUM"}
    # M(3) never known: no verdict (a history that starts after the legislature's install)
    unknown = Trace()
    unknown.passed("A", 100, 36, 3, ABCDE, ["A", "B"], values("aa"))
    unknown.hb("A", 9000, 4, ["A", "B", "C"], 40, leader="A")
    assert unknown.kinds() == set()


def test_obsolete_decree_executed_and_its_near_misses() -> None:
    def run(leg: int | None, outcome: str = "executed") -> set[str]:
        t = Trace()
        legislature(t, wm=30)
        t.decree("D", 100, 30, 3, reconf(4, ABCDE))
        for k in range(31, 35):
            t.decree("D", 100 + k, k, 4, values(f"{k:x}"))
        if outcome == "executed":
            t.decree("D", 200, 35, leg, values("ff"))
        return t.kinds()

    assert run(3) == {"QLOG_OBSOLETE_DECREE_EXECUTED"}
    assert run(3, outcome="none") == set()  # D skips it ("Skipping decree": no event)
    assert run(None) == set()  # teleported: legislature unknown (maxBound)
    assert run(4) == set()


def test_obsolete_reconf_executed() -> None:
    t = Trace()
    legislature(t, wm=30)
    t.decree("D", 100, 30, 3, reconf(5, ABCDE))
    t.decree("D", 110, 31, 5, reconf(4, ["A", "B", "C"]))
    assert t.kinds() == {"QLOG_OBSOLETE_DECREE_EXECUTED"}
    ok = Trace()
    legislature(ok, wm=30)
    ok.decree("D", 100, 30, 3, reconf(5, ABCDE))
    ok.decree("D", 110, 31, 5, reconf(4, ["A", "B", "C"]), outcome="skipped")
    assert ok.kinds() == set()


def test_recover_unsynced_and_synced() -> None:
    def run(synced_with: list[str]) -> set[str]:
        t = Trace()
        abc = ["A", "B", "C"]
        new = ["A", "B", "X"]
        t.hb("A", 0, 5, abc, 50)
        t.recover("A", 100, "started", 5, abc, new)
        t.recover("A", 200, "synced", 5, abc, new, synced_with=synced_with)
        t.passed("A", 300, 50, 5, new, ["A", "X"], reconf(6, new), recovery=True)
        return t.kinds()

    assert run(["A", "B"]) == {"QLOG_RECOVER_UNSYNCED"}
    assert run(["A", "B", "X"]) == set()


def test_recover_unsynced_without_any_sync_and_with_a_minority_ack() -> None:
    t = Trace()
    abc = ["A", "B", "C"]
    t.hb("A", 0, 5, abc, 50)
    t.passed("A", 300, 50, 5, abc, ["A", "B"], reconf(6, abc), recovery=True)
    assert t.kinds() == {"QLOG_RECOVER_UNSYNCED"}
    m = Trace()
    m.hb("A", 0, 5, abc, 50)
    m.recover("A", 200, "synced", 5, abc, abc, synced_with=abc)
    m.passed("A", 300, 50, 5, abc, ["A"], reconf(6, abc), recovery=True)
    assert m.kinds() == {"QLOG_RECOVER_UNSYNCED"}


def test_a_synced_proposer_uses_the_new_acceptors_before_the_reconf_executes() -> None:
    # go/Recover hands the proposer the new acceptors: its lease request before the recovery's
    # Reconf executes is acked by a majority of the new membership, not of M(5)
    t = Trace()
    abcd = ["A", "B", "C", "D"]
    new = ["C", "D", "X"]
    t.hb("C", 0, 5, abcd, 90)
    t.recover("C", 100, "started", 5, abcd, new, relocated={"X": "A"})
    t.recover("C", 200, "synced", 5, abcd, new, relocated={"X": "A"}, synced_with=new)
    t.passed("C", 300, 90, 5, new, ["C", "X"], reconf(6, new))
    assert t.kinds() == set()


def test_legislature_regression_and_the_replay_from_a_snapshot() -> None:
    abc = ["A", "B", "C"]
    t = Trace()
    t.hb("B", 0, 6, abc, 80, leader="A")
    t.restart("B")
    t.hb("B", 5000, 4, abc, 60, leader="A")
    t.hb("B", 6000, 4, abc, 61, leader="A")
    alerts = [a for a in t.alerts() if a.kind == "QLOG_LEGISLATURE_REGRESSION"]
    assert [(a.node, a.instance) for a in alerts] == [("B", 4)]  # once per incarnation
    ok = Trace()
    ok.hb("B", 0, 6, abc, 80, leader="A")
    ok.restart("B")
    ok.hb("B", 5000, 6, abc, 60, leader="A")  # lower watermark, new incarnation: legal
    assert ok.kinds() == set()


def test_execution_regression_on_the_watermark_within_an_incarnation() -> None:
    abc = ["A", "B", "C"]
    t = Trace()
    t.hb("B", 0, 6, abc, 80, leader="B")
    t.hb("B", 1000, 6, abc, 70, leader="B")
    assert "EXECUTION_REGRESSION" in t.kinds()


# ------------------------------------------------------------------------------- wedges
def beats(g: GroupMonitor, t: Trace, start: int, end: int, leader: dict[str, str | None],
          members: list[str] = ["A", "B", "C"], leg: int = 3) -> list[Alert]:  # noqa: B006
    out: list[Alert] = []
    t.events.clear()
    for ts in range(start, end, 1000):
        for n in members:
            t.hb(n, ts, leg, members, 10, leader=leader.get(n))
    for ev in t.events:
        out.extend(g.on_event(ev))
    return out


def test_no_leader_fires_with_no_input_and_resolves() -> None:
    g, t = GroupMonitor("ql1"), Trace()
    out = beats(g, t, 0, 10_000, {n: "A" for n in "ABC"})
    out += beats(g, t, 10_000, 12_000, {})  # the lease lapses; nobody takes it
    deadline = g.next_timer()
    assert deadline is not None and deadline - T0 == 9_000 + 15_000 + 2_000
    out += g.on_timer(deadline - 1)
    assert not [a for a in out if a.kind == "QLOG_NO_LEADER"]
    out += g.on_timer(deadline)
    fired = [a for a in out if a.kind == "QLOG_NO_LEADER"]
    assert [a.status for a in fired] == ["firing"] and fired[0].event_ts_ms - T0 == 9_000
    out += beats(g, t, 40_000, 42_000, {"B": "B"})
    mine = [a for a in out if a.kind == "QLOG_NO_LEADER"]
    assert [a.status for a in mine] == ["firing", "resolved"]
    assert mine[0].alert_id == mine[1].alert_id


def test_no_leader_near_miss_a_new_leader_within_five_seconds() -> None:
    g, t = GroupMonitor("ql1"), Trace()
    out = beats(g, t, 0, 10_000, {n: "A" for n in "ABC"})
    out += beats(g, t, 10_000, 15_000, {})
    out += beats(g, t, 15_000, 60_000, {n: "B" for n in "ABC"})
    out += g.on_timer(T0 + 80_000)
    assert not [a for a in out if a.kind == "QLOG_NO_LEADER"]


def recovery(g: GroupMonitor, t: Trace, done_at: int | None) -> list[Alert]:
    abc, new = ["A", "B", "C"], ["A", "B", "X"]
    t.events.clear()
    t.hb("A", 0, 5, abc, 50, leader="A")
    t.recover("A", 1000, "started", 5, abc, new)
    t.recover("A", 2000, "failed", 5, abc, new)
    t.recover("A", 3000, "started", 5, abc, new)  # the client retries: the episode goes on
    out: list[Alert] = []
    for ev in t.events:
        out.extend(g.on_event(ev))
    if done_at is not None:
        t.events.clear()
        t.recover("A", done_at, "synced", 5, abc, new, synced_with=new)
        t.passed("A", done_at + 100, 50, 5, new, ["A", "X"], reconf(6, new), recovery=True)
        t.decree("A", done_at + 200, 50, 5, reconf(6, new))
        for ev in t.events:
            out.extend(g.on_event(ev))
    return out


def test_recover_stuck_fires_with_no_input_and_resolves_when_the_reconf_executes() -> None:
    g, t = GroupMonitor("ql1"), Trace()
    out = recovery(g, t, None)
    deadline = g.next_timer()
    out += g.on_timer(T0 + 1000 + 60_000 + 2_000)
    fired = [a for a in out if a.kind == "QLOG_RECOVER_STUCK"]
    assert [(a.status, a.node, a.event_ts_ms - T0) for a in fired] == [("firing", "A", 1000)]
    assert deadline is not None and deadline <= T0 + 63_000
    t.events.clear()
    t.recover("A", 90_000, "synced", 5, ["A", "B", "C"], ["A", "B", "X"], synced_with=["A", "B", "X"])
    t.decree("A", 90_200, 50, 5, reconf(6, ["A", "B", "X"]))
    for ev in t.events:
        out.extend(g.on_event(ev))
    mine = [a for a in out if a.kind == "QLOG_RECOVER_STUCK"]
    assert [a.status for a in mine] == ["firing", "resolved"] and mine[0].alert_id == mine[1].alert_id


def test_recover_stuck_near_miss_recovery_completes_in_ten_seconds() -> None:
    g, t = GroupMonitor("ql1"), Trace()
    out = recovery(g, t, 11_000)
    out += g.on_timer(T0 + 200_000)
    assert not [a for a in out if a.kind == "QLOG_RECOVER_STUCK"]
    assert not [a for a in out if a.kind.startswith("QLOG_") and a.severity != INFO]


# ------------------------------------------------------------------------------- coverage, state
FAULTS = {
    "QLOG_DIVERGENT_DECREE": test_divergent_decree_executed_and_the_skipped_unreachable_decree,
    "QLOG_RECONF_WITHOUT_OLD_QUORUM": test_reconf_without_old_quorum_and_with_it,
    "QLOG_DECREE_WITHOUT_QUORUM": test_decree_without_quorum_and_the_stale_proposer,
    "QLOG_OBSOLETE_DECREE_EXECUTED": test_obsolete_decree_executed_and_its_near_misses,
    "QLOG_RECOVER_UNSAFE": test_e5_fault_no_relocation_is_unsafe,
    "QLOG_RECOVER_UNSYNCED": test_recover_unsynced_and_synced,
    "QLOG_LEGISLATURE_REGRESSION": test_legislature_regression_and_the_replay_from_a_snapshot,
    "QLOG_NO_LEADER": test_no_leader_fires_with_no_input_and_resolves,
    "QLOG_RECOVER_STUCK": test_recover_stuck_fires_with_no_input_and_resolves_when_the_reconf_executes,
    "QLOG_RECONFIGURED": test_a_clean_history_raises_nothing_but_the_reconfiguration,
}


def test_every_qlog_kind_has_a_history_that_fires_it_and_a_near_miss() -> None:
    assert set(FAULTS) == {k for k in KINDS if k.startswith("QLOG_")}


def histories() -> dict[str, list[dict[str, Any]]]:
    out = {"e4": e4().events, "e4-near": e4(near_miss=True).events,
           "e5": e5(["C", "D", "X"], {"X": "A"}).events, "e5-unsafe": e5(["C", "X", "Y"], None).events}
    t = Trace()
    t.passed("A", 100, 36, 3, ABCDE, ["A", "B"], values("aa"))
    legislature(t, ts=900)
    out["held"] = t.events
    return out


@pytest.mark.parametrize("name", sorted(histories()))
def test_state_through_json_at_every_cut_changes_nothing(name: str) -> None:
    assert_state_through_json_changes_nothing(histories()[name], "ql1", timer_after_ms=100_000)


def test_state_restored_mid_wedge_fires_and_resolves_the_same() -> None:
    def run(cut: bool) -> list[dict[str, Any]]:
        g, t = GroupMonitor("ql1"), Trace()
        out = recovery(g, t, None)
        if cut:
            g = GroupMonitor.from_state(json.loads(json.dumps(g.to_state())))
            assert g.to_state() == json.loads(json.dumps(g.to_state()))
        out += g.on_timer(T0 + 70_000)
        if cut:
            g = GroupMonitor.from_state(json.loads(json.dumps(g.to_state())))
        t.events.clear()
        t.decree("A", 90_200, 50, 5, reconf(6, ["A", "B", "X"]))
        for ev in t.events:
            out.extend(g.on_event(ev))
        return [a.to_dict() for a in out]

    assert run(True) == run(False)


def test_snapshot_shows_the_legislature_leader_and_frontier() -> None:
    g, t = GroupMonitor("ql1"), Trace()
    beats(g, t, 0, 2000, {n: "B" for n in "ABC"})
    snap = g.snapshot()
    assert snap["family"] == "qlog" and snap["config_version"] == 3
    assert snap["config"]["members"] == [{"id": "A", "leader": False}, {"id": "B", "leader": True},
                                         {"id": "C", "leader": False}]
    assert snap["config"]["executed"] == 9 and snap["decided"] == 9 and snap["executed_majority"] == 9
    assert snap["nodes"]["A"]["leader"] == "B" and snap["nodes"]["A"]["watermark"] == 10


# ------------------------------------------------------------------------------- properties
def clean_history(seed: int, steps: int = 60) -> list[dict[str, Any]]:
    """A random correct quorum-log history: values decrees and Reconfs (lease handovers and
    membership changes) passed by a majority of their legislature, executed in order by every
    member, stale proposers passing unreachable decrees in an old legislature, heartbeats every
    second naming the lease holder. Everything a correct replicated log does, nothing it must not."""
    rng = random.Random(seed)
    t = Trace()
    pool = ["A", "B", "C", "D", "E", "F", "G"]
    members = pool[:rng.choice((3, 4, 5))]
    legs = {1: list(members)}
    leg, k, ts, leader = 1, 0, 0, members[0]
    next_beat = 0
    last: dict[str, int] = {}

    def majority_of(ms: list[str]) -> list[str]:
        return rng.sample(ms, rng.randint(len(ms) // 2 + 1, len(ms)))

    def beat_until(until: int) -> None:
        nonlocal next_beat
        while next_beat <= until:
            for n in members:
                t.hb(n, next_beat, leg, members, k, leader=leader)
            next_beat += 1000

    for _ in range(steps):
        ts += rng.randint(100, 900)
        beat_until(ts)
        roll = rng.random()
        if roll < 0.15 and leg > 1:
            # a stale proposer passes in the previous legislature at the next number: unreachable
            old = legs[leg - 1]
            t.passed(rng.choice(old), ts, k, leg - 1, old, majority_of(old), values(f"5{k:x}"))
            continue
        if roll < 0.6:
            value = values(f"{k:x}")
        elif roll < 0.85 or len(members) == 3 and roll < 0.9:
            head = rng.choice([n for n in members if n != leader])
            value = reconf(leg + 1, [head, *(n for n in members if n != head)])  # a lease handover
        else:
            out = [n for n in pool if n not in members]
            new = list(members)
            if out and (len(new) == 3 or rng.random() < 0.5):
                new.append(out[0])
            else:
                new.remove(rng.choice([n for n in new if n != leader]))
            value = reconf(leg + 1, new)
        t.passed(leader, ts, k, leg, members, majority_of(members), value)
        done = ts + rng.randint(5, 300)
        for n in members:
            # each replica executes in decree order
            last[n] = max(done + rng.randint(0, 100), last.get(n, 0) + 1)
            t.decree(n, last[n], k, leg, value)
        next_beat = max(next_beat, *last.values()) + 1  # a heartbeat reports what was executed before it
        k += 1
        if value["kind"] == "reconf":
            joined = [n for n in value["members"] if n not in members]
            leg, members = leg + 1, list(value["members"])
            legs[leg] = members
            leader = members[0]
            for n in joined:
                last[n] = max(last.values()) + 1
                t.hb(n, last[n], leg, members, k, leader=leader)
    beat_until(ts + 3000)
    # each replica publishes in its own time order (one thread, duty 1): seq follows ts
    return in_time_order(t.events)


@given(st.integers(0, 10_000))
@_settings(40)
def test_random_clean_histories_raise_nothing_whatever_the_arrival_order(seed: int) -> None:
    info_only_whatever_the_arrival_order(clean_history(seed), seed)


@pytest.mark.parametrize("name", sorted(histories()))
def test_worked_histories_give_the_same_ids_whatever_the_arrival_order(name: str) -> None:
    assert_same_ids_whatever_the_arrival_order(histories()[name])
