"""A broker outage under the job (docs/operations.md, "Broker outage"): librdkafka's own log is
quiet, planning waits for the broker with one line when it is lost and one when it is back, and
so does a micro-batch whose tasks were reading when it went."""

from __future__ import annotations

import hashlib
import logging
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import KafkaError, KafkaException

from replimon.core import Monitor
from replimon.embedded import EmbeddedBroker
from replimon.embedded.processes import free_port
from replimon.producers.simulator import SimOptions, Simulator, parse_injection
from replimon.store.values import payload_status
from replimon.streaming.sources.kafka import reader as source
from replimon.streaming.sources.kafka.options import parse_options
from tests.support import eventually, job_config, publish
from tests.support.running_job import running_job

TP = ("replica.decisions", 0)


class _FlakyClient:
    """Answers like a KafkaClient once ``down`` metadata calls have failed as an absent broker
    does (librdkafka's _TRANSPORT, then our TimeoutError)."""

    timeout_s = 120.0

    def __init__(self, down: int, error: BaseException | None = None) -> None:
        self.down = down
        self.calls = 0
        self.error = error

    def topic_partitions(self, _selects: Any, _timeout: float | None = None) -> list[Any]:
        self.calls += 1
        if self.calls <= self.down:
            if self.error is not None:
                raise self.error
            if self.calls % 2:
                raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Connection refused"))
            raise TimeoutError("no metadata within 10 s")
        return [TP]

    def watermarks(self, tps: Any) -> dict[Any, tuple[int, int]]:
        return {tp: (0, 5) for tp in tps}

    def true_ends(self, marks: Any) -> dict[Any, int]:
        return {tp: 5 for tp in marks}


def _reader(client: Any) -> Any:
    opts = parse_options({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": TP[0],
                          "failOnDataLoss": "false"})
    r = source.KafkaStreamReader(opts)
    r._client = client
    return r


def test_planning_waits_for_the_broker_with_one_line_lost_and_one_back(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(source, "RETRY_S", (0.0,))
    client = _FlakyClient(down=7)
    r = _reader(client)
    with caplog.at_level(logging.INFO, logger="replimon.streaming.sources.kafka"):
        end = r.latestOffset({"replica.decisions": {"0": 2}}, source.ReadAllAvailable())
    assert end == {"replica.decisions": {"0": 5}}
    assert client.calls == 8
    lines = [rec.getMessage() for rec in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith("Kafka: no broker of 127.0.0.1:9 answers (")
    assert "no micro-batch runs until it does" in lines[0]
    assert lines[1].startswith("Kafka: the broker at 127.0.0.1:9 answers again after ")
    # Next batch, broker up: nothing said.
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="replimon.streaming.sources.kafka"):
        r.latestOffset({"replica.decisions": {"0": 5}}, source.ReadAllAvailable())
    assert caplog.records == []


def test_other_errors_still_fail_the_query(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source, "RETRY_S", (0.0,))
    denied = KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "denied"))
    with pytest.raises(KafkaException, match="denied"):
        _reader(_FlakyClient(down=1, error=denied)).latestOffset(
            {"replica.decisions": {"0": 2}}, source.ReadAllAvailable())


