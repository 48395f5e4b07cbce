"""How the replimon-kafka source admits a capped micro-batch (streaming/sources/kafka/admission.py):
Spark's proportional cut, and timestamp-aligned batches (``alignTimestamps``) as property tests
over records in memory and, driving the stream reader without Spark, against the embedded broker.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replimon.embedded import EmbeddedBroker
from replimon.streaming.sources.kafka.admission import (
    AlignStats,
    TimestampIndex,
    plan_aligned,
    rate_limit,
)
from replimon.streaming.sources.kafka.options import parse_options
from replimon.streaming.sources.kafka.reader import KafkaStreamReader
from tests.support import produce


def test_rate_limit_is_exact_and_proportional() -> None:
    starts = {("t", 0): 0, ("t", 1): 10, ("t", 2): 5, ("u", 0): 3}
    ends = {("t", 0): 100, ("t", 1): 10, ("t", 2): 6, ("u", 0): 303}
    capped = rate_limit(starts, ends, 40)
    assert sum(capped[tp] - starts[tp] for tp in starts) == 40
    assert all(starts[tp] <= capped[tp] <= ends[tp] for tp in starts)
    assert capped[("t", 1)] == 10 and capped[("u", 0)] - 3 > capped[("t", 0)]
    assert rate_limit(starts, ends, 1000) == ends
    assert sum(rate_limit(starts, ends, 1)[tp] - starts[tp] for tp in starts) == 1


TPk = tuple[str, int]
Stamps = dict[TPk, list[int]]  # partition -> the timestamps of its records, offsets from 0


def memory_probe(stamps: Stamps, batch: int) -> Callable[[Mapping[TPk, int]],
                                                         dict[TPk, list[tuple[int, int]]]]:
    """A probe over records in memory that, like a Kafka fetch, also returns the rest of the
    record batch (of ``batch`` records) holding the wanted offset."""
    def probe(wanted: Mapping[TPk, int]) -> dict[TPk, list[tuple[int, int]]]:
        out = {}
        for tp, off in wanted.items():
            ts = stamps[tp]
            out[tp] = [(o, ts[o]) for o in range(off, min(off - off % batch + batch, len(ts)))]
        return out
    return probe


Planned = list[tuple[dict[TPk, int], dict[TPk, int], AlignStats]]  # (start, end, stats) a batch


def plan_all(stamps: Stamps, cap: int, batch: int) -> Planned:
    """Aligned batches from offset 0 until every record is admitted."""
    index = TimestampIndex()
    ends = {tp: len(ts) for tp, ts in stamps.items()}
    start = {tp: 0 for tp in stamps}
    out: Planned = []
    while start != ends:
        assert len(out) <= sum(ends.values()), "no progress"
        index.prune(start)
        end, stats = plan_aligned(start, ends, cap, index, memory_probe(stamps, batch))
        out.append((start, end, stats))
        start = end
    return out


def check_time_slices(stamps: Stamps, planned: Planned, cap: int) -> None:
    """Every batch holds 1..cap records and is a consistent prefix of what is left: all records
    up to its T, none later, and as large as that allows (the next timestamp would not fit);
    batches follow each other, so every record is admitted exactly once."""
    for start, end, stats in planned:
        assert all(start[tp] <= end[tp] <= len(ts) for tp, ts in stamps.items())
        admitted = [t for tp, ts in stamps.items() for t in ts[start[tp]:end[tp]]]
        later = [t for tp, ts in stamps.items() for t in ts[end[tp]:]]
        assert 1 <= len(admitted) <= cap
        assert stats.fallback is None
        if stats.tie_split:  # one timestamp alone holds more than the cap
            assert set(admitted) == {stats.timestamp}
            assert not later or min(later) >= stats.timestamp
        elif later:
            assert stats.timestamp is not None
            assert max(admitted) <= stats.timestamp < min(later)
            assert len(admitted) + later.count(min(later)) > cap
    assert all(a[1] == b[0] for a, b in zip(planned, planned[1:], strict=False))


def probe_bound(backlog: int) -> float:
    """Fetch rounds allowed per batch: logarithmic in the backlog."""
    return 3 * math.log2(backlog + 2) + 6


def monotone(deltas: st.SearchStrategy[int]) -> st.SearchStrategy[list[int]]:
    return st.tuples(st.integers(0, 5_000), st.lists(deltas, max_size=400)).map(
        lambda p: [p[0] + sum(p[1][:i + 1]) for i in range(len(p[1]))])


BURSTY = st.sampled_from([0, 0, 0, 1, 2, 700, 8_000])


@settings(max_examples=150, deadline=None)
@given(parts=st.lists(monotone(BURSTY), min_size=1, max_size=6), cap=st.integers(1, 300),
       batch=st.sampled_from([1, 7, 100]))
def test_aligned_batches_are_time_slices(parts: list[list[int]], cap: int, batch: int) -> None:
    stamps = {(f"t{i % 3}", i): ts for i, ts in enumerate(parts)}
    if not any(parts):
        return
    planned = plan_all(stamps, cap, batch)
    check_time_slices(stamps, planned, cap)
    for start, end, stats in planned:
        backlog = sum(len(ts) - start[tp] for tp, ts in stamps.items())
        assert stats.capped == (backlog > cap)
        assert stats.rounds <= probe_bound(backlog), stats
        if not stats.capped:
            assert stats.probes == 0 and end == {tp: len(ts) for tp, ts in stamps.items()}


@settings(max_examples=100, deadline=None)
@given(parts=st.lists(st.lists(st.integers(0, 60), max_size=120), min_size=1, max_size=5),
       cap=st.integers(1, 50), batch=st.sampled_from([1, 10]))
def test_aligned_batches_survive_out_of_order_timestamps(parts: list[list[int]], cap: int,
                                                         batch: int) -> None:
    """CreateTime need not be ordered: batches still hold 1..cap records, each record once."""
    stamps = {("t", i): ts for i, ts in enumerate(parts)}
    if not any(parts):
        return
    index = TimestampIndex()
    start = {tp: 0 for tp in stamps}
    seen = 0
    while start != {tp: len(ts) for tp, ts in stamps.items()}:
        end, _stats = plan_aligned(start, {tp: len(ts) for tp, ts in stamps.items()}, cap, index,
                                   memory_probe(stamps, batch))
        assert all(start[tp] <= end[tp] for tp in stamps)
        assert 1 <= sum(end[tp] - start[tp] for tp in stamps) <= cap
        seen += sum(end[tp] - start[tp] for tp in stamps)
        start = end
    assert seen == sum(len(ts) for ts in parts)


def test_aligned_batches_share_out_a_timestamp_larger_than_the_cap() -> None:
    stamps = {("a", 0): [5] * 50 + [9] * 15, ("b", 0): [5] * 30 + [6] * 10, ("c", 0): [7]}
    planned = plan_all(stamps, 20, 8)
    check_time_slices(stamps, planned, 20)
    assert [s.tie_split for _, _, s in planned] == [True] * 3 + [False] * 3  # the 4th: 20 fives
    assert planned[4][1] == {("a", 0): 50, ("b", 0): 40, ("c", 0): 1}  # 6s and 7: the 9s don't fit


def test_proportional_cut_is_not_a_time_slice() -> None:
    """Why the option exists: Spark's rule cuts a sparse partition far from a dense one."""
    stamps = {("dense", 0): list(range(0, 9_900, 10)), ("sparse", 0): list(range(9_000, 9_010))}
    start = {tp: 0 for tp in stamps}
    ends = {tp: len(ts) for tp, ts in stamps.items()}
    cut = rate_limit(start, ends, 100)
    assert cut == {("dense", 0): 99, ("sparse", 0): 1}  # 9.0 s in, 0.99 s out
    end, stats = plan_aligned(start, ends, 100, TimestampIndex(), memory_probe(stamps, 10))
    assert end == {("dense", 0): 100, ("sparse", 0): 0} and stats.timestamp == 999


