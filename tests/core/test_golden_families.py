"""Golden alert sequences of the generations, quorum-log and chain families (XCom's are
``test_golden_alerts.py``): for each family, every fault and near miss of its simulator's
catalogue and two clean runs, with every alert's id, status, kind, group, instance, node, event and
detection times, message and evidence digest, and a digest of each group's saved state at the end.
A change of code that changes any of these for the same history fails here (ids must stay the
same live, replayed and across versions; a stored state must still load).

``REPLIMON_GENERATE_GOLDEN_FILES=1`` rewrites the files; do that only for a change meant to alter
what the monitor says, and say so in the commit.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from replimon.core import Monitor
from replimon.producers import simulator_chain, simulator_gen, simulator_qlog
from tests.support.families import simulated
from tests.support.golden import digest

GOLDEN = Path(__file__).parent / "golden"
# family -> (simulator, first group, nodes, seed, duration): the runs of each family's own tests
RUNS: dict[str, tuple[ModuleType, str, int, int, int]] = {
    "gen": (simulator_gen, "pg1", 3, 5, 150_000),
    "qlog": (simulator_qlog, "ql1", 5, 2, 90_000),
    "chain": (simulator_chain, "ch1", 5, 2, 90_000),
}
CLEAN = ("clean-11", "clean-12")


def trace(family: str, name: str) -> list[dict[str, Any]]:
    sim, first, nodes, seed, duration = RUNS[family]
    fault, seed = (None, int(name[6:])) if name in CLEAN else (name, seed)
    lines = simulated(sim, fault, first=first, seed=seed, groups=2, nodes=nodes, duration_ms=duration)
    return [json.loads(line) for line in lines]


def record(events: list[dict[str, Any]]) -> dict[str, Any]:
    mon = Monitor()
    alerts = mon.run(events)
    return {
        "events": len(events),
        "alerts": [[a.alert_id, a.status, a.kind, a.group, a.instance, a.node, a.event_ts_ms, a.detected_ts_ms,
                    a.message, digest(a.evidence)] for a in alerts],
        "states": {g: digest(m.to_state()) for g, m in sorted(mon.groups.items())},
    }


CASES = [(family, name) for family, (sim, *_rest) in RUNS.items() for name in [*sorted(sim.CATALOGUE), *CLEAN]]


def golden(family: str) -> dict[str, Any]:
    path = GOLDEN / f"{family}_alerts.json"
    return json.loads(path.read_text()) if path.exists() else {}


@pytest.mark.parametrize(("family", "name"), CASES, ids=[f"{f}:{n}" for f, n in CASES])
def test_alerts_and_states_match_the_golden_file(family: str, name: str) -> None:
    got = record(trace(family, name))
    path = GOLDEN / f"{family}_alerts.json"
    if os.environ.get("REPLIMON_GENERATE_GOLDEN_FILES") == "1":
        data = golden(family)
        data[name] = got
        path.write_text(json.dumps(dict(sorted(data.items())), indent=1) + "\n")
        return
    want = golden(family).get(name)
    assert want is not None, f"{name} is not in {path.name}: REPLIMON_GENERATE_GOLDEN_FILES=1"
    assert got["events"] == want["events"], "the simulator's trace changed"
    assert got["alerts"] == want["alerts"]
    assert got["states"] == want["states"]


def test_every_catalogued_fault_is_pinned_with_its_alert() -> None:
    """The files are not vacuous: each fault's trace holds its alert, each near miss's none but info."""
    for family, (sim, *_rest) in RUNS.items():
        data = golden(family)
        for name, spec in sim.CATALOGUE.items():
            kinds = {a[2] for a in data[name]["alerts"]}
            if spec.alert:
                assert spec.alert in kinds, (family, name)
        assert all(data[c]["events"] > 1000 for c in CLEAN)