def test_librdkafka_says_nothing_while_no_broker_answers() -> None:
    """Metadata and a consumer's read against a port nobody listens on: librdkafka would log a
    FAIL line per connection attempt to stderr; the client keeps only its critical lines."""
    code = f"""
from replimon.kafka import KafkaClient
client = KafkaClient({{"bootstrap.servers": "127.0.0.1:{free_port()}"}}, timeout_s=4)
try:
    client.topic_partitions(["x"])
except Exception as exc:
    print("metadata:", type(exc).__name__)
try:
    list(client.read({{("x", 0): (0, 10)}}))
except Exception as exc:
    print("read:", type(exc).__name__)
client.close()
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          check=False)
    assert "metadata:" in done.stdout and "read:" in done.stdout, (done.stdout, done.stderr)
    assert "FAIL" not in done.stderr and "Connection refused" not in done.stderr, done.stderr[:500]


def _alerts_in_pg(dsn: str, run_id: str) -> set[tuple[str, str]]:
    """The run's alerts in PostgreSQL as (id, the status the monitor emitted): an info alert's
    row is stored as an event (docs/operations.md, "Info alerts are events")."""
    with psycopg.connect(dsn) as conn:
        return {(i, payload_status(s)) for i, s in conn.execute(
            "SELECT alert_id, status FROM alerts WHERE run_id = %s", (run_id,)).fetchall()}


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.postgres
@pytest.mark.timeout(900)
def test_job_rides_out_a_broker_restarted_without_its_data(spark: Any, postgres: Any, topic_prefix: str,
                                                          tmp_path: Path, clean_env: None) -> None:
    """The streaming job (Spark, a broker of its own, PostgreSQL) reads 20 s of three groups; the
    broker stops and comes back empty on the same port (the events of 20-30 s are gone with it);
    the job waits, then sees every input partition moved back: each group gets one DATA_LOST and
    restarts as an incomplete history. The events after the loss hold two faults: PostgreSQL then
    holds exactly check's alerts of the events before the loss, the DATA_LOSTs, and check's
    alerts of the events after the loss alone: both faults, nothing the stale state made up.
    (The source's lines, lost/back and one per moved partition, come from Spark's Python source
    process, whose stderr pytest shows but a fixture cannot read: the test above pins them.)"""
    port = free_port()
    broker = EmbeddedBroker(port=port).start()
    try:
        # No data-quality sink: it would flag the events stamped ahead of the clock (below); the
        # clock-skew bound raised to match.
        _, settings = job_config(broker, postgres, topic_prefix, tmp_path, quality={"enabled": False},
                                 thresholds={"clock_skew_s": 3600})
        run_id = f"loss-{uuid.uuid4().hex[:8]}"
        # Stamped ahead of the wall clock: silences are judged by processing time in live mode,
        # and this test is about the input, not about a job that fell behind.
        start_ms = int(time.time() * 1000) + 600_000
        events: list[dict[str, Any]] = []
        Simulator(SimOptions(duration_ms=60_000, groups=3, seed=11, start_ms=start_ms),
                  [parse_injection(f) for f in ("beyond_horizon:g1@45s", "divergent_decision:g2@50s")],
                  events.append).run()
        before = [e for e in events if e["ts_ms"] < start_ms + 20_000]
        after = [e for e in events if e["ts_ms"] >= start_ms + 30_000]
        with running_job(spark, settings, postgres.dsn, run_id) as job:
            batches, query = job.batches, job.query
            publish(settings, before)
            want_before = {(a.alert_id, a.status) for a in Monitor().run(before)}

            def seen() -> set[tuple[str, str]]:
                return {(a["alert_id"], a["status"]) for b in batches for a in b.alerts}

            eventually(lambda: want_before <= seen() and len({s["group"] for b in batches for s in b.snapshots}) == 3,
                       timeout=240, what="the events before the loss processed")
            broker.stop()
            time.sleep(15)  # the job finds no broker (planning waits 10 s for metadata)
            job.assert_running()
            broker = EmbeddedBroker(port=port).start()  # same address, nothing of the old data
            broker.create_topics(list(settings.kafka.topics.all), settings.kafka.partitions)

            def lost() -> list[dict[str, Any]]:
                return [a for b in batches for a in b.alerts if a["kind"] == "DATA_LOST"]

            eventually(lambda: len(lost()) == 3, timeout=180, what="DATA_LOST for every group")
            assert {a["group"] for a in lost()} == {"g1", "g2", "g3"}
            publish(settings, after)
            want_after = {(a.alert_id, a.status) for a in Monitor().run(after)}
            kinds_after = {a.kind for a in Monitor().run(after)}
            assert {"BEYOND_HORIZON", "DIVERGENT_DECISION", "INCOMPLETE_HISTORY"} <= kinds_after

            def in_pg() -> set[tuple[str, str]]:
                return _alerts_in_pg(postgres.dsn, run_id)

            try:
                eventually(lambda: want_after <= in_pg(), timeout=240, interval=1,
                           what="check's alerts of the events after the loss in PostgreSQL")
            except AssertionError as exc:
                got = {(a["alert_id"], a["status"]): a["kind"] for b in batches for a in b.alerts}
                raise AssertionError((str(exc), query.exception(), query.status, [b.batch_id for b in batches][-5:],
                                      sorted(got[k] for k in set(got) - want_before - want_after),
                                      len(want_after - set(got)), len(want_after - in_pg()))) from exc
            time.sleep(3)  # a few more batches: anything false would show now
            cut = {(a["alert_id"], a["status"]) for b in batches for a in b.alerts
                   if a["kind"] == "DATA_LOST" or "cut by data loss" in a["message"]}
            extra = in_pg() - (want_before | want_after | cut)
            missing = (want_before | want_after | cut) - in_pg()
            with psycopg.connect(postgres.dsn) as conn:
                said = {(r[0], r[1]): r[2:] for r in conn.execute(
                    "SELECT alert_id, status, kind, group_id, event_ts, message FROM alerts WHERE run_id = %s",
                    (run_id,)).fetchall()}
            assert not extra and not missing, ([said[k] for k in extra], missing, start_ms)
            job.assert_running()
    finally:
        broker.stop()


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.postgres
@pytest.mark.timeout(900)
def test_job_rides_out_a_broker_lost_while_a_batch_reads(spark: Any, postgres: Any, topic_prefix: str,
                                                         tmp_path: Path, clean_env: None) -> None:
    """A backlog read in small micro-batches; the broker goes (connections dropped, new ones
    refused) the moment a batch's task starts reading, for longer than the source's
    pollTimeoutMs (120 s), and comes back with its data (a proxy in front of the broker: as a
    Kafka broker restarted with its disks). The task waits for it, one of the batch's tasks
    says so (the notice file the lines share is there while it is down and gone after), the
    query neither fails nor needs a restart, and PostgreSQL then holds exactly check's alerts
    of the whole input, each alert once through the writer."""
    from replimon.kafka.consumers import READER_ID
    from tests.kafka.proxy import ProxiedBroker

    broker = ProxiedBroker().start()
    try:
        # Stamped ahead of the wall clock (the clock-skew bound raised to match): live silences
        # are judged by processing time, and this test is about the input, not a job behind.
        _, settings = job_config(broker, postgres, topic_prefix, tmp_path, quality={"enabled": False},
                                 thresholds={"clock_skew_s": 3600},
                                 streaming={"max_offsets_per_trigger": 400})
        run_id = f"midread-{uuid.uuid4().hex[:8]}"
        start_ms = int(time.time() * 1000) + 900_000
        events: list[dict[str, Any]] = []
        Simulator(SimOptions(duration_ms=40_000, groups=3, seed=5, start_ms=start_ms),
                  [parse_injection(f) for f in ("beyond_horizon:g1@25s", "divergent_decision:g2@30s")],
                  events.append).run()
        publish(settings, events)
        want = {(a.alert_id, a.status) for a in Monitor().run(events)}
        assert {"BEYOND_HORIZON", "DIVERGENT_DECISION"} <= {a.kind for a in Monitor().run(events)}
        notice = Path(tempfile.gettempdir()) / (
            "replimon-kafka-lost-" + hashlib.sha1(broker.bootstrap_servers.encode()).hexdigest()[:12])
        notice.unlink(missing_ok=True)
        with running_job(spark, settings, postgres.dsn, run_id) as job:
            batches = job.batches
            eventually(lambda: batches, timeout=240, what="a first micro-batch")
            broker.proxy.cut_on_fetch(READER_ID)
            assert broker.proxy.cut_done.wait(120), "no micro-batch read after the first"
            cut_at = time.monotonic()
            done = len(batches)
            eventually(notice.exists, timeout=60, what="a task saying the broker is lost")
            time.sleep(max(0.0, 130 - (time.monotonic() - cut_at)))  # past pollTimeoutMs
            job.assert_running()
            assert len(batches) == done, "a batch ended without its input"
            assert notice.exists()
            broker.restore()

            def in_pg() -> set[tuple[str, str]]:
                return _alerts_in_pg(postgres.dsn, run_id)

            kinds = {a.alert_id: a.kind for a in Monitor().run(events)}
            eventually(lambda: want <= in_pg(), timeout=300, interval=1,
                       what=lambda: f"check's alerts in PostgreSQL ({sorted(kinds[i] for i, _ in want - in_pg())} missing)")
            eventually(lambda: not notice.exists(), timeout=60, what="a task saying the broker is back")
            time.sleep(3)  # a few more batches: anything false would show now
            assert in_pg() == want
            seen = [(a["alert_id"], a["status"]) for b in batches for a in b.alerts]
            assert len(seen) == len(set(seen)), "an alert went out twice"
            job.assert_running()
    finally:
        broker.stop()


class _NoLeaders:
    """``earliest`` failing as a broker that went away does in ListOffsets: _NOENT, "No leaders
    found" (it ended the query in a batch's planning), then answering."""

    timeout_s = 20.0

    def __init__(self, down: int) -> None:
        self.down = down
        self.calls = 0

    def earliest(self, tps: Any) -> dict[Any, int]:
        self.calls += 1
        if self.calls <= self.down:
            raise KafkaException(KafkaError(KafkaError._NOENT, "No leaders found"))
        return {tp: 0 for tp in tps}


