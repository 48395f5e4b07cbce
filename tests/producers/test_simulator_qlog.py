"""The quorum-log simulator (docs/families.md 3.1-3.7): reproducible to the byte, the events of 3.2
field for field, one seq space per (group, node, incarnation), and clean when clean.

``qlog_check`` (tests/producers/qlog_check.py) is a batch reference checker of the rules of
docs/families.md 3.4-3.5; the worked examples E4 and E5 of 3.8 pin it down first, so that "the
checker finds nothing" means something.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replimon.producers.simulator_qlog import (
    CATALOGUE,
    IMPLIED,
    JsonlSink,
    SimOptions,
    Simulator,
    parse_injection,
)
from tests.producers.qlog_check import check


# ------------------------------------------------------------------ worked examples (3.8)
def _ev(ts: int, node: str, type_: str, seqs: Counter[str], **body: Any) -> dict[str, Any]:
    seq = seqs[node]
    seqs[node] += 1
    return {"v": 1, "type": f"qlog.{type_}", "group": "ql1", "node": node, "ts_ms": ts, "seq": seq,
            "incarnation": 0, **body}


def _reconf(new_leg: int, members: list[str]) -> dict[str, Any]:
    return {"kind": "reconf", "digest": f"r{new_leg}{''.join(members)}", "new_leg": new_leg, "members": members}


def e4(near_miss: bool = False) -> list[dict[str, Any]]:
    """The RFC's situation (2): M(3) = [A..E], D and E delayed at watermark 36."""
    s: Counter[str] = Counter()
    five = ["A", "B", "C", "D", "E"]
    evs = [_ev(0, n, "heartbeat", s, leg=3, members=five, watermark=36 if n in "DE" else 36,
               status="active", suspects=[]) for n in five]
    aa = {"kind": "values", "digest": "aa"}
    evs.append(_ev(1000, "A", "passed", s, num=36, leg=3, ballot={"n": 1, "proposer": "A"},
                   acceptors=five, acked=["A", "B", "C"], **aa, recovery=False))
    evs += [_ev(1010, n, "decree", s, num=36, leg=3, **aa, outcome="executed") for n in "ABC"]
    num, acked = (41, ["C", "D", "E"]) if near_miss else (36, ["D", "E"])
    evs.append(_ev(2000, "D", "passed", s, num=num, leg=3, ballot={"n": 1, "proposer": "D"},
                   acceptors=["C", "D", "E"], acked=acked, **_reconf(4, ["C", "D", "E"]), recovery=False))
    evs += [_ev(2010, n, "decree", s, num=num, leg=3, **_reconf(4, ["C", "D", "E"]), outcome="executed")
            for n in "DE"]
    return evs


