"""The chain-replication simulator (docs/families.md 4.1-4.7): reproducible to the byte, the events
of 4.2 field for field, one seq space per (group, node, incarnation), and clean when clean.

``chain_check`` (tests/producers/chain_check.py) is a batch reference checker of the rules of
docs/families.md 4.4-4.5; the worked examples E6, E7 and E8 of 4.8 pin it down first, so that "the
checker finds nothing" means something.

Every event is checked by the contract's own strict parser (``decode_event``), and the monitor's
rules over the same runs are tested in tests/core/test_chain_simulated.py.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replimon.contract import Invalid, decode_event
from replimon.producers.simulator_chain import (
    CATALOGUE,
    IMPLIED,
    JsonlSink,
    SimOptions,
    Simulator,
    parse_injection,
)
from tests.producers.chain_check import check

T0 = 1767225600000  # the default start (2026-01-01T00:00:00Z)


# ------------------------------------------------------------------ worked examples (4.8)
def _ev(ts: int, node: str, seq: int, type_: str, **body: Any) -> dict[str, Any]:
    return {"v": 1, "type": f"chain.{type_}", "group": "ch1", "node": node, "ts_ms": ts, "seq": seq,
            "incarnation": 0, **body}


def _append(ts: int, node: str, seq: int, assumed: tuple[int, int], epoch: int, pos: int,
            outcome: str = "accepted", origin: str = "upstream", count: int = 1) -> dict[str, Any]:
    return _ev(ts, node, seq, "append", assumed={"epoch": assumed[0], "pos": assumed[1]}, epoch=epoch, pos=pos,
               count=count, origin=origin, outcome=outcome)


def _view(ts: int, node: str, seq: int, from_epoch: int, epoch: int, chain: str, pos: int,
          reason: str | None = None) -> dict[str, Any]:
    extra = {"reason": reason} if reason else {}
    return _ev(ts, node, seq, "view", from_epoch=from_epoch, epoch=epoch, chain=list(chain), pos=pos,
               outcome="rejected" if reason else "installed", **extra)


def _hb(ts: int, node: str, seq: int, epoch: int, chain: str, pos: int, wedged: bool = False) -> dict[str, Any]:
    return _ev(ts, node, seq, "heartbeat", epoch=epoch, chain=list(chain), wedged=wedged, pos=pos, ttl_ms=2000,
               status="active")


def e6(six: str = "bad_sequence", early: bool = False) -> list[dict[str, Any]]:
    """Epoch 10 = [A, B, C]; A suspected; the view manager gives 14 = [B, C, D]."""
    if early:  # #6 accepted before #3: the view then at 102 (C gets 101 first too)
        return [_append(1000, "B", 40, (10, 99), 10, 100), _append(1005, "C", 30, (10, 99), 10, 100),
                _append(1150, "B", 41, (10, 100), 10, 101), _append(1160, "C", 31, (10, 100), 10, 101),
                _view(1200, "B", 42, 10, 14, "BCD", 102), _view(1250, "C", 32, 10, 14, "BCD", 102),
                _append(1300, "A", 77, (10, 100), 10, 101, origin="client")]
    return [_append(1000, "B", 40, (10, 99), 10, 100), _append(1005, "C", 30, (10, 99), 10, 100),
            _view(1200, "B", 41, 10, 14, "BCD", 101), _view(1250, "C", 31, 10, 14, "BCD", 101),
            _append(1300, "A", 77, (10, 100), 10, 101, origin="client"),
            _append(1310, "B", 42, (10, 100), 10, 101, outcome=six)]


def e7() -> list[dict[str, Any]]:
    """E6, then B wedges 14, accepts epoch-14 data, heartbeats; C's last renewal at 1250."""
    return [*e6(), _hb(1250, "C", 32, 14, "BCD", 101),
            _ev(2000, "B", 43, "wedge", epoch=14, reason="suspect_downstream", suspect="C"),
            _append(2500, "B", 44, (14, 101), 14, 102), _hb(3000, "B", 45, 14, "BCD", 102, wedged=True)]


