"""The publisher when the broker fails under it (docs/operations.md, "Publishing"): a broker that
restarts empty (the producer's id and sequences are gone: Tansu drops the connection, a Kafka
broker fences the producer), and ``simulate --kafka`` against a broker that is not there."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from replimon.config import load_settings
from replimon.embedded import EmbeddedBroker
from replimon.embedded.processes import free_port
from replimon.producers.publisher import Publisher, PublishError
from tests.support import eventually

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]
INPUTS = ["replica.decisions", "replica.executions", "replica.heartbeats", "replica.config"]


def _event(i: int) -> dict[str, Any]:
    return {"v": 1, "type": "heartbeat", "group": f"g{i % 3}", "node": "n1", "incarnation": 1, "seq": i,
            "ts_ms": int(time.time() * 1000), "executed": i, "decided": i, "protocol": 9, "status": "ONLINE"}


def test_publisher_recovers_from_a_broker_restarted_empty() -> None:
    port = free_port()
    broker = EmbeddedBroker(port=port).start()
    try:
        broker.create_topics(INPUTS, 2)
        settings = load_settings(None, kafka={"bootstrap_servers": broker.bootstrap_servers,
                                              "producer": {"delivery_timeout_ms": 3000}})
        publisher = Publisher.from_settings(settings)
        for i in range(100):
            publisher.send(_event(i))
        assert publisher.flush(30) == 0
        broker.stop()
        broker = EmbeddedBroker(port=port).start()  # same address, nothing of the old state
        broker.create_topics(INPUTS, 2)
        before = publisher.stats().delivered
        sent = [100]

        def delivering_again() -> bool:
            for _ in range(50):
                publisher.send(_event(sent[0]))
                sent[0] += 1
            publisher.poll(0.1)
            return publisher.stats().delivered > before + 200

        eventually(delivering_again, timeout=60, what="deliveries after the broker restarted")
        try:
            publisher.close(30)
        except PublishError as exc:  # the messages caught in the restart: counted, and said
            assert "failed delivery" in str(exc)
        st = publisher.stats()
        assert st.sent == sent[0] and st.in_flight == 0
        assert st.delivered + st.failed == st.sent  # every message accounted for
        assert st.renewed >= 1
    finally:
        broker.stop()


def _simulate(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.upper().startswith("REPLIMON_")}
    return subprocess.run([sys.executable, "-m", "replimon.cli", "simulate", "--kafka", *args],
                          env={**base, **env}, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def test_simulate_to_a_missing_broker_exits_1_and_says_what_was_lost(tmp_path: Path) -> None:
    done = _simulate({"REPLIMON_KAFKA__BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}",
                      "REPLIMON_KAFKA__PRODUCER__DELIVERY_TIMEOUT_MS": "2000"},
                     tmp_path, "--groups", "1", "--duration", "6s")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    failed = [line for line in done.stderr.splitlines() if line.startswith("delivery failed (")]
    kinds = [line.split("(")[1].split(":")[0] for line in failed]
    assert failed and len(kinds) == len(set(kinds))  # once per kind, not once per message
    assert " sent, " in done.stderr  # live progress
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("published 0 of ") and "LOST" in last


def test_simulate_shows_progress_and_exits_0_when_all_delivered(broker: Any, topic_prefix: str, tmp_path: Path) -> None:
    topics = {f: f"{topic_prefix}{f}" for f in ("decisions", "executions", "heartbeats", "config")}
    broker.create_topics(list(topics.values()), 2)
    env = {"REPLIMON_KAFKA__BOOTSTRAP_SERVERS": broker.bootstrap_servers,
           **{f"REPLIMON_KAFKA__TOPICS__{f.upper()}": t for f, t in topics.items()}}
    done = _simulate(env, tmp_path, "--groups", "2", "--duration", "7s")
    assert done.returncode == 0, done.stderr
    assert " sent, " in done.stderr and " delivered, " in done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith("none lost")
