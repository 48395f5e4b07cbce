"""Ctrl-C (and SIGTERM) of ``replimon run`` while the broker is down: a clean stop within a
bounded time, the documented exit status, no trace (docs/operations.md, "Broker outage" and
"Stopping"). The real command in a subprocess, as an operator runs it."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path
from queue import Empty, Queue
from typing import Any

import pytest

from replimon.config import load_settings
from replimon.embedded import EmbeddedBroker, EmbeddedPostgres
from tests.test_operator_errors import NOISE, REPLIMON, clean_environ

pytestmark = pytest.mark.usefixtures("clean_env")

INPUT = ("decisions", "executions", "heartbeats", "config")


def _lines(stream: object, into: Queue[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        into.put(line)
    into.put("")  # the end


def _wait_for(lines: Queue[str], seen: list[str], word: str | None, timeout: float) -> None:
    """Move lines into ``seen`` until one holds ``word`` (None: until the stream ends or is
    quiet for ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5 if word else timeout)
        except Empty:
            if word is None:
                return
            continue
        if line == "":
            break
        seen.append(line)
        if word is not None and word in line:
            return
    if word is not None:
        raise AssertionError(f"{word!r} not seen within {timeout} s:\n{''.join(seen)[-3000:]}")


@pytest.mark.slow
@pytest.mark.parametrize("where", ["planning", "reading"])
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)],
                         ids=["ctrl-c", "sigterm"])
def test_stopping_run_while_the_broker_is_down(tmp_path: Path, postgres: EmbeddedPostgres,
                                               topic_prefix: str, sig: int, status: int,
                                               where: str) -> None:
    """The job runs, its broker goes, the job says so once: between batches (``planning``: the
    broker stopped, the next batch's planning waits) or while a batch reads (``reading``: a
    backlog read in small batches, the broker cut the moment a task fetches). Then the signal:
    ``replimon run`` stops within a bounded time with the documented status, says ``stopped``,
    and nothing that looks like a trace."""
    from replimon.kafka.consumers import READER_ID
    from replimon.producers.simulator import SimOptions, Simulator
    from tests.kafka.proxy import ProxiedBroker
    from tests.support import publish

    broker = EmbeddedBroker().start() if where == "planning" else ProxiedBroker().start()
    proc = None
    try:
        names = {f: f"{topic_prefix}{f}" for f in (*INPUT, "alerts", "state", "dead_letters")}
        broker.create_topics(list(names.values()), 2)
        env = clean_environ(REPLIMON_POSTGRES__DSN=postgres.dsn,
                            REPLIMON_KAFKA__BOOTSTRAP_SERVERS=broker.bootstrap_servers,
                            REPLIMON_PATHS__CHECKPOINT_DIR=str(tmp_path / "ck"),
                            REPLIMON_STREAMING__TRIGGER_INTERVAL_S="1",
                            REPLIMON_STREAMING__MAX_OFFSETS_PER_TRIGGER="200",
                            REPLIMON_QUALITY__ENABLED="false",
                            **{f"REPLIMON_KAFKA__TOPICS__{f.upper()}": n for f, n in names.items()})
        if where == "reading":  # a backlog, read 200 records a batch
            settings: Any = load_settings(kafka={"bootstrap_servers": broker.bootstrap_servers,
                                                 "topics": names})
            events: list[dict[str, Any]] = []
            Simulator(SimOptions(groups=3, duration_ms=30_000, start_ms=int(time.time() * 1000) - 30_000),
                      [], events.append).run()
            publish(settings, events)
        proc = subprocess.Popen([*REPLIMON, "run", "--run-id", topic_prefix.strip("-")], env=env,
                                cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        lines: Queue[str] = Queue()
        threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True).start()
        seen: list[str] = []
        _wait_for(lines, seen, "replimon.job batch ", 240)  # the job works (its first batch is said)
        time.sleep(2)
        if isinstance(broker, ProxiedBroker):
            broker.proxy.cut_on_fetch(READER_ID)
            _wait_for(lines, seen, "the micro-batch that was reading waits for it", 120)
        else:
            broker.stop()
            _wait_for(lines, seen, "no micro-batch runs until it does", 60)
        stopped = time.monotonic()
        proc.send_signal(sig)
        proc.wait(timeout=120)
        took = time.monotonic() - stopped
        _wait_for(lines, seen, None, 5)
    finally:
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
            if proc.stderr is not None:
                proc.stderr.close()
        broker.stop()
    stderr = "".join(seen)
    assert proc.returncode == status, stderr[-3000:]
    assert took < 60, (took, stderr[-3000:])
    assert "replimon.run stopped" in stderr, stderr[-3000:]
    assert len([line for line in seen if "Kafka: no broker of" in line]) == 1, stderr[-3000:]
    for word in NOISE:
        assert word not in stderr, f"{word!r} in:\n{stderr[-3000:]}"
    print(f"{where}: stopped {took:.1f} s after the signal")
