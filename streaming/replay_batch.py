"""A replay as a bounded Spark batch job (``replimon replay``, the default engine; docs/replay.md,
"Two engines").

The streaming replay (``replay.py``, ``engine="stream"``) carries a window through the live job's
graph: the Python source, the decode stage, a shuffle by state bucket, ``transformWithState`` with
its state store, micro-batches of ``max_offsets_per_trigger`` records. Its fixed costs per batch
and per record (docs/streaming.md, "The floor") held it near a tenth of the one-thread core chain.
A replay needs none of that machinery: its input is a fixed offset range, and one group's events
all sit in one partition number of the four input topics (Kafka key = group). So here:

* one Spark task per partition number: it reads that partition of every input topic over the
  replay's range with the project's Kafka client (``replimon.kafka``), no shuffle, no state store;
* the records go through the decode stage itself (``decode.decode_batches``, on Arrow batches built
  from the records: the same contract check, dead letters, packing and watermark times);
* the packed rows go through the stateful processor's own logic (``processor.MonitorLogic``:
  ``on_initial``, ``on_rows``, ``on_timer``) with in-memory stand-ins for Spark's ValueState and
  timers, one state per bucket, exactly as ``transformWithState`` calls it in a replay;
* the output rows (alerts, snapshots, dead letters) go to the same writer's sinks
  (``runner.make_writer``: PostgreSQL under the replay's run id, the data-quality sink).

Time and order, as the streaming replay has them in one micro-batch (``timeMode="EventTime"``,
docs/streaming.md, "Replay"). A task's records are one batch for each state bucket: a group's
events sorted by (event time, node, incarnation, seq, topic, partition, offset), its own event time
firing what falls due before each event (``MonitorLogic.feed``). The outside clock is the
watermark, the highest event time read (``event_ms`` of the packed rows, the decode stage's
trusted times) minus the skew in whole seconds, as Spark computes it; it is known once every task
is done, so the driver then fires, as the streaming replay's final no-data batch does, every
bucket timer at or below it (``on_timer``) on the states the tasks return. The streaming replay
of a window larger than ``max_offsets_per_trigger`` runs several micro-batches instead, each
sorted on its own and timed by the watermark of the one before: where two nodes' reports of one
command fall on either side of a cut, which one an info alert names (CONFIG_INSTALLED's node and
evidence) follows the cut; the batch engine has no cuts, so its rows do not depend on a batch size.

Snapshots: a group's snapshot each time its clock crosses a multiple of ``snapshot_ms`` of event
time within the window (the replay's time series; the streaming replay takes one a micro-batch),
and its state after the batch and after its final timers, as the streaming replay emits them.

Checkpoint records (the groups' initial states) are handed to the task that meets the group's
first event, before it; a group whose record is chosen but which has no event in the range is
started on the driver and takes part in the final timers, as it would in Spark's state.

Refused (``SplitGroups``, the caller falls back to the streaming replay): a group met by two
tasks (topics with different partition counts, or a producer that does not key by group).
"""

from __future__ import annotations

import gc
import json
import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from replimon.core.limits import Limits
from replimon.kafka import TP, KafkaClient
from replimon.streaming.decode import decode_batches
from replimon.streaming.processor import REPLAY, MonitorLogic
from replimon.streaming.rows import ALERT, CHECKPOINT, DEAD_BUCKET, OUTPUT_COLUMNS, STATE, dead_rows

log = logging.getLogger("replimon.replay")

DEFAULT_SNAPSHOT_MS = 10_000  # event time between a group's snapshots along the replay


class SplitGroups(RuntimeError):
    """A group's events were found in two tasks: the batch replay cannot run this topic layout."""


class OutRow(NamedTuple):
    """An output row (``rows.py``, "Output rows") as the writer's ``batch_result`` reads it."""

    out: str
    group_id: str | None
    id: str
    status: str | None
    ts_ms: int | None
    payload: str | None
    raw: bytes | None


# -- in-memory stand-ins for Spark's ValueState and timer handle ---------------------------------
class MemoryState:
    """A ValueState held in memory (one per bucket)."""

    __slots__ = ("value",)

    def __init__(self, value: Any = None) -> None:
        self.value = value

    def get(self) -> Any:
        return self.value

    def update(self, value: Any) -> None:
        self.value = value

    def clear(self) -> None:
        self.value = None


