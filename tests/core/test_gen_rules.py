"""The generations family's safety rules (docs/families.md 2.4, 2.7, 2.8): each fires on its
history and stays silent on its legal near miss. Events are written as the contract's dicts."""

from __future__ import annotations

from typing import Any

import pytest

from replimon.core import Monitor
from replimon.core.alerts import INFO

ABC = ["A", "B", "C"]


class Trace:
    """Events of one group, each node with its own seq (one seq space per node, duty 1)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.seq: dict[str, int] = {}

    def _emit(self, node: str, etype: str, ts: int, seq: int | None, **fields: Any) -> dict[str, Any]:
        s = self.seq.get(node, 0) if seq is None else seq
        self.seq[node] = s + 1
        ev = {"v": 1, "type": etype, "group": "g", "node": node, "ts_ms": 1_700_000_000_000 + ts,
              "seq": s, "incarnation": 0, **fields}
        self.events.append(ev)
        return ev

    def state(self, node: str, ts: int, cause: str, num: int, status: str, *, loi: int, lv: int,
              members: list[str] = ABC, configured: list[str] = ABC, donors: list[str] = ("B",),  # type: ignore[assignment]
              lv_members: list[str] | None = None, seq: int | None = None, **extra: Any) -> dict[str, Any]:
        return self._emit(node, "gen.state", ts, seq, cause=cause,
                          gen={"num": num, "members": list(members), "configured": list(configured)},
                          donors=list(donors), last_online_in=loi,
                          last_vote={"num": lv, "members": list(members if lv_members is None else lv_members),
                                     "configured": list(configured)},
                          status=status, **extra)

    def beat(self, node: str, ts: int, gen: int, *, loi: int, lv: int, status: str = "online",
             seq: int | None = None) -> dict[str, Any]:
        return self._emit(node, "gen.heartbeat", ts, seq, gen_num=gen, last_online_in=loi,
                          last_vote_num=lv, node_status=status, suspects=[], xact_sample=1)

    def xact(self, node: str, ts: int, gid: str, xgen: int, phase: str, role: str, **extra: Any) -> dict[str, Any]:
        return self._emit(node, "gen.xact", ts, None, gid=gid, xgen=xgen, phase=phase, role=role, **extra)

    def kinds(self) -> set[str]:
        return {a.kind for a in Monitor().run(self.events) if a.severity != INFO}


def switched(t: Trace, num: int = 7, ts: int = 1000) -> None:
    """Every node switches to (num, ABC), B its donor and ONLINE, A and C recovering."""
    t.state("B", ts, "switch", num, "ONLINE", loi=num, lv=num)
    t.state("A", ts, "switch", num, "RECOVERY", loi=num - 1, lv=num)
    t.state("C", ts + 10, "switch", num, "RECOVERY", loi=num - 2, lv=num)


def test_a_clean_switch_and_recovery_raise_nothing_but_the_election() -> None:
    t = Trace()
    switched(t)
    t.state("A", 1500, "online", 7, "ONLINE", loi=7, lv=7, via="parallel_safe", source="B")
    t.beat("C", 2000, 7, loi=5, lv=7, status="recovery")
    alerts = Monitor().run(t.events)
    assert [(a.kind, a.instance) for a in alerts] == [("GEN_ELECTED", 7)]


def test_e2_the_promise() -> None:
    # docs/families.md 2.8 E2: A, RECOVERY in 4, votes for 5, then goes ONLINE in 4 via PS.
    t = Trace()
    t.state("A", 1000, "switch", 4, "RECOVERY", loi=3, lv=4, seq=5)
    t.state("A", 1200, "vote", 4, "DEAD", loi=3, lv=5, lv_members=["A", "B"], seq=6,
            vote={"num": 5, "members": ["A", "B"], "configured": ABC, "candidate": "B"})
    t.state("A", 1300, "online", 4, "ONLINE", loi=4, lv=5, lv_members=["A", "B"], seq=7,
            via="parallel_safe", source="B")
    alerts = [a for a in Monitor().run(t.events) if a.kind == "GEN_VOTE_PROMISE_BROKEN"]
    assert [(a.node, a.instance) for a in alerts] == [("A", 4)]


def test_e2_near_miss_online_before_promising() -> None:
    t = Trace()
    t.state("A", 1000, "switch", 4, "ONLINE", loi=4, lv=4, donors=["A"], seq=5)
    t.state("A", 1200, "vote", 4, "ONLINE", loi=4, lv=5, lv_members=["A", "B"], seq=6, donors=["A"],
            vote={"num": 5, "members": ["A", "B"], "configured": ABC, "candidate": "B"})
    assert t.kinds() == set()


def test_e3_a_stale_donor() -> None:
    t = Trace()
    t.state("A", 1000, "switch", 8, "ONLINE", loi=8, lv=8, members=["A", "B"], donors=["A", "B"], seq=1)
    t.state("B", 1000, "switch", 8, "ONLINE", loi=8, lv=8, members=["A", "B"], donors=["A", "B"], seq=1)
    t.beat("C", 1100, 7, loi=7, lv=8, status="disabled", seq=8)
    t.xact("A", 1200, "MTM-1-100-8", 8, "committed", "coordinator", prepared_by=["A", "B"],
           xmembers=["A", "B"])
    t.state("C", 5000, "switch", 9, "ONLINE", loi=9, lv=9, donors=["C"])
    alerts = [a for a in Monitor().run(t.events) if a.kind == "GEN_DONOR_STALE"]
    assert [(a.node, a.instance) for a in alerts] == [("C", 9)]


@pytest.mark.parametrize("variant", ["aborted", "donor_A"])
def test_e3_near_misses(variant: str) -> None:
    t = Trace()
    t.state("A", 1000, "switch", 8, "ONLINE", loi=8, lv=8, members=["A", "B"], donors=["A", "B"], seq=1)
    t.state("B", 1000, "switch", 8, "ONLINE", loi=8, lv=8, members=["A", "B"], donors=["A", "B"], seq=1)
    t.beat("C", 1100, 7, loi=7, lv=8, status="disabled", seq=8)
    if variant == "aborted":
        t.xact("A", 1200, "MTM-1-100-8", 8, "aborted", "coordinator", xmembers=["A", "B"])
        t.state("C", 5000, "switch", 9, "ONLINE", loi=9, lv=9, donors=["C"])
    else:
        t.xact("A", 1200, "MTM-1-100-8", 8, "committed", "coordinator", prepared_by=["A", "B"],
               xmembers=["A", "B"])
        t.state("A", 5000, "switch", 9, "ONLINE", loi=9, lv=9, donors=["A"])
        t.state("C", 5000, "switch", 9, "RECOVERY", loi=7, lv=9, donors=["A"])
    assert "GEN_DONOR_STALE" not in t.kinds()


def test_regression_across_a_restart_and_its_near_miss() -> None:
    t = Trace()
    t.state("B", 1000, "switch", 9, "ONLINE", loi=9, lv=9)
    older = Trace()
    older.events = list(t.events)
    t.events.append({**t.state("B", 2000, "load", 6, "ONLINE", loi=6, lv=6, seq=0), "incarnation": 1})
    t.events.pop(-2)
    assert t.kinds() == {"GEN_REGRESSION"}
    older.events.append({**older.state("B", 2000, "load", 9, "ONLINE", loi=9, lv=9, seq=0), "incarnation": 1})
    older.events.pop(-2)
    assert older.kinds() == set()


def test_state_inconsistent_and_the_node_that_voted_ahead() -> None:
    t = Trace()
    t.state("B", 1000, "switch", 9, "ONLINE", loi=9, lv=8)
    assert t.kinds() == {"GEN_STATE_INCONSISTENT"}
    ok = Trace()
    ok.state("B", 1000, "switch", 9, "DEAD", loi=8, lv=12)
    assert ok.kinds() == set()


def test_members_conflict_and_two_winning_campaigners() -> None:
    t = Trace()
    t.state("A", 1000, "switch", 9, "ONLINE", loi=9, lv=9, members=["A", "B"], donors=["A"])
    t.state("C", 1100, "switch", 9, "DEAD", loi=7, lv=9, members=["B", "C"], donors=["B"])
    assert "GEN_MEMBERS_CONFLICT" in t.kinds()
    ok = Trace()
    ok.state("A", 1000, "switch", 9, "ONLINE", loi=9, lv=9, members=["A", "B"], donors=["A"])
    ok.state("B", 1000, "switch", 9, "ONLINE", loi=9, lv=9, members=["A", "B"], donors=["A", "B"])
    assert ok.kinds() == set()


def test_vote_promise_a_and_the_regrant() -> None:
    t = Trace()
    vote = {"num": 7, "members": ["A", "B"], "configured": ABC, "candidate": "B"}
    t.state("A", 1000, "vote", 6, "DEAD", loi=5, lv=7, lv_members=["A", "B"], vote=vote)
    t.state("A", 1100, "vote", 6, "DEAD", loi=5, lv=7, lv_members=["A", "C"],
            vote={**vote, "members": ["A", "C"], "candidate": "C"})
    assert t.kinds() == {"GEN_VOTE_PROMISE_BROKEN"}
    ok = Trace()
    ok.state("A", 1000, "vote", 6, "DEAD", loi=5, lv=7, lv_members=["A", "B"], vote=vote)
    ok.state("A", 1100, "vote", 6, "DEAD", loi=5, lv=7, lv_members=["A", "B"], vote=vote)
    assert ok.kinds() == set()


def test_online_ineligible_and_the_referee() -> None:
    t = Trace()
    t.state("C", 1000, "switch", 10, "DEAD", loi=9, lv=10, members=["C"])
    t.state("C", 1100, "online", 10, "ONLINE", loi=10, lv=10, members=["C"], via="parallel_safe", source="C")
    assert "GEN_ONLINE_INELIGIBLE" in t.kinds()
    ok = Trace()
    ok.state("A", 1000, "switch", 10, "RECOVERY", loi=9, lv=10, members=["A"], configured=["A", "B"], donors=["B"])
    ok.state("A", 1100, "online", 10, "ONLINE", loi=10, lv=10, members=["A"], configured=["A", "B"],
             donors=["B"], via="parallel_safe", source="B")
    assert ok.kinds() == set()


def test_online_unrecovered_by_switch_and_the_recovery() -> None:
    t = Trace()
    t.beat("C", 500, 8, loi=8, lv=8)
    t.state("C", 1000, "switch", 9, "ONLINE", loi=9, lv=9, donors=["A"])
    assert t.kinds() == {"GEN_ONLINE_UNRECOVERED"}
    ok = Trace()
    ok.state("A", 900, "switch", 9, "ONLINE", loi=9, lv=9, donors=["A"])
    ok.beat("C", 500, 8, loi=8, lv=8)
    ok.state("C", 1000, "switch", 9, "RECOVERY", loi=8, lv=9, donors=["A"])
    ok.state("C", 1500, "online", 9, "ONLINE", loi=9, lv=9, donors=["A"], via="parallel_safe", source="A")
    assert ok.kinds() == set()


def test_barrier_broken_and_recovery_mode() -> None:
    t = Trace()
    t.xact("B", 1000, "MTM-2-1-8", 8, "prepared", "replica", mode="normal", at={"num": 9, "status": "ONLINE"})
    assert t.kinds() == {"GEN_BARRIER_BROKEN"}
    ok = Trace()
    ok.xact("B", 1000, "MTM-2-1-8", 8, "prepared", "replica", mode="recovery", at={"num": 9, "status": "RECOVERY"})
    assert ok.kinds() == set()


def test_commit_unprepared_and_an_excluded_member() -> None:
    t = Trace()
    t.state("A", 900, "switch", 9, "ONLINE", loi=9, lv=9, donors=["A"])
    t.xact("A", 1000, "MTM-1-5-9", 9, "committed", "coordinator", prepared_by=["A", "B"], xmembers=ABC)
    assert t.kinds() == {"GEN_COMMIT_UNPREPARED"}
    ok = Trace()
    ok.state("A", 900, "switch", 9, "ONLINE", loi=9, lv=9, members=["A", "B"], donors=["A"])
    ok.xact("A", 1000, "MTM-1-5-9", 9, "committed", "coordinator", prepared_by=["A", "B"], xmembers=["A", "B"])
    assert ok.kinds() == set()


def test_xact_divergent_and_an_abort_everywhere() -> None:
    t = Trace()
    t.xact("A", 1000, "X", 9, "committed", "coordinator", xmembers=ABC)
    t.xact("C", 1100, "X", 9, "aborted", "replica")
    assert "GEN_XACT_DIVERGENT" in t.kinds()
    ok = Trace()
    ok.xact("A", 1000, "X", 9, "aborted", "coordinator", xmembers=ABC)
    ok.xact("C", 1100, "X", 9, "aborted", "replica")
    assert ok.kinds() == set()


def test_xact_outcomes_are_compared_within_the_window_and_forgotten_oldest_first() -> None:
    """Traced gids are kept for XACT_KEEP_MS of group time (docs/rules.md, the generations
    family): an outcome inside the window is compared, one after it is not."""
    from replimon.core.rules.gen.safety import XACT_KEEP_MS

    inside = Trace()
    switched(inside, ts=500)
    inside.xact("A", 1000, "X", 9, "committed", "coordinator", xmembers=ABC)
    inside.xact("B", 1000 + XACT_KEEP_MS // 2, "Y", 9, "committed", "coordinator", xmembers=ABC)
    inside.xact("C", 1000 + XACT_KEEP_MS, "X", 9, "aborted", "replica")
    assert "GEN_XACT_DIVERGENT" in inside.kinds()
    after = Trace()
    switched(after, ts=500)
    after.xact("A", 1000, "X", 9, "committed", "coordinator", xmembers=ABC)
    after.xact("B", 1000 + XACT_KEEP_MS // 2, "Y", 9, "committed", "coordinator", xmembers=ABC)
    after.xact("B", 1000 + XACT_KEEP_MS + 5_000, "Z", 9, "committed", "coordinator", xmembers=ABC)
    after.xact("C", 1000 + XACT_KEEP_MS + 6_000, "X", 9, "aborted", "replica")
    assert "GEN_XACT_DIVERGENT" not in after.kinds()  # (the gaps make silences: not the point)



def e1(near_miss: bool = False, cut_after: int | None = None) -> Trace:
    """docs/families.md 2.8 E1: C gets online on a ParallelSafe record from A, which is still
    recovering in 7 (near miss: A's own ONLINE in 7, stamped before C's, arrives after it)."""
    t = Trace()
    t.state("B", 1000, "switch", 7, "ONLINE", loi=7, lv=7, seq=20)
    t.state("A", 1000, "switch", 7, "RECOVERY", loi=6, lv=7, seq=10)
    t.state("C", 1010, "switch", 7, "RECOVERY", loi=5, lv=7, seq=15)
    t.state("C", 1600, "online", 7, "ONLINE", loi=7, lv=7, seq=16, via="parallel_safe", source="A")
    if near_miss:
        t.state("A", 1590, "online", 7, "ONLINE", loi=7, lv=7, seq=11, via="parallel_safe", source="B")
    else:
        t.beat("A", 2500, 7, loi=6, lv=7, status="recovery", seq=11)
    t.beat("A", 4200, 7, loi=7 if near_miss else 6, lv=7, status="online" if near_miss else "recovery",
           seq=12)
    if cut_after is not None:
        t.events = t.events[:cut_after]
    return t


def test_e1_parallel_safe_from_a_node_that_never_got_online() -> None:
    alerts = [a for a in Monitor().run(e1().events) if a.kind == "GEN_ONLINE_UNRECOVERED"]
    assert [(a.node, a.instance) for a in alerts] == [("C", 7)]


def test_e1_near_miss_the_source_online_report_arrives_after() -> None:
    assert e1(near_miss=True).kinds() == set()


def test_e1_no_verdict_without_the_source_history_past_the_skew() -> None:
    # A's history ends at 2500 < 1600 + skew: the end of input gives no verdict
    assert e1(cut_after=5).kinds() == set()
    # a gap in A's history (seq 11 missing): no verdict either
    t = e1()
    t.events = [e for e in t.events if not (e["node"] == "A" and e["seq"] == 11)]
    assert "GEN_ONLINE_UNRECOVERED" not in t.kinds()


# ----------------------------------------------- late outcomes: the design's 10 minutes (2.3)
@pytest.mark.parametrize(("late_s", "fires"), [(90, True), (150, True), (540, True), (660, False)])
def test_a_resolvers_commit_contradicting_a_rollback_within_ten_minutes(late_s: int, fires: bool) -> None:
    # A long partition: the coordinator rolls back; a resolver commits the same gid when the
    # partition heals. Within the 10 minutes of docs/families.md 2.3 it is GEN_XACT_DIVERGENT;
    # later the outcome is forgotten (the near miss of the window, not of the rule).
    t = Trace()
    switched(t)
    t.xact("A", 2000, "MTM-1-7-7", 7, "aborted", "coordinator")
    for s in range(3, late_s, 5):  # the group goes on meanwhile
        t.beat("B", s * 1000, 7, loi=7, lv=7)
    t.xact("C", 2000 + late_s * 1000, "MTM-1-7-7", 7, "committed", "resolver")
    alerts = [a for a in Monitor().run(t.events) if a.kind == "GEN_XACT_DIVERGENT"]
    assert bool(alerts) is fires
    if fires:
        (alert,) = alerts
        assert [(e["node"], e["phase"]) for e in alert.evidence] == [("C", "committed"), ("A", "aborted")]


def test_a_state_saved_with_the_old_traced_outcomes_loads() -> None:
    import json as _json

    from replimon.core import GroupMonitor

    t = Trace()
    switched(t)
    t.xact("A", 2000, "MTM-1-7-7", 7, "aborted", "coordinator")
    g = GroupMonitor("g")
    for ev in t.events:
        g.on_event(ev)
    state = _json.loads(_json.dumps(g.to_state()))
    (kept,) = state["xacts"].values()
    assert isinstance(kept, str) and len(kept) < 60
    # the shape before: every outcome of a gid with its evidence
    state["xacts"] = {"MTM-1-7-7": {"aborted": ["A", t.events[-1]["ts_ms"], {
        "type": "gen.xact", "node": "A", "ts_ms": t.events[-1]["ts_ms"], "incarnation": 0, "seq": 1,
        "gid": "MTM-1-7-7", "xgen": 7, "phase": "aborted"}]}}
    g = GroupMonitor.from_state(state)
    out = g.on_event({**t.events[-1], "node": "C", "seq": 1, "phase": "committed", "role": "resolver"})
    assert [a.kind for a in out] == ["GEN_XACT_DIVERGENT"]
