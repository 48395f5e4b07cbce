"""The job under ``spark-submit`` on a Spark standalone cluster (``docs/cluster.md``).

A master and two workers (1 core each) from the pyspark package on 127.0.0.1; the job is the
wheel built from the tree, installed into a fresh virtual environment that has no other copy of
replimon and none of the dev extra's packages (``tests/support/wheel.py``). spark-submit runs the
wheel's ``replimon/streaming/submit.py`` in replay mode against the session broker and PostgreSQL,
with that environment's Python for the driver and the executors, over a fleet of the four families
with a fault in each. Checked:

* PostgreSQL holds exactly the alert ids ``Monitor().run(events)`` gives, among them each
  family's fault alert;
* the driver ran on spark-submit's master and imported replimon from the wheel;
* both workers ran tasks (their executors' logs), and every Python worker process under them was
  started from the wheel's environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from replimon.core import Monitor
from replimon.embedded import free_port
from replimon.store.reads import RunReader
from tests.support import eventually, publish, settings_for
from tests.support.wheel import (
    FOUR_FAMILY_ALERTS,
    child_env,
    four_family_events,
    fresh_env,
    wheel_of_tree,
)

pytestmark = [pytest.mark.slow, pytest.mark.broker, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
WORKERS = 2


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def clean_env(**extra: str) -> dict[str, str]:
    """An environment for the cluster's processes: nothing that would choose a Python, a path or a
    config for them (tests/support/wheel.py), Spark's home and loopback."""
    return child_env(SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP=HOST, **extra)


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """End a process started with start_new_session=True and everything it started."""
    if proc.poll() is None:
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
    with contextlib.suppress(ProcessLookupError):  # executors left behind by a worker that died first
        os.killpg(proc.pid, signal.SIGKILL)


