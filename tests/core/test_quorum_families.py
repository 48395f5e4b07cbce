"""QUORUM_AT_RISK / QUORUM_LOST in every family that has a quorum (SPEC section 8; docs/rules.md,
"QUORUM_AT_RISK / QUORUM_LOST", and each family's inputs): a majority of the members silent is
QUORUM_LOST whatever the survivors' ``suspects`` say; one of three silent is at most
QUORUM_AT_RISK; the generations campaign near miss (every node isolated 8 s, each suspecting the
others, every one still publishing) raises no quorum alert, because the family counts silence
only. XCom's own cases are in ``test_rules.py``; the chain family has no quorum."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from replimon.core import GroupMonitor, Monitor
from replimon.core.alerts import Alert
from replimon.core.rules.gen.family import GenRules
from tests.support.family_trace import T0, EventTrace

ABC = ["A", "B", "C"]
QUORUM = {"QUORUM_AT_RISK", "QUORUM_LOST"}


class GenTrace(EventTrace):
    """A generations group ``pg``: one switch to generation 7 of A, B, C, then heartbeats."""

    def __init__(self, configured: list[str] = ABC) -> None:
        super().__init__("pg")
        self.configured = configured
        gen = {"num": 7, "members": configured, "configured": configured}
        for n in configured:
            self._emit(n, "gen.state", 0, cause="switch", gen=gen, donors=[configured[0]],
                       last_online_in=7, last_vote=gen, status="ONLINE")

    def beat(self, node: str, ts: int, *, status: str = "online", suspects: Iterable[str] = ()) -> None:
        self._emit(node, "gen.heartbeat", ts, gen_num=7, last_online_in=7, last_vote_num=7,
                   node_status=status, suspects=list(suspects), xact_sample=0)


class QlogTrace(EventTrace):
    """A quorum-log group ``ql`` in legislature 3 of A, B, C, A leading."""

    def __init__(self) -> None:
        super().__init__("ql")

    def beat(self, node: str, ts: int, *, status: str = "online", suspects: Iterable[str] = ()) -> None:
        self._emit(node, "qlog.heartbeat", ts, leg=3, members=ABC, watermark=10, leader="A",
                   status="ok", suspects=list(suspects))


def run(t: EventTrace, *, until: int, silent: Iterable[str] = (), from_ms: int = 5_000,
        suspects: dict[str, list[str]] | None = None, status: str = "online") -> list[Alert]:
    """Every node beats each second until ``from_ms``; from then on ``silent`` stop and the others
    beat with ``suspects`` until ``until``; then a timer at ``until``."""
    silent = set(silent)
    nodes = t.configured if isinstance(t, GenTrace) else ABC
    for ts in range(1000, until, 1000):
        for n in nodes:
            if ts >= from_ms and n in silent:
                continue
            later = ts >= from_ms
            t.beat(n, ts, status=status if later else "online",  # type: ignore[attr-defined]
                   suspects=(suspects or {}).get(n, []) if later else [])
    g = GroupMonitor(t.group)
    out: list[Alert] = []
    for ev in t.events:
        out += g.on_event(ev)
    return out + g.on_timer(T0 + until)


def kinds(alerts: list[Alert]) -> set[str]:
    return {a.kind for a in alerts if a.severity != "info"}


TRACES = {"gen": GenTrace, "qlog": QlogTrace}


@pytest.mark.parametrize("family", sorted(TRACES))
def test_a_majority_silent_is_quorum_lost(family: str) -> None:
    # B and C crash; A alone is left, suspecting them: one vote is no majority of suspicions, the
    # silence is what says the quorum is lost.
    alerts = run(TRACES[family](), until=20_000, silent="BC", suspects={"A": ["B", "C"]},
                 status="isolated")
    lost = [a for a in alerts if a.kind == "QUORUM_LOST"]
    assert [a.status for a in lost] == ["firing"]
    assert "1 of 3 members" in lost[0].message and "silent: B, C" in lost[0].message
    silent = [a for a in alerts if a.kind == "NODE_SILENT"]
    assert {a.node for a in silent} == {"B", "C"}
    assert lost[0].event_ts_ms >= max(a.detected_ts_ms for a in silent)
    assert {e["node"] for e in lost[0].evidence} >= {"B", "C"}
    assert not kinds(alerts) & {"QUORUM_AT_RISK"}


@pytest.mark.parametrize("family", sorted(TRACES))
def test_one_of_three_silent_is_at_most_at_risk(family: str) -> None:
    # C crashes: A and B miss it too (their suspects name it): a bare majority is live.
    crashed = run(TRACES[family](), until=30_000, silent="C", suspects={"A": ["C"], "B": ["C"]})
    assert kinds(crashed) == {"NODE_SILENT", "QUORUM_AT_RISK"}
    # Only C's publisher stops (nobody misses C): NODE_SILENT alone.
    quiet = run(TRACES[family](), until=30_000, silent="C")
    assert kinds(quiet) == {"NODE_SILENT"}


@pytest.mark.parametrize("family", sorted(TRACES))
def test_the_quorum_is_back_when_the_silent_publish_again(family: str) -> None:
    t = TRACES[family]()
    alerts = run(t, until=20_000, silent="BC", suspects={"A": ["B", "C"]}, status="isolated")
    g = GroupMonitor(t.group)
    out = [a for ev in t.events for a in g.on_event(ev)]
    for ts in range(20_000, 24_000, 1000):
        for n in ABC:
            t.beat(n, ts)  # type: ignore[attr-defined]
            out += g.on_event(t.events[-1])
    lost = [a for a in out if a.kind == "QUORUM_LOST"]
    assert [a.status for a in lost] == ["firing", "resolved"] and lost[0].alert_id == lost[1].alert_id
    # the resolution cites the members that came back, not the firing's evidence again
    back = lost[1].evidence
    assert {e["node"] for e in back} == {"B", "C"} and min(e["ts_ms"] for e in back) >= T0 + 20_000
    assert {a.alert_id for a in alerts if a.kind == "QUORUM_LOST"} == {lost[0].alert_id}


def campaign(isolated_ms: int) -> list[dict[str, Any]]:
    """docs/families.md 2.7, GEN_NO_ONLINE: every node cut off from the others for
    ``isolated_ms`` during a campaign; each keeps publishing, suspecting the other two."""
    t = GenTrace()
    for ts in range(1000, 40_000, 1000):
        cut = 10_000 <= ts < 10_000 + isolated_ms
        for n in ABC:
            t.beat(n, ts, status="isolated" if cut else "online",
                   suspects=[m for m in ABC if m != n] if cut else [])
    return t.events


def test_the_campaign_near_miss_raises_no_quorum_alert() -> None:
    assert kinds(Monitor().run(campaign(8_000))) == set()
    assert kinds(Monitor().run(campaign(20_000))) == {"GEN_NO_ONLINE"}  # the fault: its own kind


def test_the_campaign_near_miss_would_fire_if_suspicions_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    # Why generations count silence only: the heartbeats' suspicions say every node is cut off.
    monkeypatch.setattr(GenRules, "suspicions", True)
    assert "QUORUM_LOST" in kinds(Monitor().run(campaign(8_000)))


def test_a_two_node_generations_cluster_survives_one_node() -> None:
    # mtm may run two nodes with a referee: one of two is a quorum (nothing but NODE_SILENT).
    alerts = run(GenTrace(["A", "B"]), until=30_000, silent="B", suspects={"A": ["B"]})
    assert kinds(alerts) == {"NODE_SILENT"}
