"""The timestamp index (replimon/kafka/timeindex.py) against the definition it replaces: the
first offset whose record timestamp is >= T, read forward from each partition's oldest record.

Records are out of order on purpose (a record far ahead early, records far behind, equal
timestamps): a binary search over record timestamps would answer later offsets there, and the
first test checks that its data is such that one does. The others check what the index saves: a
second plan reads only what was appended, and an index whose log changed is rebuilt, not used.
"""

from __future__ import annotations

import random
from bisect import bisect_left
from pathlib import Path

import pytest

from replimon.embedded import EmbeddedBroker
from replimon.kafka import BEGINNING, TP, KafkaClient
from replimon.kafka.timeindex import PartitionIndex, TimeIndex
from replimon.replay.window import plan_window
from tests.support import produce

pytestmark = pytest.mark.broker

BASE = 1_700_000_000_000
N = 1024  # records a partition


def stamps_out_of_order(count: int, seed: int) -> list[int]:
    """Mostly increasing by 10 ms, with a record 3 s ahead early on, bursts 5 s behind and runs
    of equal timestamps."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        ts = BASE + 10 * i
        if i == 263:
            ts += 3_000  # a node's clock ahead
        elif rng.random() < 0.05:
            ts -= rng.choice((200, 5_000))  # late records
        elif i % 50 < 3:
            ts = BASE + 10 * (i - i % 50)  # equal timestamps
        out.append(ts)
    return out


def publish(broker: EmbeddedBroker, topic: str, stamps: dict[int, list[int]], first: int = 0) -> None:
    items = [(p, None, f"{p}-{first + i}".encode()) for p, ts in stamps.items() for i in range(len(ts))]
    produce(broker.bootstrap_servers, topic, items, timestamps=[t for ts in stamps.values() for t in ts],
            batch_records=100)


def by_definition(stamps: list[int], ts: int) -> int | None:
    """The earliest offset whose timestamp is >= ts (offsets from 0), None if none."""
    return next((off for off, s in enumerate(stamps) if s >= ts), None)


def questions(stamps: list[int]) -> list[int]:
    """Every timestamp held, one below and one above each, and beyond both ends."""
    return sorted({t + d for t in stamps for d in (-1, 0, 1)} | {0, BASE - 1, max(stamps) + 1})


def lookup(client: KafkaClient, tps: list[TP], ts: int, index: TimeIndex | None) -> dict[TP, int | None]:
    _, marks, ends = client.snapshot([tps[0][0]])
    return client.timestamp_offsets({tp: ts for tp in tps}, marks, ends, index)


def test_the_index_answers_the_definition_with_records_out_of_order(broker: EmbeddedBroker,
                                                                     topic_prefix: str) -> None:
    topic = topic_prefix + "ooo"
    broker.create_topics([topic], partitions=2)
    stamps = {p: stamps_out_of_order(N, seed=p) for p in (0, 1)}
    publish(broker, topic, stamps)
    tps = [(topic, 0), (topic, 1)]
    # The data has teeth: a binary search over the timestamps differs from the definition.
    assert any(bisect_left(stamps[0], t) != by_definition(stamps[0], t) for t in questions(stamps[0]))
    index = TimeIndex(broker.bootstrap_servers, "read_uncommitted")
    with KafkaClient({"bootstrap.servers": broker.bootstrap_servers}, timeout_s=30) as client:
        read_back = client.read_all({tp: (BEGINNING, None) for tp in tps})
        assert [m.timestamp()[1] for m in read_back if m.partition() == 0] == stamps[0]
        _, marks, ends = client.snapshot([topic])
        every = sorted(set(questions(stamps[0])) | set(questions(stamps[1])))
        for ts in every[::200]:  # through the client
            got = client.timestamp_offsets({tp: ts for tp in tps}, marks, ends, index)
            assert got == {tp: by_definition(stamps[tp[1]], ts) for tp in tps}, ts
            assert lookup(client, tps, ts, None) == got, ts  # the scan it replaces
        # Built once: every later question was answered from what it held.
        assert index.records_read == 0 and all(index.parts[tp].end == N for tp in tps)
        for ts in every:  # the index itself, every question
            assert {tp: index.parts[tp].first_at(ts) for tp in tps} == {
                tp: by_definition(stamps[tp[1]], ts) for tp in tps}, ts


def test_a_second_plan_reads_only_what_was_appended(broker: EmbeddedBroker, topic_prefix: str,
                                                    tmp_path: Path) -> None:
    topic = topic_prefix + "grow"
    broker.create_topics([topic], partitions=2)
    stamps = {p: stamps_out_of_order(N, seed=10 + p) for p in (0, 1)}
    publish(broker, topic, stamps)
    tps = [(topic, 0), (topic, 1)]
    late = BASE + 10 * N - 1_500  # in the last 1.5 s

    def index() -> TimeIndex:  # a new planner: what the directory keeps
        return TimeIndex(broker.bootstrap_servers, "read_uncommitted", tmp_path)

    with KafkaClient({"bootstrap.servers": broker.bootstrap_servers}, timeout_s=30) as client:
        first = index()
        assert lookup(client, tps, late, first) == {tp: by_definition(stamps[tp[1]], late) for tp in tps}
        assert first.records_read == 2 * N
        again = index()
        assert lookup(client, tps, late, again) == {tp: by_definition(stamps[tp[1]], late) for tp in tps}
        assert again.records_read == 0
        more = {p: [BASE + 10 * (N + i) - (40_000 if i == 5 else 0) for i in range(100)] for p in (0, 1)}
        publish(broker, topic, more, first=N)
        whole = {p: stamps[p] + more[p] for p in (0, 1)}
        grown = index()
        for k, ts in enumerate((late, BASE + 10 * (N + 50), BASE + 10 * (N + 200))):
            assert lookup(client, tps, ts, grown) == {tp: by_definition(whole[tp[1]], ts) for tp in tps}
            assert grown.records_read == (200 if k == 0 else 0)
        assert all(grown.parts[tp].end == N + 100 for tp in tps)


def test_an_index_of_another_log_is_rebuilt(broker: EmbeddedBroker, topic_prefix: str, tmp_path: Path) -> None:
    """An index whose last record is not in the partition any more (a re-created topic, another
    broker at the same address) is not used: the partition is read again from its oldest record."""
    topic = topic_prefix + "other"
    broker.create_topics([topic], partitions=1)
    stamps = stamps_out_of_order(N, seed=3)
    publish(broker, topic, {0: stamps})
    tp = (topic, 0)
    late = BASE + 10 * N - 1_500
    with KafkaClient({"bootstrap.servers": broker.bootstrap_servers}, timeout_s=30) as client:
        built = TimeIndex(broker.bootstrap_servers, "read_uncommitted", tmp_path)
        assert lookup(client, [tp], late, built)[tp] == by_definition(stamps, late)
        # The same offsets, other records: a forged index says every record from offset 1 is late.
        forged = built.parts[tp]
        forged.offsets, forged.stamps = [0, 1], [stamps[0], late]
        forged.last = (forged.last[0], forged.last[1], forged.last[2] ^ 1) if forged.last else None
        built.save([topic])
        rebuilt = TimeIndex(broker.bootstrap_servers, "read_uncommitted", tmp_path)
        assert lookup(client, [tp], late, rebuilt)[tp] == by_definition(stamps, late)
        assert rebuilt.records_read == N


def test_plan_window_is_the_same_with_and_without_a_kept_index(broker: EmbeddedBroker, topic_prefix: str,
                                                               tmp_path: Path) -> None:
    topics = [topic_prefix + "a", topic_prefix + "b"]
    for k, topic in enumerate(topics):
        broker.create_topics([topic], partitions=2)
        publish(broker, topic, {p: stamps_out_of_order(N, seed=20 + 2 * k + p) for p in (0, 1)})
    bootstrap = broker.bootstrap_servers
    for lo, hi in ((BASE + 2_000, BASE + 6_000), (BASE + 3_005, BASE + 9_001), (BASE - 5, BASE + 3_000)):
        cold = plan_window(bootstrap, topics, lo, hi)
        assert plan_window(bootstrap, topics, lo, hi, index_dir=tmp_path) == cold
        assert plan_window(bootstrap, topics, lo, hi, index_dir=tmp_path) == cold  # from the file
        with KafkaClient({"bootstrap.servers": bootstrap}, timeout_s=30) as client:
            tps, marks, ends = client.snapshot(topics)
            scan = [client.timestamp_offsets({tp: ts for tp in tps}, marks, ends) for ts in (lo, hi)]
        assert [cold.start, cold.until] == [{tp: ends[tp] if off is None else off for tp, off in s.items()}
                                            for s in scan]


def test_an_index_kept_and_read_back_and_a_directory_that_cannot_be_written(tmp_path: Path) -> None:
    index = TimeIndex("host:1", "read_uncommitted", tmp_path / "idx")
    index.parts[("t", 0)] = PartitionIndex(5, 9, (8, BASE + 7, 123), [5, 6, 8], [BASE, BASE + 9, BASE + 11])
    index.save(["t"])
    again = TimeIndex("host:1", "read_uncommitted", tmp_path / "idx")
    held = again.held([("t", 0)], {("t", 0): 5}, {("t", 0): 9})
    assert held[("t", 0)] == index.parts[("t", 0)]
    assert [held[("t", 0)].first_at(ts) for ts in (0, BASE + 1, BASE + 10, BASE + 12)] == [5, 6, 8, None]
    other = TimeIndex("host:2", "read_uncommitted", tmp_path / "idx")  # another broker's: not read
    assert other.held([("t", 0)], {("t", 0): 5}, {("t", 0): 9})[("t", 0)].end == 5
    (tmp_path / "a-file").write_text("")
    TimeIndex("host:1", "read_uncommitted", tmp_path / "a-file").save(["t"])  # a warning, no error
