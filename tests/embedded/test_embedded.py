"""The embedded broker and PostgreSQL: they work, stop cleanly, and Tansu's end-offset quirk
is characterised exactly (replimon/kafka/client.py, "The embedded broker's quirks")."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest
from confluent_kafka import Consumer, IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from replimon.embedded import EmbeddedBroker, EmbeddedPostgres, free_port
from replimon.embedded.postgres import PostgresStartError
from replimon.kafka import KafkaClient
from tests.support import read_topic, true_end_offsets

TIMEOUT = 20.0


def _consumer(bootstrap: str) -> Consumer:
    """An assign-only consumer (never joins its group) that reports partition EOF."""
    return Consumer({"bootstrap.servers": bootstrap, "group.id": "test-embedded",
                     "enable.auto.commit": False, "enable.partition.eof": True,
                     "fetch.wait.max.ms": 50})


def _read(bootstrap: str, topic: str, ends: dict[int, int]) -> list[tuple[int, int, bytes]]:
    """All records (partition, offset, value) with offset < ends[partition], from offset 0 (the
    ends must not lie past the true ends): with the reported (quirky) ends a reader that trusts
    ListOffsets, with true ends one that does not."""
    with KafkaClient({"bootstrap.servers": bootstrap}, timeout_s=TIMEOUT) as client:
        return [(m.partition(), m.offset(), m.value() or b"")
                for m in client.read_all({(topic, p): (0, end) for p, end in ends.items()})]


def _reported_latest(bootstrap: str, topic: str, partitions: int) -> dict[str, dict[int, int]]:
    """End offsets as the broker reports them through each ListOffsets-based client API."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    views: dict[str, dict[int, int]] = {}
    for name, level in (("admin_read_uncommitted", IsolationLevel.READ_UNCOMMITTED),
                        ("admin_read_committed", IsolationLevel.READ_COMMITTED)):
        futures = admin.list_offsets(
            {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)},
            isolation_level=level, request_timeout=TIMEOUT)
        views[name] = {tp.partition: f.result().offset for tp, f in futures.items()}
    consumer = _consumer(bootstrap)
    try:
        views["get_watermark_offsets"] = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT)[1]
            for p in range(partitions)}
    finally:
        consumer.close()
    with warnings.catch_warnings():
        # kafka-python 3.0 loads its protocol schemas with the legacy importlib.resources API.
        warnings.filterwarnings("ignore", r"(read|open)_text is deprecated", DeprecationWarning)
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KafkaTP
    kafka_python = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        ends = kafka_python.end_offsets([KafkaTP(topic, p) for p in range(partitions)])
        views["kafka_python_end_offsets"] = {tp.partition: end for tp, end in ends.items()}
    finally:
        kafka_python.close()
    return views


# -- broker -------------------------------------------------------------------------------------

@pytest.mark.broker
def test_produce_consume_round_trip(broker: EmbeddedBroker, topic_prefix: str) -> None:
    topic = topic_prefix + "roundtrip"
    broker.create_topics([topic], partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    sent = [(f"k{i}".encode(), f"value-{i}".encode()) for i in range(25)]
    for key, value in sent:
        producer.produce(topic, key=key, value=value, headers=[("h", b"1")])
    assert producer.flush(TIMEOUT) == 0

    records = read_topic(broker.bootstrap_servers, topic, TIMEOUT)
    assert all(msg.headers() == [("h", b"1")] for msg in records)
    got = [(msg.key(), msg.value()) for msg in records]
    assert got == sent


@pytest.mark.broker
def test_create_topics_partitions_and_idempotence(broker: EmbeddedBroker,
                                                  topic_prefix: str) -> None:
    three, five = topic_prefix + "three", topic_prefix + "five"
    broker.create_topics([three], partitions=3, config={"retention.ms": "3600000"})
    broker.create_topics([three, five], partitions=5)  # `three` exists: accepted unchanged
    md = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=TIMEOUT)
    assert sorted(md.topics[three].partitions) == [0, 1, 2]
    assert sorted(md.topics[five].partitions) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError):
        broker.create_topics([topic_prefix + "none"], partitions=0)


