"""The Kafka sink against the embedded broker: a ``monitor.state`` record too large for Kafka is
left out with a warning, and the batch's other records go out (the 20-minute demo soak,
bench/demo_soak.py, found a 1 MB checkpoint record stopping the job)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from replimon.streaming.sinks.base import AlertRow, BatchResult, CheckpointRow, SnapshotRow
from replimon.streaming.sinks.kafka import DEAD_PREFIX_BYTES, MAX_STATE_RECORD_BYTES, KafkaSink
from tests.support import headers, read_topic, settings_for


def test_a_state_record_too_large_for_kafka_is_left_out_and_the_rest_sent(
        broker: Any, postgres: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = settings_for(broker, postgres, "sink-big-", tmp_path)
    broker.create_topics(list(settings.kafka.topics.all), settings.kafka.partitions)
    huge = json.dumps({"digests": "x" * MAX_STATE_RECORD_BYTES})
    result = BatchResult(
        batch_id=3,
        alert_rows=[AlertRow("g1", "a1", "firing", 1, json.dumps({"alert_id": "a1"}))],
        snapshot_rows=[SnapshotRow("g1", 1, json.dumps({"group": "g1"})), SnapshotRow("g2", 1, huge)],
        checkpoints=[CheckpointRow("g1", 1, json.dumps({"small": True})), CheckpointRow("g2", 1, huge)])
    sink = KafkaSink(settings, "run-big")
    with caplog.at_level(logging.WARNING, logger="replimon.sinks.kafka"):
        sink.write(result)
    sink.close()
    state = read_topic(broker.bootstrap_servers, settings.kafka.topics.state)
    assert sorted(r.key().decode() for r in state) == ["g1", "g1@1"]
    assert [r.key().decode() for r in read_topic(broker.bootstrap_servers, settings.kafka.topics.alerts)] == ["g1"]
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2 and all("group g2" in w and "left out" in w for w in warned), warned


def _dead(offset: int, raw: bytes, reason: str = "not JSON") -> dict[str, Any]:
    return {"topic": "replica.heartbeats", "partition": 2, "offset": offset, "raw": raw, "reason": reason,
            "kafka_ts": 1}


def test_a_dead_letter_too_large_for_kafka_goes_as_its_prefix_with_its_size(
        broker: Any, postgres: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The records that stopped the job: 1,000,100 bytes of ``#`` (under the contract's 1 MiB,
    not JSON) and a 1.2 MB heartbeat (over it). librdkafka refuses a message over 1,000,000
    bytes; each goes as its first 64 KiB, with its coordinates, reason and full size."""
    settings = settings_for(broker, postgres, "sink-dead-", tmp_path)
    broker.create_topics(list(settings.kafka.topics.all), settings.kafka.partitions)
    hashes = b"#" * 1_000_100
    heartbeat = json.dumps({"v": 1, "type": "heartbeat", "group": "g1", "pad": "x" * 1_200_000}).encode()
    result = BatchResult(batch_id=4, dead_letters=[
        _dead(10, hashes), _dead(11, heartbeat, f"message of {len(heartbeat)} bytes exceeds the 1 MiB limit"),
        _dead(12, b"\xff\xfe small")])
    sink = KafkaSink(settings, "run-dead")
    with caplog.at_level(logging.WARNING, logger="replimon.sinks.kafka"):
        sink.write(result)
    out = {headers(r)["offset"]: r for r in read_topic(broker.bootstrap_servers, settings.kafka.topics.dead_letters)}
    assert sorted(out) == ["10", "11", "12"]
    for off, raw in (("10", hashes), ("11", heartbeat)):
        rec = out[off]
        assert rec.key() == f"replica.heartbeats:2:{off}".encode()
        assert rec.value() == raw[:DEAD_PREFIX_BYTES]
        assert headers(rec)["size"] == str(len(raw)) and "truncated" in headers(rec)
    assert headers(out["11"])["reason"].startswith("message of 1200")
    assert out["12"].value() == b"\xff\xfe small" and "size" not in headers(out["12"])
    assert len([r for r in caplog.records if "sent as 65536 bytes" in r.getMessage()]) == 2