def e8(near_miss: bool = False) -> list[dict[str, Any]]:
    if near_miss:
        return [_view(1000, "A", 1, 19, 20, "ABC", 50), _view(1010, "B", 1, 19, 20, "ABC", 50),
                _append(1100, "A", 2, (20, 50), 20, 51, origin="client"),
                _view(1200, "B", 2, 20, 21, "BC", 51), _append(1300, "B", 3, (21, 51), 21, 52, origin="client")]
    return [_view(1000, "A", 1, 19, 20, "ABC", 50), _view(1010, "B", 1, 19, 20, "ABC", 50),
            _append(1100, "B", 2, (20, 50), 20, 51, origin="client")]


def test_e6_a_stale_epoch_write() -> None:
    assert check(e6(), info=True) == {"ch1": {"CHAIN_VIEW_INSTALLED"}}
    assert check(e6()) == {"ch1": set()}  # #5 is the stale head's own log: legal
    assert check(e6("accepted")) == {"ch1": {"CHAIN_STALE_EPOCH_WRITE"}}
    assert check(e6(early=True)) == {"ch1": set()}


def test_e7_wedged_then_silence() -> None:
    assert check(e7()) == {"ch1": {"CHAIN_WEDGED_WRITE"}}
    assert check(e7(), end=5_250) == {"ch1": {"CHAIN_WEDGED_WRITE"}}
    assert check(e7(), end=5_251) == {"ch1": {"CHAIN_WEDGED_WRITE", "CHAIN_LEASE_EXPIRED"}}
    assert "CHAIN_WEDGE_NOT_REPLACED" not in check(e7(), end=13_999)["ch1"]
    assert "CHAIN_WEDGE_NOT_REPLACED" in check(e7(), end=14_000)["ch1"]
    assert "CHAIN_VIEW_STALE" not in check(e7(), end=15_249)["ch1"]
    assert check(e7(), end=15_250) == {"ch1": {"CHAIN_WEDGED_WRITE", "CHAIN_LEASE_EXPIRED",
                                               "CHAIN_WEDGE_NOT_REPLACED", "CHAIN_VIEW_STALE"}}
    # an install of 15 without C at 12000 resolves both wedges (B's own lease has expired by then)
    replaced = [*e7(), _view(12_000, "B", 46, 14, 15, "BD", 103)]
    assert check(replaced, end=16_000) == {"ch1": {"CHAIN_WEDGED_WRITE", "CHAIN_LEASE_EXPIRED"}}


def test_e8_two_heads() -> None:
    assert check(e8()) == {"ch1": {"CHAIN_TWO_HEADS"}}
    assert check(e8(near_miss=True)) == {"ch1": set()}


