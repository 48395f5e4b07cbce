"""A clock far ahead (replimon.core.clocks, docs/operations.md "Clocks"): one node 10 years ahead
gives one CLOCK_SKEW and nothing in any other group, wherever its events come in the input; a node
within the bound, or behind, is not reported."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from replimon.core import Monitor
from replimon.core.alerts import KINDS
from replimon.core.clocks import judge, trusted_latest
from replimon.core.limits import Limits
from replimon.producers.simulator import SimOptions, Simulator

YEARS_10 = 10 * 365 * 86_400_000
BAD = ("g2", "n1")


def trace() -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    Simulator(SimOptions(duration_ms=90_000, groups=3, nodes=3, seed=1), [], events.append).run()
    return events


def shifted(events: list[dict[str, Any]], ahead: int, first: bool = False) -> list[dict[str, Any]]:
    out = [dict(e, ts_ms=e["ts_ms"] + ahead) if (e["group"], e["node"]) == BAD else e for e in events]
    if first:  # the bad node's first event is the first of the input: nothing to judge it by yet
        i = next(i for i, e in enumerate(out) if (e["group"], e["node"]) == BAD)
        out.insert(0, out.pop(i))
    return out


def kinds(alerts: list[Any]) -> Counter[tuple[str, str]]:
    return Counter((a.group, a.kind) for a in alerts if KINDS[a.kind][1] != "info")


@pytest.mark.parametrize("first", [False, True], ids=["mid-stream", "first-event"])
def test_one_node_ten_years_ahead_is_one_alert_and_nothing_else(first: bool) -> None:
    clean = Monitor().run(trace())
    alerts = Monitor().run(shifted(trace(), YEARS_10, first))
    assert kinds(alerts) == kinds(clean) + Counter({("g2", "CLOCK_SKEW"): 1})
    skew = next(a for a in alerts if a.kind == "CLOCK_SKEW")
    assert skew.node == "n1" and skew.severity == "warning" and skew.category == "data"
    end = trace()[-1]["ts_ms"]
    assert skew.evidence[0]["ts_ms"] > end + YEARS_10 // 2  # the event as the node stamped it
    # No alert is dated in the future, and the outside clock stayed with the others.
    assert max(a.event_ts_ms for a in alerts) <= end
    assert max(a.detected_ts_ms for a in alerts) <= end


def test_the_same_history_gives_the_same_clock_skew_id() -> None:
    a = [x.alert_id for x in Monitor().run(shifted(trace(), YEARS_10)) if x.kind == "CLOCK_SKEW"]
    b = [x.alert_id for x in Monitor().run(shifted(trace(), YEARS_10)) if x.kind == "CLOCK_SKEW"]
    assert a == b and len(a) == 1


@pytest.mark.parametrize("ahead", [10_000, -60_000, 299_000], ids=["10s-ahead", "60s-behind", "299s-ahead"])
def test_near_miss_within_the_bound_or_behind_is_no_clock_skew(ahead: int) -> None:
    clean = Monitor().run(trace())
    alerts = Monitor().run(shifted(trace(), ahead))
    assert "CLOCK_SKEW" not in {a.kind for a in alerts}
    # Nothing changes, in any group: the node's own group measures its members' silences from
    # when they were heard on its clock (docs/operations.md, "Clocks"; tests/core/test_clocks_lead.py).
    assert kinds(alerts) == kinds(clean)


def test_the_bound_is_configurable() -> None:
    alerts = Monitor(Limits(clock_skew_ms=5_000)).run(shifted(trace(), 10_000))
    assert [a.node for a in alerts if a.kind == "CLOCK_SKEW"] == ["n1"]


def test_a_gap_in_the_capture_is_not_a_skewed_clock() -> None:
    # Every node jumps an hour ahead together (a capture with a gap): the first node after the
    # gap is held until another node confirms its time.
    events = trace()
    cut = len(events) // 2
    gapped = events[:cut] + [dict(e, ts_ms=e["ts_ms"] + 3_600_000) for e in events[cut:]]
    assert "CLOCK_SKEW" not in {a.kind for a in Monitor().run(gapped)}


def test_a_node_whose_clock_comes_back_is_trusted_again() -> None:
    events = trace()
    half = (events[0]["ts_ms"] + events[-1]["ts_ms"]) // 2
    bad = [dict(e, ts_ms=e["ts_ms"] + YEARS_10) if (e["group"], e["node"]) == BAD and e["ts_ms"] < half else e
           for e in events]
    mon = Monitor()
    alerts = mon.run(bad)
    assert [a.kind for a in alerts].count("CLOCK_SKEW") == 1
    assert mon.groups["g2"].ctx.nodes["n1"].last_ts >= events[-1]["ts_ms"] - 5_000


def test_judge_and_trusted_latest() -> None:
    assert judge(10_001, 0, 10_000) and not judge(10_000, 0, 10_000) and not judge(5, None, 1)
    assert not judge(-100, 0, 10)  # behind is never skewed
    evs = [{"group": "a", "node": "x", "ts_ms": 1_000}, {"group": "b", "node": "y", "ts_ms": 2_000},
           {"group": "b", "node": "z", "ts_ms": YEARS_10}]
    assert trusted_latest(evs, 300_000) == {"a": 1_000, "b": 2_000}
    assert trusted_latest(evs[2:], 300_000) == {"b": YEARS_10}  # alone: nothing to judge it by
