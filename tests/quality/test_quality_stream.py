"""The data-quality sink in the real streaming job (docs/quality.md): embedded broker, Spark local
mode, embedded PostgreSQL.

A simulator trace with two contract-valid faults the monitor's rules do not judge (one node's seq
goes backwards, another node's clock runs 10 minutes ahead) is replayed through the job with the
sink validating every batch. The suites flag exactly those two expectations, ``dq_results`` has
a row per expectation and batch, a DATA_QUALITY_FAILED alert names each failed expectation with
the failing records (topic, partition, offset) as evidence, in PostgreSQL and on
``monitor.alerts``; the replay report lists the results. A batch written again by the writer
(Spark's retry) writes no dq row or alert twice, and a validation lost to a crash after the
batch's commit is made on the retry.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from replimon.store.reads import RunReader
from tests.support import (
    batch_frame,
    headers,
    publish,
    read_topic,
    replay,
    settings_for,
    simulate,
    writer_for,
)

pytestmark = [pytest.mark.broker, pytest.mark.postgres]

AHEAD_MS = 10 * 60 * 1000
SEQ = ("replica.decisions", "expect_column_values_to_be_between(seq_step)")
CLOCK = ("replica.heartbeats", "expect_column_values_to_be_between(clock_offset_ms)")


def _settings(broker: Any, postgres: Any, prefix: str, tmp_path: Path) -> Any:
    s = settings_for(broker, postgres, prefix, tmp_path)
    quality = s.quality.model_copy(update={"every_batches": 1, "every_s": 0, "sample_records": 1_000_000})
    return s.model_copy(update={"quality": quality})


def bad_trace() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A clean 3-group trace, then: in g1, two consecutive decisions of node n2 swap their seq
    numbers (seq goes back by the step between them); in g2, every event of node n3 is stamped 10
    minutes later (its clock runs ahead). Both stay contract-valid."""
    events = simulate(30, groups=3, seed=11)
    mine = [i for i, e in enumerate(events) if (e["group"], e["node"], e["type"]) == ("g1", "n2", "decision")]
    a, b = mine[len(mine) // 2], mine[len(mine) // 2 + 1]
    assert events[a]["incarnation"] == events[b]["incarnation"]
    events[a], events[b] = dict(events[a]), dict(events[b])
    events[a]["seq"], events[b]["seq"] = events[b]["seq"], events[a]["seq"]
    ahead = 0
    for i, e in enumerate(events):
        if (e["group"], e["node"]) == ("g2", "n3"):
            events[i] = {**e, "ts_ms": e["ts_ms"] + AHEAD_MS}
            ahead += 1
    assert ahead > 50
    return events, {"seq_back": events[b], "ahead": ("g2", "n3")}


def _dq(dsn: str, run_id: str) -> list[dict[str, Any]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT batch_id, suite, expectation, success, evaluated, unexpected, details"
            " FROM dq_results WHERE run_id = %s ORDER BY batch_id, suite, expectation", (run_id,)).fetchall()
    keys = ("batch_id", "suite", "expectation", "success", "evaluated", "unexpected", "details")
    return [dict(zip(keys, r, strict=True)) for r in rows]


def _dq_alerts(dsn: str, run_id: str) -> list[dict[str, Any]]:
    return [a for a in RunReader(dsn, run_id).alerts() if a["kind"] == "DATA_QUALITY_FAILED"]


def quality(writer: Any) -> Any:
    """The writer's data-quality sink."""
    from replimon.streaming.sinks.quality import QualitySink

    return next(s for s in writer.sinks if isinstance(s, QualitySink))


def _frame(result: Any) -> Any:
    """A stand-in for the batch DataFrame ``foreachBatch`` gets: the rows of a BatchResult."""
    return batch_frame(result.alerts, result.snapshots)


def test_the_hook_in_the_streaming_job(spark: Any, broker: Any, postgres: Any, topic_prefix: str,
                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from replimon.replay.report_data import load_run
    from replimon.streaming.sinks.postgres import PostgresSink

    settings = _settings(broker, postgres, topic_prefix, tmp_path)
    events, bad = bad_trace()
    publish(settings, events)
    run_id = f"dq-{uuid.uuid4().hex[:8]}"
    _, batches = replay(spark, settings, run_id, max_offsets=len(events) // 2 + 1)
    dsn = settings.postgres.dsn
    assert len(batches) >= 2
    rows = _dq(dsn, run_id)
    # Every batch with something to validate (a batch with input has snapshots; the last one of
    # a replay only fires timers, maybe with nothing to say).
    assert {r["batch_id"] for r in rows} == {b.batch_id for b in batches if b.snapshots or b.alerts}
    failed = {(r["suite"], r["expectation"]) for r in rows if not r["success"]}
    assert failed == {SEQ, CLOCK}, failed  # exactly the two faults; the clean rest passes
    assert all(r["evaluated"] for r in rows)

    # The seq step: the one record whose seq went back, found where it was read.
    seq_rows = [r for r in rows if (r["suite"], r["expectation"]) == SEQ and not r["success"]]
    assert [r["unexpected"] for r in seq_rows] == [1]
    (sample,) = seq_rows[0]["details"]["sample"]
    back = bad["seq_back"]
    assert {k: sample[k] for k in ("group", "node", "seq", "ts_ms")} == {k: back[k] for k in ("group", "node", "seq", "ts_ms")}
    assert sample["seq_step"] < 0 and sample["topic"] == settings.kafka.topics.decisions

    # The clock: only g2's n3, ahead. How far depends on the batch: the job cuts batches at one
    # record time (alignTimestamps), so n3's heartbeats (stamped 10 minutes late) land in a later
    # batch than the others' of the same moment, and there meet only some of them (a median
    # offset between the bound and 10 minutes; test_quality.py checks the exact figure).
    clock_rows = [r for r in rows if (r["suite"], r["expectation"]) == CLOCK and not r["success"]]
    samples = [s for r in clock_rows for s in r["details"]["sample"]]
    assert samples and {(s["group"], s["node"]) for s in samples} == {bad["ahead"]}
    bound = settings.quality.max_clock_skew_s * 1000
    assert all(bound < s["clock_offset_ms"] <= AHEAD_MS + 5_000 for s in samples), samples

    # One DATA_QUALITY_FAILED alert per failed expectation and batch, naming it, with evidence; but
    # the node whose clock is off gets one per spell off, not per batch (docs/quality.md).
    alerts = _dq_alerts(dsn, run_id)
    clock = [a for a in alerts if "is off" in a["message"]]
    assert len(alerts) - len(clock) == sum(1 for r in rows if not r["success"] and (r["suite"], r["expectation"]) != CLOCK)
    assert 1 <= len(clock) <= len(clock_rows) and {(a["group"], a["node"]) for a in clock} == {bad["ahead"]}
    for a in alerts:
        assert (a["severity"], a["category"], a["status"]) == ("warning", "data", "firing")
        assert any(name in a["message"] for _, name in (SEQ, CLOCK)), a["message"]
        assert a["evidence"] and all({"topic", "partition", "offset", "node", "seq"} <= set(e) for e in a["evidence"])
    assert {a["group"] for a in alerts} == {"g1", "g2"}
    sent = [json.loads(m.value()) for m in read_topic(broker.bootstrap_servers, settings.kafka.topics.alerts)]
    assert {a["alert_id"] for a in sent if a["kind"] == "DATA_QUALITY_FAILED"} == {a["alert_id"] for a in alerts}

    # The replay report of the run shows the results.
    dq = {(d.suite, d.expectation): d for d in load_run(dsn, run_id).dq}
    assert set(dq) == {(r["suite"], r["expectation"]) for r in rows}
    assert dq[SEQ].failures == 1 and dq[CLOCK].failures >= 1

    # Spark retries a batch: the writer runs it again. A second run id over the same checkpoint
    # (the same input offsets) sees batch 0 written, then retried.
    ckpt = str(Path(settings.paths.checkpoint_dir) / run_id)
    first = batches[0]
    for crash in (False, True):
        run2 = f"dq-retry-{uuid.uuid4().hex[:8]}"
        with PostgresSink(dsn, run_id=run2) as sink:
            writer = writer_for(settings, run2, sink, ckpt)
            if crash:  # the process dies after the batch's commit, before the data-quality sink's
                from replimon.streaming.sinks.quality import QualitySink

                def boom(*_: Any, **__: Any) -> bool:
                    raise ConnectionError("killed")

                monkeypatch.setattr(QualitySink, "_validate", boom)
                writer(_frame(first), first.batch_id)
                assert _dq(dsn, run2) == [] and sink.last_batch_id() == first.batch_id
                monkeypatch.undo()
                writer = writer_for(settings, run2, sink, ckpt)  # the restarted job
            writer(_frame(first), first.batch_id)
            once = (_dq(dsn, run2), _dq_alerts(dsn, run2))
            writer(_frame(first), first.batch_id)  # the retry
            quality(writer).last_time = None  # due again however the cadence is set
            writer(_frame(first), first.batch_id)
            assert (_dq(dsn, run2), _dq_alerts(dsn, run2)) == once
        assert [(r["suite"], r["expectation"], r["success"], r["unexpected"]) for r in once[0]] == [
            (r["suite"], r["expectation"], r["success"], r["unexpected"]) for r in rows if r["batch_id"] == first.batch_id]
        assert len(once[1]) == sum(1 for r in once[0] if not r["success"])
        sent = Counter(headers(m)["alert_id"] for m in read_topic(broker.bootstrap_servers, settings.kafka.topics.alerts)
                       if headers(m)["run_id"] == run2 and json.loads(m.value())["kind"] == "DATA_QUALITY_FAILED")
        assert sent == Counter(a["alert_id"] for a in once[1])  # sent once, not on the retries
