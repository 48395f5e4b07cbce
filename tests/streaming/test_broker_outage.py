"""A broker outage under the job (docs/operations.md, "Broker outage"): librdkafka's own log is
quiet, planning waits for the broker with one line when it is lost and one when it is back."""

from __future__ import annotations

import logging
import subprocess
import sys
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from replimon.embedded.processes import free_port
from replimon.streaming.sources.kafka import reader as source
from replimon.streaming.sources.kafka.options import parse_options

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
