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
from replimon.streaming.sinks.kafka import MAX_STATE_RECORD_BYTES, KafkaSink
from tests.support import read_topic, settings_for


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
