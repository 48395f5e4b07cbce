"""The end-to-end run shared by the tests that need a PostgreSQL filled by the real pipeline:
``tests/streaming/test_e2e.py`` checks its verdicts, the dashboard and alert-rule tests run their
SQL against its tables. ``conftest.py`` runs it once per session (fixture
``e2e``). Why the trace looks as it does: ``tests/streaming/test_e2e.py``'s docstring."""

from __future__ import annotations

import heapq
import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from replimon.core.limits import Limits
from replimon.kafka import KafkaClient
from replimon.producers import simulator_chain, simulator_gen, simulator_qlog
from replimon.producers.simulator import CATALOGUE, SimOptions, Simulator, parse_injection
from tests.support import publish, read_topic, replay, settings_for

FAULTS = sorted(CATALOGUE)
CLEAN = 4  # groups with no fault at all
# 120 s fits the slowest fault (pending_config_stuck: ~90 s to start, stuck after 60 s); a 200 ms
# tick halves the events of the default 100 ms and keeps every verdict (checked on seeds 1-6).
# Restarts and old nodes as often as test_monitor_sim's clean fleets.
OPTIONS = SimOptions(duration_ms=120_000, groups=len(FAULTS) + CLEAN, nodes=3, seed=1, tick_ms=200,
                     restart_every_s=40, old_node_fraction=0.4)
FAULT_AT_S = 10


