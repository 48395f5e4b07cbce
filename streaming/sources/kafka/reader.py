"""The ``replimon-kafka`` source's readers on the driver: the micro-batch reader
(`KafkaStreamReader`) and the batch reader (`KafkaBatchReader`).

They plan, with one `replimon.kafka.KafkaClient` each: the partitions there are, where each
starts and ends (true ends, never the broker's reported latest alone), how much a micro-batch
admits (``maxOffsetsPerTrigger``, ``alignTimestamps``: ``admission.py``) and the offset ranges
of its tasks (``planning.py``); the tasks read them (``partitions.py``). Offsets handed to Spark
are ``{"topic": {"partition": next_offset}}`` (``replimon.kafka.offsets``); a micro-batch is the
half-open range ``[start, end)`` of every partition.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from replimon.kafka import TP, KafkaClient, RecordsUnavailable, offsets_from_json, offsets_to_json
from replimon.kafka.client import Print
from replimon.kafka.consumers import unreachable
from replimon.kafka.outage import OutageNotice
from replimon.streaming.sources.kafka.admission import (
    AlignStats,
    TimestampIndex,
    plan_aligned,
    rate_limit,
)
from replimon.streaming.sources.kafka.markers import loss, recreated, truncation
from replimon.streaming.sources.kafka.options import (
    SOURCE_NAME,
    Endpoint,
    Options,
    check_batch_start,
    check_ending,
    data_loss,
    worker_logging,
)
from replimon.streaming.sources.kafka.partitions import (
    KafkaInputPartition,
    KafkaRangesPartition,
    input_partitions,
    read_partition,
)
from replimon.streaming.sources.kafka.planning import Range, resolve, split_ranges

logger = logging.getLogger("replimon.streaming.sources.kafka")
_T = TypeVar("_T")

# A broker outage (docs/operations.md, "Broker outage"): how long planning waits for metadata
# before calling the broker lost, how long any other planning call may take (a broker that hangs,
# SIGSTOP or a dead host, answers nothing: the client's pollTimeoutMs, 120 s, would hold a batch
# that long without a line), and how often it asks again meanwhile.
METADATA_TIMEOUT_S = 10.0
MOVED_BACK_CHECKS = 3  # a partition's end below the offsets read is asked again this many times
PLAN_TIMEOUT_S = 20.0
RETRY_S = (1.0, 2.0, 5.0)
LOST = ("Kafka: no broker of {servers} answers ({reason}); the job waits, no micro-batch runs "
        "until it does")
STILL = "Kafka: still no broker of {servers} answers after {down} s ({reason}); the job waits"
BACK = "Kafka: the broker at {servers} answers again after {down} s; the job goes on"


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader. Lives in one long-lived driver-side Python process (one KafkaClient);
    a copy is pickled to the executors, where only `read` runs."""

    def __init__(self, opts: Options) -> None:
        check_ending(opts)
        self.opts = opts
        self._client: KafkaClient | None = None
        self._target: dict[TP, int] | None = None  # availableNow: nothing past this
        self._bound: dict[TP, int] | None = None  # endingOffsets/endingTimestamp, once resolved
        self._latest: dict[TP, int] | None = None  # last true ends seen, for reportLatestOffset
        self._stamps = TimestampIndex()  # alignTimestamps: record timestamps probed so far
        self.last_alignment: AlignStats | None = None  # alignTimestamps: the last capped plan
        self._gone: set[TP] = set()  # partitions reported gone (said once, not every batch)
        # dataLossMarkers: the last record of each partition seen when the last batch was
        # planned, and the partitions found re-created since (their batch start then).
        self._prints: dict[TP, Print] = {}
        self._recreated: dict[TP, int] = {}
        self._outage = OutageNotice(logger, LOST, STILL, BACK)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None
        state["_stamps"] = TimestampIndex()  # executors only read
        state["_prints"], state["_recreated"] = {}, {}
        return state

    @property
    def client(self) -> KafkaClient:
        if self._client is None:
            worker_logging()
            self._client = self.opts.new_client()
            # Planning calls are bounded by PLAN_TIMEOUT_S, not pollTimeoutMs: a hung broker is
            # then an outage with its line, not a batch that waits two minutes in silence.
            self._client.timeout_s = min(self._client.timeout_s, PLAN_TIMEOUT_S)
        return self._client

    def _patient(self, call: Callable[..., _T], *args: Any) -> _T:
        """``call(*args)``, again and again while no broker answers: waiting 1, 2, then 5 s
        between attempts, with the outage's lines (lost, still every minute, back). Nothing is
        planned meanwhile, so nothing is judged on input that cannot arrive; any other error
        raises (docs/operations.md, "Broker outage")."""
        attempt = 0
        while True:
            try:
                out = call(*args)
            except Exception as exc:
                if not unreachable(exc):
                    raise
                self._outage.failed(exc, servers=self._servers())
                time.sleep(RETRY_S[min(attempt, len(RETRY_S) - 1)])
                attempt += 1
                continue
            self._outage.ok(servers=self._servers())
            return out

    def _resolve_bound(self, tps: Sequence[TP], marks: Mapping[TP, tuple[int, int]],
                       ends: Mapping[TP, int]) -> None:
        """endingOffsets / endingTimestamp (an extension: Spark allows them in batch only) are
        resolved once per run, the first time partitions are looked at."""
        if self._bound is None and self.opts.ending.kind != "default":
            self._bound = resolve(self.client, self.opts, self.opts.ending, "ending", tps, marks,
                                  ends)
            logger.info("%s: ending at %s", SOURCE_NAME, offsets_to_json(self._bound))

    def initialOffset(self) -> dict:
        return self._patient(self._initial_offset)

    def _initial_offset(self) -> dict:
        tps, marks, ends = self.client.snapshot(self.opts.selects)
        self._latest = ends
        self._resolve_bound(tps, marks, ends)
        kind = self.opts.starting.kind
        endpoint = self.opts.starting if kind != "default" else Endpoint("latest",
                                                                         option="startingOffsets")
        return offsets_to_json(resolve(self.client, self.opts, endpoint, "starting", tps, marks,
                                       ends))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        _tps, _marks, ends = self._patient(self.client.snapshot, self.opts.selects)
        self._target = dict(ends)
        logger.info("%s: availableNow target %s", SOURCE_NAME, offsets_to_json(ends))

    def _present(self, start: Mapping[TP, int]) -> tuple[list[TP], set[TP]]:
        """Current partitions, and those of `start` that are gone (checked twice)."""
        wait = min(METADATA_TIMEOUT_S, self.client.timeout_s)
        tps = self.client.topic_partitions(self.opts.selects, wait)
        gone = set(start) - set(tps)
        if gone:
            time.sleep(0.5)  # metadata of a topic being created can lag: ask again
            tps = self.client.topic_partitions(self.opts.selects, wait)
            gone = set(start) - set(tps)
        return tps, gone

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """The end of the next micro-batch. While no broker answers this waits (``_patient``):
        no micro-batch runs meanwhile, so nothing is judged on input that cannot arrive (a
        silence timer would otherwise fire for every group), and the job goes on by itself
        after."""
        return self._patient(self._latest_offset, start, limit)

    def _servers(self) -> str:
        return str(self.opts.client.get("bootstrap.servers", "?"))

    def _latest_offset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets_from_json(start)
        tps, gone = self._present(begin)
        for tp in sorted(gone - self._gone):
            data_loss(self.opts, f"Partition {tp[0]}-{tp[1]} is gone (was at offset {begin[tp]})")
        self._gone = gone
        marks = self.client.watermarks(tps)
        avail = self.client.true_ends(marks)
        marks, avail = self._confirm_moved_back(begin, marks, avail)
        self._latest = dict(avail)
        if self.opts.data_loss_markers:
            self._check_logs(begin, marks, avail)
        self._resolve_bound(tps, marks, avail)
        limits = [lim for lim in (self._target, self._bound) if lim is not None]
        result: dict[TP, int] = {tp: begin[tp] for tp in gone}  # carried forward
        starts: dict[TP, int] = {}
        for tp in tps:
            if tp in begin:
                first = begin[tp]
            else:
                if any(tp not in lim for lim in limits):
                    continue  # appeared after the availableNow target / the end was fixed
                first = marks[tp][0]  # a new partition starts at earliest
                if first != 0:
                    data_loss(self.opts, f"Added partition {tp[0]}-{tp[1]} starts from offset "
                                         f"{first} instead of 0")
            if first > avail[tp]:
                data_loss(self.opts, f"Partition {tp[0]}-{tp[1]}'s offset was changed from "
                                     f"{first} to {avail[tp]}")
                result[tp] = avail[tp]  # skip to the current end (partitions() skips the range)
                continue
            end = avail[tp]
            for lim in limits:  # availableNow target, ending offsets: never past them
                end = max(first, min(end, lim.get(tp, first)))
            starts[tp] = first
            result[tp] = end
        if isinstance(limit, ReadMaxRows):
            tops = {tp: result[tp] for tp in starts}
            if self.opts.align_timestamps:
                result.update(self._aligned(starts, tops, limit.max_rows))
            else:
                result.update(rate_limit(starts, tops, limit.max_rows))
        elif not isinstance(limit, ReadAllAvailable):
            raise NotImplementedError(f"{SOURCE_NAME}: read limit {limit!r} is not supported")
        return offsets_to_json(result)

    def _confirm_moved_back(self, begin: Mapping[TP, int], marks: dict[TP, tuple[int, int]],
                            avail: dict[TP, int]) -> tuple[dict[TP, tuple[int, int]], dict[TP, int]]:
        """A partition whose end is below where the job has read is data loss (a truncated or
        re-created log), but a broker coming back from an outage can answer so for a moment (an
        embedded broker resumed after a pause reported offset 0 for partitions it holds): such an
        answer is asked again, up to ``MOVED_BACK_CHECKS`` times a second apart, and only one
        that stays is taken."""
        for _ in range(MOVED_BACK_CHECKS):
            moved = sorted(tp for tp, end in avail.items() if tp in begin and begin[tp] > end)
            if not moved:
                break
            logger.info("%s: %s below the offsets read (%s); asking the broker again", SOURCE_NAME,
                        ", ".join(f"{t}-{p} at {avail[(t, p)]}" for t, p in moved),
                        ", ".join(str(begin[tp]) for tp in moved))
            time.sleep(1.0)
            prints = dict(self.client.last_prints)
            again = self.client.watermarks(moved)
            ends = self.client.true_ends(again)
            self.client.last_prints = {**prints, **self.client.last_prints}
            marks, avail = {**marks, **again}, {**avail, **ends}
        return marks, avail

    def _check_logs(self, begin: Mapping[TP, int], marks: Mapping[TP, tuple[int, int]],
                    ends: Mapping[TP, int]) -> None:
        """A log re-created and already past the offset the job read up to looks, by offsets,
        like the old log grown: the record remembered at the last planning (the partition's last
        then, from ``true_ends``) is compared with what the partition holds at that offset now.
        Different, or gone while the partition does not start above it, is a new log: the
        batch that starts at ``begin`` reads it from its earliest offset after a marker
        (``partitions``). Cost: nothing when the partition did not grow (``true_ends`` read that
        record again), else one fetch round of one record per grown partition."""
        seen, self._prints = self._prints, dict(self.client.last_prints)
        now = self._prints
        ask: dict[TP, int] = {}
        for tp, old in seen.items():
            if tp not in begin or tp not in ends or begin[tp] > ends[tp]:
                continue  # a new partition, or moved back: the offsets show it already
            off = old[0]
            if off < marks[tp][0]:
                continue  # deleted from the front: a truncation (``partitions``)
            if off >= ends[tp]:
                self._flag(tp, begin[tp], f"its end {ends[tp]} is below offset {off}, read before")
            elif now.get(tp, (-1,))[0] == off:
                if now[tp] != old:
                    self._flag(tp, begin[tp], f"the record at offset {off} is another")
            else:
                ask[tp] = off
        for tp, got in sorted(self.client.prints_at(ask).items() if ask else ()):
            if got != seen[tp]:
                self._flag(tp, begin[tp], f"the record at offset {ask[tp]} is "
                                          f"{'gone' if got is None else 'another'}")

    def _flag(self, tp: TP, start: int, why: str) -> None:
        logger.warning("%s: %s-%s is a new log (%s): offsets %s.. of the old log were never "
                       "read; reading the new log from its start", SOURCE_NAME, tp[0], tp[1], why,
                       start)
        self._recreated[tp] = start

    def _aligned(self, starts: Mapping[TP, int], ends: Mapping[TP, int],
                 cap: int) -> dict[TP, int]:
        """alignTimestamps: cut every partition at one record timestamp (``admission.py``)."""
        self._stamps.prune(starts)
        try:
            out, stats = plan_aligned(starts, ends, cap, self._stamps,
                                      self.client.record_timestamps)
        except RecordsUnavailable as exc:  # data loss under way: reading will report it
            logger.warning("%s: alignTimestamps: %s; this batch is cut in proportion to the "
                           "backlogs instead", SOURCE_NAME, exc)
            return rate_limit(starts, ends, cap)
        if stats.capped:
            self.last_alignment = stats
            log = logger.warning if stats.fallback else logger.info
            log("%s: aligned batch at timestamp %s: %d of %d offsets (cap %d)%s%s, %d probes in "
                "%d rounds, %d pivots, %.0f ms", SOURCE_NAME, stats.timestamp, stats.records,
                stats.backlog, cap, ", earliest timestamp split" if stats.tie_split else "",
                f", proportional cut ({stats.fallback})" if stats.fallback else "", stats.probes,
                stats.rounds, stats.pivots, stats.seconds * 1000)
        return out

    def reportLatestOffset(self) -> dict | None:
        return offsets_to_json(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, finish = offsets_from_json(start), offsets_from_json(end)
        markers = self.opts.data_loss_markers
        # Where each partition now starts: for new partitions; with markers also for those
        # moved back (read from the new log's start) and those with anything to read (records
        # deleted from the front before they were read are a loss too).
        renewed = {tp for tp, at in self._recreated.items() if begin.get(tp) == at}
        want = sorted(tp for tp, until in finish.items()
                      if tp not in begin or (markers and until != begin[tp]) or tp in renewed)
        lows = self._patient(self.client.earliest, want)
        ranges: list[Range] = []
        losses: list[dict[str, Any]] = []
        for tp, until in sorted(finish.items()):
            first = begin[tp] if tp in begin else lows[tp]
            if markers and tp in renewed:
                del self._recreated[tp]
                low = min(lows[tp], until)
                losses.append(recreated(tp[0], tp[1], first, until, low))
                ranges.append((tp[0], tp[1], low, until))
                continue
            if markers and tp in begin and first < until and lows[tp] > first:
                low = min(lows[tp], until)
                logger.warning("%s: %s-%s lost offsets %s..%s: deleted before they were read "
                               "(retention, deleted records); reading on from %s", SOURCE_NAME,
                               tp[0], tp[1], first, low - 1, low)
                losses.append(truncation(tp[0], tp[1], first, low))
                first = low
            if until < first:
                # latestOffset reported this already (and failed if failOnDataLoss); a re-run
                # of the batch after the option changed must not read it either. With markers
                # the new log is read from its earliest offset, after a marker (markers.py).
                if not markers:
                    logger.warning("%s: skipping %s-%s, offset moved back from %s to %s",
                                   SOURCE_NAME, tp[0], tp[1], first, until)
                    continue
                low = min(lows[tp], until)
                logger.warning("%s: %s-%s moved back from offset %s to %s: offsets %s.. of the old "
                               "log were never read; reading the new log from %s", SOURCE_NAME,
                               tp[0], tp[1], first, until, first, low)
                losses.append(loss(tp[0], tp[1], first, until, low))
                first = low
            ranges.append((tp[0], tp[1], first, until))
        ranges = split_ranges(ranges, self.opts.min_partitions, self.opts.max_records_per_partition)
        parts = input_partitions(ranges, self.opts.max_partitions)
        if losses:  # the markers ride on the batch's first task (one with nothing to read if none)
            if not parts:
                parts = input_partitions([(losses[0]["topic"], losses[0]["partition"], 0, 0)])
            parts[0].losses = losses  # type: ignore[attr-defined]
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, (KafkaInputPartition, KafkaRangesPartition)), partition
        return read_partition(self.opts, partition)

    def commit(self, end: dict) -> None:
        # Nothing to do: offsets live in Spark's checkpoint, no consumer group is used.
        logger.debug("%s: committed %s", SOURCE_NAME, end)

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


class KafkaBatchReader(DataSourceReader):
    """spark.read: [startingOffsets, endingOffsets) fixed when the query is planned."""

    def __init__(self, opts: Options) -> None:
        check_batch_start(opts)
        check_ending(opts)
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        client = self.opts.new_client()
        try:
            tps, marks, ends = client.snapshot(self.opts.selects)
            starts = resolve(client, self.opts, self.opts.starting, "starting", tps, marks, ends)
            finals = resolve(client, self.opts, self.opts.ending, "ending", tps, marks, ends)
        finally:
            client.close()
        ranges: list[Range] = []
        for tp in tps:
            first, until = starts[tp], finals[tp]
            if until > ends[tp]:
                data_loss(self.opts, f"endingOffsets {until} of {tp[0]}-{tp[1]} is past the end "
                                     f"of the partition ({ends[tp]})")
                until = ends[tp]
            if first > until:
                data_loss(self.opts, f"The offset range of {tp[0]}-{tp[1]} is empty: start "
                                     f"{first} is past the end {until}")
                continue
            ranges.append((tp[0], tp[1], first, until))
        ranges = split_ranges(ranges, self.opts.min_partitions, self.opts.max_records_per_partition)
        return input_partitions(ranges, self.opts.max_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.opts, partition)