def master_json(webui_port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://{HOST}:{webui_port}/json/", timeout=5) as resp:
        data: dict[str, Any] = json.load(resp)
        return data


def wait_for(what: str, check: Any, timeout: float, procs: list[subprocess.Popen[bytes]]) -> Any:
    def alive_and(check: Any = check) -> Any:
        dead = [p.args for p in procs if p.poll() is not None]
        assert not dead, f"exited while waiting for {what}: {dead}"
        try:
            return check()
        except OSError:
            return None

    return eventually(alive_and, timeout=timeout, interval=0.5, what=what)


class Standalone:
    """A standalone master and its workers, each in its own process group."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = free_port()
        self.webui_port = free_port()
        self.url = f"spark://{HOST}:{self.port}"
        self.master: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self.work_dirs: list[Path] = []

    def _start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        env = clean_env(SPARK_DAEMON_MEMORY="512m",
                        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")
        log = open(self.base / f"{name}.log", "wb")  # noqa: SIM115 - the child keeps it
        try:
            return subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], env=env,
                                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        finally:
            log.close()

    def start(self) -> None:
        self.master = self._start("master", "org.apache.spark.deploy.master.Master", "--host", HOST,
                                  "--port", str(self.port), "--webui-port", str(self.webui_port))
        wait_for("the master", lambda: master_json(self.webui_port).get("status") == "ALIVE", 120,
                 [self.master])
        for i in range(WORKERS):
            work = self.base / f"worker{i}"
            work.mkdir()
            self.work_dirs.append(work)
            self.workers.append(self._start(
                f"worker{i}", "org.apache.spark.deploy.worker.Worker", self.url, "--host", HOST,
                "--cores", "1", "--memory", "1g", "--webui-port", "0", "--work-dir", str(work)))
        wait_for("two workers", lambda: master_json(self.webui_port).get("aliveworkers") == WORKERS,
                 120, [self.master, *self.workers])

    def stop(self) -> None:
        for proc in [*self.workers, *([self.master] if self.master else [])]:
            stop_group(proc)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted(self.base.glob("*.log")))


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[Standalone]:
    cluster = Standalone(tmp_path)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def wheel_python(tmp_path: Path) -> Path:
    """The fresh environment's Python, with the wheel built from this tree installed."""
    return fresh_env(wheel_of_tree(tmp_path), tmp_path / "venv")


def process_tree() -> dict[int, int]:
    """pid -> parent pid, from /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


class PythonWorkerWatch(threading.Thread):
    """Samples /proc for PySpark Python workers below each Spark worker; records their argv[0]."""

    def __init__(self, roots: list[int]) -> None:
        super().__init__(daemon=True)
        self.roots = roots
        self.seen: dict[int, set[str]] = {root: set() for root in roots}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.3):
            parents = process_tree()
            for pid in parents:
                root = self._root(pid, parents)
                if root is None:
                    continue
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if any(a.startswith(b"pyspark.") for a in argv):
                    self.seen[root].add(argv[0].decode())

    def _root(self, pid: int, parents: dict[int, int]) -> int | None:
        for _ in range(16):
            pid = parents.get(pid, 0)
            if pid in self.seen:
                return pid
            if pid <= 1:
                return None
        return None


@pytest.mark.timeout(600)
def test_spark_submit_on_standalone_cluster(standalone: Standalone, wheel_python: Path, broker: Any,
                                            postgres: Any, topic_prefix: str, tmp_path: Path) -> None:
    settings = settings_for(broker, postgres, topic_prefix, tmp_path)
    events = four_family_events(60)
    publish(settings, events)
    expected = Monitor().run(events)
    want = {a.alert_id for a in expected}
    assert {(a.group, a.kind) for a in expected if a.severity != "info"} == FOUR_FAMILY_ALERTS
    config = tmp_path / "replimon.yaml"
    config.write_text(yaml.safe_dump(settings.model_dump(mode="json")))
    run_id = f"cluster-{uuid.uuid4().hex[:8]}"
    entry = subprocess.run([str(wheel_python), "-c", "import replimon.streaming.submit as m; print(m.__file__)"],
                           check=True, capture_output=True, text=True, env=clean_env(), cwd=tmp_path).stdout.strip()
    wheel_root = Path(entry).parent.parent  # .../site-packages/replimon
    assert wheel_root.is_relative_to(wheel_python.parent.parent), entry
    command = [
        str(spark_home() / "bin" / "spark-submit"), "--master", standalone.url,
        "--conf", f"spark.pyspark.python={wheel_python}",
        "--conf", f"spark.pyspark.driver.python={wheel_python}",
        "--conf", "spark.executor.memory=512m",
        # wait for both executors before the first job, so both get tasks on a slow machine
        "--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0",
        "--conf", "spark.scheduler.maxRegisteredResourcesWaitingTime=120s",
        entry, "--config", str(config), "--replay", "--run-id", run_id,
        "--checkpoint", str(tmp_path / "ckpt" / run_id),
    ]
    watch = PythonWorkerWatch([w.pid for w in standalone.workers])
    watch.start()
    driver_log = tmp_path / "driver.log"
    started = time.monotonic()
    with open(driver_log, "wb") as log:
        driver = subprocess.Popen(command, cwd=tmp_path, env=clean_env(), stdout=log,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc = driver.wait(420)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            stop_group(driver)
            watch.done.set()
            watch.join(5)
    took = time.monotonic() - started
    out = driver_log.read_text(errors="replace")
    assert rc == 0, f"spark-submit exit {rc}:\n{out[-6000:]}\n{standalone.logs()}"
    assert f"master {standalone.url}" in out, out[-3000:]
    assert f"replimon from {wheel_root}" in out, out[-3000:]

    stored = RunReader(settings.postgres.dsn, run_id).alerts()
    got = {a["alert_id"] for a in stored}
    assert got == want, (sorted(want - got), sorted(got - want))
    # every family's fault, found by the job on the cluster (and nothing else of note)
    assert {(a["group"], a["kind"]) for a in stored if a["severity"] != "info"} == FOUR_FAMILY_ALERTS

    app = master_json(standalone.webui_port)
    (done,) = [a for a in app["completedapps"] if a["name"] == "replimon"]
    for i, work in enumerate(standalone.work_dirs):
        logs = list(work.glob(f"{done['id']}/*/stderr"))
        assert logs, f"worker {i} ran no executor for {done['id']}"
        text = "".join(p.read_text(errors="replace") for p in logs)
        assert "Running task" in text, f"worker {i}'s executor ran no task"
    for root, pythons in watch.seen.items():
        assert pythons == {str(wheel_python)}, (root, pythons)
    tasks = [sum(p.read_text(errors="replace").count("Running task") for p in w.glob(f"{done['id']}/*/stderr"))
             for w in standalone.work_dirs]
    print(f"spark-submit on {WORKERS} workers: {len(events)} events replayed in {took:.1f} s; "
          f"tasks per worker {tasks}; {len(want)} alert ids")
