"""A node whose clock is far ahead, through the data-quality sink's batches (docs/operations.md
"Clocks", "Data quality sees it too"; ``replimon.quality.clockwatch``): one DATA_QUALITY_FAILED
naming that node while its clock stays off, another only after it came back and went off again;
the other expectations' failures alerted in every batch as before. The sink's batch function runs
on sampled records as the Kafka read-back would give them; PostgreSQL's guard and write are
stand-ins that record what would be written."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from replimon.config import load_settings
from replimon.producers.simulator import SimOptions, Simulator
from replimon.quality.derive import Record
from replimon.quality.records import Sample
from replimon.streaming.sinks.base import BatchResult
from replimon.streaming.sinks.quality import QualitySink

YEARS_MS = 10 * 365 * 86_400_000
BATCH_S = 10
AHEAD = ("g2", "n1")  # its clock runs 10 years ahead in the batches of AHEAD_IN
AHEAD_IN = {1, 2, 3, 6, 7}
ALSO = ("g1", "n3")  # a second node off in batch 2 only
BEFORE_2000 = {1, 2, 3}  # batches with a g3 decision stamped in seconds: the time bound's other failure


class Kafka:
    def __init__(self) -> None:
        self.sent: list[tuple[int, list[dict[str, Any]]]] = []

    def send_alerts(self, alerts: list[dict[str, Any]], batch_id: int) -> None:
        self.sent.append((batch_id, list(alerts)))


def batches(n: int) -> list[list[Record]]:
    """``n`` batches of ``BATCH_S`` seconds of a 3-group fleet that ended a minute ago, each as its
    sample of records (one partition per topic), with the clocks of ``AHEAD_IN``."""
    start_ms = int(time.time() * 1000) - (n * BATCH_S + 60) * 1000
    events: list[dict[str, Any]] = []
    Simulator(SimOptions(duration_ms=n * BATCH_S * 1000, groups=3, seed=4, start_ms=start_ms), [],
              events.append).run()
    out: list[list[Record]] = [[] for _ in range(n)]
    for offset, e in enumerate(events):
        b = min(n - 1, (e["ts_ms"] - start_ms) // (BATCH_S * 1000))
        if ((e["group"], e["node"]) == AHEAD and b in AHEAD_IN) or ((e["group"], e["node"]) == ALSO and b == 2):
            e = {**e, "ts_ms": e["ts_ms"] + YEARS_MS}
        out[b].append(Record(f"replica.{e['type']}s" if e["type"] != "config" else "replica.config", 0, offset, e))
    for b in BEFORE_2000:
        i = next(k for k, r in enumerate(out[b]) if r.event["type"] == "decision" and r.event["group"] == "g3")
        out[b][i] = Record(out[b][i].source, 0, out[b][i].offset, {**out[b][i].event, "ts_ms": 5})
    return out


@pytest.fixture
def sink(monkeypatch: pytest.MonkeyPatch) -> Callable[..., QualitySink]:
    """A sink validating every batch; ``sink.written`` gets each batch's alerts as written."""
    import replimon.quality.results as results

    base = load_settings(None)
    written: list[tuple[int, list[dict[str, Any]]]] = []
    fail: set[int] = set()

    def write(dsn: str, run_id: str, pipeline: str, batch_id: int, outcomes: Any, alerts: Any,
              now_ms: int) -> bool:
        if batch_id in fail:
            raise OSError("the database is down")
        written.append((batch_id, list(alerts)))
        return True

    monkeypatch.setattr(results, "validated_before", lambda *a: False)
    monkeypatch.setattr(results, "write_results", write)

    def make(sample_rows: int = 5) -> QualitySink:
        settings = base.model_copy(update={"quality": base.quality.model_copy(
            update={"every_batches": 1, "every_s": 0, "sample_rows": sample_rows})})
        s = QualitySink(settings, "live", "", lambda: "monitor", kafka=Kafka())
        s.written, s.fail = written, fail  # type: ignore[attr-defined]
        return s
    return make


def run(sink: QualitySink, samples: list[list[Record]], ids: range) -> dict[int, list[dict[str, Any]]]:
    """Validate batches ``ids``; the DATA_QUALITY_FAILED alerts written per batch."""
    for b in ids:
        recs = samples[b]
        sink.sample = lambda batch_id, recs=recs: Sample(recs, len(recs), len(recs), 3, 0, True)  # type: ignore[method-assign]
        sink.validate(BatchResult(b))
    return {b: a for b, a in sink.written if b in ids}  # type: ignore[attr-defined]


def named(alerts: list[dict[str, Any]], who: tuple[str, str]) -> list[dict[str, Any]]:
    return [a for a in alerts if (a["group"], a["node"]) == who]