def e5(new: list[str], relocated: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Recover: M(5) = [A, B, C, D], A and B crashed."""
    s: Counter[str] = Counter()
    old = ["A", "B", "C", "D"]
    base = {"leg": 5, "old": old, "new": new, "relocated": relocated}
    return [
        _ev(1000, "C", "heartbeat", s, leg=5, members=old, watermark=90, status="active", suspects=["A", "B"]),
        _ev(2000, "C", "recover", s, phase="started", **base),
        _ev(2500, "C", "recover", s, phase="synced", **base, synced_with=new),
        _ev(2600, "C", "passed", s, num=90, leg=5, ballot={"n": 1, "proposer": "C"}, acceptors=new,
            acked=["C", new[1]], **_reconf(6, new), recovery=True),
        *[_ev(2700, n, "decree", s, num=90, leg=5, **_reconf(6, new), outcome="executed") for n in new],
    ]


WORKED = {
    "E4": (e4(), {"QLOG_RECONF_WITHOUT_OLD_QUORUM", "QLOG_DIVERGENT_DECREE"}),
    "E4-near-miss": (e4(near_miss=True), set()),
    "E5": (e5(["C", "D", "X"], [{"node": "X", "from": "A"}]), set()),
    "E5-fault": (e5(["C", "X", "Y"], []), {"QLOG_RECOVER_UNSAFE"}),
    "E5-near-miss": (e5(["C", "D", "Y"], []), set()),
}


@pytest.mark.parametrize("example", sorted(WORKED))
def test_the_checker_on_the_worked_examples(example: str) -> None:
    events, expected = WORKED[example]
    assert check(events) == {"ql1": expected}


def _hb(ts: int, node: str, s: Counter[str], leg: int, members: list[str], leader: str | None = None) -> dict[str, Any]:
    extra = {"leader": leader} if leader else {}
    return _ev(ts, node, "heartbeat", s, leg=leg, members=members, watermark=10, **extra, status="active",
               suspects=[])


def _passed(ts: int, node: str, s: Counter[str], num: int, leg: int, acked: list[str], value: dict[str, Any],
            acceptors: list[str], recovery: bool = False) -> dict[str, Any]:
    return _ev(ts, node, "passed", s, num=num, leg=leg, ballot={"n": 1, "proposer": node}, acceptors=acceptors,
               acked=acked, **value, recovery=recovery)


ABC = ["A", "B", "C"]


def test_the_checker_on_the_other_forms() -> None:
    """The forms the worked examples and the catalogue leave out, each with its near miss."""
    s: Counter[str] = Counter()
    # (c): legislature 4 with two member sets; the same set in another order is not one
    assert check([_hb(0, "A", s, 4, ABC), _hb(0, "B", s, 4, ["C", "B", "A"])]) == {"ql1": set()}
    assert check([_hb(0, "A", s, 4, ABC), _hb(0, "B", s, 4, ["A", "B"])]) == {"ql1": {"QLOG_DIVERGENT_DECREE"}}
    # OBSOLETE, second form: a Reconf not opening a newer legislature than the last one it ran
    base = [_hb(0, "A", s, 4, ABC),
            _ev(10, "A", "decree", s, num=5, leg=4, **_reconf(6, ABC), outcome="executed")]
    late = _ev(20, "A", "decree", s, num=7, leg=6, **_reconf(5, ABC), outcome="executed")
    assert check([*base, late]) == {"ql1": {"QLOG_OBSOLETE_DECREE_EXECUTED"}}
    assert check([*base, {**late, "outcome": "skipped"}]) == {"ql1": set()}
    # a values decree without a majority, exempt while its proposer's synced recovery is open
    rec = {"leg": 4, "old": ABC, "new": ["A", "X", "Y"], "relocated": [{"node": "X", "from": "B"}]}
    synced = [_ev(30, "A", "recover", s, phase="started", **rec),
              _ev(31, "A", "recover", s, phase="synced", **rec, synced_with=["A", "X", "Y"])]
    minority = _passed(40, "A", s, 8, 4, ["A", "X"], {"kind": "values", "digest": "bb"}, ["A", "X", "Y"])
    assert check([*base, minority]) == {"ql1": {"QLOG_DECREE_WITHOUT_QUORUM"}}
    assert check([*base, *synced, minority]) == {"ql1": set()}
    # RECOVER_UNSYNCED, second form: synced, but acked by a minority of new
    reconf = _reconf(5, ["A", "X", "Y"])
    assert check([*base, *synced, _passed(50, "A", s, 9, 4, ["A"], reconf, ["A", "X", "Y"], True)]) == {
        "ql1": {"QLOG_RECOVER_UNSYNCED"}}
    assert check([*base, *synced, _passed(50, "A", s, 9, 4, ["A", "Y"], reconf, ["A", "X", "Y"], True)]) == {
        "ql1": set()}


def test_the_checker_wedges() -> None:
    s: Counter[str] = Counter()
    led = [_hb(t, "A", s, 4, ABC, leader="A") for t in range(0, 20_000, 1_000)]
    quiet = [_hb(t, "A", s, 4, ABC) for t in range(20_000, 40_000, 1_000)]
    assert check(led + quiet[:14]) == {"ql1": set()}
    assert check(led + quiet) == {"ql1": {"QLOG_NO_LEADER"}}
    # a recover episode: same-set renewals (new legislatures) do not close it; a Reconf to new does
    rec = {"leg": 4, "old": ABC, "new": ["A", "B", "X"], "relocated": [{"node": "X", "from": "C"}]}
    start = [_ev(0, "A", "recover", s, phase="started", **rec)]
    renewals = [_ev(t, "A", "decree", s, num=t // 1_000, leg=4 + t // 2_000, **_reconf(5 + t // 2_000, ABC),
                    outcome="executed") for t in range(0, 70_000, 2_000)]
    leading = [_hb(t, "A", s, 40, ABC, leader="A") for t in range(500, 70_000, 1_000)]
    assert check(start + renewals + leading) == {"ql1": {"QLOG_RECOVER_STUCK"}}
    done = _ev(50_000, "A", "decree", s, num=99, leg=99, **_reconf(100, ["A", "B", "X"]), outcome="executed")
    assert check([*start, *renewals[:20], done]) == {"ql1": set()}
    # the old quorum passes a Reconf again (its members came back): the recovery is abandoned
    back = _ev(30_000, "B", "passed", s, num=98, leg=98, ballot={"n": 1, "proposer": "B"}, acceptors=ABC,
               acked=["A", "B"], recovery=False, **_reconf(99, ABC))
    assert check([*start, *renewals, back]) == {"ql1": set()}
    minority = {**back, "acked": ["B", "X"]}
    assert check([*start, *renewals, minority, *leading]) == {"ql1": {"QLOG_RECOVER_STUCK"}}


# -------------------------------------------------------------------------------- the runs
def run(duration_ms: int = 60_000, faults: tuple[str, ...] = (), **opts: Any) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    Simulator(SimOptions(duration_ms=duration_ms, **opts), [parse_injection(f) for f in faults],
              events.append).run()
    return events


def jsonl(**opts: Any) -> str:
    buf = io.StringIO()
    Simulator(SimOptions(**opts), [], JsonlSink(buf)).run()
    return buf.getvalue()


def test_same_seed_same_bytes_other_seed_other_bytes() -> None:
    opts = {"groups": 2, "nodes": 5, "duration_ms": 60_000, "restart_every_s": 10, "delay_every_s": 10}
    a = jsonl(seed=7, **opts)
    assert a == jsonl(seed=7, **opts)
    assert a != jsonl(seed=8, **opts)
    assert len(a.splitlines()) > 1_000


# docs/families.md 3.2, field for field: (required, optional) per type beside the envelope
ENVELOPE = {"v", "type", "group", "node", "ts_ms", "seq", "incarnation"}
VALUE = ({"kind", "digest"}, {"new_leg", "members"})
SHAPES = {
    "qlog.decree": ({"num", "outcome"} | VALUE[0], {"leg"} | VALUE[1]),
    "qlog.passed": ({"num", "leg", "ballot", "acceptors", "acked", "recovery"} | VALUE[0], VALUE[1]),
    "qlog.recover": ({"phase", "leg", "old", "new", "relocated"}, {"synced_with"}),
    "qlog.heartbeat": ({"leg", "members", "watermark", "status", "suspects"}, {"leader"}),
}


def _ids(x: Any) -> bool:
    return isinstance(x, list) and all(isinstance(i, str) for i in x)


def assert_shape(e: dict[str, Any]) -> None:
    required, optional = SHAPES[e["type"]]
    assert required | ENVELOPE <= e.keys() <= required | optional | ENVELOPE, e
    for key in ("num", "leg", "new_leg", "watermark"):
        assert key not in e or (type(e[key]) is int and e[key] >= 0), e
    for key in ("acceptors", "acked", "members", "old", "new", "synced_with", "suspects"):
        assert key not in e or _ids(e[key]), e
    if "kind" in e:
        assert e["kind"] in ("values", "reconf") and isinstance(e["digest"], str)
        assert ({"new_leg", "members"} <= e.keys()) == (e["kind"] == "reconf"), e
        assert not ({"new_leg", "members"} & e.keys()) or e["kind"] == "reconf", e
    if e["type"] == "qlog.decree":
        assert e["outcome"] in ("executed", "skipped")
        assert e["outcome"] == "executed" or e["kind"] == "reconf", e  # skipped: a Reconf (3.2)
    if e["type"] == "qlog.passed":
        assert set(e["ballot"]) == {"n", "proposer"} and type(e["ballot"]["n"]) is int
        assert type(e["recovery"]) is bool and set(e["acked"]) <= set(e["acceptors"])
    if e["type"] == "qlog.recover":
        assert e["phase"] in ("started", "synced", "failed")
        assert ("synced_with" in e) == (e["phase"] == "synced")
        assert all(set(r) == {"node", "from"} for r in e["relocated"])
    if e["type"] == "qlog.heartbeat":
        assert e["status"] in ("active", "delayed", "recovering")
        assert "leader" not in e or e["leader"] in e["members"]


def test_every_event_has_the_fields_of_section_3_2() -> None:
    faults = ("qlog_recover_unsafe_near_miss:ql1@10s", "qlog_reconf_without_old_quorum_near_miss:ql2@10s",
              "qlog_obsolete_decree_executed_near_miss_teleported:ql3@10s")
    events = run(120_000, faults, groups=3, seed=3, restart_every_s=10, delay_every_s=10)
    kinds = set()
    for e in events:
        assert_shape(e)
        kinds.add((e["type"], e.get("outcome") or e.get("phase") or e.get("status") or e["kind"], "leg" in e))
    assert {("qlog.decree", "executed", True), ("qlog.decree", "executed", False),  # teleported
            ("qlog.recover", "started", True), ("qlog.recover", "synced", True),
            ("qlog.heartbeat", "active", True), ("qlog.heartbeat", "delayed", True),
            ("qlog.passed", "values", True), ("qlog.passed", "reconf", True)} <= kinds
    assert any(e["type"] == "qlog.passed" and e["recovery"] for e in events)
    assert any(e["type"] == "qlog.heartbeat" and "leader" not in e for e in events)


def test_seq_counts_per_incarnation_and_time_never_goes_back_per_node() -> None:
    events = run(120_000, groups=2, nodes=5, seed=11, restart_every_s=10)
    seqs: dict[tuple[str, str, int], list[int]] = {}
    last_ts: dict[tuple[str, str], int] = {}
    for e in events:
        seqs.setdefault((e["group"], e["node"], e["incarnation"]), []).append(e["seq"])
        key = (e["group"], e["node"])
        assert e["ts_ms"] >= last_ts.get(key, 0)
        last_ts[key] = e["ts_ms"]
    assert any(inc > 0 for _, _, inc in seqs), "restarts must start new incarnations"
    for key, values in seqs.items():
        assert values == list(range(len(values))), key


def test_heartbeats_every_second_per_node() -> None:
    events = run(30_000, groups=1, nodes=3, seed=2, restart_every_s=0, delay_every_s=0)
    for node in ("n1", "n2", "n3"):
        times = [e["ts_ms"] for e in events if e["type"] == "qlog.heartbeat" and e["node"] == node]
        assert len(times) == 30 and {b - a for a, b in zip(times, times[1:], strict=False)} == {1_000}


def test_leases_are_same_set_reconfs_and_the_leader_is_the_head() -> None:
    """`Internal.hs`: ``proposeLeaseRequest`` is ``Reconf (succ leg) (here : others)``; ``getLeader``
    is the head of the list while the lease lasts."""
    events = run(60_000, groups=1, nodes=5, seed=4, restart_every_s=0, delay_every_s=0)
    reconfs = [e for e in events if e["type"] == "qlog.passed" and e["kind"] == "reconf"]
    assert len(reconfs) >= 25 and all(e["node"] == e["members"][0] for e in reconfs)
    assert {frozenset(e["members"]) for e in reconfs} == {frozenset(f"n{i}" for i in range(1, 6))}
    legs = [e["new_leg"] for e in reconfs]
    assert legs == list(range(2, 2 + len(legs)))
    for e in events:
        if e["type"] == "qlog.heartbeat" and "leader" in e:
            assert e["leader"] == e["members"][0]


def test_a_crashed_leader_is_replaced_and_a_restart_replays_its_snapshot() -> None:
    events = run(300_000, groups=1, nodes=3, seed=1, restart_every_s=10, delay_every_s=0)
    leaders = {e["node"] for e in events if e["type"] == "qlog.passed" and e["kind"] == "reconf"}
    assert len(leaders) >= 2
    last: dict[tuple[str, int], int] = {}  # (node, incarnation) -> the highest decree executed
    replays = 0
    for e in events:
        if e["type"] != "qlog.decree":
            continue
        key = (e["node"], e["incarnation"])
        before = last.get((e["node"], e["incarnation"] - 1))
        if key not in last and before is not None and e["num"] < before:
            replays += 1  # a new incarnation starts below where the last one got to
        last[key] = max(last.get(key, 0), e["num"])
    assert replays >= 3
    skipped = [e for e in events if e["type"] == "qlog.decree" and e["outcome"] == "skipped"]
    assert skipped and all(e["kind"] == "reconf" and e["incarnation"] > 0 for e in skipped)
    replayed = Counter((e["node"], e["num"]) for e in events if e["type"] == "qlog.decree")
    assert max(replayed.values()) >= 2  # a decree re-executed after a restart


@pytest.mark.parametrize(("seed", "nodes"), [(0, 5), (1, 3), (2, 4), (3, 7)])
def test_clean_runs_raise_nothing(seed: int, nodes: int) -> None:
    events = run(300_000, groups=3, nodes=nodes, seed=seed, restart_every_s=15, delay_every_s=10)
    assert check(events) == {f"ql{i}": set() for i in (1, 2, 3)}
    assert sum(e["type"] == "qlog.decree" and "leg" not in e for e in events) > 0  # teleported
    assert max(e["leg"] for e in events if e["type"] == "qlog.heartbeat") > 100


@settings(max_examples=8, deadline=None, database=None)
@given(seed=st.integers(0, 10_000), nodes=st.integers(3, 6),
       restart_every_s=st.sampled_from([4.0, 10.0, 30.0]), delay_every_s=st.sampled_from([0.0, 5.0, 20.0]),
       decrees_per_s=st.sampled_from([1.0, 5.0, 9.0]))
def test_random_clean_histories_never_alert(seed: int, nodes: int, restart_every_s: float,
                                            delay_every_s: float, decrees_per_s: float) -> None:
    events = run(120_000, groups=1, nodes=nodes, seed=seed, restart_every_s=restart_every_s,
                 delay_every_s=delay_every_s, decrees_per_s=decrees_per_s)
    assert check(events) == {"ql1": set()}


# ------------------------------------------------------------------------------------- faults
@pytest.mark.parametrize("fault", sorted(CATALOGUE))
@pytest.mark.parametrize("nodes", [3, 5])
def test_each_fault_raises_exactly_its_alert_and_each_near_miss_nothing(fault: str, nodes: int) -> None:
    events = run(150_000, (f"{fault}:ql1@10s",), groups=2, nodes=nodes, seed=5)
    alert = CATALOGUE[fault].alert
    family = {k for k in IMPLIED.get(alert or "", ()) if k.startswith("QLOG_")}
    assert check(events) == {"ql1": {alert, *family} if alert else set(), "ql2": set()}
    for e in events:
        assert_shape(e)


@pytest.mark.parametrize("fault", ["qlog_recover_unsafe_near_miss", "qlog_recover_unsynced_near_miss",
                                   "qlog_recover_stuck_near_miss", "qlog_recover_stuck"])
def test_every_recovery_completes_with_its_reconf_executed_by_the_new_membership(fault: str) -> None:
    sim = Simulator(SimOptions(groups=1, nodes=5, duration_ms=150_000, seed=5), [parse_injection(fault)])
    events: list[dict[str, Any]] = []
    sim.sink = events.append
    sim.run()
    new = sim.manifest()[0]["new"]
    passed = [e for e in events if e["type"] == "qlog.passed" and e["recovery"]]
    assert len(passed) == 1 and set(passed[0]["members"]) == set(new)
    done = {e["node"] for e in events if e["type"] == "qlog.decree" and e["num"] == passed[0]["num"]}
    assert set(new) <= done
    failed = sum(e["type"] == "qlog.recover" and e["phase"] == "failed" for e in events)
    assert failed == {"qlog_recover_stuck": 9, "qlog_recover_stuck_near_miss": 1,
                      "qlog_recover_unsynced_near_miss": 1}.get(fault, 0)


def test_the_stale_proposer_passes_with_a_majority_of_its_old_legislature() -> None:
    sim = Simulator(SimOptions(groups=1, nodes=5, duration_ms=60_000, seed=5),
                    [parse_injection("qlog_decree_without_quorum_near_miss")])
    events: list[dict[str, Any]] = []
    sim.sink = events.append
    sim.run()
    f = sim.manifest()[0]
    at = [e for e in events if e["type"] == "qlog.passed" and e["num"] == f["num"]]
    assert [(e["node"] == f["node"], e["leg"]) for e in at] == [(True, f["leg"]), (False, f["leg"] + 1)]
    assert len(at[0]["acked"]) == 3
    executed = {(e["leg"]) for e in events if e["type"] == "qlog.decree" and e["num"] == f["num"]}
    assert executed == {f["leg"] + 1}  # everyone skipped the old legislature's decree


def longest_member_silence(events: list[dict[str, Any]]) -> int:
    """The longest time a member of the newest installed list went without publishing (what
    NODE_SILENT watches: docs/families.md 3.5, members = M(L))."""
    top, members, last, longest = 0, frozenset[str](), dict[str, int](), 0
    for e in sorted(events, key=lambda e: e["ts_ms"]):
        t = e["ts_ms"]
        last[e["node"]] = t
        got = (e["leg"], e["members"]) if e["type"] == "qlog.heartbeat" else \
            (e["new_leg"], e["members"]) if e["type"] == "qlog.decree" and e["kind"] == "reconf" else None
        if got is not None and got[0] > top:
            top, members = got[0], frozenset(got[1])
            last.update({m: max(last.get(m, t), t) for m in members if m not in last})
        longest = max([longest, *(t - last[m] for m in members)])
    return longest


@pytest.mark.parametrize("fault", [None, *sorted(f for f in CATALOGUE
                                                  if "NODE_SILENT" not in IMPLIED.get(CATALOGUE[f].alert or "", ()))])
def test_no_member_goes_silent_for_node_silent_s(fault: str | None) -> None:
    """So the family-agnostic NODE_SILENT (5 s) stays quiet on clean runs and beside each fault
    (but the stuck recovery's, whose group has lost its quorum: ``IMPLIED``)."""
    faults = (f"{fault}:ql1@10s",) if fault else ()
    events = run(150_000, faults, groups=1, nodes=5, seed=5, restart_every_s=10)
    assert longest_member_silence(events) < 5_000
    assert not any(e["type"] == "qlog.heartbeat" and e["suspects"] for e in events)  # QUORUM_* quiet too


def test_a_peer_down_for_5_s_is_suspected() -> None:
    events: list[dict[str, Any]] = []
    sim = Simulator(SimOptions(groups=1, nodes=3, duration_ms=40_000, seed=5, restart_every_s=0,
                               delay_every_s=0), [], events.append)
    while sim.t < 20_000:
        sim.step()
    g = sim.groups["ql1"]
    g.crash(g.nodes["n3"], 7_000)
    sim.run()
    suspected = sorted({(e["ts_ms"] - 1767225600000) // 1000 for e in events
                        if e["type"] == "qlog.heartbeat" and e["suspects"] == ["n3"]})
    assert suspected and suspected[0] >= 24 and suspected[-1] <= 27
    assert not any(e["type"] == "qlog.heartbeat" and e["suspects"] and e["suspects"] != ["n3"] for e in events)


def test_injection_syntax_and_errors() -> None:
    inj = parse_injection("qlog_no_leader:ql2@1.5s")
    assert (inj.fault, inj.group, inj.at_ms) == ("qlog_no_leader", "ql2", 1_500)
    assert parse_injection("qlog_recover_stuck").group == "ql1"
    with pytest.raises(ValueError, match="unknown fault"):
        parse_injection("gen_regression")
    with pytest.raises(ValueError, match="no group"):
        Simulator(SimOptions(groups=1), [parse_injection("qlog_no_leader:ql2")])
    with pytest.raises(ValueError, match="3 replicas"):
        Simulator(SimOptions(nodes=2))


def test_every_alert_of_the_catalogue_has_a_fault_and_a_near_miss() -> None:
    alerts = {spec.alert for spec in CATALOGUE.values()} - {None}
    assert len(alerts) == 9  # docs/families.md 3.7 (QLOG_RECONFIGURED is info, not a fault)
    for name, spec in CATALOGUE.items():
        if spec.alert is not None:
            assert f"{name}_near_miss" in CATALOGUE, name


def test_the_manifest_names_each_fault_and_its_alert() -> None:
    sim = Simulator(SimOptions(groups=1, duration_ms=60_000, seed=5),
                    [parse_injection("qlog_no_leader@10s")])
    summary = sim.run()
    assert summary.faults == [{"fault": "qlog_no_leader", "alert": "QLOG_NO_LEADER", "group": "ql1",
                               "at_ms": 10_000, "ts_ms": 1767225610000, "node": summary.faults[0]["node"],
                               "wedged_ms": 25_000}]


# ---------------------------------------------------------------------------------- the CLI
def test_replimon_simulate_family_qlog(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from replimon.cli import main
    from tests.support import one_error_line

    out = tmp_path / "qlog.jsonl"
    assert main(["simulate", "--family", "qlog", "--seed", "5", "--groups", "2", "--nodes", "5",
                 "--rate", "2", "--duration", "150s", "--out", str(out),
                 "--inject", "qlog_recover_unsafe:ql2@10s"]) == 0
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert {e["group"] for e in events} == {"ql1", "ql2"}
    assert {e["type"] for e in events} == {"qlog.decree", "qlog.passed", "qlog.recover", "qlog.heartbeat"}
    assert check(events) == {"ql1": set(), "ql2": {"QLOG_RECOVER_UNSAFE"}}
    (fault,) = json.loads((tmp_path / "qlog.jsonl.faults.json").read_text())
    assert (fault["fault"], fault["alert"], fault["group"]) == ("qlog_recover_unsafe", "QLOG_RECOVER_UNSAFE", "ql2")
    capsys.readouterr()
    assert main(["simulate", "--family", "qlog", "--list-faults"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in CATALOGUE)
    assert main(["simulate", "--family", "qlog", "--nodes", "2", "--out", str(out)]) == 2
    assert "3 replicas" in one_error_line(capsys)
    assert main(["simulate", "--family", "raft", "--out", str(out)]) == 2
    assert "xcom, gen, qlog or chain" in one_error_line(capsys)


@pytest.mark.parametrize("fault", ["qlog_obsolete_decree_executed", "qlog_divergent_decree", "qlog_recover_unsafe"])
def test_the_frontier_is_one_past_the_highest_passed_decree_at_every_tick(fault: str) -> None:
    """`frontier` keeps the highest number instead of scanning the ledger (a scan made a 20-minute
    demo's driver slower every minute); faults that pass decrees out of order included."""
    sim = Simulator(SimOptions(groups=1, nodes=5, duration_ms=60_000, seed=5), [parse_injection(f"{fault}:ql1@10s")],
                    lambda ev: None)
    g = sim.groups["ql1"]
    while sim.t < 60_000:
        sim.step()
        assert g.frontier() == max(g.ledger, default=0) + 1
