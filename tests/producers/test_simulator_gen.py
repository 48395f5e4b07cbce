"""The generations simulator (docs/families.md 2.1, 2.7): reproducible to the byte, contract-valid,
one seq space per (group, node, incarnation), and clean when clean.

``gen_check`` (tests/producers/gen_check.py) is a batch reference checker of the rules of
docs/families.md 2.4-2.5; the worked examples E1-E3 of 2.8 pin it down first, so that "the
checker finds nothing" means something.
"""

from __future__ import annotations

import io
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replimon.contract import Invalid, parse_event
from replimon.contract.fast import accepts
from replimon.contract.parse import SCHEMA_PATH
from replimon.producers.simulator_gen import (
    CATALOGUE,
    JsonlSink,
    SimOptions,
    Simulator,
    parse_injection,
)
from tests.contract.gen_cases import WORKED
from tests.producers.gen_check import check

EXPECTED = {"E1": {"GEN_ONLINE_UNRECOVERED"}, "E1-near-miss": set(),
            "E2": {"GEN_VOTE_PROMISE_BROKEN"}, "E2-near-miss": set(),
            "E3": {"GEN_DONOR_STALE"}, "E3-near-miss": set(), "E3-aborted": set()}


def run(duration_ms: int = 60_000, faults: tuple[str, ...] = (), **opts: Any) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    Simulator(SimOptions(duration_ms=duration_ms, **opts), [parse_injection(f) for f in faults],
              events.append).run()
    return events


def jsonl(**opts: Any) -> str:
    buf = io.StringIO()
    Simulator(SimOptions(**opts), [], JsonlSink(buf)).run()
    return buf.getvalue()


@pytest.mark.parametrize("example", sorted(EXPECTED))
def test_the_checker_on_the_worked_examples(example: str) -> None:
    assert check(WORKED[example]) == {"pg1": EXPECTED[example]}


def test_same_seed_same_bytes_other_seed_other_bytes() -> None:
    a = jsonl(seed=7, groups=2, nodes=3, duration_ms=60_000, restart_every_s=10)
    assert a == jsonl(seed=7, groups=2, nodes=3, duration_ms=60_000, restart_every_s=10)
    assert a != jsonl(seed=8, groups=2, nodes=3, duration_ms=60_000, restart_every_s=10)
    assert len(a.splitlines()) > 1_000


def test_every_event_is_contract_valid_and_matches_the_schema() -> None:
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))
    events = run(120_000, groups=2, nodes=3, seed=3, restart_every_s=10)
    kinds = set()
    for event in events:
        raw = json.dumps(event, separators=(",", ":"))
        parsed = parse_event(raw)
        assert not isinstance(parsed, Invalid), (parsed, raw)
        assert accepts(json.loads(raw)), raw  # every simulator event takes the fast path
        validator.validate(event)
        kinds.add((event["type"], event.get("cause") or event.get("phase") or event["node_status"]))
    assert {("gen.state", c) for c in ("load", "switch", "online", "vote")} <= kinds
    assert {("gen.xact", p) for p in ("prepared", "committed", "aborted")} <= kinds
    assert {("gen.heartbeat", "online"), ("gen.heartbeat", "recovery")} <= kinds


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
    events = run(30_000, groups=1, nodes=3, seed=2, restart_every_s=0)
    for node in ("n1", "n2", "n3"):
        times = [e["ts_ms"] for e in events if e["type"] == "gen.heartbeat" and e["node"] == node]
        assert len(times) == 30 and {b - a for a, b in zip(times, times[1:], strict=False)} == {1_000}


def test_sampling_is_crc32_of_the_gid() -> None:
    import zlib
    events = run(30_000, groups=1, nodes=3, seed=4, xact_sample=3)
    gids = {e["gid"] for e in events if e["type"] == "gen.xact"}
    assert gids and all(zlib.crc32(g.encode()) % 3 == 0 for g in gids)
    assert not [e for e in run(10_000, groups=1, seed=4, xact_sample=0) if e["type"] == "gen.xact"]


@pytest.mark.parametrize(("seed", "nodes"), [(0, 3), (1, 3), (2, 5), (3, 4), (4, 2)])
def test_clean_runs_raise_nothing(seed: int, nodes: int) -> None:
    # restarts every ~15 s: nodes are excluded, rejoin by campaigning, recover to ParallelSafe
    events = run(400_000, groups=3, nodes=nodes, seed=seed, restart_every_s=15)
    assert check(events) == {f"pg{i}": set() for i in (1, 2, 3)}
    causes = {e.get("cause") for e in events}
    assert {"load", "switch", "online", "vote"} <= causes
    gens = max(e["gen"]["num"] for e in events if e["type"] == "gen.state")
    assert gens > 10  # many generations were elected
    assert sum(e["type"] == "gen.xact" and e["phase"] == "committed" for e in events) > 1_000