def timeline(base: int) -> dict[str, list[tuple[int, int]]]:
    """Topic suffix -> (partition, timestamp) of its records over 60 s, in time order within a
    partition: "dense" (2 partitions, a record every 10 ms each), "beats" (a burst of 20 records
    in one millisecond every second), "config" (5 records within 3 ms every 8 s)."""
    return {
        "dense": [(i % 2, base + (i // 2) * 10) for i in range(12_000)],
        "beats": [(0, base + s * 1000 + 500) for s in range(60) for _ in range(20)],
        "config": [(0, base + s * 1000 + k) for s in range(8, 60, 8) for k in (0, 0, 1, 2, 3)],
    }


def produce_timeline(broker: EmbeddedBroker, prefix: str, base: int) -> dict[tuple[str, int, int], int]:
    """The timeline produced with explicit timestamps, in record batches of up to 200 (so that
    a probe does not see a whole partition); (topic, partition, offset) -> timestamp."""
    sent: dict[tuple[str, int, int], int] = {}
    for suffix, items in timeline(base).items():
        topic = prefix + suffix
        broker.create_topics([topic], partitions=2 if suffix == "dense" else 1)
        recs = produce(broker.bootstrap_servers, topic,
                       ((p, None, f"{suffix}:{ts}".encode()) for p, ts in items),
                       timestamps=(ts for _, ts in items), batch_records=200)
        for t, p, off, value in recs:
            sent[(t, p, off)] = int(value.split(b":")[1])
    return sent


def drive(bootstrap: str, cap: int, after_prepare: Callable[[], Any] = lambda: None,
          **options: Any) -> tuple[list[dict[tuple[str, int, int], int]], list[AlignStats | None],
                                   list[float]]:
    """An availableNow run driving the reader as Spark does (prepare, initialOffset, then
    latestOffset / partitions / read per batch) without Spark: per batch the records read
    ((topic, partition, offset) -> timestamp ms), the alignment stats and the planning time."""
    from pyspark.sql.streaming.datasource import ReadMaxRows

    opts = parse_options({"kafka.bootstrap.servers": bootstrap, "startingOffsets": "earliest",
                          "maxOffsetsPerTrigger": str(cap), **options})
    src = KafkaStreamReader(opts)
    batches: list[dict[tuple[str, int, int], int]] = []
    stats: list[AlignStats | None] = []
    took: list[float] = []
    try:
        src.prepareForTriggerAvailableNow()
        after_prepare()
        start = src.initialOffset()
        while True:
            src.last_alignment = None
            began = time.perf_counter()
            end = src.latestOffset(start, ReadMaxRows(cap))
            took.append(time.perf_counter() - began)
            if end == start:
                break
            got: dict[tuple[str, int, int], int] = {}
            for part in src.partitions(start, end):
                for rb in src.read(part):
                    cols = [rb.column(c).to_pylist() for c in ("topic", "partition", "offset")]
                    micros = rb.column("timestamp").cast(pa.int64()).to_pylist()
                    for t, p, off, us in zip(*cols, micros, strict=True):
                        got[(t, p, off)] = us // 1000
            batches.append(got)
            stats.append(src.last_alignment)
            start = end
            assert len(batches) < 1000, "no progress"
    finally:
        src.stop()
    return batches, stats, took


@pytest.mark.broker
def test_align_timestamps_reads_time_slices_of_all_topics(broker: EmbeddedBroker,
                                                          topic_prefix: str) -> None:
    bootstrap = broker.bootstrap_servers
    base = 1_700_000_000_000
    sent = produce_timeline(broker, topic_prefix, base)
    cap = 1000
    late = []

    def produce_late() -> None:  # after the availableNow target was fixed: not read in this run
        late.extend(produce(bootstrap, topic_prefix + "dense", ((0, None, b"late:0"),),
                            timestamps=(base + 61_000,)))

    batches, stats, took = drive(bootstrap, cap, produce_late, subscribePattern=topic_prefix + ".*",
                                 alignTimestamps="true")
    assert late and not any(k == late[0][:3] for b in batches for k in b)
    read = [k for b in batches for k in b]
    assert sorted(read) == sorted(sent) and len(read) == len(set(read))  # each record once
    assert all(b[k] == sent[k] for b in batches for k in b)  # timestamps as produced
    for i, batch in enumerate(batches):
        later = [ts for b in batches[i + 1:] for ts in b.values()]
        assert 1 <= len(batch) <= cap
        if later:
            assert max(batch.values()) < min(later), f"batch {i} is not a time slice"
            assert len(batch) + later.count(min(later)) > cap  # as large as alignment allows
    assert len(batches) == -(-len(sent) // cap)  # batches nearly full: > cap - a burst (22)
    capped = [s for s in stats if s is not None]
    assert len(capped) == len(batches) - 1 and not any(s.tie_split or s.fallback for s in capped)
    assert all(s.rounds <= probe_bound(s.backlog) for s in capped), capped
    print(f"\naligned: {len(batches)} batches of <= {cap}; probes per batch "
          f"{[s.probes for s in capped]}, rounds {[s.rounds for s in capped]}, planning ms "
          f"{[round(t * 1000) for t in took]}")


@pytest.mark.broker
def test_without_align_timestamps_batches_are_proportional(broker: EmbeddedBroker,
                                                           topic_prefix: str) -> None:
    """The default is Spark's rule, unchanged: the cuts are not time slices."""
    bootstrap = broker.bootstrap_servers
    sent = produce_timeline(broker, topic_prefix, 1_700_000_000_000)
    batches, stats, _took = drive(bootstrap, 1000, subscribePattern=topic_prefix + ".*")
    assert sorted(k for b in batches for k in b) == sorted(sent)
    assert [len(b) for b in batches] == [1000] * 13 + [len(sent) - 13_000]
    assert stats == [None] * len(batches)  # nothing probed
    first, rest = batches[0], [ts for b in batches[1:] for ts in b.values()]
    assert max(first.values()) > min(rest)  # config at 8 s is in, dense at 4.6 s is not
    per_topic = {t: sum(1 for k in first if k[0] == topic_prefix + t) for t in ("dense", "beats",
                                                                             "config")}
    start = {tp: 0 for tp in {(k[0], k[1]) for k in sent}}
    ends = {tp: 1 + max(k[2] for k in sent if (k[0], k[1]) == tp) for tp in start}
    cut = rate_limit(start, ends, 1000)
    assert per_topic == {t: sum(cut[tp] for tp in cut if tp[0] == topic_prefix + t)
                         for t in per_topic}