@pytest.mark.parametrize("sample_rows", [5, 1])  # 1: the clock rows fill the failing rows GX keeps
def test_a_far_ahead_clock_is_reported_once_while_it_stays_off(sink: Callable[..., QualitySink],
                                                               sample_rows: int) -> None:
    samples = batches(9)
    s = sink(sample_rows)
    by_batch = run(s, samples, range(9))
    assert sorted(by_batch) == list(range(9))
    assert by_batch[0] == []  # a clean batch
    ahead = {b: named(a, AHEAD) for b, a in by_batch.items()}
    # Off in 1-3: once; back in 4-5; off again in 6-7: once more; back in 8.
    assert [b for b, a in ahead.items() if a] == [1, 6]
    assert [len(ahead[b]) for b in (1, 6)] == [1, 1]
    first = ahead[1][0]
    assert first["kind"] == "DATA_QUALITY_FAILED" and first["status"] == "firing"
    assert "clock of node n1 of group g2 is off" in first["message"]
    assert first["event_ts_ms"] <= first["detected_ts_ms"]  # never dated in the future
    assert len(first["evidence"]) == sample_rows and all((e["group"], e["node"]) == AHEAD for e in first["evidence"])
    assert first["evidence"][0]["ts_ms"] > time.time() * 1000 + YEARS_MS // 2  # as the node stamped it
    assert ahead[6][0]["alert_id"] != first["alert_id"]  # a new spell, a new occurrence
    # A second node off while the first still is: its own one alert.
    assert [b for b, a in by_batch.items() if named(a, ALSO)] == [2]
    # The time bound's other failure (a time before 2000) is alerted in every batch, as before.
    for b in range(9):
        seconds = [a for a in by_batch[b] if a["group"] == "g3"]
        assert len(seconds) == (1 if b in BEFORE_2000 else 0), (b, seconds)
        if seconds:
            assert "ts_ms" in seconds[0]["message"] and seconds[0]["evidence"][0]["ts_ms"] == 5
    assert {(a["group"], a["node"]) for b in by_batch for a in by_batch[b]} <= {AHEAD, ALSO, ("g3", "n1"),
                                                                                ("g3", "n2"), ("g3", "n3")}
    # Kafka got what was written.
    assert [(b, a) for b, a in s.kafka.sent] == [(b, a) for b, a in sorted(by_batch.items()) if a]


def test_a_failed_write_reports_the_node_again(sink: Callable[..., QualitySink]) -> None:
    samples = batches(4)
    s = sink()
    s.fail.add(1)  # type: ignore[attr-defined]
    by_batch = run(s, samples, range(4))
    assert 1 not in by_batch  # logged, the job goes on
    assert [b for b, a in by_batch.items() if named(a, AHEAD)] == [2]


def test_a_restart_reports_a_node_still_off_once_more(sink: Callable[..., QualitySink]) -> None:
    samples = batches(4)
    before, after = sink(), sink()  # the state lives in the sink's memory (docs/operations.md)
    run(before, samples, range(2))
    assert [b for b, a in run(after, samples, range(2, 4)).items() if named(a, AHEAD)] == [2]


def test_live_validation_runs_off_the_batch_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Live (``background``), ``write`` hands the batch to a thread and returns before the
    validation ends, so the next micro-batch does not wait for it; one validation at a time: a
    batch due while one runs is skipped, and the next batch after it is validated. Without
    ``background`` (replays) ``write`` returns only when the batch is validated."""
    import threading

    base = load_settings(None)
    settings = base.model_copy(update={"quality": base.quality.model_copy(update={"every_batches": 1, "every_s": 0})})
    release = threading.Event()
    done: list[int] = []

    def slow(self: QualitySink, result: BatchResult) -> bool:
        release.wait(10)
        done.append(result.batch_id)
        return True

    monkeypatch.setattr(QualitySink, "_validate", slow)
    live = QualitySink(settings, "live", "", lambda: "monitor", background=True)
    started = time.monotonic()
    live.write(BatchResult(0))
    live.write(BatchResult(1))  # due, but batch 0 is still being validated: skipped
    assert time.monotonic() - started < 5 and live.busy() and done == []
    release.set()
    live.close()
    assert done == [0] and not live.busy()
    live.write(BatchResult(2))
    live.close()
    assert done == [0, 2]

    release.clear()
    replay = QualitySink(settings, "replay", "", lambda: "monitor")
    threading.Timer(0.3, release.set).start()
    replay.write(BatchResult(7))
    assert done == [0, 2, 7]  # validated before write returned