def test_a_batch_planned_while_the_broker_goes_waits_in_partitions(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """``partitions()`` (the planning after ``latestOffset``) asks where partitions start; a
    broker lost in between answers _NOENT: the batch waits with the outage's lines instead of
    failing the query, and its tasks are the ones it would have had."""
    monkeypatch.setattr(source, "RETRY_S", (0.0,))
    r = _reader(_NoLeaders(down=4))
    with caplog.at_level(logging.INFO, logger="replimon.streaming.sources.kafka"):
        parts = r.partitions({"replica.decisions": {"0": 2}}, {"replica.decisions": {"0": 5}})
    assert [(p.topic, p.partition, p.start, p.until) for p in parts] == [("replica.decisions", 0, 2, 5)]
    lines = [rec.getMessage() for rec in caplog.records]
    assert len(lines) == 2 and "no micro-batch runs until it does" in lines[0], lines
    assert lines[1].startswith("Kafka: the broker at 127.0.0.1:9 answers again after "), lines


def test_a_long_outage_says_still_once_a_minute(monkeypatch: pytest.MonkeyPatch,
                                                caplog: pytest.LogCaptureFixture) -> None:
    """Planning through a long outage: lost, then "still" each time the minute has passed (a
    clock that moves 25 s per attempt: 12 attempts, 300 s), then back with the real length."""
    monkeypatch.setattr(source, "RETRY_S", (0.0,))
    r = _reader(_FlakyClient(down=12))
    now = [0.0]

    def clock() -> float:
        now[0] += 25.0
        return now[0]

    r._outage.clock = clock
    with caplog.at_level(logging.WARNING, logger="replimon.streaming.sources.kafka"):
        r.latestOffset({"replica.decisions": {"0": 2}}, source.ReadAllAvailable())
    lines = [rec.getMessage() for rec in caplog.records]
    still = [line for line in lines if line.startswith("Kafka: still no broker of 127.0.0.1:9 answers after ")]
    assert lines[0].startswith("Kafka: no broker of") and len(still) == 3, lines  # at 75, 150, 225 s
    assert lines[-1] == "Kafka: the broker at 127.0.0.1:9 answers again after 300 s; the job goes on"
