"""Golden alert sequences: the monitor's alerts over simulator traces, pinned in a file.

Each trace is a simulator run of three 3-node XCom groups with one catalogued fault in ``g2``
(every fault of the catalogue), plus clean runs with restarts and reconfigurations. For every
alert the file keeps its id, status, kind, group, instance, node, event and detection times, the
message and a digest of the evidence; for every group at the end of the trace, a digest of its
saved state (``to_state``, what Spark's state store and the checkpoint records keep). A change of
the monitor's code that changes any of these for the same history fails here: alert ids must be
the same live, replayed and across versions, and a stored state must still load.

``REPLIMON_GENERATE_GOLDEN_FILES=1`` rewrites the file (as Spark's SPARK_GENERATE_GOLDEN_FILES);
do that only for a change meant to alter what the monitor says, and say so in the commit.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from replimon.core import GroupMonitor, Monitor
from replimon.producers.simulator import CATALOGUE, SimOptions, Simulator, parse_injection
from tests.support.golden import digest

GOLDEN = Path(__file__).parent / "golden" / "xcom_alerts.json"


def _trace(name: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    if name.startswith("clean-"):
        seed = int(name[6:])
        options = SimOptions(duration_ms=240_000, groups=3, nodes=3 + seed, seed=seed,
                             old_node_fraction=0.4, restart_every_s=40, reconfig_every_s=10)
        Simulator(options, [], events.append).run()
    else:
        options = SimOptions(duration_ms=150_000, groups=3, nodes=3, seed=1)
        Simulator(options, [parse_injection(f"{name}:g2@20s")], events.append).run()
    return events


def _record(events: list[dict[str, Any]]) -> dict[str, Any]:
    mon = Monitor()
    alerts = mon.run(events)
    return {
        "events": len(events),
        "alerts": [
            [a.alert_id, a.status, a.kind, a.group, a.instance, a.node, a.event_ts_ms, a.detected_ts_ms,
             a.message, digest(a.evidence)]
            for a in alerts
        ],
        "states": {g: digest(m.to_state()) for g, m in sorted(mon.groups.items())},
    }


TRACES = [*sorted(CATALOGUE), "clean-0", "clean-1", "clean-2"]


def _golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}


@pytest.mark.parametrize("name", TRACES)
def test_alerts_and_states_match_the_golden_file(name: str) -> None:
    got = _record(_trace(name))
    if os.environ.get("REPLIMON_GENERATE_GOLDEN_FILES") == "1":
        data = _golden()
        data[name] = got
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(dict(sorted(data.items())), indent=1) + "\n")
        return
    want = _golden().get(name)
    assert want is not None, f"{name} is not in {GOLDEN.name}: REPLIMON_GENERATE_GOLDEN_FILES=1"
    assert got["events"] == want["events"], "the simulator's trace changed"
    assert got["alerts"] == want["alerts"]
    assert got["states"] == want["states"]


def test_state_saved_and_restored_mid_trace_gives_the_golden_alerts() -> None:
    """The same alerts when every group's state goes through ``to_state``/``from_state`` (as
    through Spark's state store) every 997 events."""
    name = "can_leave_unsafe"
    events = _trace(name)
    mon = Monitor()
    out = []
    for i, ev in enumerate(events):
        out.extend(mon.process(ev))
        if i % 997 == 0:
            mon.groups = {g: GroupMonitor.from_state(json.loads(json.dumps(m.to_state())))
                          for g, m in mon.groups.items()}
    out.extend(mon.finish())
    want = _golden()[name]["alerts"]
    assert [[a.alert_id, a.status, a.kind] for a in out] == [w[:3] for w in want]
