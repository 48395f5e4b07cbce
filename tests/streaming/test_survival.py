"""The job outlives what it monitors (docs/operations.md, "What cannot stop the job"): records no
contract allows, and a broker that goes and comes back again and again at random moments, each
through the real broker, Spark and PostgreSQL, with PostgreSQL then holding exactly what
``replimon check`` says of the valid events."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import Producer

from replimon.core import Monitor
from replimon.producers.simulator import SimOptions, Simulator, parse_injection
from replimon.store.values import payload_status
from tests.support import eventually, job_config, publish, read_topic
from tests.support.running_job import running_job

pytestmark = [pytest.mark.broker, pytest.mark.postgres]


def _alerts_in_pg(dsn: str, run_id: str) -> set[tuple[str, str]]:
    with psycopg.connect(dsn) as conn:
        return {(i, payload_status(s)) for i, s in conn.execute(
            "SELECT alert_id, status FROM alerts WHERE run_id = %s", (run_id,)).fetchall()}


def _events(seconds: int, faults: tuple[str, ...], seed: int, start_ms: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    Simulator(SimOptions(duration_ms=seconds * 1000, groups=3, seed=seed, start_ms=start_ms),
              [parse_injection(f) for f in faults], events.append).run()
    return events


def _bad_records(settings: Any, events: list[dict[str, Any]]) -> list[tuple[str, bytes | None, bytes, str]]:
    """(topic, key, value, what the dead letter's reason says) of each record that once stopped
    the job or that no contract allows. The keyless and wrongly keyed ones are copies of valid
    events of g3 (published as well, keyed right): had they been taken, they were duplicates."""
    topics = settings.kafka.topics
    heartbeat = next(e for e in events if e["type"] == "heartbeat" and e["group"] == "g3")
    huge = json.dumps({**heartbeat, "version": "x" * 1_200_000}).encode()
    decision = next(e for e in events if e["type"] == "decision" and e["group"] == "g3")
    raw = json.dumps(decision, separators=(",", ":")).encode()
    return [(topics.decisions, b"g2", b"#" * 1_000_100, "not"),
            (topics.heartbeats, b"g3", huge, "exceeds the 1 MiB limit"),
            (topics.executions, b"g1", b"\xff\xfe\x00 not UTF-8", "UTF-8"),
            (topics.decisions, None, raw, "has no key"),
            (topics.decisions, b"g1", raw, "is not its group")]


@pytest.mark.timeout(900)
def test_no_record_stops_the_job(spark: Any, broker: Any, postgres: Any, topic_prefix: str, tmp_path: Path,
                                 clean_env: None) -> None:
    """Each record of ``_bad_records`` between valid events: the job goes on, each is a dead letter
    with its reason (the oversize ones on Kafka as a 64 KiB prefix with their size), PostgreSQL
    holds exactly check's alerts of the valid events; then the job restarts on its checkpoint and
    goes on past them (before, the 1 MB record failed the batch, and every restart the same way)."""
    _, settings = job_config(broker, postgres, topic_prefix, tmp_path, quality={"enabled": False},
                             thresholds={"clock_skew_s": 3600})
    run_id = f"bad-{uuid.uuid4().hex[:8]}"
    start_ms = int(time.time() * 1000) + 600_000  # ahead of the clock: judged by event time (test_broker_outage)
    events = _events(40, ("beyond_horizon:g1@12s", "divergent_decision:g2@32s"), 3, start_ms)
    first = [e for e in events if e["ts_ms"] < start_ms + 20_000]
    later = [e for e in events if e["ts_ms"] >= start_ms + 20_000]
    bad = _bad_records(settings, events)
    with running_job(spark, settings, postgres.dsn, run_id) as job:
        publish(settings, first[: len(first) // 2])
        p = Producer({"bootstrap.servers": settings.kafka.bootstrap_servers, "message.max.bytes": 2_000_000})
        for topic, key, value, _ in bad:
            p.produce(topic, key=key, value=value)
        assert p.flush(30) == 0
        publish(settings, first[len(first) // 2:])
        want = {(a.alert_id, a.status) for a in Monitor().run(first)}
        eventually(lambda: want <= _alerts_in_pg(postgres.dsn, run_id), timeout=300, interval=1,
                   what="check's alerts of the first events in PostgreSQL")
        job.assert_running()
    with psycopg.connect(postgres.dsn) as conn:
        dead = conn.execute('SELECT reason, length(raw) FROM dead_letters WHERE run_id = %s ORDER BY "offset"',
                            (run_id,)).fetchall()
    assert len(dead) == len(bad), dead
    reasons = " | ".join(r for r, _ in dead)
    for _, _, value, words in bad:
        assert words in reasons, (words, reasons)
        assert len(value) in {s for _, s in dead}  # PostgreSQL keeps each record whole
    on_kafka = read_topic(broker.bootstrap_servers, settings.kafka.topics.dead_letters)
    sizes = sorted(int(dict((k, v.decode()) for k, v in r.headers())["size"]) for r in on_kafka
                   if any(k == "size" for k, _ in r.headers()))
    assert sizes == sorted(len(b[2]) for b in bad[:2]) and all(len(r.value()) <= 65_536 for r in on_kafka)
    # The same checkpoint, another job: it goes on past the records.
    with running_job(spark, settings, postgres.dsn, run_id) as job:
        publish(settings, later)
        want_all = {(a.alert_id, a.status) for a in Monitor().run(events)}
        assert {"BEYOND_HORIZON", "DIVERGENT_DECISION"} <= {a.kind for a in Monitor().run(events)}
        eventually(lambda: want_all <= _alerts_in_pg(postgres.dsn, run_id), timeout=300, interval=1,
                   what="check's alerts of all the events in PostgreSQL after the restart")
        time.sleep(3)
        assert _alerts_in_pg(postgres.dsn, run_id) == want_all
        job.assert_running()


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("outages", [pytest.param(6, id="6"), pytest.param(30, id="30", marks=pytest.mark.slow)])
def test_a_broker_that_keeps_going_away_never_ends_the_query(spark: Any, postgres: Any, topic_prefix: str,
                                                             tmp_path: Path, clean_env: None, outages: int) -> None:
    """A backlog read 300 records a batch (each batch plans, reads and writes to Kafka); the broker
    goes ``outages`` times at random moments (gaps of 0.2-5 s, so outages land in every stage of
    a batch, planning included), for 1-10 s each, alternately refusing every connection (a proxy
    cut) or hanging (the broker SIGSTOPped: connections open, no answer). The query never ends,
    and PostgreSQL then holds exactly check's alerts of the events, each once."""
    from tests.kafka.proxy import ProxiedBroker

    seed = int(os.environ.get("REPLIMON_TEST_SEED", time.time()))
    rng = random.Random(seed)
    print(f"seed {seed}")
    broker = ProxiedBroker().start()
    try:
        _, settings = job_config(broker, postgres, topic_prefix, tmp_path, quality={"enabled": False},
                                 thresholds={"clock_skew_s": 3600},
                                 streaming={"max_offsets_per_trigger": 300})
        run_id = f"flaky-{uuid.uuid4().hex[:8]}"
        events = _events(60 if outages <= 6 else 200, ("beyond_horizon:g1@25s", "divergent_decision:g2@45s"), 7,
                         int(time.time() * 1000) + 900_000)
        publish(settings, events)
        want = {(a.alert_id, a.status) for a in Monitor().run(events)}
        kinds = {a.kind for a in Monitor().run(events)}
        assert {"BEYOND_HORIZON", "DIVERGENT_DECISION"} <= kinds
        with running_job(spark, settings, postgres.dsn, run_id) as job:
            eventually(lambda: job.batches, timeout=240, what="a first micro-batch")
            log = []
            for i in range(outages):
                time.sleep(rng.uniform(0.2, 5.0))
                down = rng.uniform(1.0, 10.0)
                if i % 2:
                    os.kill(broker.pid, signal.SIGSTOP)
                    time.sleep(down)
                    os.kill(broker.pid, signal.SIGCONT)
                else:
                    broker.cut()
                    time.sleep(down)
                    broker.restore()
                log.append((("hang", "refuse")[i % 2 == 0], round(down, 1), len(job.batches)))
                job.assert_running()
            print("outages (kind, seconds, batches done):", log)
            eventually(lambda: want <= _alerts_in_pg(postgres.dsn, run_id), timeout=600, interval=1,
                       what=lambda: f"check's alerts in PostgreSQL ({len(want - _alerts_in_pg(postgres.dsn, run_id))} missing)")
            time.sleep(3)
            assert _alerts_in_pg(postgres.dsn, run_id) == want
            seen = [(a["alert_id"], a["status"]) for b in job.batches for a in b.alerts]
            assert len(seen) == len(set(seen)), "an alert went out twice"
            job.assert_running()
    finally:
        with contextlib.suppress(ProcessLookupError, RuntimeError):
            os.kill(broker.pid, signal.SIGCONT)
        broker.stop()
