"""Planning a replay: which records a time window covers, and the group states it starts from.

A window ``[from, to)`` is taken on the records' Kafka timestamps, with Spark's
``startingTimestamp``/``endingTimestamp`` meaning (the first record at or after each time, per
partition); the publisher stamps every record with its event's ``ts_ms``, so this is event time.

Where a group stands at ``from`` comes from ``monitor.state``: the job writes there, besides the
latest snapshot per group, a *checkpoint record* each time a group's event time crosses a multiple
of ``streaming.replay_checkpoint_s`` (the group's whole state, and the input offsets the
micro-batch ended at). The replay takes, per group, the latest checkpoint record from before
``from`` whose offsets all lie at or below the window's start offsets, starts reading each
partition at the lowest offset any chosen record needs, and skips, per group, the events its
record already holds (its *floors*). Groups without such a record start empty at the window's
start (the monitor then says INCOMPLETE_HISTORY where the history it sees begins mid-way).
With ``state_from="earliest"`` the replay instead reads everything from the oldest record Kafka
still holds and keeps only what falls in the window. docs/replay.md has the whole story.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replimon.kafka import BEGINNING, TP, KafkaClient, offsets_from_json
from replimon.kafka.timeindex import TimeIndex
from replimon.replay import iso


def time_index_dir(settings: Any) -> Path:
    """Where planners keep the input topics' timestamp indexes between runs
    (``replimon.kafka.timeindex``): beside the embedded broker's data."""
    return Path(settings.paths.data_dir) / "time-index"


class ReplayError(ValueError):
    """A window or option that cannot be replayed (one line, for the CLI)."""


@dataclass
class Window:
    """The records of the input topics a window covers."""

    from_ms: int
    to_ms: int
    earliest: dict[TP, int]  # oldest offset Kafka still holds
    end: dict[TP, int]  # true end of each partition now
    start: dict[TP, int]  # first record at or after from_ms
    until: dict[TP, int]  # first record at or after to_ms (exclusive end of the window)

    @property
    def records(self) -> int:
        return sum(self.until[tp] - self.start[tp] for tp in self.start)


def plan_window(bootstrap: str, topics: Sequence[str], from_ms: int, to_ms: int,
                client_options: Mapping[str, str] | None = None,
                timeout_s: float | None = None, index_dir: str | Path | None = None) -> Window:
    """Resolve the window's offsets on the broker; ReplayError for an empty window or one that
    starts before what Kafka still holds (``timeout_s``: the client's, default its own).
    ``index_dir``: where the topics' timestamp indexes are kept between runs
    (``replimon.kafka.timeindex``: a broker that ignores timestamps in ListOffsets then costs a
    read of what was appended since the last plan, not of every partition; None: this plan's)."""
    if from_ms >= to_ms:
        raise ReplayError(f"--from ({iso(from_ms)}) must be before --to ({iso(to_ms)})")
    config = {"bootstrap.servers": bootstrap, **(client_options or {})}
    client = KafkaClient(config) if timeout_s is None else KafkaClient(config, timeout_s=timeout_s)
    with client:
        tps, marks, ends = client.snapshot(topics)
        if not tps:
            raise ReplayError(f"none of the topics {', '.join(topics)} exists on {bootstrap}")
        index = TimeIndex(bootstrap, client.isolation_level, index_dir)
        at_from, at_to = client.timestamps_offsets(
            [{tp: from_ms for tp in tps}, {tp: to_ms for tp in tps}], marks, ends, index)
        start = {tp: _or(at_from[tp], ends[tp]) for tp in tps}
        until = {tp: _or(at_to[tp], ends[tp]) for tp in tps}
        window = Window(from_ms, to_ms, {tp: marks[tp][0] for tp in tps}, dict(ends), start, until)
        suspects = trimmed(window)
        if suspects:
            firsts = client.record_timestamps({tp: window.earliest[tp] for tp in suspects})
            check_retention(window, {tp: v[0][1] for tp, v in firsts.items() if v})
        if window.records == 0:
            held = sum(ends[tp] - window.earliest[tp] for tp in tps)
            raise ReplayError(
                f"no record was published between {iso(from_ms)} and {iso(to_ms)} on "
                f"{', '.join(topics)} (they hold {held} record(s) in all)")
        return window


def _or(hit: int | None, end: int) -> int:
    """An offset found for a time, or the partition's end when no record is that late."""
    return end if hit is None else hit


def trimmed(window: Window) -> list[TP]:
    """Partitions that may have lost the window's first records to retention: they no longer
    start at offset 0, hold records, and the window starts at their oldest one."""
    return [tp for tp in sorted(window.start) if window.earliest[tp] > 0
            and window.start[tp] == window.earliest[tp] < window.end[tp]]