def test_the_checker_on_the_other_forms() -> None:
    """The forms the worked examples leave out, each with its near miss."""
    base = [_view(0, "A", 0, 0, 0, "A", 0), _view(10, "A", 1, 0, 14, "AB", 1)]
    # VIEW_NOT_CAS: from an epoch not its own; a rejected one is nothing
    assert check([*base, _view(20, "A", 2, 12, 16, "AB", 2)]) == {"ch1": {"CHAIN_VIEW_NOT_CAS"}}
    assert check([*base, _view(20, "A", 2, 12, 16, "AB", 2, "WrongEpoch")]) == {"ch1": set()}
    assert check([*base, _view(20, "A", 2, 14, 16, "AB", 3)]) == {"ch1": {"CHAIN_VIEW_NOT_CAS"}}
    # the first event seen is not judged; nor the state after a gap, until a heartbeat
    assert check([_view(20, "A", 7, 12, 16, "AB", 9)]) == {"ch1": set()}
    gap = [*base, _hb(30, "A", 5, 14, "AB", 40), _append(40, "A", 6, (14, 40), 14, 41)]
    assert check(gap) == {"ch1": set()}
    # APPEND_NOT_CAS: overwriting; a stale write is only STALE
    assert check([*base, _append(20, "A", 2, (14, 0), 14, 1)]) == {"ch1": {"CHAIN_APPEND_NOT_CAS"}}
    assert check([*base, _append(20, "A", 2, (14, 1), 14, 2, outcome="bad_sequence")]) == {"ch1": set()}
    # ADD_NOT_AT_TAIL: D put before C; at the tail, or a splice, is legal; epoch-0 self-views are no view
    abc = [_view(0, "B", 0, 0, 0, "B", 0), _view(10, "B", 1, 0, 14, "BC", 1)]
    assert check([*abc, _view(20, "B", 2, 14, 15, "BDC", 2)]) == {"ch1": {"CHAIN_ADD_NOT_AT_TAIL"}}
    assert check([*abc, _view(20, "B", 2, 14, 15, "BCD", 2)]) == {"ch1": set()}
    assert check([*abc, _view(20, "B", 2, 14, 15, "C", 2)]) == {"ch1": set()}
    # VIEW_CONFLICT and LOG_DIVERGENCE are set facts; epoch 0 is excluded
    assert check([_view(0, "B", 0, 0, 0, "B", 0), _view(0, "C", 0, 0, 0, "C", 0)]) == {"ch1": set()}
    conflict = [_view(10, "B", 1, 14, 15, "BCD", 9), _view(11, "C", 1, 14, 15, "BDC", 9)]
    assert check(conflict) == {"ch1": {"CHAIN_VIEW_CONFLICT"}}
    places = [_view(10, "B", 1, 14, 15, "BCD", 130), _view(11, "C", 1, 14, 15, "BCD", 131)]
    assert check(places) == {"ch1": {"CHAIN_LOG_DIVERGENCE"}}
    digests = [{**_append(10, "B", 1, (15, 9), 15, 10), "digest": "aa"},
               {**_append(11, "C", 1, (15, 9), 15, 10), "digest": "bb"}]
    assert check(digests) == {"ch1": {"CHAIN_LOG_DIVERGENCE"}}
    # EPOCH_REGRESSION: a lower epoch, same incarnation; a new incarnation starts afresh
    low = [*base, _hb(30, "A", 2, 12, "AB", 1)]
    assert check(low) == {"ch1": {"CHAIN_EPOCH_REGRESSION"}}
    assert check([*base, {**_hb(30, "A", 0, 12, "AB", 1), "incarnation": 1}]) == {"ch1": set()}


