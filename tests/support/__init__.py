"""What the tests share: settings on a test's own topics, publishing events and producing records,
simulating, reading topics back (with ``replimon.kafka``, to their true ends), running the job
once over what the topics hold, and ``eventually`` (poll until a deadline, never a bare sleep).

Test modules import from here (and from ``tests.support.*``: the end-to-end run, the reference
checker, history builders, the contract's cases), never from each other.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest
import yaml
from confluent_kafka import Producer

from replimon.config import load_settings
from replimon.kafka import BEGINNING, KafkaClient
from replimon.producers.simulator import SimOptions, Simulator, parse_injection

T = TypeVar("T")

TOPIC_NAMES = ("decisions", "executions", "heartbeats", "config", "alerts", "state", "dead_letters")


# -- waiting ----------------------------------------------------------------------------------------
def eventually(check: Callable[[], T], *, timeout: float,
               what: str | Callable[[], str] = "the condition", interval: float = 0.1) -> T:
    """Call ``check`` until it returns something truthy, and return that; fail the test naming
    ``what`` (a text, or a function giving it when the time is up) and the last value when
    ``timeout`` seconds pass first. An assertion inside ``check`` fails at once. The
    poll-until-deadline loop of Spark's Kafka test utilities (``assert_eventually``)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            text = what() if callable(what) else what
            raise AssertionError(f"{text}: not within {timeout:g} s (last: {value!r})")
        time.sleep(interval)


# -- settings and topics ----------------------------------------------------------------------------
def settings_for(broker: Any, postgres: Any, prefix: str, tmp_path: Path) -> Any:
    """Settings for a job on this test's own topics (``prefix``), PostgreSQL and directories."""
    topics = {name: f"{prefix}{name}" for name in TOPIC_NAMES}
    return load_settings(None, kafka={"bootstrap_servers": broker.bootstrap_servers, "topics": topics},
                         postgres={"dsn": postgres.dsn},
                         paths={"checkpoint_dir": str(tmp_path / "ckpt"), "data_dir": str(tmp_path / "data")})


def job_config(broker: Any, postgres: Any, prefix: str, tmp_path: Path,
               thresholds: dict[str, Any] | None = None,
               streaming: dict[str, Any] | None = None,
               quality: dict[str, Any] | None = None) -> tuple[Path, Any]:
    """A config file for a job on this test's own topics (1 s trigger); returns (path, settings)."""
    topics = {n: f"{prefix}{n}" for n in TOPIC_NAMES}
    cfg = {"kafka": {"bootstrap_servers": broker.bootstrap_servers, "topics": topics},
           "postgres": {"dsn": postgres.dsn},
           "paths": {"checkpoint_dir": str(tmp_path / "ckpt"), "data_dir": str(tmp_path / "data")},
           "streaming": {"trigger_interval_s": 1, **(streaming or {})}, "thresholds": thresholds or {},
           "quality": quality or {}}
    path = tmp_path / "replimon.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    settings = load_settings(path)
    broker.create_topics(list(settings.kafka.topics.all), settings.kafka.partitions)
    return path, settings


# -- events in and out ------------------------------------------------------------------------------
def simulate(seconds: int, *faults: str, groups: int = 3, seed: int = 4) -> list[dict[str, Any]]:
    """A simulator run of ``groups`` 3-node groups with the given ``fault:group@time`` injections."""
    events: list[dict[str, Any]] = []
    Simulator(SimOptions(duration_ms=seconds * 1000, groups=groups, seed=seed),
              [parse_injection(f) for f in faults], events.append).run()
    return events


def publish(settings: Any, events: list[dict[str, Any]], bad: list[tuple[str, bytes]] = ()) -> None:
    """Every event to its topic (key = group, record time = event time), then ``bad`` records
    (``(topic field, raw bytes)``, key ``g1``); waits until all are delivered."""
    p = Producer({"bootstrap.servers": settings.kafka.bootstrap_servers, "linger.ms": 5})
    topics = settings.kafka.topics
    for ev in events:
        p.produce(topics.for_event_type(ev["type"]), key=ev["group"].encode(),
                  value=json.dumps(ev, separators=(",", ":")).encode(), timestamp=ev["ts_ms"])
    for topic_name, raw in bad:
        p.produce(getattr(topics, topic_name), key=b"g1", value=raw)
    assert p.flush(60) == 0


Rec = tuple[str, int, int, bytes]  # topic, partition, offset, value


def produce(bootstrap: str, topic: str, items: Iterable[tuple[int, bytes | None, bytes]],
            timestamps: Iterable[int] | None = None, batch_records: int = 10_000) -> list[Rec]:
    """Produce (partition, key, value) items with linger (multi-record batches of up to
    ``batch_records``); the records as the broker stored them."""
    delivered: list[Rec] = []
    errors: list[Any] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.topic(), msg.partition(), msg.offset(), msg.value()))

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.num.messages": batch_records})
    stamps = iter(timestamps) if timestamps is not None else None
    for part, key, value in items:
        stamp = next(stamps) if stamps is not None else 0  # 0: now
        producer.produce(topic, key=key, value=value, partition=part, on_delivery=report,
                         timestamp=stamp)
    assert producer.flush(30) == 0
    assert not errors, errors
    return delivered


