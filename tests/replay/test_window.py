"""Planning a replay's start (replimon/replay/window.py): `read_checkpoints` decodes only the
checkpoint records `choose_start` could take, and the start is the same as from all of them."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer

from replimon.embedded import EmbeddedBroker
from replimon.replay.window import Window, choose_start, read_checkpoints

pytestmark = pytest.mark.broker


def checkpoint(group: str, clock_ms: int, offset: int, run_id: str = "live") -> tuple[bytes, bytes, dict[str, str]]:
    """A record as the Kafka sink writes it (streaming/sinks/kafka.py)."""
    value = (f'{{"kind":"checkpoint","group":{json.dumps(group)},"clock_ms":{clock_ms},"run_id":"{run_id}",'
             f'"batch_id":{offset},"offsets":{{"in":{{"0":{offset}}}}},"state":{{"g":"{group}","at":{clock_ms}}}}}')
    return f"{group}@{clock_ms}".encode(), value.encode(), {"kind": "checkpoint", "run_id": run_id,
                                                            "batch_id": str(offset)}


def test_read_checkpoints_decodes_only_candidates_and_starts_the_same(broker: EmbeddedBroker,
                                                                      topic_prefix: str) -> None:
    topic = topic_prefix + "state"
    broker.create_topics([topic], partitions=2)
    records = [checkpoint(g, clock, clock // 100) for clock in (0, 30_000, 60_000, 90_000)
               for g in ("g1", "g@2", "g3")]
    records += [checkpoint("g1", 45_000, 10, run_id="other"), checkpoint("g3", 59_999, 900)]
    records.append((b"g1", b'{"kind":"snapshot"}', {"kind": "snapshot", "run_id": "live", "batch_id": "1"}))
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for key, value, headers in records:
        p.produce(topic, key=key, value=value, headers=headers)
    assert p.flush(30) == 0
    window = Window(60_000, 90_000, {("in", 0): 0}, {("in", 0): 1_000}, {("in", 0): 600}, {("in", 0): 900})
    every = read_checkpoints(broker.bootstrap_servers, topic)
    assert len(every) == len(records) - 1
    for groups in (None, frozenset({"g@2", "g3"})):
        for run_id in ("live", None):
            some = read_checkpoints(broker.bootstrap_servers, topic, before_ms=60_000, groups=groups,
                                    run_id=run_id)
            assert all(cp.clock_ms < 60_000 and (groups is None or cp.group in groups) for cp in some)
            assert all(run_id is None or cp.run_id == run_id for cp in some)
            assert choose_start(window, some, groups, run_id=run_id) == choose_start(window, every, groups,
                                                                                 run_id=run_id)
    start = choose_start(window, read_checkpoints(broker.bootstrap_servers, topic, before_ms=60_000))
    # g3's 59,999 ms record needs offset 900, past the window's start: its 30 s one is taken.
    assert {g: cp.clock_ms for g, cp in start.checkpoints.items()} == {"g1": 30_000, "g@2": 30_000, "g3": 30_000}
    assert start.starting == {("in", 0): 300}
