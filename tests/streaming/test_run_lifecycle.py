"""``replimon run`` stopped at any moment of its start-up or run, and a query that fails: nothing
is left running (the JVM and its Python workers included), the documented status, no trace
(docs/operations.md, "Stopping" and "Exit status"). The real command in a subprocess, as an
operator runs it.

Moments are measured from the command's start: before its checks, while the JVM starts (Ctrl-C
there left a JVM running for minutes), while the session and the query start (py4j traces),
and after its first micro-batch. The default run stops it at six moments; ``slow`` adds twelve
drawn at random over the first 20 s (the seed is printed)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from replimon.embedded import EmbeddedBroker, EmbeddedPostgres
from tests.support import eventually, job_config
from tests.test_operator_errors import NOISE, REPLIMON, clean_environ

pytestmark = [pytest.mark.usefixtures("clean_env"), pytest.mark.broker, pytest.mark.postgres]


def _parents() -> dict[int, tuple[int, str]]:
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            out[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), cmd)
    return out


class Tree:
    """Every process descended from ``pid`` seen while it ran (polled), with its command line."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.seen: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(0.05):
            procs = _parents()
            todo = [self.pid]
            while todo:
                current = todo.pop()
                for child, (parent, cmd) in procs.items():
                    if parent == current and child not in self.seen:
                        self.seen[child] = cmd
                        todo.append(child)

    def alive(self) -> dict[int, str]:
        """The descendants seen that still run (same pid, same command line)."""
        self._stop.set()
        self._thread.join()
        procs = _parents()
        out = {}
        for pid, cmd in self.seen.items():
            if pid in procs and procs[pid][1] == cmd:
                try:
                    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                except OSError:
                    continue
                if state != "Z":
                    out[pid] = cmd
        return out


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with EmbeddedBroker() as broker, EmbeddedPostgres() as pg:
        yield broker, pg


def _run(stack: Any, tmp_path: Path, prefix: str, extra: dict[str, str] | None = None,
         argv: tuple[str, ...] = ()) -> tuple[subprocess.Popen[str], Tree, list[str]]:
    broker, pg = stack
    path, _ = job_config(broker, pg, prefix, tmp_path, quality={"enabled": False})
    proc = subprocess.Popen([*REPLIMON, "--config", str(path), "run", *argv], cwd=tmp_path,
                            env=clean_environ(**(extra or {})), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    lines: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        with proc.stderr:
            for line in iter(proc.stderr.readline, ""):
                lines.append(line)

    threading.Thread(target=read, daemon=True).start()
    return proc, Tree(proc.pid), lines


def _stop_at(stack: Any, tmp_path: Path, prefix: str, at: float | str, sig: int) -> str:
    proc, tree, lines = _run(stack, tmp_path, prefix)
    try:
        if at == "running":
            eventually(lambda: any("replimon.job batch " in line for line in lines), timeout=180,
                       what=lambda: f"a first batch: {''.join(lines)[-2000:]}")
        else:
            time.sleep(float(at))
        proc.send_signal(sig)
        proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    deadline = time.monotonic() + 20  # the JVM's shutdown after SIGTERM takes a moment
    while tree.alive() and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(0.2)  # the last lines
    stderr = "".join(lines)
    assert not tree.alive(), (at, tree.alive(), stderr[-2000:])
    assert proc.returncode == (130 if sig == signal.SIGINT else 0), (at, proc.returncode, stderr[-3000:])
    for word in NOISE:
        assert word not in stderr, f"stopped at {at}: {word!r} in:\n{stderr[-3000:]}"
    return stderr


MOMENTS = [(0.3, signal.SIGINT), (1.5, signal.SIGTERM), (3.0, signal.SIGINT), (5.0, signal.SIGTERM),
           (8.0, signal.SIGINT), ("running", signal.SIGTERM)]


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("at", "sig"), MOMENTS, ids=[f"{a}-{signal.Signals(s).name}" for a, s in MOMENTS])
def test_a_signal_at_any_moment_leaves_nothing_running(stack: Any, tmp_path: Path, topic_prefix: str,
                                                       at: float | str, sig: int) -> None:
    stderr = _stop_at(stack, tmp_path, topic_prefix, at, sig)
    if at == "running":
        assert "replimon.run stopped" in stderr, stderr[-2000:]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_signals_at_random_moments_leave_nothing_running(stack: Any, tmp_path: Path) -> None:
    seed = int(os.environ.get("REPLIMON_TEST_SEED", time.time()))
    rng = random.Random(seed)
    print(f"seed {seed}")
    for i in range(12):
        at = round(rng.uniform(0.1, 20.0), 2)
        sig = rng.choice((signal.SIGINT, signal.SIGTERM))
        case = tmp_path / str(i)
        case.mkdir()
        _stop_at(stack, case, f"r{i}-{seed}-", at, sig)


@pytest.mark.timeout(300)
def test_a_query_that_fails_is_one_line_with_its_first_cause(stack: Any, tmp_path: Path,
                                                              topic_prefix: str) -> None:
    """A query that cannot run (a startingOffsets the source refuses): one ``replimon: run:``
    line naming the cause and the log file that holds the whole trace, exit 1, nothing left."""
    proc, tree, lines = _run(stack, tmp_path, topic_prefix, argv=("--starting", "{bad"))
    proc.wait(timeout=180)
    stderr = "".join(lines)
    assert proc.returncode == 1, stderr[-3000:]
    *before, last = [line for line in lines if line.strip()]
    for word in NOISE:
        assert word not in "".join(before), f"{word!r} in:\n{stderr[-3000:]}"
    assert last.startswith("replimon: run: the streaming query did not start: KafkaOptionError: Option "
                           "'startingOffsets' must be"), last
    log = Path(last.rsplit("(the whole trace: ", 1)[1].rstrip().rstrip(")"))
    assert "Traceback" in log.read_text() or "KafkaOptionError" in log.read_text()
    deadline = time.monotonic() + 20
    while tree.alive() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not tree.alive()
