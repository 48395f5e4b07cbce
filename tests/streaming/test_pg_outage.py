"""PostgreSQL goes away under the job and comes back (docs/operations.md, "PostgreSQL outage").

* ``test_writer_rides_out_an_outage``: the ``foreachBatch`` writer alone against a real
  PostgreSQL that is stopped and started again: batches during the outage still reach Kafka, their
  rows wait in the backlog (on disk in the checkpoint), a restarted writer finds them, and when
  PostgreSQL is back every row is written once, with ``pg_backlog``/``pg_wait_s`` on the batches
  that waited; one log line per state change.
* ``test_job_survives_an_outage`` (slow): the real streaming job (Spark, the broker): PostgreSQL
  stopped while events with a fault are published; the query keeps running, the fault's alert
  reaches ``monitor.alerts`` during the outage, and after PostgreSQL is back the tables hold every
  alert Kafka got, each once.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest

from replimon.core import Monitor
from replimon.dashboards.boards.pipeline import PG_BACKLOG
from replimon.dashboards.macros import TimeRange, expand
from replimon.embedded import EmbeddedPostgres
from replimon.embedded.processes import free_port
from replimon.producers.simulator import SimOptions, Simulator, parse_injection
from replimon.store.values import payload_status
from tests.support import eventually, headers, job_config, publish, read_topic, writer_for
from tests.support.running_job import running_job

pytestmark = [pytest.mark.broker, pytest.mark.postgres, pytest.mark.timeout(900)]


@pytest.fixture
def own_postgres() -> Iterator[EmbeddedPostgres]:
    """A PostgreSQL of this test alone (it is stopped and started again), on a fixed port and a
    kept data dir; the data dir lives under /tmp, which the server's user can reach."""
    folder = Path(tempfile.mkdtemp(prefix="replimon-outage-"))
    folder.chmod(0o755)
    pg = EmbeddedPostgres(folder / "data", port=free_port())
    pg.start()
    try:
        yield pg
    finally:
        pg.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _frame(items: list[tuple[str, dict[str, Any]]]) -> Any:
    rows = []
    for out, p in items:
        if out == "alert":
            rows.append(SimpleNamespace(out="alert", group_id=p["group"], id=p["alert_id"], status=p["status"],
                                        ts_ms=p["event_ts_ms"], payload=json.dumps(p), raw=None))
        else:
            rows.append(SimpleNamespace(out="state", group_id=p["group"], id=p["group"], status=None,
                                        ts_ms=p.get("clock_ms") or 0, payload=json.dumps(p), raw=None))
    return SimpleNamespace(collect=lambda: rows)


def _batches(n: int) -> list[list[tuple[str, dict[str, Any]]]]:
    events: list[dict[str, Any]] = []
    Simulator(SimOptions(duration_ms=40_000, groups=3, seed=5, start_ms=1_767_225_600_000),
              [parse_injection(f) for f in ("divergent_decision:g1@5s", "beyond_horizon:g2@15s",
                                            "can_leave_unsafe:g3@25s")], events.append).run()
    m = Monitor()
    size = len(events) // n + 1
    out = []
    for i in range(n):
        part = events[i * size:(i + 1) * size]
        batch: list[tuple[str, dict[str, Any]]] = [("alert", a.to_dict()) for ev in part for a in m.process(ev)]
        out.append(batch + [("state", g.snapshot()) for g in m.groups.values()])
    return out


