"""replimon's Kafka client (replimon/kafka/) against the embedded Tansu broker: true partition
ends despite the short ListOffsets answer, timestamp lookups despite the ignored timestamp,
record-timestamp probes, and reading offset ranges exactly, with what cannot be read reported.

Records are produced with linger, so that they land in multi-record batches: that is what makes
Tansu's reported end short (replimon/kafka/client.py, "The embedded broker's quirks").
"""

from __future__ import annotations

from typing import Any

import pytest

from replimon.embedded import EmbeddedBroker
from replimon.kafka import BEGINNING, TP, KafkaClient, RecordsUnavailable
from tests.support import Rec, produce

pytestmark = pytest.mark.broker

BASE = 1_700_000_000_000


def client_for(broker: EmbeddedBroker, **kw: Any) -> KafkaClient:
    return KafkaClient({"bootstrap.servers": broker.bootstrap_servers}, timeout_s=30, **kw)


def topic_with(broker: EmbeddedBroker, topic: str, partitions: int, count: int) -> list[Rec]:
    """``count`` records spread over the partitions, record i with timestamp BASE + 10 i and
    value ``v<i>``, in multi-record batches."""
    broker.create_topics([topic], partitions=partitions)
    return produce(broker.bootstrap_servers, topic,
                   ((i % partitions, None, f"v{i}".encode()) for i in range(count)),
                   timestamps=(BASE + 10 * i for i in range(count)))


def values(msgs: list[Any]) -> list[tuple[str, int, int, bytes]]:
    return [(m.topic(), m.partition(), m.offset(), m.value()) for m in msgs]


def test_partitions_true_ends_and_snapshot(broker: EmbeddedBroker, topic_prefix: str) -> None:
    topic, other = topic_prefix + "ends", topic_prefix + "other"
    sent = topic_with(broker, topic, 3, 300)
    broker.create_topics([other], partitions=2)
    counts = {(topic, p): sum(1 for r in sent if r[1] == p) for p in range(3)}
    with client_for(broker) as client:
        assert client.topic_partitions([topic]) == sorted(counts)
        assert client.topic_partitions(topic) == sorted(counts)  # one name
        assert client.topic_partitions([topic, other, topic_prefix + "missing"]) == sorted(
            [*counts, (other, 0), (other, 1)])
        assert client.topic_partitions(lambda tp: tp[0] == other and tp[1] == 1) == [(other, 1)]
        marks = client.watermarks(sorted(counts))
        assert all(low == 0 and high < counts[tp] for tp, (low, high) in marks.items())  # short
        assert client.true_ends(marks) == counts
        tps, again, ends = client.snapshot([topic, other])
        assert tps == sorted([*counts, (other, 0), (other, 1)])
        assert ends == {**counts, (other, 0): 0, (other, 1): 0}
        assert {tp: again[tp] for tp in marks} == marks


def test_read_ranges_exactly(broker: EmbeddedBroker, topic_prefix: str) -> None:
    topic = topic_prefix + "read"
    sent = sorted(topic_with(broker, topic, 2, 400))
    with client_for(broker) as client:
        everything = client.read_all({(topic, 0): (BEGINNING, None), (topic, 1): (0, None)})
        assert values(everything) == sent
        spans: dict[TP, tuple[int, int | None]] = {(topic, 0): (17, 150), (topic, 1): (0, 1)}
        chunks = list(client.read(spans, chunk=25))
        assert len(chunks) > 1 and all(len(c) <= 25 for c in chunks)
        got = [r for c in chunks for r in values(c)]
        want = [r for r in sent if (r[1] == 0 and 17 <= r[2] < 150) or (r[1] == 1 and r[2] < 1)]
        assert sorted(got) == want and len(got) == len(set(got))
        for part in (0, 1):  # offset order within a partition
            offsets = [r[2] for r in got if r[1] == part]
            assert offsets == sorted(offsets)
        assert client.read_all({(topic, 0): (5, 5)}) == []  # an empty range reads nothing


def test_a_range_past_the_end_is_reported(broker: EmbeddedBroker, topic_prefix: str) -> None:
    topic = topic_prefix + "gap"
    sent = sorted(topic_with(broker, topic, 1, 50))
    with client_for(broker) as client:
        with pytest.raises(RecordsUnavailable, match=rf"{topic}-0 offsets \[50, 60\): the partition ends at 50"):
            client.read_all({(topic, 0): (0, 60)})
        gaps: list[tuple[TP, str]] = []
        got = client.read_all({(topic, 0): (40, 60)}, on_gap=lambda tp, what: gaps.append((tp, what)))
        assert values(got) == sent[40:]  # what is there is still read
        assert [tp for tp, _ in gaps] == [(topic, 0)]
        # A start past the end: the broker says nothing at all; the read still ends, reported.
        gaps.clear()
        assert client.read_all({(topic, 0): (70, 80)}, on_gap=lambda tp, what: gaps.append((tp, what))) == []
        assert len(gaps) == 1 and "ends at 50" in gaps[0][1]


def test_timestamp_lookups_and_probes(broker: EmbeddedBroker, topic_prefix: str) -> None:
    topic = topic_prefix + "time"
    sent = topic_with(broker, topic, 2, 100)  # record i: partition i % 2, offset i // 2
    tp0, tp1 = (topic, 0), (topic, 1)
    with client_for(broker) as client:
        tps, marks, ends = client.snapshot([topic])
        # Record 31 (partition 1, offset 15) is the first at or after BASE + 305 in partition 1;
        # record 32 (partition 0, offset 16) in partition 0. Tansu answers offset 0 to both.
        found = client.timestamp_offsets({tp0: BASE + 305, tp1: BASE + 305}, marks, ends)
        assert found == {tp0: 16, tp1: 15}
        assert client.timestamp_offsets({tp0: BASE + 10_000}, marks, ends) == {tp0: None}
        assert client.timestamp_offsets({tp0: 0}, marks, ends) == {tp0: 0}
        probed = client.record_timestamps({tp0: 10, tp1: 49}, keep=4)
        assert probed[tp0][0] == (10, BASE + 200) and len(probed[tp0]) <= 4
        assert [off for off, _ in probed[tp0]] == sorted({off for off, _ in probed[tp0]})
        assert probed[tp1] == [(49, BASE + 990)]  # the last record: nothing after it
    assert len(sent) == 100 and tps == [tp0, tp1]


def test_record_fingerprints(broker: EmbeddedBroker, topic_prefix: str) -> None:
    """true_ends remembers the last record of each partition; prints_at reads the record at an
    offset again (None where there is none): what tells a re-created log from the old one."""
    topic = topic_prefix + "prints"
    topic_with(broker, topic, 2, 40)
    with client_for(broker) as client:
        tps = client.topic_partitions([topic])
        ends = client.true_ends(client.watermarks(tps))
        last = client.last_prints
        assert sorted(last) == tps and all(last[tp][0] == ends[tp] - 1 for tp in tps)
        again = client.prints_at({tp: ends[tp] - 1 for tp in tps})
        assert again == last
        other = client.prints_at({(topic, 0): 3, (topic, 1): ends[(topic, 1)] + 5})
        assert other[(topic, 0)] is not None and other[(topic, 0)][0] == 3
        assert other[(topic, 0)] != last[(topic, 0)] and other[(topic, 1)] is None
