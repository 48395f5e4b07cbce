"""Data loss on the input (docs/operations.md, "Data loss"): markers from the source, through the
decode stage to every bucket, reset the groups they cut; the state after is a fresh, incomplete
history, so faults after the loss are found and the stale state raises nothing."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pyarrow as pa

from replimon.core import Monitor
from replimon.core.limits import Limits
from replimon.producers.simulator import SimOptions, Simulator, parse_injection
from replimon.streaming.data_loss import LOSS_KEY
from replimon.streaming.decode import decode_batches
from replimon.streaming.processor import LIVE, MonitorLogic, parse_groups
from replimon.streaming.rows import CLOCK_KEY, bucket_of, pack, unpack
from replimon.streaming.sources.kafka import reader as source
from replimon.streaming.sources.kafka.markers import loss, marker_batch, read_marker, truncation
from replimon.streaming.sources.kafka.options import parse_options
from replimon.streaming.sources.kafka.schema import ARROW_SCHEMA
from tests.support.stateful import MemoryState, MemoryTimers

INFO_KINDS = {"CONFIG_INSTALLED", "RECONFIG_REFUSED", "INCOMPLETE_HISTORY"}
LOSS = loss("replica.decisions", 0, 5120, 0, 0)


def simulate(seconds: int, *faults: str, groups: int = 3) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    Simulator(SimOptions(duration_ms=seconds * 1000, groups=groups, seed=7),
              [parse_injection(f) for f in faults], events.append).run()
    return events


def run_batches(logic: MonitorLogic, batches: list[tuple[int, list[dict[str, Any]], bool]],
                states: dict[int, MemoryState] | None = None,
                marker: dict[str, Any] = LOSS,
                handles: dict[int, MemoryTimers] | None = None) -> list[tuple[Any, ...]]:
    """Micro-batches in Spark's order (each bucket's rows, then the timers due); a batch's flag
    puts a data-loss marker in it, sent to every bucket as the decode stage does."""
    states = states if states is not None else defaultdict(MemoryState)
    handles = handles if handles is not None else defaultdict(MemoryTimers)
    out: list[tuple[Any, ...]] = []
    for now, evs, marked in batches:
        rows: dict[int, list[tuple[str, bytes]]] = defaultdict(list)
        if marked:
            for b in range(logic.buckets):
                rows[b].append((LOSS_KEY, pack(marker)))
        for i, ev in enumerate(evs):
            rows[bucket_of(ev["group"], logic.buckets)].append(
                (ev["group"], pack([(f"replica.{ev['type']}", 0, i, ev)])))
        if evs:
            for b in range(logic.buckets):
                rows[b].append((CLOCK_KEY, pack(max(e["ts_ms"] for e in evs))))
        for b in sorted(rows):
            out += logic.on_rows(handles[b], states[b], rows[b], now)
        for b in sorted(handles):
            due = [t for t in handles[b].timers if t <= now]
            if due:
                handles[b].timers.difference_update(due)
                out += logic.on_timer(handles[b], states[b], now)
    return out


def alerts(rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    return [json.loads(r[5]) for r in rows if r[0] == "alert"]


def test_a_loss_resets_every_group_and_the_rest_is_a_fresh_history() -> None:
    """60 s of three groups; the events of 20-30 s are lost (the broker restarted without them)
    and a marker comes with the first batch after. Every group gets one DATA_LOST naming the
    partition and offsets; after it each group is judged as ``replimon check`` judges the events
    after the loss alone (a fresh, incomplete history): the fault injected after the loss is
    found, nothing else fires. Without the marker the stale state raises what check does not."""
    events = simulate(60, "beyond_horizon:g1@40s")
    start = min(e["ts_ms"] for e in events)
    cut, back = start + 20_000, start + 30_000
    kept = [e for e in events if not cut <= e["ts_ms"] < back]
    after = [e for e in events if e["ts_ms"] >= back]
    end = max(e["ts_ms"] for e in events)
    batches = [(start + (b + 1) * 1000, [e for e in kept if start + b * 1000 <= e["ts_ms"] < start + (b + 1) * 1000],
                start + b * 1000 == back) for b in range((end - start) // 1000 + 1)]
    buckets = 7
    logic = MonitorLogic(Limits(), LIVE, buckets)
    states: dict[int, MemoryState] = defaultdict(MemoryState)
    out = alerts(run_batches(logic, batches, states))
    lost = [a for a in out if a["kind"] == "DATA_LOST"]
    assert sorted(a["group"] for a in lost) == ["g1", "g2", "g3"]
    for a in lost:
        assert a["status"] == "firing" and a["severity"] == "warning" and a["category"] == "data"
        assert "replica.decisions-0 moved back from offset 5120 to 0" in a["message"]
        assert a["evidence"] == [LOSS]
        assert a["event_ts_ms"] < cut  # the group's clock when its history was cut
    # After the loss: exactly what check finds in the events after it (ids included).
    first = [a for a in out if a["detected_ts_ms"] >= back]
    fresh = {(a.alert_id, a.status) for a in Monitor().run(after)}
    got = {(a["alert_id"], a["status"]) for a in first if a["kind"] != "DATA_LOST" and "cut by data loss" not in a["message"]}
    assert got == fresh
    kinds = {a["kind"] for a in first}
    assert "BEYOND_HORIZON" in kinds and "INCOMPLETE_HISTORY" in kinds
    assert kinds <= INFO_KINDS | {"BEYOND_HORIZON", "DATA_LOST"}
    # The marker's batch re-run from the same state gives the same records (deterministic ids).
    assert len({a["alert_id"] for a in lost}) == 3

    stale = alerts(run_batches(MonitorLogic(Limits(), LIVE, buckets), [(t, evs, False) for t, evs, _ in batches]))
    made_up = {a["kind"] for a in stale if a["detected_ts_ms"] >= back} - INFO_KINDS - {"BEYOND_HORIZON"}
    assert made_up, "the stale state should raise what a fresh history does not (else this test shows nothing)"


def test_open_wedges_are_resolved_when_the_history_is_cut() -> None:
    """A wedge open when the loss comes (here NODE_SILENT) is closed with the reason, once: the
    state that held it is gone, and a firing alert would otherwise never be resolved."""
    events = simulate(40, "node_silent:g1@5s", groups=1)
    start = min(e["ts_ms"] for e in events)
    batches = [(start + (b + 1) * 1000, [e for e in events if start + b * 1000 <= e["ts_ms"] < start + (b + 1) * 1000], False)
               for b in range(15)]  # the node is silent from 12 s (and back at 18 s)
    logic = MonitorLogic(Limits(), LIVE, 3)
    states: dict[int, MemoryState] = defaultdict(MemoryState)
    handles: dict[int, MemoryTimers] = defaultdict(MemoryTimers)
    before = alerts(run_batches(logic, batches, states, handles=handles))
    silent = [a for a in before if a["kind"] == "NODE_SILENT" and a["status"] == "firing"]
    assert silent
    out = alerts(run_batches(logic, [(start + 16_000, [], True)], states, handles=handles))
    assert [(a["kind"], a["status"]) for a in out] == [("NODE_SILENT", "resolved"), ("DATA_LOST", "firing")]
    assert out[0]["alert_id"] == silent[0]["alert_id"] and "cut by data loss" in out[0]["message"]
    (state,) = [s for s in states.values() if s.value]
    assert state.value is not None and parse_groups(state.value[0])["g1"][:2] == ["", None]
    # The reset is done in the marker's batch, with no event of the group in it (a group that
    # never publishes again): no timer of the dropped state fires afterwards (its NODE_SILENT,
    # GROUP_SILENT deadlines are gone with it), however long nothing comes.
    assert any(handles[b].timers for b in handles)  # Spark's timer is still registered
    later = alerts(run_batches(logic, [(start + 16_000 + s * 1000, [], False) for s in range(1, 90)], states,
                               handles=handles))
    assert later == []


def test_decode_sends_each_marker_to_every_bucket() -> None:
    ev = simulate(2, groups=1)[0]
    raw = json.dumps(ev).encode()
    records = pa.RecordBatch.from_arrays([
        pa.array([ev["group"].encode()], pa.binary()), pa.array([raw], pa.binary()), pa.array([f"replica.{ev['type']}"]),
        pa.array([0], pa.int32()), pa.array([7], pa.int64()), pa.array([0], pa.timestamp("us", tz="UTC")),
        pa.array([0], pa.int32())], schema=ARROW_SCHEMA)
    topics = {f"replica.{t}": t for t in ("decision", "executed", "heartbeat", "config")}
    topics[f"replica.{ev['type']}"] = ev["type"]
    run = decode_batches(topics, 4, clock=False)
    (out,) = list(run(iter([pa.Table.from_batches([marker_batch([LOSS]), records]).combine_chunks().to_batches()[0]])))
    rows = out.to_pylist()
    marks = [r for r in rows if r["group"] == LOSS_KEY]
    assert sorted(r["bucket"] for r in marks) == [0, 1, 2, 3]
    assert all(unpack(r["items"]) == LOSS for r in marks)
    assert [r["group"] for r in rows if r["group"] != LOSS_KEY] == [ev["group"]]  # not a dead letter


class _Earliest:
    """The client calls ``partitions()`` makes: where each partition starts now."""

    def __init__(self, lows: dict[tuple[str, int], int]) -> None:
        self.lows = lows
        self.asked: list[tuple[str, int]] = []

    def earliest(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        self.asked += tps
        return {tp: self.lows[tp] for tp in tps}


def _plan(lows: dict[tuple[str, int], int], start: dict[str, Any], end: dict[str, Any],
          markers: bool = True) -> tuple[list[tuple[str, int, int, int]], list[dict[str, Any]]]:
    opts = parse_options({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t",
                          "failOnDataLoss": "false", "dataLossMarkers": str(markers).lower()})
    r = source.KafkaStreamReader(opts)
    r._client = _Earliest(lows)  # type: ignore[assignment]
    parts = r.partitions(start, end)
    ranges = [(p.topic, p.partition, p.start, p.until) for p in parts]
    return ranges, getattr(parts[0], "losses", []) if parts else []


def test_records_deleted_before_they_were_read_get_a_marker_naming_the_range() -> None:
    """Retention deleted offsets 100-119 of t-0 before the job read them: the batch reads t-0
    from 120, after a marker naming [100, 120); t-1 (nothing deleted) reads as planned."""
    start, end = {"t": {"0": 100, "1": 5}}, {"t": {"0": 150, "1": 9}}
    ranges, losses = _plan({("t", 0): 120, ("t", 1): 0}, start, end)
    assert ranges == [("t", 0, 120, 150), ("t", 1, 5, 9)]
    assert losses == [truncation("t", 0, 100, 120)]
    assert losses[0] == {"topic": "t", "partition": 0, "from": 100, "to": 120, "earliest": 120,
                         "cause": "truncated"}
    # The marker row carries it to the job.
    assert read_marker(marker_batch(losses).column(1)[0].as_py()) == losses[0]
    # Everything the batch was to read is gone (and more): the lost range ends at the batch's
    # end, the next batch names the rest.
    ranges, losses = _plan({("t", 0): 170, ("t", 1): 0}, start, end)
    assert [r for r in ranges if r[1] == 0] == [] and losses == [truncation("t", 0, 100, 150)]
    ranges, losses = _plan({("t", 0): 170, ("t", 1): 0}, end, {"t": {"0": 180, "1": 9}})
    assert ranges == [("t", 0, 170, 180)] and losses == [truncation("t", 0, 150, 170)]
    # Without markers: as before, read from the batch's start (the consumer skips what is gone).
    ranges, losses = _plan({("t", 0): 120, ("t", 1): 0}, start, end, markers=False)
    assert ranges == [("t", 0, 100, 150), ("t", 1, 5, 9)] and losses == []
    # Nothing deleted: no marker.
    client_lows = {("t", 0): 0, ("t", 1): 0}
    ranges, losses = _plan(client_lows, start, {"t": {"0": 150, "1": 5}})
    assert ranges == [("t", 0, 100, 150)] and losses == []


def test_a_truncation_resets_the_groups_with_the_lost_range_named() -> None:
    """The marker of a front truncation resets every group as a move back does (a DATA_LOST
    each, state dropped); its message names the lost offsets."""
    events = simulate(20)
    start = min(e["ts_ms"] for e in events)
    cut = truncation("replica.decisions", 1, 300, 420)
    batches = [(start + (b + 1) * 1000, [e for e in events if start + b * 1000 <= e["ts_ms"] < start + (b + 1) * 1000],
                b == 12) for b in range(20)]
    out = alerts(run_batches(MonitorLogic(Limits(), LIVE, 5), batches, marker=cut))
    lost = [a for a in out if a["kind"] == "DATA_LOST"]
    assert sorted(a["group"] for a in lost) == ["g1", "g2", "g3"]
    for a in lost:
        assert "replica.decisions-1 lost offsets 300..419 (deleted before they were read" in a["message"]
        assert a["evidence"] == [cut]
    assert len({a["alert_id"] for a in lost}) == 3


class _Rec:
    def __init__(self, tp: tuple[str, int], off: int) -> None:
        self.tp, self.off = tp, off

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self.tp[0]

    def partition(self) -> int:
        return self.tp[1]

    def offset(self) -> int:
        return self.off

    def key(self) -> bytes:
        return b"g1"

    def value(self) -> bytes:
        return b"{}"

    def timestamp(self) -> tuple[int, int]:
        return 1, 1_000


class _Deleting:
    """A client whose partition t-0 holds ``held`` (offsets) and starts at ``low`` when asked:
    records planned, then deleted before the task read them, as a consumer with
    ``auto.offset.reset=earliest`` sees them (it goes on from the oldest record held)."""

    def __init__(self, held: list[int], low: int) -> None:
        self.held, self.low = held, low

    def earliest(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return {tp: self.low for tp in tps}

    def read(self, spans: dict[tuple[str, int], tuple[int, int]], **kw: Any) -> Any:
        from replimon.kafka.reading import read_ranges

        held = self.held

        class Consumer:
            sent = False

            def assign(self, _parts: Any) -> None:
                pass

            def consume(self, _n: int, timeout: float) -> list[_Rec]:
                if self.sent:
                    return [_EOF(max(held, default=0) + 1)]
                self.sent = True
                return [_Rec(("t", 0), off) for off in held]

        kw.pop("reset", None)
        return read_ranges(Consumer(), spans, timeout_s=5, **kw)


class _EOF(_Rec):
    def __init__(self, off: int) -> None:
        super().__init__(("t", 0), off)

    def error(self) -> Any:
        from confluent_kafka import KafkaError

        return KafkaError(KafkaError._PARTITION_EOF)


def _read_task(monkeypatch: Any, client: _Deleting, start: int, until: int, markers: bool = True) -> tuple[list[int], list[dict[str, Any]]]:
    from replimon.streaming.sources.kafka import options
    from replimon.streaming.sources.kafka.partitions import KafkaInputPartition, read_range

    opts = parse_options({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t",
                          "failOnDataLoss": "false", "dataLossMarkers": str(markers).lower()})
    monkeypatch.setattr(options.Options, "new_client", lambda _self: client)
    offsets: list[int] = []
    losses: list[dict[str, Any]] = []
    for batch in read_range(opts, KafkaInputPartition(0, "t", 0, start, until)):
        for row in batch.to_pylist():
            if row["offset"] == -1:
                losses.append(read_marker(row["value"]))
            else:
                offsets.append(row["offset"])
    return offsets, losses


def test_records_deleted_while_the_task_reads_get_a_marker_naming_the_skipped_range(monkeypatch: Any) -> None:
    """Planned [100, 150) of t-0, then offsets 100-119 deleted before the task fetched them: the
    consumer goes on from 120; the task's output carries a marker naming [100, 120) (the same
    marker a truncation seen at planning gives, so the job resets its groups the same way),
    instead of skipping them in silence."""
    got, losses = _read_task(monkeypatch, _Deleting(list(range(120, 150)), low=120), 100, 150)
    assert got == list(range(120, 150))
    assert losses == [truncation("t", 0, 100, 120)]
    # Everything planned is gone (the consumer's first record is past the range): the whole range.
    got, losses = _read_task(monkeypatch, _Deleting([170, 171], low=170), 100, 150)
    assert got == [] and losses == [truncation("t", 0, 100, 150)]
    # A hole the partition still starts below (a compacted partition, a transaction's control
    # record) is no loss: no marker.
    got, losses = _read_task(monkeypatch, _Deleting([100, 101, 105, 106], low=0), 100, 107)
    assert got == [100, 101, 105, 106] and losses == []
    # Without markers the read is as before: the skip is the consumer's.
    got, losses = _read_task(monkeypatch, _Deleting(list(range(120, 150)), low=120), 100, 150, markers=False)
    assert got == list(range(120, 150)) and losses == []
    # Nothing skipped: nothing asked, no marker.
    got, losses = _read_task(monkeypatch, _Deleting(list(range(100, 150)), low=100), 100, 150)
    assert got == list(range(100, 150)) and losses == []


class _Logs:
    """The client calls the source's planning makes, over one partition t-0 whose log is
    ``log`` (offset -> record fingerprint, offsets 0..n-1); ``asked``: what ``prints_at`` was
    asked (the check's cost)."""

    def __init__(self, log: dict[int, tuple[int, int, int]]) -> None:
        self.log = log
        self.asked: list[dict[tuple[str, int], int]] = []
        self.last_prints: dict[tuple[str, int], tuple[int, int, int]] = {}
        self.timeout_s = 5.0

    def topic_partitions(self, _sel: Any, _wait: float | None = None) -> list[tuple[str, int]]:
        return [("t", 0)]

    def watermarks(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        return {tp: (min(self.log, default=0), max(self.log, default=-1) + 1) for tp in tps}

    def true_ends(self, marks: dict[tuple[str, int], tuple[int, int]]) -> dict[tuple[str, int], int]:
        self.last_prints = {tp: self.log[high - 1] for tp, (_low, high) in marks.items() if high > 0}
        return {tp: high for tp, (_low, high) in marks.items()}

    def prints_at(self, wanted: dict[tuple[str, int], int]) -> dict[tuple[str, int], Any]:
        self.asked.append(dict(wanted))
        return {tp: self.log.get(off) for tp, off in wanted.items()}

    def earliest(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return {tp: min(self.log, default=0) for tp in tps}


def _log(n: int, stamp: int) -> dict[int, tuple[int, int, int]]:
    return {off: (off, stamp + off, off * 7 + stamp) for off in range(n)}


def test_a_log_recreated_past_the_offset_read_is_flagged_by_the_record_remembered() -> None:
    """The job read t-0 up to 150; the topic is re-created and the new log already holds 260
    records when the next batch is planned: the offsets (150 -> 260) look like the old log
    grown. The last record seen at the previous planning (offset 149) is read again and is
    another record: the batch reads the new log from 0, after a marker naming the offset read up
    to. An unchanged log costs one record fetch per grown partition, none when it did not grow,
    and gives no marker."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from replimon.streaming.sources.kafka.markers import recreated
    from replimon.streaming.sources.kafka.options import parse_options
    from replimon.streaming.sources.kafka.reader import KafkaStreamReader

    opts = parse_options({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t",
                          "failOnDataLoss": "false", "dataLossMarkers": "true"})
    r = KafkaStreamReader(opts)
    old = _Logs(_log(150, 1_000))
    r._client = old  # type: ignore[assignment]

    def batch(start: dict[str, Any]) -> tuple[dict[str, Any], list[Any], list[dict[str, Any]]]:
        end = r.latestOffset(start, ReadAllAvailable())
        parts = r.partitions(start, end)
        return end, [(p.topic, p.partition, p.start, p.until) for p in parts], \
            getattr(parts[0], "losses", []) if parts else []

    end, ranges, losses = batch({"t": {"0": 100}})
    assert end == {"t": {"0": 150}} and ranges == [("t", 0, 100, 150)] and losses == []
    # No growth: the record is compared where true_ends read it again; nothing fetched.
    assert batch(end)[2] == [] and old.asked == []
    # The old log grows: one record fetched (offset 149), the same: no marker.
    old.log.update({off: (off, 1_000 + off, off * 7 + 1_000) for off in range(150, 200)})
    end, ranges, losses = batch(end)
    assert old.asked == [{("t", 0): 149}] and ranges == [("t", 0, 150, 200)] and losses == []
    # Re-created (other records) and already past 200 when the job looks.
    old.log = _log(260, 9_000_000)
    end, ranges, losses = batch(end)
    assert end == {"t": {"0": 260}}
    assert ranges == [("t", 0, 0, 260)] and losses == [recreated("t", 0, 200, 260, 0)]
    # The next batches go on in the new log without a marker.
    old.log.update({off: (off, 9_000_000 + off, off * 7 + 9_000_000) for off in range(260, 270)})
    end, ranges, losses = batch(end)
    assert ranges == [("t", 0, 260, 270)] and losses == []
    # The new log shorter than the record last seen but not below the batch's start: its end
    # moved back below a record read before, also a new log.
    old.log = _log(268, 5)
    end, ranges, losses = batch({"t": {"0": 265}})
    assert losses == [recreated("t", 0, 265, 268, 0)] and ranges == [("t", 0, 0, 268)]
