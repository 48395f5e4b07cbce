"""A broker that answers, for a moment after an outage, that a partition ends below the offsets
the job has read is asked again before the job calls it data loss (streaming/sources/kafka,
``KafkaStreamReader._confirm_moved_back``): a passing answer changes nothing; one that stays is
data loss, as before."""

from __future__ import annotations

from typing import Any

import pytest

from replimon.streaming.sources.kafka import reader as reader_mod
from replimon.streaming.sources.kafka.options import KafkaDataLossError, parse_options
from replimon.streaming.sources.kafka.reader import KafkaStreamReader
from tests.support import produce

pytestmark = pytest.mark.broker


def _reader(broker: Any, topic: str) -> KafkaStreamReader:
    return KafkaStreamReader(parse_options({"kafka.bootstrap.servers": broker.bootstrap_servers,
                                            "subscribe": topic, "failOnDataLoss": "true"}))


def _glitch(monkeypatch: pytest.MonkeyPatch, r: KafkaStreamReader, times: int) -> list[int]:
    """The first ``times`` answers of the partitions' ends say 0 (what a resumed broker said)."""
    calls = [0]
    real = r.client.true_ends

    def true_ends(marks: Any) -> dict[Any, int]:
        calls[0] += 1
        ends = real(marks)
        return {tp: 0 for tp in ends} if calls[0] <= times else ends

    monkeypatch.setattr(r.client, "true_ends", true_ends)
    monkeypatch.setattr(reader_mod.time, "sleep", lambda s: None)
    return calls


def test_an_end_below_the_read_offsets_for_a_moment_is_no_data_loss(broker: Any, topic_prefix: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    topic = f"{topic_prefix}t"
    broker.create_topics([topic], 1)
    produce(broker.bootstrap_servers, topic, [(0, b"g", b"x")] * 10)
    r = _reader(broker, topic)
    start = r.latestOffset(r.initialOffset(), r.getDefaultReadLimit())
    assert start == {topic: {"0": 10}}
    calls = _glitch(monkeypatch, r, 2)
    again = r.latestOffset(start, r.getDefaultReadLimit())  # would raise KafkaDataLossError before
    assert again == start and calls[0] == 3


def test_an_end_that_stays_below_is_data_loss(broker: Any, topic_prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    topic = f"{topic_prefix}t"
    broker.create_topics([topic], 1)
    produce(broker.bootstrap_servers, topic, [(0, b"g", b"x")] * 10)
    r = _reader(broker, topic)
    start = r.latestOffset(r.initialOffset(), r.getDefaultReadLimit())
    _glitch(monkeypatch, r, 100)
    with pytest.raises(KafkaDataLossError, match="offset was changed from 10 to 0"):
        r.latestOffset(start, r.getDefaultReadLimit())