def test_an_alert_too_large_for_kafka_goes_without_its_evidence(broker: Any, postgres: Any, tmp_path: Path) -> None:
    settings = settings_for(broker, postgres, "sink-alert-", tmp_path)
    broker.create_topics(list(settings.kafka.topics.all), settings.kafka.partitions)
    alert = {"alert_id": "a9", "group": "g1", "kind": "DIVERGENT_DECISION", "message": "m",
             "evidence": {"events": ["e" * 1_000_000]}}
    KafkaSink(settings, "run-alert").write(BatchResult(batch_id=1, alert_rows=[
        AlertRow("g1", "a9", "firing", 1, json.dumps(alert))]))
    (rec,) = read_topic(broker.bootstrap_servers, settings.kafka.topics.alerts)
    sent = json.loads(rec.value())
    assert sent["alert_id"] == "a9" and sent["kind"] == "DIVERGENT_DECISION"
    assert "left_out" in sent["evidence"] and int(headers(rec)["size"]) > 1_000_000


def _outage_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("Kafka: the broker")]


@pytest.mark.parametrize("fault", ["refuses", "hangs"])
def test_the_sink_waits_out_a_broker_outage_with_its_lines(fault: str, postgres: Any, tmp_path: Path,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """The broker goes while a batch is being sent: connections refused (a proxy cut), or a broker
    that hangs (SIGSTOP: connections open, no answer). The batch waits (no exception: before, a
    flush that timed out failed the batch and the query), says lost, still (every minute; here
    every 2 s) and back with the outage's length, and every record is delivered."""
    import os
    import signal
    import threading
    import time

    from tests.kafka.proxy import ProxiedBroker

    broker = ProxiedBroker().start()
    try:
        settings = settings_for(broker, postgres, "sink-out-", tmp_path)
        broker.create_topics(list(settings.kafka.topics.all), settings.kafka.partitions)
        sink = KafkaSink(settings, "run-out")
        sink.flush_s, sink.retry_s = 2, (0.5,)
        sink.outage.every_s = 2
        sink.write(BatchResult(batch_id=1, alert_rows=[AlertRow("g1", "a1", "firing", 1, "{}")]))  # a kept producer
        if fault == "refuses":
            broker.cut()
            undo = broker.restore
        else:
            os.kill(broker.pid, signal.SIGSTOP)

            def undo() -> None:
                os.kill(broker.pid, signal.SIGCONT)
        down_s = 10.0
        timer = threading.Timer(down_s, undo)
        timer.start()
        started = time.monotonic()
        try:
            with caplog.at_level(logging.WARNING, logger="replimon.sinks.kafka"):
                sink.write(BatchResult(batch_id=2, alert_rows=[
                    AlertRow("g1", f"b{i}", "firing", 1, "{}") for i in range(50)]))
        finally:
            timer.join()
        assert time.monotonic() - started >= down_s - 0.5
        lines = _outage_lines(caplog)
        assert "does not take the micro-batch's records" in lines[0], lines
        assert any("still does not take" in line for line in lines[1:-1]), lines
        assert lines[-1].startswith("Kafka: the broker at") and "takes records again after" in lines[-1], lines
        took = int(lines[-1].split("after ")[1].split(" s")[0])
        assert down_s - 3 <= took <= down_s + 6, lines  # the outage's real length
        ids = {headers(r)["alert_id"] for r in read_topic(broker.bootstrap_servers, settings.kafka.topics.alerts)}
        assert ids >= {f"b{i}" for i in range(50)}
    finally:
        broker.stop()


def test_a_stop_ends_the_wait(postgres: Any, tmp_path: Path) -> None:
    """Asked to stop while the broker is away, the sink gives up at once (the batch runs again at
    the next start): a stop does not wait for a broker."""
    import threading

    from replimon.embedded.processes import free_port
    from replimon.streaming.sinks.kafka import Stopped

    settings = settings_for(_NoBroker(f"127.0.0.1:{free_port()}"), postgres, "sink-stop-", tmp_path)
    stop = threading.Event()
    sink = KafkaSink(settings, "run-stop", stop=stop)
    sink.flush_s, sink.retry_s = 1, (30.0,)
    threading.Timer(2.0, stop.set).start()
    with pytest.raises(Stopped):
        sink.write(BatchResult(batch_id=1, alert_rows=[AlertRow("g1", "a1", "firing", 1, "{}")]))


class _NoBroker:
    def __init__(self, servers: str) -> None:
        self.bootstrap_servers = servers