def _pg_alerts(dsn: str, run_id: str) -> Counter[tuple[str, str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT alert_id, status FROM alerts WHERE run_id = %s", (run_id,)).fetchall()
    return Counter((a, payload_status(s)) for a, s in rows)


def test_writer_rides_out_an_outage(broker: Any, postgres: Any, own_postgres: EmbeddedPostgres,
                                    topic_prefix: str, tmp_path: Path, clean_env: None,
                                    caplog: pytest.LogCaptureFixture) -> None:
    from replimon.streaming.sinks.postgres import PostgresSink

    caplog.set_level(logging.INFO, logger="replimon.job")
    _, settings = job_config(broker, postgres, topic_prefix, tmp_path)
    dsn = own_postgres.dsn
    ckpt = tmp_path / "ckpt" / "outage"
    (ckpt / "offsets").mkdir(parents=True)
    batches = _batches(6)
    run_id = f"outage-{uuid.uuid4().hex[:8]}"
    want = Counter((p["alert_id"], p["status"]) for b in batches for o, p in b if o == "alert")
    assert sum(want.values()) >= 3

    def fast(writer: Any) -> Any:
        writer.guard.backoff.first_s = writer.guard.backoff.max_s = 0.0  # retry at every batch
        return writer

    with PostgresSink(dsn, run_id=run_id) as sink:
        writer = fast(writer_for(settings, run_id, sink, checkpoint=str(ckpt), live=True))
        writer(_frame(batches[0]), 0)
        own_postgres.stop()  # PostgreSQL goes away
        writer(_frame(batches[1]), 1)  # no exception: the job goes on
        writer(_frame(batches[2]), 2)
        assert sorted(p.name for p in (ckpt / "pg-backlog").iterdir()) == ["1.json", "2.json"]
        assert writer.guard.committed(2) and not writer.guard.committed(3)
    # The job dies during the outage and starts again: the backlog is on disk.
    with PostgresSink(dsn, run_id=run_id, migrate_schema=False) as sink:
        writer = fast(writer_for(settings, run_id, sink, checkpoint=str(ckpt), live=True))
        assert [p.batch_id for p in writer.guard.backlog.items] == [1, 2]
        writer(_frame(batches[2]), 2)  # Spark runs its last batch again: already sent, skipped
        writer(_frame(batches[3]), 3)
        own_postgres.start()  # back
        back = datetime.now(UTC)
        writer(_frame(batches[4]), 4)  # its guard question writes the backlog (1, 2, 3), then itself
        writer(_frame(batches[5]), 5)
        assert not writer.guard.backlog and not list((ckpt / "pg-backlog").iterdir())
        assert sink.last_batch_id() == 5
    assert _pg_alerts(dsn, run_id) == want  # every alert once
    sent = Counter((headers(x)["alert_id"], headers(x)["status"])
                   for x in read_topic(broker.bootstrap_servers, settings.kafka.topics.alerts))
    assert sent == want  # Kafka got every batch during the outage, and none twice
    with psycopg.connect(dsn) as conn:
        waited = dict(conn.execute("SELECT batch_id, pg_backlog FROM pipeline_metrics WHERE run_id = %s"
                                   " AND pg_backlog IS NOT NULL", (run_id,)).fetchall())
        written = {b: (live, at) for b, live, at in conn.execute(
            "SELECT batch_id, live, written_at FROM pipeline_metrics WHERE run_id = %s", (run_id,))}
    assert set(waited) == {1, 2, 3}  # 4 found PostgreSQL back, wrote 1-3, then itself on time
    # Pipeline health's "PostgreSQL backlog" panel draws exactly that, and 0 for the batches on time
    panel = expand(PG_BACKLOG, TimeRange(datetime.fromtimestamp(0, UTC), datetime.now(UTC)), {"run": run_id})
    with psycopg.connect(dsn) as conn:
        drawn = [row[1:] for row in conn.execute(panel).fetchall()]
    assert [b for b, _ in drawn] == [waited.get(b, 0) for b in range(6)]
    assert all((s > 0) == (b in waited) for b, (_, s) in enumerate(drawn))
    # Alert latency ends when a batch's rows were in PostgreSQL: a batch of the backlog, when it
    # was finally written (docs/dashboards.md, "Alert latency"); each as live as the job.
    assert set(written) == set(range(6)) and all(live is True for live, _ in written.values())
    assert written[0][1] < back <= min(written[b][1] for b in (1, 2, 3, 4, 5))
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("PostgreSQL:")]
    # One line per state change: lost, retrying; the restarted job finds the backlog, retries;
    # back. Never a line per batch.
    assert [" ".join(line.split()[1:3]) for line in lines] == [
        "lost (connection", "still unreachable", "2 batch(es)", "still unreachable", "back after"], lines


@pytest.mark.slow
def test_job_survives_an_outage(spark: Any, broker: Any, postgres: Any, own_postgres: EmbeddedPostgres,
                                topic_prefix: str, tmp_path: Path, clean_env: None) -> None:
    from replimon.config import load_settings

    _, base = job_config(broker, postgres, topic_prefix, tmp_path)
    settings = load_settings(None, **{**base.model_dump(), "postgres": {"dsn": own_postgres.dsn}})
    run_id = f"outage-{uuid.uuid4().hex[:8]}"
    # Stamped ahead of the wall clock: live mode judges silences by processing time, and this
    # test is about the sink, not about a job that falls behind (as in test_recovery.py).
    start_ms = int(time.time() * 1000) + 600_000
    events: list[dict[str, Any]] = []
    Simulator(SimOptions(duration_ms=30_000, groups=3, seed=6, start_ms=start_ms),
              [parse_injection(f) for f in ("beyond_horizon:g1@20s", "divergent_decision:g2@22s")],
              events.append).run()
    before = [e for e in events if e["ts_ms"] < start_ms + 10_000]
    during = [e for e in events if e["ts_ms"] >= start_ms + 10_000]
    with running_job(spark, settings, own_postgres.dsn, run_id) as job:
        batches = job.batches
        publish(settings, before)
        eventually(lambda: any(b.snapshot_rows for b in batches), timeout=180, what="a first batch with data")
        own_postgres.stop()
        publish(settings, during)

        def kafka_kinds() -> set[str]:
            return {json.loads(m.value())["kind"]
                    for m in read_topic(broker.bootstrap_servers, settings.kafka.topics.alerts)}

        eventually(lambda: {"BEYOND_HORIZON", "DIVERGENT_DECISION"} <= kafka_kinds(), timeout=180,
                   what="the faults' alerts on monitor.alerts while PostgreSQL is down")
        job.assert_running()
        assert any(b.deferred for b in batches)
        own_postgres.start()

        def caught_up() -> bool:
            sent = {(headers(m)["alert_id"], headers(m)["status"])
                    for m in read_topic(broker.bootstrap_servers, settings.kafka.topics.alerts)}
            return bool(sent) and set(_pg_alerts(own_postgres.dsn, run_id)) == sent

        eventually(caught_up, timeout=180, interval=1, what="PostgreSQL holding every alert Kafka got")
        assert max(_pg_alerts(own_postgres.dsn, run_id).values()) == 1
        job.assert_running()


@pytest.mark.slow
def test_the_job_starts_without_postgresql(broker: Any, own_postgres: EmbeddedPostgres, topic_prefix: str,
                                           tmp_path: Path, clean_env: None) -> None:
    """``replimon run`` while PostgreSQL is down (a database never migrated): it starts, says so,
    monitors (a fault's alert on ``monitor.alerts``); killed (SIGKILL) and started again still
    during the outage, it goes on (another fault); PostgreSQL back: the migrations are applied
    and every alert of check over the events is in the tables exactly once; the lines as
    documented (lost, still unreachable, back)."""
    import os
    import signal
    import subprocess
    import threading

    from tests.test_operator_errors import REPLIMON, clean_environ

    path, settings = job_config(broker, own_postgres, topic_prefix, tmp_path, quality={"enabled": False},
                                thresholds={"clock_skew_s": 3600})
    own_postgres.stop()
    start_ms = int(time.time() * 1000) + 600_000
    events: list[dict[str, Any]] = []
    Simulator(SimOptions(duration_ms=40_000, groups=3, seed=8, start_ms=start_ms),
              [parse_injection(f) for f in ("beyond_horizon:g1@10s", "divergent_decision:g2@30s")],
              events.append).run()
    first = [e for e in events if e["ts_ms"] < start_ms + 20_000]
    later = [e for e in events if e["ts_ms"] >= start_ms + 20_000]
    lines: list[str] = []

    def start() -> subprocess.Popen[str]:
        proc = subprocess.Popen([*REPLIMON, "--config", str(path), "run"], cwd=tmp_path, env=clean_environ(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

        def read() -> None:
            assert proc.stderr is not None
            with proc.stderr:
                for line in iter(proc.stderr.readline, ""):
                    lines.append(line)

        threading.Thread(target=read, daemon=True).start()
        return proc

    def on_kafka(kind: str) -> bool:
        return any(json.loads(m.value())["kind"] == kind
                   for m in read_topic(broker.bootstrap_servers, settings.kafka.topics.alerts))

    proc = start()
    try:
        publish(settings, first)
        eventually(lambda: on_kafka("BEYOND_HORIZON"), timeout=240, interval=1,
                   what=lambda: f"the first fault on Kafka: {''.join(lines)[-2000:]}")
        os.kill(proc.pid, signal.SIGKILL)  # a crash during the outage
        proc.wait(30)
        backlog = tmp_path / "ckpt" / "live" / "pg-backlog"
        assert list(backlog.glob("*.json")), "the rows of the outage wait on disk"
        proc = start()
        publish(settings, later)
        eventually(lambda: on_kafka("DIVERGENT_DECISION"), timeout=240, interval=1,
                   what=lambda: f"the second fault on Kafka: {''.join(lines)[-2000:]}")
        own_postgres.start()
        want = Counter((a.alert_id, a.status) for a in Monitor().run(events))
        def stored() -> Counter[tuple[str, str]]:
            try:
                return _pg_alerts(own_postgres.dsn, "live")
            except psycopg.errors.UndefinedTable:  # the job has not migrated the new database yet
                return Counter()

        eventually(lambda: stored() == want, timeout=240, interval=1,
                   what=lambda: f"check's alerts in PostgreSQL, each once: {''.join(lines)[-2000:]}")
        time.sleep(3)
        assert _pg_alerts(own_postgres.dsn, "live") == want
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    text = "".join(lines)
    assert "cannot reach PostgreSQL at" in text and "starting without it" in text, text[-3000:]
    for said in ("PostgreSQL: lost (", "PostgreSQL: still unreachable (", "PostgreSQL: back after "):
        assert said in text, (said, text[-3000:])
    assert "Traceback" not in text
