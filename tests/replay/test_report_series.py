"""``replimon.replay.report_series``: the report's frontier and heartbeat series from the events
(docs/report.md, "Timelines"), on a small simulator trace, without Kafka, PostgreSQL or Spark.

Each point is checked against the events directly (a node's executed frontier is the highest it
reported by then, its heartbeat age the time since its latest event), not against the core a
second time; a silenced node's age rises past the silence threshold and drops when it speaks.
"""

from __future__ import annotations

from typing import Any

import pytest

from replimon.core import Limits
from replimon.producers.simulator import SimOptions, Simulator, parse_injection
from replimon.replay.report_series import POINTS, event_series, sample_step

START = 1_767_225_600_000
OPTIONS = SimOptions(duration_ms=40_000, groups=2, nodes=3, seed=3, tick_ms=200,
                     restart_every_s=10_000, old_node_fraction=0.0, reconfig_every_s=10_000,
                     start_ms=START)


@pytest.fixture(scope="module")
def trace() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    events: list[dict[str, Any]] = []
    sim = Simulator(OPTIONS, [parse_injection("node_silent:g1@10s")], events.append)
    sim.run()
    (manifest,) = [m for m in sim.manifest() if m["group"] == "g1"]
    return events, manifest


def test_step_gives_a_few_hundred_points() -> None:
    assert sample_step(0, 40_000) == 200  # 200 intervals
    assert sample_step(0, 3_600_000) == 15_000  # an hour: 240
    assert sample_step(0, 10) == 10
    assert 100 <= 86_400_000 / sample_step(0, 86_400_000) <= POINTS


def test_points_are_the_state_after_the_events_up_to_each_time(trace: Any) -> None:
    events, _ = trace
    t0, t1 = START, START + OPTIONS.duration_ms
    s = event_series(list(reversed(events)), ["g1"], t0, t1)  # any input order
    assert set(s.points) == {"g1"} and s.events == sum(e["group"] == "g1" for e in events)
    pts = s.points["g1"]
    assert 150 <= len(pts) <= POINTS + 1
    assert all(b["ts"] - a["ts"] == s.step_ms for a, b in zip(pts, pts[1:], strict=False))
    assert t0 <= pts[0]["ts"] and pts[-1]["ts"] <= t1
    mine = [e for e in events if e["group"] == "g1"]
    assert set(s.nodes["g1"]) == {e["node"] for e in mine}
    checked = 0
    for node, rows in s.nodes["g1"].items():
        assert [r["ts"] for r in rows] == [p["ts"] for p in pts][-len(rows):]
        for r in rows:
            seen = [e for e in mine if e["node"] == node and e["ts_ms"] <= r["ts"]]
            if not seen:  # a member the configuration names, not heard from yet: the core
                continue  # dates its silence from when it learned of it
            last = max(e["ts_ms"] for e in seen)
            assert r["last_ts"] == last and r["heartbeat_age_ms"] == r["ts"] - last
            execs = [e["executed"] for e in seen if e["type"] in ("heartbeat", "execution")
                     and isinstance(e.get("executed"), int) and e["executed"] >= 0]
            if execs and r["executed"] is not None:
                assert r["executed"] == max(execs)
                checked += 1
    assert checked > 300
    # Frontiers move: a few hundred points show the progress the two snapshots of a replay hide.
    executed = [r["executed"] for r in s.nodes["g1"][sorted(s.nodes["g1"])[0]] if r["executed"]]
    assert len(set(executed)) > 50
    assert all(p["effective_horizon"] is not None for p in pts[len(pts) // 4:])
    assert all(p["active_config"] for p in pts[len(pts) // 4:])


def test_a_silence_is_a_rising_age_and_the_silent_flag(trace: Any) -> None:
    events, manifest = trace
    lim = Limits()
    s = event_series(events, ["g1", "g2"], START, START + OPTIONS.duration_ms, limits=lim)
    node = manifest["node"]
    ages = [(r["ts"], r["heartbeat_age_ms"], r["silent"]) for r in s.nodes["g1"][node]]
    peak = max(a for _, a, _ in ages)
    assert peak >= lim.node_silent_ms  # the silence is drawn, not one dot
    assert any(silent for *_, silent in ages)  # the core's NODE_SILENT is open at some point
    assert ages[-1][1] < 2_000  # it spoke again
    others = [r["heartbeat_age_ms"] for n, rows in s.nodes["g2"].items() for r in rows]
    assert max(others) < 3_000  # the clean group's nodes stay fresh


def test_nothing_outside_the_range_or_before_the_first_event(trace: Any) -> None:
    events, _ = trace
    late = START + 20_000
    s = event_series([e for e in events if e["ts_ms"] >= late], ["g1"], START, START + 30_000)
    assert s.points["g1"][0]["ts"] >= late and s.points["g1"][-1]["ts"] <= START + 30_000
    assert event_series(events, ["nope"], START, START + 1000).points == {}