@settings(max_examples=8, deadline=None, database=None)
@given(seed=st.integers(0, 10_000), nodes=st.integers(2, 5),
       restart_every_s=st.sampled_from([4.0, 10.0, 30.0]), xact_sample=st.integers(0, 5))
def test_random_clean_histories_never_alert(seed: int, nodes: int, restart_every_s: float,
                                            xact_sample: int) -> None:
    events = run(120_000, groups=1, nodes=nodes, seed=seed, restart_every_s=restart_every_s,
                 xact_sample=xact_sample)
    assert check(events) == {"pg1": set()}


def test_a_clean_run_satisfies_the_tla_invariants() -> None:
    """LastVoteGECurrentGen, EachGenHasDonor, no regression, one member set per number, stated
    directly (the checker's GEN_STATE_INCONSISTENT, GEN_REGRESSION, GEN_MEMBERS_CONFLICT)."""
    events = run(300_000, groups=2, nodes=3, seed=9, restart_every_s=10)
    gens: dict[tuple[str, int], tuple[list[str], list[str]]] = {}
    top: dict[tuple[str, str], tuple[int, int, int]] = {}
    for e in events:
        if e["type"] == "gen.state":
            num, lv, loi = e["gen"]["num"], e["last_vote"]["num"], e["last_online_in"]
            assert lv >= num and loi <= num and e["donors"]
            sets = (e["gen"]["members"], e["gen"]["configured"])
            assert gens.setdefault((e["group"], num), sets) == sets
        elif e["type"] == "gen.heartbeat":
            num, lv, loi = e["gen_num"], e["last_vote_num"], e["last_online_in"]
            assert lv >= num >= loi
        else:
            continue
        key = (e["group"], e["node"])
        before = top.get(key, (0, 0, 0))
        assert (num, lv, loi) >= before and all(a >= b for a, b in zip((num, lv, loi), before, strict=True))
        top[key] = (num, lv, loi)


# ------------------------------------------------------------------------------------- faults
@pytest.mark.parametrize("fault", sorted(CATALOGUE))
def test_each_fault_raises_exactly_its_alert_and_each_near_miss_nothing(fault: str) -> None:
    events = run(150_000, (f"{fault}:pg1@10s",), groups=2, nodes=3, seed=5)
    alert = CATALOGUE[fault].alert
    assert check(events) == {"pg1": {alert} if alert else set(), "pg2": set()}
    for raw in map(json.dumps, events):
        assert not isinstance(parse_event(raw), Invalid), raw
        assert accepts(json.loads(raw)), raw


def test_injection_syntax_and_errors() -> None:
    inj = parse_injection("gen_regression:pg2@1.5s")
    assert (inj.fault, inj.group, inj.at_ms) == ("gen_regression", "pg2", 1_500)
    assert parse_injection("gen_no_online").group == "pg1"
    with pytest.raises(ValueError, match="unknown fault"):
        parse_injection("beyond_horizon")
    with pytest.raises(ValueError, match="no group"):
        Simulator(SimOptions(groups=1), [parse_injection("gen_regression:pg2")])
    with pytest.raises(ValueError, match="3 nodes"):
        Simulator(SimOptions(nodes=2), [parse_injection("gen_regression")])


def test_every_alert_of_the_catalogue_has_a_fault_and_a_near_miss() -> None:
    alerts = {spec.alert for spec in CATALOGUE.values()} - {None}
    assert len(alerts) == 13  # docs/families.md 2.7 (GEN_ELECTED is info, not a fault)
    for name, spec in CATALOGUE.items():
        if spec.alert is not None:
            assert f"{name}_near_miss" in CATALOGUE, name


def test_the_manifest_names_each_fault_and_its_alert() -> None:
    sim = Simulator(SimOptions(groups=1, duration_ms=60_000, seed=5),
                    [parse_injection("gen_xact_divergent@10s")])
    summary = sim.run()
    assert summary.faults == [{"fault": "gen_xact_divergent", "alert": "GEN_XACT_DIVERGENT",
                               "group": "pg1", "at_ms": 10_000, "ts_ms": 1767225610000,
                               "gid": summary.faults[0]["gid"]}]
