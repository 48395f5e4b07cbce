"""The Spark job end to end: real broker (Tansu), real Spark (local[2]), real PostgreSQL.

* replay (availableNow, event time) of simulator traces with faults gives the same set of alert
  ids as ``replimon check`` over the same events (docs/rules.md, "Alert records": the same
  history gives the same ids, live, replay or check);
* bad records become dead letters with their reason; counts reconcile
  (events published = events processed + dead letters);
* a retried micro-batch changes nothing in PostgreSQL.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from replimon.core import Monitor
from replimon.producers.simulator import SimOptions, Simulator, parse_injection
from tests.support import eventually, publish, replay, settings_for, simulate

pytestmark = [pytest.mark.broker, pytest.mark.postgres]


def test_replay_equals_check_and_dead_letters_reconcile(spark: Any, broker: Any, postgres: Any,
                                                        topic_prefix: str, tmp_path: Path) -> None:
    settings = settings_for(broker, postgres, topic_prefix, tmp_path)
    faults = ("beyond_horizon:g1@15s", "can_leave_unsafe:g2@20s", "node_silent:g3@25s",
              "divergent_decision:g1@40s", "execution_regression:g2@50s", "events_lost:g3@55s")
    events = simulate(90, *faults)
    bad = [("decisions", b"not json"), ("heartbeats", b'{"v": 1, "type": "heartbeat"}'),
           ("executions", json.dumps({**events[0], "type": "decision"}).encode())]
    publish(settings, events, bad)
    expected = Monitor().run(events)
    run_id = f"test-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    stored, batches = replay(spark, settings, run_id)
    took = time.monotonic() - started
    got = stored.alert_ids()
    want = {a.alert_id for a in expected}
    assert got == want, (sorted(k for k in want - got), sorted(k for k in got - want))
    kinds = {a["kind"] for a in stored.alerts()}
    assert {"BEYOND_HORIZON", "CAN_LEAVE_UNSAFE", "NODE_SILENT", "DIVERGENT_DECISION",
            "EXECUTION_REGRESSION", "EVENTS_LOST"} <= kinds
    dead = [d for b in batches for d in b.dead_letters]
    assert len(dead) == len(bad)
    assert all(d["reason"] for d in dead)
    latest = {s["group"]: s for b in batches for s in b.snapshots}
    processed = sum(s["counts"]["events"] for s in latest.values())
    assert processed + len(dead) == len(events) + len(bad)  # every record accounted for, once
    print(f"replayed {len(events)} events in {took:.1f} s")


def test_live_silences_fire_with_no_input_at_all(spark: Any, broker: Any, postgres: Any,
                                                 topic_prefix: str, tmp_path: Path) -> None:
    """Live (processing-time timers): every producer stops; NODE_SILENT (a member quiet 3 s before
    the rest) and GROUP_SILENT still come, and never before their deadlines (threshold + skew after
    the last event). How soon after the deadline they land is a latency figure: bench/pipeline.py
    measures it."""
    from replimon.store.reads import RunReader
    from replimon.streaming.runner import start_query
    from replimon.streaming.sinks.postgres import PostgresSink

    settings = settings_for(broker, postgres, topic_prefix, tmp_path)
    run_id = f"live-{uuid.uuid4().hex[:8]}"
    pg = PostgresSink(settings.postgres.dsn, run_id=run_id)
    stored = RunReader(settings.postgres.dsn, run_id)
    batches: list[Any] = []

    query = start_query(spark, settings, run_id=run_id, pg=pg, observers=[batches.append], trigger_s=1.0,
                        api="row")
    try:
        eventually(lambda: batches, timeout=120, what="a first batch of the live query")  # up and idle
        seconds = 20
        now_ms = int(time.time() * 1000)
        events: list[dict[str, Any]] = []
        sim = Simulator(SimOptions(duration_ms=seconds * 1000, groups=1, seed=5, start_ms=now_ms - seconds * 1000),
                        [parse_injection(f"node_silent:g1@{seconds - 3}s")], events.append)
        sim.run()
        publish(settings, events)
        node = sim.manifest()[0]["node"]
        last_node = max(e["ts_ms"] for e in events if e["node"] == node)
        last = max(e["ts_ms"] for e in events)
        lim = settings.thresholds
        due = {"NODE_SILENT": last_node + int((lim.node_silent_s + lim.skew_s) * 1000),
               "GROUP_SILENT": last + int((lim.group_silent_s + lim.skew_s) * 1000)}
        seen: dict[str, float] = {}

        def landed() -> bool:
            for a in stored.firing_alerts():
                if a["kind"] in due and a["kind"] not in seen:
                    seen[a["kind"]] = time.time() * 1000
            return set(seen) == set(due)

        eventually(landed, timeout=(due["GROUP_SILENT"] - time.time() * 1000) / 1000 + 60, interval=0.2,
                   what=lambda: f"NODE_SILENT and GROUP_SILENT with no input (seen {sorted(seen)})")
        for kind, at in seen.items():
            assert at >= due[kind] - 500, (kind, at - due[kind])  # never before the deadline
    finally:
        query.stop()
        query.awaitTermination(60)
        pg.close()


def test_replay_keeps_events_older_than_the_watermark(spark: Any, broker: Any, postgres: Any,
                                                      topic_prefix: str, tmp_path: Path) -> None:
    """A group whose publisher lagged 8 s behind the others: in a replay over many small
    micro-batches its events arrive after the watermark (the others' event time - skew) passed
    them. Spark's stateful operator drops input rows older than the watermark; the job must not
    lose them (it keeps no event-time column on the operator's input), and the alerts still equal
    ``replimon check`` over the records in topic order."""
    settings = settings_for(broker, postgres, topic_prefix, tmp_path)
    events = simulate(40, "beyond_horizon:g2@20s", groups=2, seed=6)
    lag = {"g1": 0, "g2": 8_000}
    published = sorted(events, key=lambda e: e["ts_ms"] + lag[e["group"]])
    publish(settings, published)
    run_id = f"late-{uuid.uuid4().hex[:8]}"
    stored, batches = replay(spark, settings, run_id, max_offsets=max(200, len(events) // 25))
    assert len(batches) >= 10
    latest = {s["group"]: s for b in batches for s in b.snapshots}
    per_group = {g: sum(1 for e in events if e["group"] == g) for g in lag}
    assert {g: s["counts"]["events"] for g, s in latest.items()} == per_group  # nothing dropped
    want = {a.alert_id for a in Monitor().run(published)}
    got = stored.alert_ids()
    exp = {a.alert_id: (a.kind, a.group, a.status, a.event_ts_ms, a.detected_ts_ms) for a in Monitor().run(published)}
    gotk = {a["alert_id"]: (a["kind"], a["group"], a["status"], a["event_ts_ms"], a["detected_ts_ms"]) for a in stored.alerts()}
    assert got == want, ([exp[k] for k in sorted(want - got)], [gotk[k] for k in sorted(got - want)])
    assert "BEYOND_HORIZON" in {a["kind"] for a in stored.alerts()}