class MemoryTimers:
    """The timer handle: registered timers are read back from the bucket's state (``value[1]``,
    where ``MonitorLogic`` remembers its one timer), so nothing is kept here."""

    def registerTimer(self, when: int) -> None:  # noqa: N802 - Spark's name
        pass

    def deleteTimer(self, when: int) -> None:  # noqa: N802 - Spark's name
        pass


# -- the plan -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    """What every task needs (pickled to the executors once per task)."""

    bootstrap: str
    topic_types: dict[str, Any]
    buckets: int
    limits: Limits
    floors: str  # JSON: where a group without a checkpoint record starts ("" : nowhere)
    pins: tuple[tuple[str, str], ...]
    only: frozenset[str] | None
    snapshot_ms: int  # a snapshot each time a group's clock crosses a multiple (0: at the end only)
    since: int  # no snapshot taken along the way before this event time (the window's start)
    initial: dict[str, tuple[str, str]] = field(default_factory=dict)  # group -> (state, floors)
    client_options: dict[str, str] = field(default_factory=dict)

    def logic(self) -> BatchLogic:
        # checkpoint_ms 0: a replay's checkpoint records go nowhere (no Kafka output).
        return BatchLogic(self.limits, REPLAY, self.buckets, checkpoint_ms=0,
                          floors=json.loads(self.floors) if self.floors else None, snapshot_ms=0,
                          pins=self.pins, snapshot_every=self.snapshot_ms, since=self.since)


@dataclass
class TaskOut:
    """One task's result."""

    index: int
    records: int = 0
    event_ms: int = -1  # the highest packed-row event time (the watermark's input)
    rows: list[OutRow] = field(default_factory=list)
    states: dict[int, Any] = field(default_factory=dict)  # bucket -> its state value at the end
    groups: set[str] = field(default_factory=set)
    seconds: dict[str, float] = field(default_factory=dict)  # read, decode, monitor (bench/replay.py)


def tasks(starting: Mapping[TP, int], until: Mapping[TP, int]) -> list[dict[TP, tuple[int, int]]]:
    """One task per partition number: that partition of every topic, over ``[starting, until)``
    (empty ranges left out; tasks without any record left out)."""
    by_number: dict[int, dict[TP, tuple[int, int]]] = {}
    for tp in sorted(until):
        lo, hi = starting.get(tp, until[tp]), until[tp]
        if hi > lo:
            by_number.setdefault(tp[1], {})[tp] = (lo, hi)
    return [by_number[n] for n in sorted(by_number)]


# -- one task -------------------------------------------------------------------------------------
# value, topic, partition, offset, timestamp (ms), key
Record = tuple[bytes | None, str, int, int, int, bytes | None]
DECODE_RECORDS = 20_000  # records per Arrow batch through the decode stage (memory, not results)


class _Snapshotting:
    """A group's monitor while its events are fed: each time the group's clock crosses a multiple
    of ``every`` (at or after ``since``), a ``state`` row of its snapshot goes to ``out`` (the
    replay's time series; the streaming replay takes one a micro-batch). Everything else is the
    monitor's own (``GroupMonitor`` has slots: it cannot be patched)."""

    __slots__ = ("every", "gm", "last", "out", "since")

    def __init__(self, gm: Any, out: list[tuple[Any, ...]], every: int, since: int) -> None:
        self.gm, self.out, self.every, self.since = gm, out, every, since
        self.last = gm.clock

    def __getattr__(self, name: str) -> Any:
        return getattr(self.gm, name)

    def on_event(self, ev: dict[str, Any], src: Any = None, now: int | None = None) -> Any:
        gm = self.gm
        alerts = gm.on_event(ev, src, now)
        clock = gm.clock
        if clock // self.every > self.last // self.every:
            self.last = clock
            if clock >= self.since:
                self.out.append((STATE, gm.group, gm.group, None, clock,
                                 json.dumps(gm.snapshot(), separators=(",", ":")), None))
        return alerts