def check_retention(window: Window, oldest_ts: Mapping[TP, int]) -> None:
    """ReplayError when a trimmed partition's oldest record (``oldest_ts``: its timestamp) is
    newer than the window's start: records of the window were deleted."""
    late = {tp: ts for tp, ts in oldest_ts.items() if ts > window.from_ms}
    if late:
        names = ", ".join(f"{t}-{p}" for t, p in sorted(late)[:4])
        raise ReplayError(
            f"the window starts at {iso(window.from_ms)} but Kafka no longer holds records that "
            f"old on {names}: the oldest record there is from {iso(min(late.values()))} "
            "(retention). Start the window at or after that time.")


@dataclass
class Checkpoint:
    """A group's checkpoint record from ``monitor.state``."""

    group: str
    clock_ms: int
    offsets: dict[TP, int]
    state: str  # the group's to_state() as JSON text
    run_id: str = ""
    batch_id: int = -1


@dataclass
class StartState:
    """Where a replay starts: per partition, and per group."""

    starting: dict[TP, int]  # where each partition is read from
    checkpoints: dict[str, Checkpoint] = field(default_factory=dict)  # group -> the record it starts from
    floors: dict[TP, int] = field(default_factory=dict)  # groups without a record: the window start


def read_checkpoints(bootstrap: str, topic: str, client_options: Mapping[str, str] | None = None,
                     timeout_s: float = 60.0, *, before_ms: int | None = None,
                     groups: frozenset[str] | None = None, run_id: str | None = None) -> list[Checkpoint]:
    """The checkpoint records ``topic`` (``monitor.state``) holds now (read from its oldest
    record to its true end, read_committed); ReplayError when that makes no progress for
    ``timeout_s``. Only those `choose_start` could take are decoded: with ``before_ms``, a clock
    before it; with ``groups``, one of them; with ``run_id``, that run's. The key (``group@clock``)
    and headers tell, so the others (most of the records' JSON) are never parsed."""
    config = {"bootstrap.servers": bootstrap, "group.id": "replimon-replay",
              "isolation.level": "read_committed", **(client_options or {})}
    out: list[Checkpoint] = []
    with KafkaClient(config, timeout_s=timeout_s) as client:
        spans = {tp: (BEGINNING, None) for tp in client.topic_partitions([topic])}
        try:
            for msgs in client.read(spans, reset="earliest"):
                for msg in msgs:
                    headers = dict(msg.headers() or [])
                    if headers.get("kind") != b"checkpoint":
                        continue
                    if run_id is not None and headers.get("run_id", run_id.encode()) != run_id.encode():
                        continue
                    if not _may_start(msg.key(), before_ms, groups):
                        continue
                    out.append(_checkpoint(json.loads(msg.value() or b"{}")))
        except TimeoutError:
            raise ReplayError(f"could not read {topic} to its end within {timeout_s:.0f} s") from None
    return out


def _may_start(key: bytes | None, before_ms: int | None, groups: frozenset[str] | None) -> bool:
    """Whether a checkpoint record's key (``group@clock_ms``, the Kafka sink's) leaves it a
    candidate; a key of another form does (its value decides)."""
    group, at, clock = (key or b"").decode(errors="replace").rpartition("@")
    if not at or not clock.isdigit():
        return True
    return (before_ms is None or int(clock) < before_ms) and (groups is None or group in groups)


def _checkpoint(value: Mapping[str, Any]) -> Checkpoint:
    return Checkpoint(value["group"], int(value["clock_ms"]), offsets_from_json(value["offsets"]),
                      json.dumps(value["state"], separators=(",", ":")),
                      value.get("run_id", ""), int(value.get("batch_id", -1)))


def choose_start(window: Window, checkpoints: Iterable[Checkpoint], groups: frozenset[str] | None = None,
                 state_from: str = "checkpoint", run_id: str | None = "live") -> StartState:
    """The start of a replay (module docstring). ``run_id``: only checkpoint records of that run
    (the live job's, by default; None: any)."""
    if state_from == "earliest":
        return StartState(starting=dict(window.earliest))
    if state_from != "checkpoint":
        raise ReplayError(f"--state must be checkpoint or earliest (got {state_from!r})")
    best: dict[str, Checkpoint] = {}
    for cp in checkpoints:
        if groups is not None and cp.group not in groups:
            continue
        if run_id is not None and cp.run_id != run_id:
            continue
        if cp.clock_ms >= window.from_ms:
            continue
        # Its offsets must not reach into the window (nor be of another topic layout).
        if any(tp not in cp.offsets or cp.offsets[tp] > window.start[tp] for tp in window.start):
            continue
        if cp.offsets and any(cp.offsets[tp] < window.earliest[tp] for tp in window.start):
            continue  # what it needs after it was deleted: not usable
        held = best.get(cp.group)
        if held is None or cp.clock_ms > held.clock_ms:
            best[cp.group] = cp
    starting = dict(window.start)
    for cp in best.values():
        for tp in starting:
            starting[tp] = min(starting[tp], cp.offsets[tp])
    return StartState(starting=starting, checkpoints=best, floors=dict(window.start))