@pytest.mark.broker
def test_high_watermark_quirk_exact(broker: EmbeddedBroker, topic_prefix: str) -> None:
    """Batches with known boundaries: ListOffsets says last batch base + 1, Fetch says the truth."""
    topic = topic_prefix + "quirk"
    broker.create_topics([topic], partitions=3)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20})
    # One flush per group makes each group exactly one record batch.
    layout = {0: [5, 1, 7], 1: [1, 1, 1], 2: []}  # p0: 0-4, 5, 6-12; p1: 0, 1, 2; p2 empty
    for part, groups in layout.items():
        for size in groups:
            for _ in range(size):
                producer.produce(topic, value=b"x", partition=part)
            assert producer.flush(TIMEOUT) == 0

    reported = _reported_latest(broker.bootstrap_servers, topic, 3)
    for view in reported.values():  # every ListOffsets view, both isolation levels
        assert view == {0: 7, 1: 3, 2: 0}  # base of the last batch + 1 (6 + 1; 2 + 1; empty)
    truth = {0: 13, 1: 3, 2: 0}
    assert true_end_offsets(broker.bootstrap_servers, topic) == truth
    assert true_end_offsets(broker.bootstrap_servers, topic,
                            isolation_level="read_uncommitted") == truth
    # A reader trusting the reported end misses offsets 7-12 of partition 0.
    assert len(_read(broker.bootstrap_servers, topic, reported["get_watermark_offsets"])) == 10
    assert len(_read(broker.bootstrap_servers, topic, truth)) == 16

    # The Fetch response's high watermark is right: librdkafka caches it after a fetch.
    consumer = _consumer(broker.bootstrap_servers)
    try:
        consumer.assign([TopicPartition(topic, 0, 12)])
        deadline = time.monotonic() + TIMEOUT
        while consumer.get_watermark_offsets(TopicPartition(topic, 0), cached=True)[1] < 0:
            assert time.monotonic() < deadline
            consumer.consume(10, timeout=0.1)
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), cached=True) == (0, 13)
    finally:
        consumer.close()


