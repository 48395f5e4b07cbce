"""Publisher and NodePublisher against the embedded broker (and against a dead address)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from replimon.config import Kafka, Producer, Settings, Topics
from replimon.contract import Invalid, parse_event
from replimon.producers.node import NodePublisher
from replimon.producers.publisher import (
    BufferFull,
    DeliveryReport,
    Publisher,
    PublishError,
)
from tests.support import eventually, read_topic

pytestmark = pytest.mark.broker

DEAD = "127.0.0.1:1"  # nothing listens on port 1: connections are refused at once
MEMBERS = [{"id": "n1", "protocol": 5}, {"id": "n2", "protocol": 5}]


@pytest.fixture
def topics(broker: Any, topic_prefix: str) -> Topics:
    t = Topics(
        decisions=f"{topic_prefix}decisions",
        executions=f"{topic_prefix}executions",
        heartbeats=f"{topic_prefix}heartbeats",
        config=f"{topic_prefix}config",
        alerts=f"{topic_prefix}alerts",
        state=f"{topic_prefix}state",
        dead_letters=f"{topic_prefix}dead_letters",
    )
    broker.create_topics(list(t.inputs), partitions=3)
    return t


@pytest.fixture
def reports() -> list[DeliveryReport]:
    """Every delivery report of the `publisher` fixture, in the order they were served."""
    return []


@pytest.fixture
def publisher(
    broker: Any, topics: Topics, reports: list[DeliveryReport]
) -> Iterator[Publisher]:
    settings = Settings(
        kafka=Kafka(
            bootstrap_servers=broker.bootstrap_servers,
            topics=topics,
            producer=Producer(linger_ms=5),
        )
    )
    with Publisher.from_settings(settings, on_delivery=reports.append) as pub:
        yield pub


def read_all(bootstrap: str, topic: str, expect: int, timeout: float = 20.0) -> list[Any]:
    """Every record of ``topic`` to each partition's true end (not the reported high watermark,
    which Tansu understates), read again until there are at least ``expect``."""
    records: list[Any] = []

    def enough() -> bool:
        records[:] = read_topic(bootstrap, topic, timeout)
        return len(records) >= expect

    eventually(enough, timeout=timeout, what=lambda: f"{topic}: read {len(records)} of {expect}")
    return records


def test_node_events_arrive_keyed_ordered_and_valid(
    broker: Any, topics: Topics, publisher: Publisher, reports: list[DeliveryReport]
) -> None:
    clock = iter(range(1_000, 2_000))
    n1 = NodePublisher(publisher, "g-1", "n1", incarnation=3, clock=lambda: next(clock))
    n2 = NodePublisher(publisher, "g-1", "n2")
    other = NodePublisher(publisher, "g.2:x", "n1")

    first = n1.decision(instance=0, proposer="n1", kind="config", window_base=0,
                        config={"op": "boot", "nodes": MEMBERS})
    assert list(first) == ["v", "type", "group", "node", "ts_ms", "seq", "incarnation",
                           "instance", "count", "proposer", "kind", "window_base", "config"]
    assert (first["ts_ms"], first["seq"], first["incarnation"]) == (1_000, 0, 3)
    n1.config(instance=0, outcome="installed", start=1, event_horizon=10, members=MEMBERS)
    n1.decision(instance=1, proposer="n2", kind="app", digest="ab12")
    n1.decision(instance=2, proposer="n2", kind="noop", count=5)
    n1.execution(executed=6)
    n1.heartbeat(executed=6, decided=6, protocol=5, status="ONLINE",
                 view={"start": 1, "event_horizon": 10, "members": MEMBERS},
                 cache_size=100, suspects=["n2"], version="8.0.36")
    assert n1.restart() == 4
    assert n1.next_seq == 0
    n1.execution(executed=0)
    n1.config(instance=7, outcome="refused", reason="EVENT_HORIZON_INVALID")
    for i in range(4):
        n2.execution(executed=i)
        other.heartbeat(executed=i, decided=i, protocol=4, status="RECOVERING")

    assert publisher.flush(10) == 0
    stats = publisher.stats()
    assert (stats.sent, stats.delivered, stats.failed, stats.in_flight) == (16, 16, 0, 0)
    assert len(reports) == 16 and all(r.ok and r.offset is not None for r in reports)

    seen: dict[tuple[str, str, int], list[int]] = {}
    per_topic: Counter[str] = Counter()
    partition_of: dict[str, set[int]] = {}
    for topic in topics.inputs:
        for msg in read_all(broker.bootstrap_servers, topic, expect=0):
            event = parse_event(msg.value())
            assert not isinstance(event, Invalid), event
            assert topic == topics.for_event_type(event.type)
            assert msg.key() == event.group.encode()
            partition_of.setdefault(event.group, set()).add(msg.partition())
            seen.setdefault((event.group, event.node, event.incarnation), []).append(event.seq)
            per_topic[event.type] += 1
    assert per_topic == {"decision": 3, "config": 2, "execution": 6, "heartbeat": 5}
    # Each topic has its own partition order; the seqs of one incarnation are 0..n-1.
    assert {k: sorted(v) for k, v in seen.items()} == {
        ("g-1", "n1", 3): [0, 1, 2, 3, 4, 5],
        ("g-1", "n1", 4): [0, 1],
        ("g-1", "n2", 0): [0, 1, 2, 3],
        ("g.2:x", "n1", 0): [0, 1, 2, 3],
    }
    # One group's events share one partition number (same key, same partition count).
    assert all(len(p) == 1 for p in partition_of.values())


def test_invalid_events_raise_and_do_not_consume_seq(
    broker: Any, topics: Topics, publisher: Publisher
) -> None:
    node = NodePublisher(publisher, "g", "n1")
    node.execution(executed=1)
    bad_calls = [
        (lambda: node.decision(instance=-1, proposer="n1", kind="app"), "instance"),
        (lambda: node.decision(instance=5, proposer="n2", kind="app", count=3, digest="ab"),
         "digest is allowed only when count is 1"),
        (lambda: node.decision(instance=5, proposer="n2", kind="config"), "config is required"),
        (lambda: node.decision(instance=5, proposer="n2", kind="app", window_base=4),
         "window_base"),
        (lambda: node.heartbeat(executed=1, decided=1, protocol=5, status="BUSY"), "status"),
        (lambda: node.execution(executed=True), "executed"),
        (lambda: node.execution(executed="7"), "executed"),
        (lambda: node.config(instance=1, outcome="installed"), "installed config needs"),
        (lambda: node.execution(executed=float("nan")), "not JSON"),
    ]
    for call, reason in bad_calls:
        with pytest.raises(ValueError, match=reason):
            call()
        assert node.next_seq == 1
    assert publisher.stats().sent == 1
    assert node.execution(executed=2)["seq"] == 1

    for group, nid, inc in [("bad group", "n1", 0), ("g", "", 0), ("g", "n" * 129, 0),
                            ("g", "n1", -1), ("g", "n1", True)]:
        with pytest.raises(ValueError):
            NodePublisher(publisher, group, nid, incarnation=inc)
    with pytest.raises(ValueError, match="incarnation must grow"):
        node.restart(incarnation=0)
    assert (node.incarnation, node.next_seq) == (0, 2)
    assert publisher.flush(10) == 0


def test_flush_loses_nothing(broker: Any, topics: Topics, publisher: Publisher) -> None:
    n = 5000
    nodes = [NodePublisher(publisher, f"g{g}", f"n{k}") for g in range(25) for k in range(3)]
    for i in range(n):
        nodes[i % len(nodes)].execution(executed=i)
    assert publisher.flush() == 0
    stats = publisher.stats()
    assert (stats.sent, stats.delivered, stats.failed, stats.in_flight) == (n, n, 0, 0)

    records = read_all(broker.bootstrap_servers, topics.executions, expect=n)
    assert len(records) == n
    # Idempotent, in-order delivery: within each partition every node's seqs are 0, 1, 2, ...
    by_node: dict[tuple[str, str], list[int]] = {}
    for msg in sorted(records, key=lambda m: (m.partition(), m.offset())):
        event = json.loads(msg.value())
        by_node.setdefault((event["group"], event["node"]), []).append(event["seq"])
    assert all(seqs == list(range(len(seqs))) for seqs in by_node.values())
    assert sum(map(len, by_node.values())) == n


def test_broker_rejection_is_surfaced(
    topics: Topics, publisher: Publisher, reports: list[DeliveryReport]
) -> None:
    try:
        publisher.send_raw("not a valid topic!", b"k", b"{}")  # Tansu answers INVALID_TOPIC
        refused_at_once = False
    except PublishError as exc:
        # When librdkafka already holds the broker's metadata answer for the topic, it refuses the
        # message at once instead of in a delivery report: surfaced too, synchronously.
        assert "UNKNOWN_TOPIC" in str(exc)
        refused_at_once = True
    publisher.send({"v": 1, "type": "execution", "group": "g", "node": "n", "ts_ms": 0,
                    "seq": 0, "incarnation": 0, "executed": 0})
    if refused_at_once:
        assert publisher.flush(10) == 0 and [r.ok for r in reports] == [True]
    else:
        with pytest.raises(PublishError, match=r"1 message\(s\) failed .*TOPIC_EXCEPTION"):
            publisher.flush(10)
        failed = [r for r in reports if not r.ok]
        assert len(reports) == 2 and len(failed) == 1
        assert failed[0].topic == "not a valid topic!" and "Invalid topic" in (failed[0].error or "")
        assert publisher.failures() == failed
        assert publisher.flush(10) == 0  # reported once, not again

    with pytest.raises(PublishError, match="MSG_SIZE_TOO_LARGE"):
        publisher.send_raw(topics.executions, b"k", b"x" * (2 << 20))
    stats = publisher.stats()
    # refused at once, the first message counts as rejected rather than sent and failed
    want = (1, 1, 0, 2) if refused_at_once else (2, 1, 1, 1)
    assert (stats.sent, stats.delivered, stats.failed, stats.rejected) == want


def test_delivery_failure_to_dead_broker_is_surfaced(
    topics: Topics, caplog: pytest.LogCaptureFixture
) -> None:
    reports: list[DeliveryReport] = []

    def on_delivery(report: DeliveryReport) -> None:
        reports.append(report)
        raise RuntimeError("a buggy callback")  # logged, never breaks the publisher

    pub = Publisher(DEAD, topics, Producer(delivery_timeout_ms=1000), on_delivery=on_delivery)
    node = NodePublisher(pub, "g", "n1")
    for i in range(3):
        node.execution(executed=i)
    assert pub.stats().in_flight == 3
    with pytest.raises(PublishError, match=r"3 message\(s\) failed .*_MSG_TIMED_OUT"):
        pub.flush(10)
    stats = pub.stats()
    assert (stats.sent, stats.delivered, stats.failed, stats.in_flight) == (3, 0, 3, 0)
    assert len(reports) == 3
    assert all(r.error and r.partition is None and r.key == b"g" for r in reports)
    assert pub.failures() == reports
    assert caplog.text.count("on_delivery callback failed") == 3
    pub.close()  # nothing left: closes cleanly
    with pytest.raises(RuntimeError, match="closed"):
        node.execution(executed=9)
    assert node.next_seq == 3


def test_full_queue_blocks_then_raises_buffer_full(topics: Topics) -> None:
    pub = Publisher(DEAD, topics, Producer(delivery_timeout_ms=1000, max_buffered_messages=10,
                                           block_timeout_s=0.5))
    node = NodePublisher(pub, "g", "n1")
    attempted = 0
    for i in range(10):
        attempted += 1
        node.execution(executed=i)
    attempted += 1
    started = time.monotonic()
    with pytest.raises(BufferFull):
        node.execution(executed=10)
    blocked = time.monotonic() - started
    assert 0.45 <= blocked < 0.95
    stats = pub.stats()
    assert stats.sent + stats.rejected == attempted
    assert (stats.sent, stats.rejected, stats.in_flight) == (10, 1, 10)
    assert 0.45 <= stats.blocked_s < 0.95
    assert node.next_seq == 10  # the refused event keeps its number for the retry
    # A close that times out purges what is left and reports it: still nothing dropped silently.
    with pytest.raises(PublishError, match=r"10 message\(s\) failed.*10 still undelivered"):
        pub.close(timeout_s=0.1)
    assert pub.stats().failed == 10
    assert all("PURGE" in (r.error or "") for r in pub.failures())


def test_blocked_send_proceeds_when_room_frees(topics: Topics) -> None:
    # The blocked call serves delivery reports: when the queued messages time out (1 s), their
    # slots free up and the send goes through instead of failing.
    pub = Publisher(DEAD, topics, Producer(delivery_timeout_ms=1000, max_buffered_messages=10,
                                           block_timeout_s=5))
    for i in range(11):
        pub.send_raw(topics.executions, b"g", str(i).encode())
    stats = pub.stats()
    assert (stats.sent, stats.rejected) == (11, 0)
    assert stats.failed >= 1  # at least one expired message was served to make room
    assert 0.5 < stats.blocked_s < 4
    with pytest.raises(PublishError, match=r"11 message\(s\) failed"):
        pub.close()
    assert pub.stats().failed == 11


def _gen_node(node: NodePublisher, topics: Topics) -> tuple[list[Any], dict[str, str]]:
    abc = ["A", "B", "C"]
    gen = {"num": 7, "members": abc, "configured": abc}
    node.gen_state("load", gen, donors=["B"], last_online_in=6, last_vote=gen, status="RECOVERY")
    node.gen_state("online", gen, donors=["B"], last_online_in=7, last_vote=gen, status="ONLINE",
                   via="parallel_safe", source="B")
    node.gen_heartbeat(gen_num=7, last_online_in=7, last_vote_num=7, node_status="online", suspects=[],
                       xact_sample=4)
    node.gen_xact("MTM-1-1-7", 7, "committed", "coordinator", prepared_by=abc, xmembers=abc)
    bad = [
        (lambda: node.gen_state("online", gen, donors=["B"], last_online_in=7, last_vote=gen, status="ONLINE"),
         "via"),
        (lambda: node.gen_heartbeat(7, 7, 7, "asleep", [], 4), "node_status"),
        (lambda: node.gen_xact("MTM-1-1-7", 7, "committed", "replica", prepared_by=abc), "prepared_by"),
    ]
    return bad, {"gen.state": topics.config, "gen.heartbeat": topics.heartbeats, "gen.xact": topics.decisions}


def _qlog_node(node: NodePublisher, topics: Topics) -> tuple[list[Any], dict[str, str]]:
    abc = ["A", "B", "C"]
    node.qlog_heartbeat(3, abc, 36, "active", [], leader="A")
    node.qlog_passed(36, 3, {"n": 4, "proposer": "A"}, abc, ["A", "B"], "reconf", "ab12", new_leg=4,
                     members=["B", "A", "C"])
    node.qlog_decree(36, "reconf", "ab12", leg=3, new_leg=4, members=["B", "A", "C"])
    node.qlog_recover("synced", 4, abc, ["A", "B", "X"], relocated=[{"node": "X", "from": "C"}],
                      synced_with=["A", "B", "X"])
    bad = [
        (lambda: node.qlog_decree(37, "values", "ab13", outcome="skipped", leg=4), "skipped"),
        (lambda: node.qlog_heartbeat(4, ["A", "A"], 37, "active", []), "twice"),
        (lambda: node.qlog_recover("started", 4, abc, abc, synced_with=abc), "synced_with"),
    ]
    return bad, {"qlog.heartbeat": topics.heartbeats, "qlog.passed": topics.decisions,
                 "qlog.decree": topics.decisions, "qlog.recover": topics.config}


def _chain_node(node: NodePublisher, topics: Topics) -> tuple[list[Any], dict[str, str]]:
    bcd = ["B", "C", "D"]
    node.chain_view(10, 14, bcd, 101)
    node.chain_wedge(14, "suspect_downstream", suspect="C")
    node.chain_append({"epoch": 14, "pos": 101}, 14, 102, "client", "accepted", digest="ab12")
    node.chain_heartbeat(14, bcd, True, 102, 2000, "active", stable=101)
    bad = [
        (lambda: node.chain_view(10, 14, bcd, 101, reason="WrongEpoch"), "reason"),
        (lambda: node.chain_append({"epoch": 14, "pos": 102}, 14, 103, "upstream", "accepted", count=2,
                                   digest="ab"), "digest"),
        (lambda: node.chain_heartbeat(14, ["B", "B"], False, 102, 2000, "active"), "twice"),
    ]
    return bad, {"chain.view": topics.config, "chain.wedge": topics.config, "chain.append": topics.decisions,
                 "chain.heartbeat": topics.heartbeats}


@pytest.mark.parametrize("family", [_gen_node, _qlog_node, _chain_node], ids=["gen", "qlog", "chain"])
def test_a_family_node_publishes_valid_events_on_the_topics_of_their_role(
    broker: Any, topics: Topics, publisher: Publisher, family: Any
) -> None:
    """docs/families.md, "What a node publishes": each family's methods, validated against the
    contract before sending, like XCom's, on the topics of their role (docs/families.md 1.3)."""
    group = f"fam-{family.__name__}"
    node = NodePublisher(publisher, group, "A")
    bad, topic_of = family(node, topics)
    for call, reason in bad:
        with pytest.raises(ValueError, match=reason):
            call()
    assert node.next_seq == 4
    assert publisher.flush(10) == 0
    got: dict[str, str] = {}
    for topic in topics.inputs:
        for msg in read_all(broker.bootstrap_servers, topic, expect=0):
            event = parse_event(msg.value())
            assert not isinstance(event, Invalid), event
            if event.group == group:
                got[event.type] = topic
    assert got == topic_of