@dataclass(frozen=True)
class Fleet:
    """A protocol family's fleet beside the XCom one (docs/families.md 2.7, 3.7, 4.7): one group per
    fault and per legal near miss of its catalogue, and clean groups; the same start and length as
    XCom's, so all go through the same micro-batches. ``info``: all a group of it may say besides
    its fault (generations elected as nodes restart; legislatures whose members or leader change)."""

    family: str
    sim: Any  # the simulator package (simulator_gen, simulator_qlog, simulator_chain)
    prefix: str  # its group names: prefix + 1, 2, ...
    clean: int
    info: frozenset[str]

    @property
    def faults(self) -> list[str]:
        return sorted(self.sim.CATALOGUE)

    @property
    def clean_groups(self) -> list[str]:
        return [f"{self.prefix}{len(self.faults) + 1 + i}" for i in range(self.clean)]

    def run(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Its events in time order, and its manifest."""
        options = self.sim.SimOptions(duration_ms=OPTIONS.duration_ms, groups=len(self.faults) + self.clean,
                                      nodes=3, seed=1, start_ms=OPTIONS.start_ms)
        events: list[dict[str, Any]] = []
        sim = self.sim.Simulator(options, [self.sim.parse_injection(f"{f}:{self.prefix}{i + 1}@{FAULT_AT_S}s")
                                           for i, f in enumerate(self.faults)], events.append)
        sim.run()
        return events, sim.manifest()


FLEETS = (Fleet("gen", simulator_gen, "pg", 2, frozenset({"GEN_ELECTED"})),
          Fleet("qlog", simulator_qlog, "ql", 2, frozenset({"QLOG_RECONFIGURED"})),
          Fleet("chain", simulator_chain, "ch", 2, frozenset({"CHAIN_VIEW_INSTALLED"})))
# Kinds a fault raises besides its own because its own requires them (a chain view is stale only
# after the lease expired: simulator_chain.IMPLIED).
IMPLIED: dict[str, frozenset[str]] = {k: v for f in FLEETS for k, v in getattr(f.sim, "IMPLIED", {}).items()}
CUT_S = 32  # inside group_silent's silence (10-35 s), past its deadline (last event + 15 s + skew)
MAX_OFFSETS = 1_000_000  # one micro-batch per installment (module docstring)
CHUNK = 50_000  # events per test_job.publish call (librdkafka's default queue holds 100k)
INFO_KINDS = {"CONFIG_INSTALLED", "RECONFIG_REFUSED"}  # all a clean run says (test_monitor_sim)
SRC_KEYS = ("topic", "partition", "offset")


def fault_group(i: int) -> str:
    return f"g{i + 1}"


CLEAN_GROUPS = [f"g{len(FAULTS) + 1 + i}" for i in range(CLEAN)]


def feed_order(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The order the job's processor hands a micro-batch's rows to the core."""
    return sorted(events, key=lambda e: (e["ts_ms"], e["node"], e["incarnation"], e["seq"]))


@dataclass
class E2E:
    """What the replay produced, and what the core says about the same events."""

    events: list[dict[str, Any]]
    bad: list[tuple[str, bytes]]
    manifest: dict[str, dict[str, Any]]  # group -> its fault's manifest record
    pg_alerts: list[dict[str, Any]]
    group_states: dict[str, dict[str, Any]]  # group -> its last snapshot (PostgreSQL group_state)
    pg_dead: list[dict[str, Any]]
    kafka_dead: list[dict[str, Any]]
    kafka_alerts: list[dict[str, Any]]
    settings: Any
    run_id: str  # the replay's run id in PostgreSQL


def bad_records(events: list[dict[str, Any]]) -> list[tuple[str, bytes]]:
    """Records the validator must refuse: neither JSON nor UTF-8, a valid event on another type's
    topic, an event without a required field."""
    execution = next(e for e in events if e["type"] == "execution")
    heartbeat = next(e for e in events if e["type"] == "heartbeat")
    no_executed = {k: v for k, v in heartbeat.items() if k != "executed"}
    return [
        ("decisions", b"\xff\xfe not json {"),
        ("heartbeats", json.dumps(execution, separators=(",", ":")).encode()),
        ("heartbeats", json.dumps(no_executed, separators=(",", ":")).encode()),
    ]


def read_at(bootstrap: str, refs: list[tuple[str, int, int]]) -> dict[tuple[str, int, int], bytes]:
    """The record value at each (topic, partition, offset)."""
    wanted = set(refs)
    spans: dict[tuple[str, int], tuple[int, int]] = {}
    for topic, part, off in refs:
        low, high = spans.get((topic, part), (off, off + 1))
        spans[(topic, part)] = (min(low, off), max(high, off + 1))
    with KafkaClient({"bootstrap.servers": bootstrap}, timeout_s=30) as client:
        out = {ref: msg.value() for msgs in client.read(spans) for msg in msgs
               if (ref := (msg.topic(), msg.partition(), msg.offset())) in wanted}
    assert set(out) == wanted, f"no record at {sorted(wanted - set(out))[:5]}"
    return out


def run_e2e(spark: Any, broker: Any, postgres: Any, tmp_path: Path) -> E2E:
    """Publish the trace and replay it (module docstring); what it produced."""
    settings = settings_for(broker, postgres, f"e2e-{uuid.uuid4().hex[:12]}-", tmp_path)
    events: list[dict[str, Any]] = []
    injections = [parse_injection(f"{f}:{fault_group(i)}@{FAULT_AT_S}s") for i, f in enumerate(FAULTS)]
    sim = Simulator(OPTIONS, injections, events.append)
    sim.run()
    manifest = {m["group"]: m for m in sim.manifest()}
    assert sorted(m["fault"] for m in manifest.values()) == FAULTS  # every fault was injected
    # the fleets interleaved by time, as replicas publish them (each keeps its own order)
    streams = [events]
    for fleet in FLEETS:
        fleet_events, fleet_manifest = fleet.run()
        streams.append(fleet_events)
        manifest.update({m["group"]: m for m in fleet_manifest})
    events = list(heapq.merge(*streams, key=lambda e: e["ts_ms"]))
    cut = OPTIONS.start_ms + CUT_S * 1000
    silent = next(g for g, m in manifest.items() if m["fault"] == "group_silent")
    lim = Limits.from_settings(settings)
    last = max(e["ts_ms"] for e in events if e["group"] == silent and e["ts_ms"] < cut)
    assert last + lim.group_silent_ms + lim.skew_ms <= cut - lim.skew_ms  # due by the cut's watermark
    assert any(e["group"] == silent and e["ts_ms"] >= cut for e in events)  # ... and resumes after it
    bad = bad_records(events)
    run_id = f"e2e-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    for part, junk in (([e for e in events if e["ts_ms"] < cut], bad[:1]),
                       ([e for e in events if e["ts_ms"] >= cut], bad[1:])):
        for i in range(0, len(part), CHUNK):
            publish(settings, part[i:i + CHUNK])
        publish(settings, [], junk)
        stored, _ = replay(spark, settings, run_id, max_offsets=MAX_OFFSETS)  # same run id: same checkpoint
    print(f"\ne2e: {len(events)} events of {OPTIONS.groups} groups x {OPTIONS.duration_ms // 1000} s "
          f"published and replayed in {time.monotonic() - started:.1f} s")
    states = stored.group_snapshots()
    with psycopg.connect(settings.postgres.dsn) as conn:
        pg_dead = [dict(zip(("topic", "partition", "offset", "raw", "reason"), r, strict=True)) for r in conn.execute(
            'SELECT topic, partition, "offset", raw, reason FROM dead_letters WHERE run_id = %s', (run_id,))]
    pg_alerts = stored.alerts()
    topics = settings.kafka.topics
    kafka_dead = [{"raw": m.value(), "headers": {k: v.decode() for k, v in (m.headers() or [])}}
                  for m in read_topic(broker.bootstrap_servers, topics.dead_letters)]
    kafka_alerts = [json.loads(m.value()) for m in read_topic(broker.bootstrap_servers, topics.alerts)]
    return E2E(events, bad, manifest, pg_alerts, states, pg_dead, kafka_dead, kafka_alerts, settings, run_id)
