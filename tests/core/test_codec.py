"""The stored state of a group monitor (``to_state``/``from_state``, ``replimon.core.codec``).

Spark's state store and the checkpoint records keep ``to_state()``: a state written by any code
of ``STATE_VERSION`` 1 must load, and the same history must give the same state key for key.
``golden/state_v1.json`` was written once, by the monitor as it stood before its rules were split
into components: group g2's state in the middle of a simulator trace (a CONFIG_MISMATCH fault,
arrival order disturbed within the skew), with a report held for a second opinion, an open
can_leave check and events held for a gap, plus the alerts that run gave after that point. It
stands for a checkpoint in the field: never regenerate it.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from replimon.core import STATE_VERSION, GroupMonitor, Monitor
from replimon.producers.simulator import SimOptions, Simulator, parse_injection

SAVED = Path(__file__).parent / "golden" / "state_v1.json"

# The v1 shape, in order (``json.dumps`` without sorting writes them so).
STATE_KEYS = [
    "v", "group", "configs", "nodes", "history", "trusted", "boot_instance", "records",
    "cmd_floor", "pending_since", "decided", "decided_ts", "progress_ts", "exec_adv_ts", "clock",
    "ext", "quiet_end", "singles", "runs", "ahead", "special", "checks", "open", "fired",
    "reach_ts", "lag_since", "quorum", "next_eval", "counts", "member_set", "episodes",
]
NODE_KEYS = [
    "inc", "seq", "prev_inc", "prev_seq", "exec_inc", "executed", "decided", "protocol", "status",
    "suspects", "cache", "last_ts", "last_ev", "last_src", "held",
]


def _events() -> list[dict[str, Any]]:
    """The trace the saved state was taken from (deterministic)."""
    events: list[dict[str, Any]] = []
    Simulator(SimOptions(duration_ms=150_000, groups=3, nodes=3, seed=1),
              [parse_injection("config_mismatch:g2@20s")], events.append).run()
    rng = random.Random(2)
    delay: dict[tuple[str, str], int] = {}

    def arrival(ev: dict[str, Any]) -> int:  # each node's topic late by its own amount < skew
        key = (ev["node"], ev["type"])
        if key not in delay:
            delay[key] = rng.randint(0, 1500)
        return int(ev["ts_ms"]) + delay[key]

    return [ev for _, _, ev in sorted((arrival(ev), i, ev) for i, ev in enumerate(events))]


@pytest.fixture(scope="module")
def saved() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SAVED.read_text())
    return data


@pytest.fixture(scope="module")
def events(saved: dict[str, Any]) -> list[dict[str, Any]]:
    got = _events()
    assert len(got) == saved["events"], "the simulator's trace changed"
    return got


def test_the_saved_state_has_what_a_codec_must_carry(saved: dict[str, Any]) -> None:
    state = saved["state"]
    assert list(state) == STATE_KEYS and state["v"] == STATE_VERSION == 1
    assert any(r["held"] for r in state["records"]) and state["checks"]
    assert any(n["held"] for n in state["nodes"].values())
    assert state["singles"] and state["runs"] and state["special"] and state["pending_since"]


def test_the_same_history_gives_the_saved_state_key_for_key(saved: dict[str, Any],
                                                            events: list[dict[str, Any]]) -> None:
    mon = Monitor()
    for ev in events[:saved["cut"] + 1]:
        mon.process(ev)
    state = mon.groups["g2"].to_state()
    assert state == saved["state"]
    # Key order too: the state store keeps the JSON text as written.
    assert json.dumps(state) == json.dumps(saved["state"])
    assert all(list(n) == NODE_KEYS for n in state["nodes"].values())


def test_a_state_saved_before_the_split_loads_and_continues_the_same(
        saved: dict[str, Any], events: list[dict[str, Any]]) -> None:
    mon = Monitor()
    for ev in events[:saved["cut"] + 1]:
        mon.process(ev)
    mon.groups["g2"] = GroupMonitor.from_state(json.loads(json.dumps(saved["state"])), mon.limits)
    after = [[a.alert_id, a.status, a.kind] for ev in events[saved["cut"] + 1:] for a in mon.process(ev)]
    after += [[a.alert_id, a.status, a.kind] for a in mon.finish()]
    assert after == saved["after"]


def test_a_restored_monitor_saves_what_it_loaded(saved: dict[str, Any]) -> None:
    restored = GroupMonitor.from_state(json.loads(json.dumps(saved["state"])))
    assert json.dumps(restored.to_state()) == json.dumps(saved["state"])
    assert list(GroupMonitor("g").to_state()) == STATE_KEYS


def test_a_state_of_another_version_is_refused(saved: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="version 2 is not 1"):
        GroupMonitor.from_state({**saved["state"], "v": 2})
