"""The replay's two engines give the same rows (docs/replay.md, "Two engines"): the bounded batch
job (``streaming/replay_batch.py``, the default) and the streaming query (``engine="stream"``), on
the same window of one recorded trace, from the same checkpoint records.

The trace has faults that need each of the batch engine's parts: a group silent in the middle of
the window (its own event time fires GROUP_SILENT before it resumes), one whose silence begins
near the end (only the window's watermark fires it: the final timers on the driver), a node
silent, lost events, a divergent decision, and a bad record (a dead letter). The batch engine
with a shorter snapshot period gives the same alerts again, and more time-series points.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from confluent_kafka import Producer

from replimon.streaming.replay import replay
from replimon.streaming.replay_batch import Job, MemoryState, finish, tasks, watermark
from tests.support import publish, settings_for, simulate
from tests.support.replays import Base, alert_rows, live_run

SECONDS = 150
FAULTS = ("divergent_decision:g6@95s", "group_silent:g1@100s", "node_silent:g3@105s",
          "events_lost:g4@110s", "group_silent:g5@118s")
FROM_S, TO_S = 90, 140


@pytest.fixture(scope="module")
def base(spark: Any, broker: Any, postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Base]:
    tmp = tmp_path_factory.mktemp("replay-engines")
    settings = settings_for(broker, postgres, f"re-{uuid.uuid4().hex[:10]}-", tmp)
    events = simulate(SECONDS, *FAULTS, groups=6, seed=7)
    t0 = min(e["ts_ms"] for e in events)
    # A bad record in the window, in publishing order (a dead letter for both engines).
    early = [e for e in events if e["ts_ms"] < t0 + 100_000]
    publish(settings, early)
    p = Producer({"bootstrap.servers": settings.kafka.bootstrap_servers})
    p.produce(settings.kafka.topics.decisions, key=b"g2", value=b"{not json", timestamp=t0 + 100_000)
    assert p.flush(30) == 0
    run = live_run(spark, settings, [e for e in events if e["ts_ms"] >= t0 + 100_000], tmp)
    yield Base(settings, events, t0, run.run_id)


def _worded(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Alert rows without the message of a silence (it says how long when it was seen)."""
    return [(*r[:8], None if r[3] in ("GROUP_SILENT", "NODE_SILENT") else r[8], *r[9:]) for r in rows]


def _states(dsn: str, run_id: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT group_id, snapshot - 'counts' FROM group_state WHERE run_id = %s"
                            " ORDER BY group_id", (run_id,)).fetchall()


def _dead(dsn: str, run_id: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT topic, partition, \"offset\", reason FROM dead_letters"
                            " WHERE run_id = %s ORDER BY 1, 2, 3", (run_id,)).fetchall()


@pytest.mark.broker
@pytest.mark.postgres
@pytest.mark.timeout(900)
def test_batch_and_stream_engines_give_identical_rows(spark: Any, base: Base) -> None:
    lo, hi = base.at(FROM_S), base.at(TO_S)
    dsn = base.settings.postgres.dsn
    s = replay(base.settings, lo, hi, spark=spark, checkpoints_of=base.run_id, engine="stream")
    b = replay(base.settings, lo, hi, spark=spark, checkpoints_of=base.run_id)
    fine = replay(base.settings, lo, hi, spark=spark, checkpoints_of=base.run_id, snapshot_ms=3_000)
    assert s.params["engine"] == "stream" and b.params["engine"] == fine.params["engine"] == "batch"
    assert s.records_read == b.records_read == b.records_total
    everything = [alert_rows(dsn, r.run_id, 0, 10**13) for r in (s, b, fine)]
    assert everything[0] == everything[1] == everything[2]
    kinds = {r[3] for r in everything[0]}
    assert {"GROUP_SILENT", "NODE_SILENT", "DIVERGENT_DECISION", "EVENTS_LOST"} <= kinds, kinds
    # ... and the live run's alerts for the window, as for the streaming engine (test_replay.py),
    # but for the wording of silences ("for 24 s": said when it was seen, docs/replay.md).
    assert _worded(alert_rows(dsn, b.run_id, lo, hi)) == _worded(alert_rows(dsn, base.run_id, lo, hi))
    # g5's silence begins 22 s before the window's end: only the final timers can report it.
    silent = {r[2] for r in everything[1] if r[3] == "GROUP_SILENT" and r[1] == "firing"}
    assert {"g1", "g5"} <= silent, silent
    assert _states(dsn, s.run_id) == _states(dsn, b.run_id)
    assert _dead(dsn, s.run_id) == _dead(dsn, b.run_id) and _dead(dsn, b.run_id)
    with psycopg.connect(dsn) as conn:
        points = dict(conn.execute("SELECT run_id, count(*) FROM group_timeseries WHERE run_id = ANY(%s)"
                                   " GROUP BY run_id", ([b.run_id, fine.run_id],)).fetchall())
    assert points[fine.run_id] > points[b.run_id] > 6  # points along the window, not one a group


# -- the batch engine's parts, without Spark ----------------------------------------------------
def test_one_task_per_partition_number() -> None:
    starting = {("d", 0): 5, ("d", 1): 0, ("e", 0): 3, ("e", 1): 7, ("h", 2): 4}
    until = {("d", 0): 9, ("d", 1): 0, ("e", 0): 8, ("e", 1): 7, ("h", 2): 6}
    assert tasks(starting, until) == [{("d", 0): (5, 9), ("e", 0): (3, 8)}, {("h", 2): (4, 6)}]


def test_the_final_timers_fire_at_the_windows_watermark_only() -> None:
    from replimon.core.limits import Limits
    from replimon.streaming.replay_batch import TaskOut

    limits = Limits()
    assert watermark(10_000, limits) == 10_000 - max(1, round(limits.skew_ms / 1000)) * 1000
    job = Job("-", {}, 4, limits, "", (), None, 10_000, 0)
    # A bucket whose timer lies past the watermark is not touched; nothing at all read: no timers.
    later = TaskOut(0, event_ms=10_000, states={1: ("", 10_000, 4, None, None)}, groups={"a"})
    assert finish(job, [later]) == ([], watermark(10_000, limits))
    assert finish(job, []) == ([], -1)
    with pytest.raises(RuntimeError, match="group a has events in partition numbers 0 and 1"):
        finish(job, [later, TaskOut(1, groups={"a"})])
    assert MemoryState(3).get() == 3
