"""What the rule tests of the protocol families share (``tests/core/test_qlog_rules.py``,
``test_chain_rules.py``): a trace of one group's events written as the contract's dicts, each
checked by the contract's parser as it is written, with one seq space per node and incarnation
(duty 1); and the two checks every family's worked histories pass: the state saved and restored
through JSON at any cut changes nothing, and the same alert ids whatever the arrival order within
the skew."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from typing import Any

from replimon.contract import Invalid, decode_event
from replimon.core import GroupMonitor, Monitor
from replimon.core.alerts import Alert
from replimon.core.limits import Limits
from tests.core.test_properties import shuffle_within

T0 = 1_700_000_000_000
SKEW_MS = Limits().skew_ms


class EventTrace:
    """Events of one group, each replica with its own seq; ``ts`` is relative to ``T0``."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.events: list[dict[str, Any]] = []
        self.seq: dict[tuple[str, int], int] = {}
        self.inc: dict[str, int] = {}

    def _emit(self, node: str, etype: str, ts: int, **fields: Any) -> dict[str, Any]:
        inc = self.inc.get(node, 0)
        s = self.seq.get((node, inc), 0)
        self.seq[(node, inc)] = s + 1
        ev = {"v": 1, "type": etype, "group": self.group, "node": node, "ts_ms": T0 + ts, "seq": s,
              "incarnation": inc, **fields}
        assert not isinstance(decode_event(json.dumps(ev)), Invalid), decode_event(json.dumps(ev))
        self.events.append(ev)
        return ev

    def restart(self, node: str) -> None:
        self.inc[node] = self.inc.get(node, 0) + 1


def assert_state_through_json_changes_nothing(events: list[dict[str, Any]], group: str, *,
                                              timer_after_ms: int, cuts: Iterable[int] | None = None) -> None:
    """The alerts of ``events`` (then a timer ``timer_after_ms`` after the last, then the end of
    input) are the same when the monitor is saved and restored through JSON before any event
    (or before each of ``cuts``: a long simulated run)."""

    def run(cut: int | None) -> list[dict[str, Any]]:
        g = GroupMonitor(group)
        out: list[Alert] = []
        for i, ev in enumerate(events):
            if i == cut:
                state = json.loads(json.dumps(g.to_state()))
                g = GroupMonitor.from_state(state)
                assert json.loads(json.dumps(g.to_state())) == state
            out.extend(g.on_event(ev))
        out += g.on_timer(events[-1]["ts_ms"] + timer_after_ms)
        out += g.flush()
        return [a.to_dict() for a in out]

    whole = run(None)
    assert whole  # every history raises something
    for cut in range(1, len(events)) if cuts is None else cuts:
        assert run(cut) == whole, cut


def assert_same_ids_whatever_the_arrival_order(events: list[dict[str, Any]], seeds: int = 20) -> None:
    """The alerts' (kind, id, status) of ``events`` arriving in order and shuffled within the skew
    (each node's too: admission restores its order)."""
    want = {(a.kind, a.alert_id, a.status) for a in Monitor().run(events)}
    for seed in range(seeds):
        shuffled = shuffle_within(events, random.Random(seed), SKEW_MS, keep_node_order=False)
        assert {(a.kind, a.alert_id, a.status) for a in Monitor().run(shuffled)} == want, seed


def in_time_order(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` sorted by time, each replica's seq renumbered in that order (it publishes in its
    own time order: duty 1)."""
    events.sort(key=lambda e: e["ts_ms"])
    seqs: dict[str, int] = {}
    for e in events:
        e["seq"] = seqs.get(e["node"], 0)
        seqs[e["node"]] = e["seq"] + 1
    return events


def info_only_whatever_the_arrival_order(events: list[dict[str, Any]], seed: int) -> set[tuple[str, str]]:
    """Assert that ``events`` raise nothing but info kinds, in order and shuffled within the skew
    (arrival by ``seed``), with the same ids; return those (kind, id)."""
    alerts = Monitor().run(events)
    assert [(a.kind, a.node, a.message) for a in alerts if a.severity != "info"] == []
    info = {(a.kind, a.alert_id) for a in alerts}
    again = Monitor().run(shuffle_within(events, random.Random(seed), SKEW_MS, keep_node_order=False))
    assert [(a.kind, a.node, a.message) for a in again if a.severity != "info"] == []
    assert {(a.kind, a.alert_id) for a in again} == info
    return info
