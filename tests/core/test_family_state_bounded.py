"""A group's saved state stays flat over a long run, for each protocol family beside XCom's
(``tests/core/test_monitor_sim.py`` has XCom's): what the rules remember to compare later
(digests, traced transactions, decrees, views) is kept for a bounded time or count. The 20-minute
demo soak (``bench/demo_soak.py``) found a chain group's digests growing to ~800 KB, its replay
checkpoint record past the broker's 1 MB limit."""

from __future__ import annotations

import json
from typing import Any

import pytest

from replimon.core import Monitor
from replimon.producers import simulator_chain, simulator_gen, simulator_qlog

RUN_MS = 480_000
MARK_MS = 160_000  # every window the rules keep (2 minutes at most, but gen's) is full by then
# the generations' traced outcomes are kept 10 minutes (docs/families.md 2.3)
GEN_MARKS = (660_000, 960_000)


@pytest.mark.parametrize("sim", [simulator_chain, simulator_gen, simulator_qlog], ids=["chain", "gen", "qlog"])
def test_a_groups_state_stays_flat_over_a_long_run(sim: Any) -> None:
    marks = GEN_MARKS if sim is simulator_gen else (MARK_MS, RUN_MS)
    monitor = Monitor()
    run = sim.Simulator(sim.SimOptions(groups=1, nodes=3, seed=3, duration_ms=marks[1]), [], monitor.process)
    sizes = []
    for mark in marks:
        while run.t < mark:
            run.step()
        (group,) = monitor.groups.values()
        sizes.append(len(json.dumps(group.to_state())))
    assert sizes[1] < 1.25 * sizes[0] and sizes[1] < 200_000, sizes