def read_topic(bootstrap: str, topic: str, timeout: float = 60.0, *,
               isolation_level: str = "read_uncommitted") -> list[Any]:
    """Every record of ``topic`` (all partitions, from the oldest to the true end), in
    partition/offset order; none when the topic does not exist."""
    config = {"bootstrap.servers": bootstrap, "isolation.level": isolation_level}
    with KafkaClient(config, timeout_s=timeout) as client:
        return client.read_all({tp: (BEGINNING, None) for tp in client.topic_partitions([topic])})


def true_end_offsets(bootstrap: str, topic: str, *, isolation_level: str = "read_committed",
                     timeout: float = 30.0) -> dict[int, int]:
    """The true end (offset of the last record + 1) of every partition of ``topic``, as
    ``replimon.kafka`` finds it despite the embedded broker's short ListOffsets answer."""
    config = {"bootstrap.servers": bootstrap, "isolation.level": isolation_level}
    with KafkaClient(config, timeout_s=timeout) as client:
        tps = client.topic_partitions([topic])
        assert tps, f"no topic {topic}"
        return {p: end for (_, p), end in client.true_ends(client.watermarks(tps)).items()}


def headers(msg: Any) -> dict[str, str]:
    """A Kafka record's headers as text."""
    return {k: v.decode() for k, v in (msg.headers() or [])}


# -- the job ----------------------------------------------------------------------------------------
def replay(spark: Any, settings: Any, run_id: str, **kw: Any) -> Any:
    """The job once over what the topics hold (availableNow, event time) into PostgreSQL under
    ``run_id``; returns (a ``RunReader`` of the run, the batches' results)."""
    from replimon.store.reads import RunReader
    from replimon.streaming.processor import REPLAY
    from replimon.streaming.runner import start_query
    from replimon.streaming.sinks.postgres import PostgresSink

    seen: list[Any] = []
    with PostgresSink(settings.postgres.dsn, run_id=run_id) as pg:
        query = start_query(spark, settings, run_id=run_id, time_mode=REPLAY, available_now=True,
                            pg=pg, observers=[seen.append], **kw)
        query.awaitTermination(600)
        assert query.exception() is None, query.exception()
    return RunReader(settings.postgres.dsn, run_id), seen


def batch_frame(alerts: list[dict[str, Any]] = (), snapshots: list[dict[str, Any]] = ()) -> Any:
    """A stand-in for the DataFrame ``foreachBatch`` gets: output rows (``streaming/rows.py``) of
    these alert and snapshot dicts."""
    from types import SimpleNamespace

    def row(out: str, group: str, id_: str, status: str | None, ts: int, payload: dict[str, Any]) -> Any:
        return SimpleNamespace(out=out, group_id=group, id=id_, status=status, ts_ms=ts,
                               payload=json.dumps(payload, separators=(",", ":")), raw=None)

    rows = ([row("alert", a["group"], a["alert_id"], a["status"], a["event_ts_ms"], a) for a in alerts]
            + [row("state", s["group"], s["group"], None, s.get("clock_ms") or 0, s) for s in snapshots])
    return SimpleNamespace(collect=lambda: rows)


def writer_for(settings: Any, run_id: str, pg: Any, checkpoint: str | None = None,
               live: bool | None = None) -> Any:
    """The job's ``foreachBatch`` writer with its sinks, driven by hand (``live``: as a live job's)."""
    from replimon.streaming.checkpoint import Checkpoint
    from replimon.streaming.runner import make_writer

    return make_writer(settings, run_id, Checkpoint(checkpoint) if checkpoint else None, pg=pg, live=live)


# -- PostgreSQL runs ----------------------------------------------------------------------------------
RUN_TABLES = ("alerts", "group_state", "node_state", "group_timeseries", "node_timeseries",
              "dead_letters", "pipeline_metrics", "pipeline_batches", "dq_results", "replay_runs")


def copy_run(dsn: str, run: str, new: str) -> None:
    """Every row of ``run`` again under run id ``new`` (committed: the code under test reads
    through its own connection)."""
    with psycopg.connect(dsn) as conn:
        for table in RUN_TABLES:
            cols = [r[0] for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = %s"
                " AND table_schema = current_schema() ORDER BY ordinal_position", (table,))]
            exprs = ", ".join("%(new)s" if c == "run_id" else f'"{c}"' for c in cols)
            names = ", ".join(f'"{c}"' for c in cols)
            conn.execute(f"INSERT INTO {table} ({names}) SELECT {exprs} FROM {table}"
                         " WHERE run_id = %(run)s", {"new": new, "run": run})


def delete_run(dsn: str, run: str) -> None:
    with psycopg.connect(dsn) as conn:
        for table in RUN_TABLES:
            conn.execute(f"DELETE FROM {table} WHERE run_id = %s", (run,))


# -- the CLI ------------------------------------------------------------------------------------------
def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The single non-empty stderr line of a failed command."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got: {err!r}"
    return lines[0]
