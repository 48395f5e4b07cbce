"""The simulator through the embedded broker: every event published is consumed, in order per node."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from replimon.cli import main
from replimon.config import Topics, load_settings
from replimon.contract import Invalid, parse_event
from replimon.producers.publisher import Publisher
from replimon.producers.simulator import SimOptions, Simulator, parse_injection
from tests.support import read_topic

pytestmark = pytest.mark.broker


def _topics(prefix: str) -> Topics:
    return Topics(**{name: f"{prefix}{name}" for name in Topics.model_fields})


def consume_all(bootstrap: str, topics: list[str], partitions: int) -> list[tuple[str, int, bytes | None, bytes]]:
    """Read every partition from the beginning to its true end (EOF), not to the reported end."""
    records = [m for t in topics for m in read_topic(bootstrap, t)]
    assert {(m.topic(), m.partition()) for m in records} <= {(t, p) for t in topics for p in range(partitions)}
    return [(m.topic(), m.partition(), m.key(), m.value()) for m in records]


def test_published_equals_consumed(broker: Any, topic_prefix: str) -> None:
    topics = _topics(topic_prefix)
    broker.create_topics(list(topics.inputs), 4)
    settings = load_settings()
    events: list[dict[str, Any]] = []
    with Publisher(broker.bootstrap_servers, topics, settings.kafka.producer) as publisher:

        def sink(event: dict[str, Any]) -> None:
            events.append(event)
            publisher.send(event)

        faults = [parse_injection("events_lost:g1@5s"), parse_injection("beyond_horizon:g2@8s")]
        Simulator(SimOptions(groups=3, nodes=3, seed=7, duration_ms=20_000), faults, sink).run()
        assert publisher.flush(30) == 0
        assert publisher.stats().delivered == len(events)
    records = consume_all(broker.bootstrap_servers, list(topics.inputs), 4)
    assert len(records) == len(events) > 3_000
    by_type = Counter(t.removeprefix(topic_prefix) for t, _, _, _ in records)
    assert by_type == Counter(topics.for_event_type(e["type"]).removeprefix(topic_prefix) for e in events)
    partitions: dict[str, set[int]] = {}
    per_node: dict[tuple[str, str, int], list[int]] = {}
    for topic, partition, key, value in records:
        event = parse_event(value)
        assert not isinstance(event, Invalid), event
        assert key == event.group.encode()
        partitions.setdefault(f"{topic}/{event.group}", set()).add(partition)
        if topic == topics.decisions:
            per_node.setdefault((event.group, event.node, event.incarnation), []).append(event.seq)
    assert all(len(p) == 1 for p in partitions.values()), "one group, one partition per topic"
    assert all(s == sorted(s) for s in per_node.values()), "a node's events stay in order"


def test_simulate_cli_publishes_to_kafka(broker: Any, topic_prefix: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    topics = _topics(topic_prefix)
    broker.create_topics(list(topics.inputs), 2)
    monkeypatch.setenv("REPLIMON_KAFKA__BOOTSTRAP_SERVERS", broker.bootstrap_servers)
    for name in Topics.model_fields:
        monkeypatch.setenv(f"REPLIMON_KAFKA__TOPICS__{name.upper()}", getattr(topics, name))
    assert main(["simulate", "--kafka", "--groups", "2", "--duration", "3s", "--seed", "1"]) == 0
    err = capsys.readouterr().err
    delivered = int(err.split("published ")[1].split()[0])
    assert delivered > 100 and "none lost" in err
    assert len(consume_all(broker.bootstrap_servers, list(topics.inputs), 2)) == delivered