class BatchLogic(MonitorLogic):
    """``MonitorLogic`` as a replay runs it, plus the snapshots along the way (``_Snapshotting``)."""

    def __init__(self, *args: Any, snapshot_every: int = 0, since: int = 0, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.snapshot_every = snapshot_every
        self.since = since
        self.along: list[tuple[Any, ...]] | None = None

    def monitor(self, groups: Any, name: str) -> Any:
        gm = super().monitor(groups, name)
        if self.along is not None and self.snapshot_every > 0:
            return _Snapshotting(gm, self.along, self.snapshot_every, self.since)
        return gm

    def keep(self, groups: Any, gm: Any) -> None:
        super().keep(groups, gm.gm if isinstance(gm, _Snapshotting) else gm)

    def on_rows(self, handle: Any, state: Any, rows: Any, now: int) -> list[tuple[Any, ...]]:
        self.along = []
        try:
            out = super().on_rows(handle, state, rows, now)
            return self.along + out  # a group's last snapshot stays its latest
        finally:
            self.along = None


def read_records(job: Job, spans: Mapping[TP, tuple[int, int]]) -> list[Record]:
    """The task's records, each partition in offset order (the partitions one after another)."""
    config = {"bootstrap.servers": job.bootstrap, **job.client_options}
    out: list[Record] = []
    with KafkaClient(config) as client:
        for msgs in client.read(dict(spans)):
            for m in msgs:
                out.append((m.value(), m.topic(), m.partition(), m.offset(), m.timestamp()[1], m.key()))
    out.sort(key=lambda r: (r[1], r[2], r[3]))
    return out


def _arrow(records: list[Record]) -> Any:
    import pyarrow as pa

    return pa.RecordBatch.from_arrays(
        [pa.array([r[0] for r in records], pa.binary()), pa.array([r[1] for r in records], pa.string()),
         pa.array([r[2] for r in records], pa.int32()), pa.array([r[3] for r in records], pa.int64()),
         pa.array([r[4] * 1000 for r in records], pa.int64()),  # epoch us, as the stage casts it
         pa.array([r[5] for r in records], pa.binary())],
        names=["value", "topic", "partition", "offset", "timestamp", "key"])


def run_task(job: Job, index: int, records: list[Record]) -> TaskOut:
    """One partition number's records through the decode stage and the monitor, as one
    micro-batch of the streaming replay (module doc)."""
    result = TaskOut(index, records=len(records))
    clock = time.perf_counter()
    decode = decode_batches(job.topic_types, job.buckets, False, job.only, job.limits.clock_skew_ms)
    batches = (_arrow(records[i:i + DECODE_RECORDS]) for i in range(0, len(records), DECODE_RECORDS))
    by_bucket: dict[int, list[tuple[str, bytes]]] = {}
    for batch in decode(batches):
        cols = batch.to_pydict()
        for bucket, group, items, event_ms in zip(cols["bucket"], cols["group"], cols["items"],
                                                  cols["event_ms"], strict=True):
            by_bucket.setdefault(bucket, []).append((group, items))
            if event_ms > result.event_ms:
                result.event_ms = event_ms
    logic = job.logic()
    timers = MemoryTimers()
    decoded = time.perf_counter()
    for bucket in sorted(by_bucket):
        rows = by_bucket.pop(bucket)
        if bucket == DEAD_BUCKET:
            result.rows.extend(OutRow(*r) for r in dead_rows(items for _, items in rows))
            continue
        state = MemoryState()
        groups = sorted({g for g, _ in rows})
        result.groups.update(groups)
        # The checkpoint records first (Spark's initial state), then the bucket's one batch; the
        # watermark during it is Spark's first one (0): the window's comes in ``finish``.
        first = [(g, *job.initial[g]) for g in groups if g in job.initial]
        if first:
            logic.on_initial(timers, state, first, 0)
        result.rows.extend(OutRow(*r) for r in logic.on_rows(timers, state, rows, 0) if r[0] != CHECKPOINT)
        result.states[bucket] = state.value
    result.seconds.update(decode=decoded - clock, monitor=time.perf_counter() - decoded)
    return result


def task_main(job: Job, index: int, spans: Mapping[TP, tuple[int, int]]) -> TaskOut:
    """A Spark task: read its ranges, run them (``run_task``). The garbage collector is off while
    they run: the task makes a few hundred thousand short-lived, acyclic objects (decoded events,
    alerts), and full collections walking the records held cost 10-40 % of its time (measured
    on one task's records, docs/replay.md); it is back on, and the records gone, when it ends."""
    clock = time.perf_counter()
    records = read_records(job, spans)
    read = time.perf_counter() - clock
    gc.disable()
    try:
        out = run_task(job, index, records)
    finally:
        gc.enable()
    out.seconds["read"] = read
    return out


# -- the driver -----------------------------------------------------------------------------------
def watermark(event_ms: int, limits: Limits) -> int:
    """Spark's watermark after reading ``event_ms`` at most, as ``job.build`` sets it (the skew in
    whole seconds, at least one)."""
    skew_s = max(1, int(round(limits.skew_ms / 1000)))
    return event_ms - skew_s * 1000


def finish(job: Job, outs: list[TaskOut]) -> tuple[list[OutRow], int]:
    """The final no-data batch: every bucket timer at or below the window's watermark fires, on
    each task's bucket states and on the groups whose checkpoint record met no event. Returns its
    rows and the watermark. SplitGroups when a group was met by two tasks."""
    seen: dict[str, int] = {}
    for o in outs:
        for g in o.groups:
            if g in seen:
                raise SplitGroups(f"group {g} has events in partition numbers {seen[g]} and {o.index} "
                                  "of the input topics")
            seen[g] = o.index
    top = max((o.event_ms for o in outs), default=-1)
    logic = job.logic()
    timers = MemoryTimers()
    states = [MemoryState(v) for o in outs for _, v in sorted(o.states.items())]
    idle: dict[int, MemoryState] = {}
    from replimon.streaming.rows import bucket_of

    for g in sorted(set(job.initial) - set(seen)):
        state = idle.setdefault(bucket_of(g, job.buckets), MemoryState())
        logic.on_initial(timers, state, [(g, *job.initial[g])], 0)
    states += [idle[b] for b in sorted(idle)]
    rows: list[OutRow] = []
    if top < 0:
        return rows, -1
    now = watermark(top, job.limits)
    for state in states:
        value = state.value
        if value is None or value[1] is None or value[1] > now:
            continue  # no timer, or not reached: Spark fires nothing for this bucket
        rows.extend(OutRow(*r) for r in logic.on_timer(timers, state, now) if r[0] != CHECKPOINT)
    return rows, now


def run(spark: Any, job: Job, spans: list[dict[TP, tuple[int, int]]]) -> tuple[list[TaskOut], list[OutRow], int]:
    """The tasks on Spark (one per partition number, ``tasks``), then ``finish`` on the driver."""
    if not spans:
        return [], [], -1
    sc = spark.sparkContext
    work = list(enumerate(spans))

    def one(items: Iterator[tuple[int, dict[TP, tuple[int, int]]]]) -> Iterator[TaskOut]:
        for index, s in items:
            yield task_main(job, index, s)

    outs = sorted(sc.parallelize(work, len(work)).mapPartitions(one).collect(), key=lambda o: o.index)
    rows, now = finish(job, outs)
    return outs, rows, now


def output_order(outs: list[TaskOut], final: list[OutRow]) -> list[list[OutRow]]:
    """The rows as the writer's batches: each task's, then the final timers' (a group's last
    snapshot is its latest state)."""
    return [o.rows for o in outs] + [final]


def pipeline_name() -> str:
    """The PostgreSQL guard's pipeline name of one batch replay (its batch ids start at 0)."""
    from replimon.store.runs import DEFAULT_PIPELINE

    return f"{DEFAULT_PIPELINE}:replay-batch-{uuid.uuid4().hex[:12]}"


def count(rows: Iterable[OutRow]) -> dict[str, int]:
    out = {ALERT: 0, STATE: 0, "dead": 0}
    for r in rows:
        out[r.out] = out.get(r.out, 0) + 1
    return out


__all__ = ["OUTPUT_COLUMNS", "Job", "MemoryState", "MemoryTimers", "OutRow", "SplitGroups", "TaskOut",
           "finish", "output_order", "pipeline_name", "run", "run_task", "tasks", "watermark"]
