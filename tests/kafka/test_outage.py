"""A read that stalls because no broker answers waits for it (docs/operations.md, "Broker
outage"): the outage's time does not count against the read's timeout, one line says the broker
is lost and one that it is back, across all the reads that wait at once; a broker that answers
but sends nothing still times out; a bound ends a long outage."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from replimon.kafka.outage import BrokerUnreachable, BrokerWatch
from replimon.kafka.reading import read_ranges

TP = ("t", 0)
DOWN = KafkaException(KafkaError(KafkaError._TRANSPORT, "Connection refused"))


class _Msg:
    def __init__(self, off: int) -> None:
        self.off = off

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return TP[0]

    def partition(self) -> int:
        return TP[1]

    def offset(self) -> int:
        return self.off


class _Consumer:
    """Sends records [0, n) after ``silent_s`` of silence; its metadata calls fail (a broker out
    of reach) while ``down()`` says so."""

    def __init__(self, n: int, silent_s: float, down: Any = lambda: True) -> None:
        self.n = n
        self.until = time.monotonic() + silent_s
        self.down = down
        self.probes = 0
        self.sent = False

    def assign(self, _parts: Any) -> None:
        pass

    def consume(self, _num: int, timeout: float) -> list[_Msg]:
        time.sleep(0.005)
        if self.sent or time.monotonic() < self.until:
            return []
        self.sent = True
        return [_Msg(i) for i in range(self.n)]

    def list_topics(self, timeout: float) -> None:
        self.probes += 1
        if self.down():
            raise DOWN

    def get_watermark_offsets(self, _tp: Any, cached: bool) -> tuple[int, int]:
        return -1, -1  # nothing cached: no fetch answered yet


def _lines(caplog: pytest.LogCaptureFixture, level: int = logging.WARNING) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "replimon.kafka" and r.levelno >= level]


def test_a_read_waits_out_an_outage_longer_than_its_timeout(tmp_path: Path,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    consumer = _Consumer(5, silent_s=1.0)
    watch = BrokerWatch("h:1", what="the micro-batch", probe_s=0.05, notice_dir=tmp_path)
    with caplog.at_level(logging.INFO, logger="replimon.kafka"):
        got = [m.offset() for ms in read_ranges(consumer, {TP: (0, 5)}, timeout_s=0.3, watch=watch)
               for m in ms]
    assert got == [0, 1, 2, 3, 4]
    assert consumer.probes >= 3  # asked again and again while down
    lines = _lines(caplog)
    assert len(lines) == 2, lines
    assert lines[0].startswith("Kafka: no broker of h:1 answers (Connection refused)") and "the micro-batch waits for it" in lines[0]
    assert lines[1].startswith("Kafka: the broker at h:1 answers again after ") and "the micro-batch goes on" in lines[1]
    assert not list(tmp_path.iterdir())  # the notice is gone with the outage


def test_a_broker_that_answers_but_sends_nothing_still_times_out(tmp_path: Path) -> None:
    consumer = _Consumer(5, silent_s=60, down=lambda: False)
    watch = BrokerWatch("h:1", probe_s=0.05, notice_dir=tmp_path)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="no record from t-0 at offset 0"):
        list(read_ranges(consumer, {TP: (0, 5)}, timeout_s=0.5, watch=watch))
    assert time.monotonic() - started < 5
    assert consumer.probes >= 1


def test_an_outage_past_the_bound_fails_the_read(tmp_path: Path) -> None:
    watch = BrokerWatch("h:1", probe_s=0.05, bound_s=0.3, notice_dir=tmp_path)
    with pytest.raises(BrokerUnreachable, match="no broker of h:1 answered for"):
        list(read_ranges(_Consumer(5, silent_s=60), {TP: (0, 5)}, timeout_s=0.1, watch=watch))


def test_other_metadata_errors_are_not_an_outage(tmp_path: Path) -> None:
    class Denied(_Consumer):
        def list_topics(self, timeout: float) -> None:
            raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "denied"))

    watch = BrokerWatch("h:1", probe_s=0.05, notice_dir=tmp_path)
    with pytest.raises(KafkaException, match="denied"):
        list(read_ranges(Denied(5, silent_s=60), {TP: (0, 5)}, timeout_s=10, watch=watch))


def test_reads_that_wait_at_once_say_it_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Two tasks of one micro-batch (two watches, one notice file): one line lost, one back."""
    a, b = (BrokerWatch("h:1", what="the micro-batch", notice_dir=tmp_path) for _ in range(2))
    other = BrokerWatch("h:2", what="the micro-batch", notice_dir=tmp_path)  # another cluster
    with caplog.at_level(logging.INFO, logger="replimon.kafka"):
        consumer = _Consumer(0, 0)
        assert a.stalled(consumer) and b.stalled(consumer) and a.stalled(consumer)
        assert other.stalled(consumer)
        consumer.down = lambda: False
        assert not b.stalled(consumer)
        a.back()
        a.back()  # said once
        other.back()
    lines = _lines(caplog)
    assert [line.split(" answers")[0] for line in lines] == [
        "Kafka: no broker of h:1", "Kafka: no broker of h:2", "Kafka: the broker at h:1",
        "Kafka: the broker at h:2"], lines


def test_a_notice_left_by_a_dead_process_goes_stale(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from replimon.kafka import outage

    dead = BrokerWatch("h:1", notice_dir=tmp_path)
    assert dead.stalled(_Consumer(0, 0))  # then its process is killed: the notice stays
    monkeypatch.setattr(outage, "STALE_S", 0.0)
    time.sleep(0.01)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="replimon.kafka"):
        assert BrokerWatch("h:1", notice_dir=tmp_path).stalled(_Consumer(0, 0))
    assert len(_lines(caplog)) == 1