def test_the_checker_leases() -> None:
    """Renewals 1.4 s apart are fine (TTL 2 s, skew 2 s); a 5 s gap expires the lease."""
    others = [_hb(t, "A", t // 100, 14, "AC", 0) for t in range(0, 30_000, 100)]
    jitter = [_hb(t, "C", i, 14, "AC", 0) for i, t in enumerate(range(0, 30_000, 1_400))]
    assert check([_view(0, "A", 999, 0, 14, "AC", 1), *others, *jitter]) == {"ch1": set()}
    gap = [_hb(t, "C", i, 14, "AC", 0) for i, t in enumerate([*range(0, 10_000, 1_000), *range(15_000, 30_000, 1_000)])]
    assert check([_view(0, "A", 999, 0, 14, "AC", 1), *others, *gap]) == {"ch1": {"CHAIN_LEASE_EXPIRED"}}


# -------------------------------------------------------------------------------- the runs
def run(duration_ms: int = 60_000, faults: tuple[str, ...] = (), **opts: Any) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    Simulator(SimOptions(duration_ms=duration_ms, **opts), [parse_injection(f) for f in faults],
              events.append).run()
    return events


def jsonl(**opts: Any) -> str:
    out = io.StringIO()
    sink = JsonlSink(out)
    Simulator(SimOptions(**opts), [parse_injection("chain_two_heads@5s")], sink).run()
    return out.getvalue()


def test_the_same_seed_gives_the_same_bytes() -> None:
    opts = {"groups": 2, "duration_ms": 60_000, "crash_every_s": 10}
    a = jsonl(seed=7, **opts)
    assert a == jsonl(seed=7, **opts)
    assert a != jsonl(seed=8, **opts)
    assert len(a.splitlines()) > 1_000


CHAIN_TYPES = ("chain.view", "chain.wedge", "chain.append", "chain.heartbeat")


def assert_shape(e: dict[str, Any]) -> None:
    """docs/families.md 4.2, field for field: the contract's own strict check (models and schema)."""
    verdict = decode_event(json.dumps(e))
    assert not isinstance(verdict, Invalid), (verdict, e)
    assert e["type"] in CHAIN_TYPES, e


def test_every_event_has_the_fields_of_section_4_2() -> None:
    faults = ("chain_wedged_write_near_miss:ch1@10s", "chain_view_not_cas_near_miss:ch2@10s",
              "chain_view_not_cas_near_miss_wrong_epoch:ch3@10s")
    events = run(120_000, faults, groups=3, seed=3, crash_every_s=10)
    kinds = set()
    for e in events:
        assert_shape(e)
        kinds.add((e["type"], e.get("outcome") or e.get("reason") or e["status"], e.get("origin")))
    assert {("chain.view", "installed", None), ("chain.view", "rejected", None),
            ("chain.wedge", "suspect_downstream", None), ("chain.wedge", "suspect_upstream", None),
            ("chain.wedge", "command", None), ("chain.append", "accepted", "client"),
            ("chain.append", "accepted", "upstream"), ("chain.append", "wedged", "upstream"),
            ("chain.append", "bad_sequence", "upstream"), ("chain.heartbeat", "active", None),
            ("chain.heartbeat", "joining", None)} <= kinds
    assert {e["reason"] for e in events if e["type"] == "chain.view" and e["outcome"] == "rejected"} == {
        "WrongEpoch", "BadSequence"}
    assert any("digest" in e for e in events) and any(e["type"] == "chain.append" and e["count"] > 1 for e in events)


def test_seq_counts_per_incarnation_and_time_never_goes_back_per_node() -> None:
    events = run(120_000, groups=2, nodes=4, seed=11, crash_every_s=10)
    seqs: dict[tuple[str, str, int], list[int]] = {}
    last_ts: dict[tuple[str, str], int] = {}
    for e in events:
        seqs.setdefault((e["group"], e["node"], e["incarnation"]), []).append(e["seq"])
        key = (e["group"], e["node"])
        assert e["ts_ms"] >= last_ts.get(key, 0)
        last_ts[key] = e["ts_ms"]
    for key, values in seqs.items():
        assert values == list(range(len(values))), key
    # a replica that lost its store never comes back under its id (duty 2): incarnation stays 0
    assert {inc for _, _, inc in seqs} == {0}
    assert len({node for g, node, _ in seqs if g == "ch1"}) > 4


def test_heartbeats_renew_every_ttl_half_and_carry_ttl_ms() -> None:
    events = run(30_000, groups=1, nodes=3, seed=2, crash_every_s=0)
    for node in ("n1", "n2", "n3"):
        times = [e["ts_ms"] for e in events if e["type"] == "chain.heartbeat" and e["node"] == node]
        gaps = {b - a for a, b in zip(times[1:], times[2:], strict=False)}  # after the boot's first
        assert len(times) >= 30 and gaps == {1_000}, node
    assert {e["ttl_ms"] for e in events if e["type"] == "chain.heartbeat"} == {2_000}


def test_epochs_grow_strictly_not_by_one_and_the_head_writes_each_view_first() -> None:
    events = run(300_000, groups=1, nodes=4, seed=3, crash_every_s=10)
    installs = [e for e in events if e["type"] == "chain.view" and e["outcome"] == "installed" and e["epoch"] > 0]
    first: dict[int, dict[str, Any]] = {}
    for e in installs:
        first.setdefault(e["epoch"], e)
    epochs = list(first)
    assert len(epochs) >= 10 and epochs == sorted(epochs)
    assert any(b - a > 1 for a, b in zip(epochs, epochs[1:], strict=False))
    assert all(e["node"] == e["chain"][0] for e in first.values())  # `views.rs`: the head adopts
    # every replica added by a view is added at the tail, under a new id
    seen: set[str] = set()
    for e in first.values():
        new = [m for m in e["chain"] if m not in seen]
        assert new == e["chain"][len(e["chain"]) - len(new):], e["chain"]
        seen |= set(e["chain"])
    wedges = Counter(e["reason"] for e in events if e["type"] == "chain.wedge")
    assert wedges["suspect_downstream"] and wedges["command"]


@pytest.mark.parametrize(("victim", "wedged"), [(0, {"n2": "suspect_upstream"}),
                                               (2, {"n2": "suspect_downstream", "n1": "command"}),
                                               (4, {"n4": "suspect_downstream", "n1": "command", "n2": "command",
                                                    "n3": "command"})])
def test_a_crash_wedges_then_a_higher_epoch_leaves_it_out_and_a_new_replica_joins_at_the_tail(
        victim: int, wedged: dict[str, str]) -> None:
    """The head crashes (its successor wedges), a middle replica (its upstream and all above
    wedge, not its downstream), the tail (likewise); then the view manager revokes the suspect's
    lease and installs a higher epoch, and an empty replica with a new id joins at the tail."""
    events: list[dict[str, Any]] = []
    sim = Simulator(SimOptions(groups=1, nodes=5, duration_ms=20_000, seed=5, crash_every_s=0), [], events.append)
    while sim.t < 5_000:
        sim.step()
    g = sim.groups["ch1"]
    gone, crashed_at = g.view_chain[victim], g.t
    g.crash(g.nodes[gone])
    sim.run()
    after = [e for e in events if e["ts_ms"] > T0 + 5_000]
    assert {e["node"]: e["reason"] for e in after if e["type"] == "chain.wedge"} == wedged
    assert all(e.get("suspect", gone) == gone for e in after if e["type"] == "chain.wedge")
    wedge_at = min(e["ts_ms"] for e in after if e["type"] == "chain.wedge") - T0
    assert crashed_at + 450 <= wedge_at <= crashed_at + 650  # 0.5 s on (clocks within 40 ms)
    views = [e for e in after if e["type"] == "chain.view" and e["epoch"] > 0]
    first = views[0]
    assert gone not in first["chain"] and first["node"] == first["chain"][0]
    assert first["ts_ms"] - T0 - wedge_at <= 600
    assert views[-1]["chain"][:-1] == first["chain"] and views[-1]["chain"][-1] == "n6"
    assert check(events) == {"ch1": set()}


@pytest.mark.parametrize(("seed", "nodes"), [(0, 3), (1, 4), (2, 5), (3, 7)])
def test_clean_runs_raise_nothing(seed: int, nodes: int) -> None:
    events = run(300_000, groups=3, nodes=nodes, seed=seed, crash_every_s=15)
    assert check(events) == {f"ch{i}": set() for i in (1, 2, 3)}
    assert sum(e["type"] == "chain.wedge" for e in events) > 0


@settings(max_examples=8, deadline=None, database=None)
@given(seed=st.integers(0, 10_000), nodes=st.integers(3, 6),
       crash_every_s=st.sampled_from([0.0, 5.0, 15.0, 40.0]), writes_per_s=st.sampled_from([1.0, 5.0, 20.0]))
def test_random_clean_histories_never_alert(seed: int, nodes: int, crash_every_s: float,
                                            writes_per_s: float) -> None:
    events = run(120_000, groups=1, nodes=nodes, seed=seed, crash_every_s=crash_every_s,
                 writes_per_s=writes_per_s)
    assert check(events) == {"ch1": set()}


# ------------------------------------------------------------------------------------- faults
def expected(fault: str) -> set[str]:
    alert = CATALOGUE[fault].alert
    return {alert, *IMPLIED.get(alert, ())} if alert else set()


def assert_heartbeats_follow_the_published_state(events: list[dict[str, Any]], *, lower_epoch: bool = False) -> None:
    """Duty 1 (families.md 1.2): a node's seq order is the order of its state changes, a run
    published before the heartbeat that follows it. So each heartbeat reports the ``(epoch, pos)``
    its node's earlier events left, and a replica's position never goes back (EXECUTION_REGRESSION
    on ``pos``, 4.4). ``lower_epoch``: a heartbeat may report a lower epoch (the regression fault)."""
    state: dict[tuple[str, str], tuple[int, int]] = {}
    top: dict[tuple[str, str], int] = {}
    for e in sorted(events, key=lambda e: (e["group"], e["node"], e["seq"])):
        key = (e["group"], e["node"])
        epoch, pos = state.get(key, (0, 0))
        if e["type"] == "chain.view" and e["outcome"] == "installed":
            epoch, pos = e["epoch"], e["pos"]
        elif e["type"] == "chain.append" and e["outcome"] == "accepted":
            pos = e["pos"] + e["count"] - 1
            epoch = max(epoch, e["epoch"])
        elif e["type"] == "chain.heartbeat":
            assert e["pos"] == pos, e
            assert e["epoch"] == epoch or (lower_epoch and e["epoch"] < epoch), e
        assert pos >= top.get(key, 0), e
        top[key] = pos
        state[key] = (epoch, pos)


@settings(max_examples=8, deadline=None, database=None)
@given(seed=st.integers(0, 10_000), nodes=st.integers(3, 6), crash_every_s=st.sampled_from([3.0, 10.0]),
       writes_per_s=st.sampled_from([1.0, 5.0, 20.0]))
def test_random_runs_publish_each_state_change_before_the_heartbeat_after_it(
        seed: int, nodes: int, crash_every_s: float, writes_per_s: float) -> None:
    events = run(60_000, groups=1, nodes=nodes, seed=seed, crash_every_s=crash_every_s, writes_per_s=writes_per_s)
    assert_heartbeats_follow_the_published_state(events)


@settings(max_examples=12, deadline=None, database=None)
@given(fault=st.sampled_from(sorted(CATALOGUE)), nodes=st.integers(3, 6), seed=st.integers(0, 10_000),
       at_s=st.integers(1, 30), crash_every_s=st.sampled_from([0.0, 20.0]))
def test_random_injections_raise_exactly_their_alert(fault: str, nodes: int, seed: int, at_s: int,
                                                     crash_every_s: float) -> None:
    """Any size, seed and start: a fault raises its kind (and what it implies), a near miss
    nothing, and every replica still publishes its state changes in order."""
    events = run(at_s * 1_000 + 60_000, (f"{fault}:ch1@{at_s}s",), groups=1, nodes=nodes, seed=seed,
                 crash_every_s=crash_every_s)
    assert check(events) == {"ch1": expected(fault)}
    assert_heartbeats_follow_the_published_state(events, lower_epoch=fault == "chain_epoch_regression")


@pytest.mark.parametrize("fault", sorted(CATALOGUE))
@pytest.mark.parametrize("nodes", [3, 5])
def test_each_fault_raises_exactly_its_alert_and_each_near_miss_nothing(fault: str, nodes: int) -> None:
    events = run(90_000, (f"{fault}:ch1@10s",), groups=2, nodes=nodes, seed=5)
    assert check(events) == {"ch1": expected(fault), "ch2": set()}
    for e in events:
        assert_shape(e)


def longest_member_silence(events: list[dict[str, Any]]) -> int:
    """The longest time a member of the newest installed chain went without publishing (what
    NODE_SILENT watches: docs/families.md 4.5, members = C(E))."""
    top, members, last, longest = 0, frozenset[str](), dict[str, int](), 0
    for e in sorted(events, key=lambda e: e["ts_ms"]):
        t = e["ts_ms"]
        last[e["node"]] = t
        if e["type"] == "chain.view" and e["outcome"] == "installed" and e["epoch"] > top:
            top, members = e["epoch"], frozenset(e["chain"])
            last.update({m: t for m in members if m not in last})
        longest = max([longest, *(t - last[m] for m in members)])
    return longest


@pytest.mark.parametrize("fault", [None, *sorted(CATALOGUE)])
def test_no_member_goes_silent_for_node_silent_s(fault: str | None) -> None:
    """So the family-agnostic NODE_SILENT (5 s) stays quiet on clean runs and beside each fault."""
    faults = (f"{fault}:ch1@10s",) if fault else ()
    events = run(90_000, faults, groups=1, nodes=5, seed=5, crash_every_s=10)
    assert longest_member_silence(events) < 5_000


def test_the_fault_evidence() -> None:
    """What each near miss shows: the answer that keeps it legal."""
    def outcomes(fault: str) -> Counter[tuple[str, str]]:
        events = run(60_000, (f"{fault}:ch1@10s",), groups=1, nodes=3, seed=5, crash_every_s=0)
        return Counter((e["type"], e.get("reason") or e.get("outcome") or "") for e in events)

    assert outcomes("chain_wedged_write_near_miss")[("chain.append", "wedged")] >= 1
    assert outcomes("chain_stale_epoch_write_near_miss")[("chain.append", "bad_sequence")] >= 3
    assert outcomes("chain_append_not_cas_near_miss")[("chain.append", "bad_sequence")] == 1
    assert outcomes("chain_view_not_cas_near_miss")[("chain.view", "BadSequence")] == 1
    assert outcomes("chain_view_not_cas_near_miss_wrong_epoch")[("chain.view", "WrongEpoch")] == 1
    assert outcomes("chain_wedge_not_replaced")[("chain.wedge", "suspect_downstream")] == 1


def test_injection_syntax_and_errors() -> None:
    inj = parse_injection("chain_two_heads:ch2@1.5s")
    assert (inj.fault, inj.group, inj.at_ms) == ("chain_two_heads", "ch2", 1_500)
    assert parse_injection("chain_view_stale").group == "ch1"
    with pytest.raises(ValueError, match="unknown fault"):
        parse_injection("qlog_no_leader")
    with pytest.raises(ValueError, match="no group"):
        Simulator(SimOptions(groups=1), [parse_injection("chain_two_heads:ch2")])
    with pytest.raises(ValueError, match="3 replicas"):
        Simulator(SimOptions(nodes=2))


def test_every_alert_of_the_catalogue_has_a_fault_and_a_near_miss() -> None:
    alerts = {spec.alert for spec in CATALOGUE.values()} - {None}
    assert len(alerts) == 12  # docs/families.md 4.7 (CHAIN_VIEW_INSTALLED is info, not a fault)
    for name, spec in CATALOGUE.items():
        assert name.startswith("chain_")
        if spec.alert is not None:
            assert name == spec.alert.lower() and f"{name}_near_miss" in CATALOGUE, name


def test_the_manifest_names_each_fault_and_its_alert() -> None:
    sim = Simulator(SimOptions(groups=1, duration_ms=60_000, seed=5),
                    [parse_injection("chain_wedge_not_replaced@10s")])
    summary = sim.run()
    (fault,) = summary.faults
    assert {k: fault[k] for k in ("fault", "alert", "group", "at_ms", "ts_ms", "stalled_ms")} == {
        "fault": "chain_wedge_not_replaced", "alert": "CHAIN_WEDGE_NOT_REPLACED", "group": "ch1",
        "at_ms": 10_000, "ts_ms": T0 + 10_000, "stalled_ms": 20_000}
    assert summary.per_group["ch1"]["views"] >= 2


# ---------------------------------------------------------------------------------- the CLI
def test_chain_events_go_to_the_topics_of_section_1_3() -> None:
    """``--kafka`` publishes each event to its type's topic (families.md 1.3). The mapping lives in
    the contract (``EVENT_TOPICS``), which gains the chain types with the chain contract."""
    from replimon.config import Topics
    from replimon.contract import EVENT_TOPICS

    assert {t: EVENT_TOPICS.get(t) for t in CHAIN_TYPES} == {
        "chain.append": "decisions", "chain.heartbeat": "heartbeats", "chain.view": "config",
        "chain.wedge": "config"}
    topics = Topics()
    assert {t: topics.for_event_type(t) for t in CHAIN_TYPES} == {
        "chain.append": topics.decisions, "chain.heartbeat": topics.heartbeats,
        "chain.view": topics.config, "chain.wedge": topics.config}


def test_replimon_simulate_family_chain(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from replimon.cli import main
    from tests.support import one_error_line

    out = tmp_path / "chain.jsonl"
    assert main(["simulate", "--family", "chain", "--seed", "5", "--groups", "2", "--nodes", "4",
                 "--rate", "4", "--duration", "60s", "--out", str(out),
                 "--inject", "chain_two_heads:ch2@10s"]) == 0
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert {e["group"] for e in events} == {"ch1", "ch2"}
    assert {e["type"] for e in events} == {"chain.view", "chain.wedge", "chain.append", "chain.heartbeat"}
    assert check(events) == {"ch1": set(), "ch2": {"CHAIN_TWO_HEADS"}}
    (fault,) = json.loads((tmp_path / "chain.jsonl.faults.json").read_text())
    assert (fault["fault"], fault["alert"], fault["group"]) == ("chain_two_heads", "CHAIN_TWO_HEADS", "ch2")
    capsys.readouterr()
    assert main(["simulate", "--family", "chain", "--list-faults"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in CATALOGUE)
    assert main(["simulate", "--family", "chain", "--nodes", "2", "--out", str(out)]) == 2
    assert "3 replicas" in one_error_line(capsys)
    assert main(["simulate", "--family", "raft", "--out", str(out)]) == 2
    assert "xcom, gen, qlog or chain" in one_error_line(capsys)