@pytest.mark.broker
def test_bulk_batched_publish_read_to_true_end(broker: EmbeddedBroker, topic_prefix: str) -> None:
    """2000 records in linger-batched produce requests: only a reader that goes past the
    reported end to the Fetch-proven end gets all of them."""
    topic, n, partitions = topic_prefix + "bulk", 2000, 4
    broker.create_topics([topic], partitions=partitions)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20})
    for i in range(n):
        producer.produce(topic, value=str(i).encode(), partition=i % partitions)
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0

    truth = true_end_offsets(broker.bootstrap_servers, topic)
    assert truth == {p: n // partitions for p in range(partitions)}

    reported = _reported_latest(broker.bootstrap_servers, topic, partitions)
    views = list(reported.values())
    assert all(view == views[0] for view in views)
    latest = views[0]
    assert all(1 <= latest[p] <= truth[p] for p in range(partitions))
    assert sum(latest.values()) < n  # the quirk: multi-record last batches under-report

    naive = _read(broker.bootstrap_servers, topic, latest)
    assert len(naive) == sum(latest.values())
    full = _read(broker.bootstrap_servers, topic, truth)
    assert len(full) == n
    assert sorted(int(value) for _, _, value in full) == list(range(n))


@pytest.mark.broker
def test_broker_stop_leaves_no_process(broker: EmbeddedBroker, tmp_path: Path) -> None:
    """A second broker beside the session one; stop reaps it and keeps a given data dir."""
    with EmbeddedBroker(tmp_path) as other:
        pid = other.pid
        assert pid is not None and psutil.pid_exists(pid)
        assert other.bootstrap_servers != broker.bootstrap_servers
        other.create_topics(["x"], partitions=2)
        assert true_end_offsets(other.bootstrap_servers, "x") == {0: 0, 1: 0}
    assert other.pid is None
    assert not psutil.pid_exists(pid)
    assert "listening on" in (tmp_path / "tansu.log").read_text()
    other.stop()  # idempotent


def test_free_port_is_bindable() -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


# -- postgres -----------------------------------------------------------------------------------

@pytest.mark.postgres
def test_postgres_round_trip(postgres: EmbeddedPostgres) -> None:
    assert postgres.dsn.startswith("postgresql://postgres@127.0.0.1:")
    with psycopg.connect(postgres.dsn) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("replimon",)
        conn.execute("CREATE TEMP TABLE t (id int PRIMARY KEY, name text NOT NULL)")
        conn.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
        assert conn.execute("SELECT id, name FROM t ORDER BY id").fetchall() == [(1, "a"),
                                                                                 (2, "b")]


@pytest.fixture
def searchable_dir() -> Iterator[Path]:
    """A fresh directory the unprivileged PostgreSQL user can reach (pytest's tmp_path is under
    0700 directories, which matters when the tests run as root)."""
    path = Path(tempfile.mkdtemp(prefix="replimon-test-"))
    path.chmod(0o711)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.postgres
def test_postgres_stop_leaves_no_process(searchable_dir: Path) -> None:
    data_dir = searchable_dir / "pg"
    with EmbeddedPostgres(data_dir) as pg:
        assert pg.pid is not None
        postmaster = psutil.Process(pg.pid)
        pids = [pg.pid] + [child.pid for child in postmaster.children(recursive=True)]
        assert len(pids) > 1  # checkpointer, walwriter, ...
        with psycopg.connect(pg.dsn) as conn:
            conn.execute("CREATE TABLE kept (v int)")
            conn.execute("INSERT INTO kept VALUES (42)")
    assert pg.pid is None
    assert not any(psutil.pid_exists(pid) for pid in pids)
    assert "database system is shut down" in (data_dir / "postgres.log").read_text()
    # A given data dir survives and is reused.
    with EmbeddedPostgres(data_dir) as again, psycopg.connect(again.dsn) as conn:
        assert conn.execute("SELECT v FROM kept").fetchone() == (42,)


@pytest.mark.postgres
@pytest.mark.skipif(os.geteuid() != 0, reason="only root switches to an unprivileged user")
def test_postgres_unreachable_data_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PostgresStartError, match="not searchable"):
        EmbeddedPostgres(tmp_path / "pg").start()


# -- stack --------------------------------------------------------------------------------------

@pytest.mark.broker
@pytest.mark.postgres
@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_stack_stops_both_on_signal(signame: str) -> None:
    """SIGINT and SIGTERM run the stack's handlers; SIGKILL runs none, and the kernel's
    parent-death signal (``die_with_parent``: util-linux ``setpriv``) stops the servers anyway."""
    if signame == "SIGKILL" and shutil.which("setpriv") is None:
        pytest.skip("util-linux setpriv is not installed: servers outlive a SIGKILLed parent")
    script = textwrap.dedent("""
        import json, time
        from replimon.embedded import EmbeddedStack
        with EmbeddedStack(["events"], 2) as stack:
            print(json.dumps([stack.broker.pid, stack.postgres.pid]), flush=True)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                time.sleep(0.05)
    """)
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        pids = json.loads(proc.stdout.readline())
        assert all(psutil.pid_exists(pid) for pid in pids)
        proc.send_signal(getattr(signal, signame))
        _, err = proc.communicate(timeout=TIMEOUT)
    # KeyboardInterrupt ends Python by re-raising SIGINT; SIGTERM became SystemExit(143).
    assert proc.returncode == {"SIGINT": -signal.SIGINT, "SIGTERM": 143, "SIGKILL": -signal.SIGKILL}[signame], err

    def running(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    # The handlers stop the servers before exiting; the parent-death signal is delivered, then obeyed.
    deadline = time.monotonic() + (20 if signame == "SIGKILL" else 0)
    while any(running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in pids if running(p)]

