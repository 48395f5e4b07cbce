"""Every failure an operator can cause ends with one line on stderr and a non-zero exit, never a
traceback (docs/operations.md, "Exit status"): a table of them, each run as the real command in
a subprocess, as an operator would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from replimon.embedded import EmbeddedBroker, EmbeddedPostgres

pytestmark = pytest.mark.usefixtures("clean_env")

REPLIMON = [sys.executable, "-m", "replimon.cli"]
NOISE = ("Traceback", "Exception", "Error:", "at java.", "py4j")


def clean_environ(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("REPLIMON_")}
    env.update(extra)
    return env


def run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*REPLIMON, *argv], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False)


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"want one line, got:\n{stderr}"
    assert not any(word in lines[0] for word in ("Traceback", "File \"")), stderr
    return lines[0]


# (id, argv, environment, exit status, words the line must hold). No server needed.
OFFLINE: list[tuple[str, list[str], dict[str, str], int, list[str]]] = [
    ("map-not-json", ["config"], {"REPLIMON_STREAMING__SPARK_CONF": "notjson"}, 2,
     ["REPLIMON_STREAMING__SPARK_CONF", "streaming.spark_conf", "JSON"]),
    ("map-a-list", ["config"], {"REPLIMON_STREAMING__SPARK_CONF": "[1]"}, 2,
     ["REPLIMON_STREAMING__SPARK_CONF", "streaming.spark_conf"]),
    ("section-not-json", ["config"], {"REPLIMON_KAFKA__TOPICS": "x"}, 2,
     ["REPLIMON_KAFKA__TOPICS", "kafka.topics", "JSON"]),
    ("unknown-section", ["config"], {"REPLIMON_KAFKAA__X": "1"}, 2,
     ["REPLIMON_KAFKAA__X", "unknown setting"]),
    ("single-underscore", ["config"], {"REPLIMON_KAFKA_BOOTSTRAP_SERVERS": "k:9092"}, 2,
     ["REPLIMON_KAFKA_BOOTSTRAP_SERVERS", "unknown setting"]),
    ("unknown-field", ["config"], {"REPLIMON_KAFKA__NOPE": "1"}, 2, ["REPLIMON_KAFKA__NOPE", "kafka.nope"]),
    ("bad-number", ["run"], {"REPLIMON_THRESHOLDS__NODE_SILENT_S": "soon"}, 2, ["thresholds.node_silent_s"]),
    ("empty-dsn", ["run"], {"REPLIMON_POSTGRES__DSN": ""}, 2, ["postgres.dsn", "empty"]),
    ("bad-dsn", ["run"], {"REPLIMON_POSTGRES__DSN": "notadsn"}, 2, ["postgres.dsn", "notadsn"]),
    ("inject-after-end", ["simulate", "--inject", "beyond_horizon:g1@10m", "--duration", "30s", "--out", "x.jsonl"],
     {}, 2, ["--inject", "never be injected"]),
    ("report-unreachable-dsn", ["report", "live"], {"REPLIMON_POSTGRES__DSN": "postgresql://u:secret@127.0.0.1:1/x"},
     1, ["PostgreSQL"]),
]


@pytest.mark.parametrize(("argv", "env", "status", "words"), [case[1:] for case in OFFLINE],
                         ids=[case[0] for case in OFFLINE])
def test_offline_failures_are_one_line(tmp_path: Path, argv: list[str], env: dict[str, str], status: int,
                                       words: list[str]) -> None:
    done = run(argv, clean_environ(**env), tmp_path)
    line = one_line(done.stderr)
    assert done.returncode == status, done.stderr
    for word in words:
        assert word in line, line
    assert "secret" not in line  # a password in the DSN is never shown


@pytest.mark.parametrize(("name", "content", "words"), [
    ("not-utf8", b"kafka:\n  client_id: \"\xff\xfe\"\n", ["line 2", "not UTF-8", "0xff"]),
    ("section-twice", b"kafka:\n  partitions: 8\npostgres:\n  dsn: ''\nkafka:\n  client_id: x\n",
     ["line 5", "'kafka' is given twice", "lines 1 and 5"]),
    ("field-twice", b"kafka:\n  topics:\n    alerts: a\n    alerts: b\n", ["line 4", "'alerts' is given twice"]),
])
@pytest.mark.parametrize("command", [["config"], ["run"]])
def test_a_config_file_that_cannot_be_read_right_is_one_line(tmp_path: Path, name: str, content: bytes,
                                                             words: list[str], command: list[str]) -> None:
    """A config file in another encoding, or one that names a section or a setting twice (YAML
    would keep the last in silence): one line naming the file and the line, exit 2."""
    (tmp_path / f"{name}.yaml").write_bytes(content)
    done = run(["--config", f"{name}.yaml", *command], clean_environ(), tmp_path)
    line = one_line(done.stderr)
    assert done.returncode == 2, done.stderr
    assert line.startswith(f"config file {name}.yaml "), line
    for word in words:
        assert word in line, line


def test_run_without_postgresql_says_so_and_goes_on(tmp_path: Path) -> None:
    """PostgreSQL unreachable at start is no reason to leave the fleet unmonitored: one line says
    the job starts without it (the password never shown), then the job goes on to the broker
    (here absent: its one line, exit 1)."""
    env = clean_environ(REPLIMON_POSTGRES__DSN="postgresql://u:secret@127.0.0.1:1/x",
                        REPLIMON_KAFKA__BOOTSTRAP_SERVERS="127.0.0.1:1")
    done = run(["run"], env, tmp_path)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1, done.stderr
    assert len(lines) == 2, done.stderr
    assert lines[0].startswith("replimon: run: cannot reach PostgreSQL at 127.0.0.1:1/x") and "starting without it" in lines[0]
    assert lines[1].startswith("replimon: run: cannot reach the Kafka broker at 127.0.0.1:1")
    assert "secret" not in done.stderr


def test_check_with_no_valid_event_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("")
    done = run(["check", "empty.jsonl"], clean_environ(), tmp_path)
    assert done.returncode == 2
    assert "no valid event" in one_line(done.stderr)


def test_broker_unreachable_or_without_topics(tmp_path: Path, postgres: EmbeddedPostgres,
                                              broker: EmbeddedBroker, topic_prefix: str) -> None:
    env = clean_environ(REPLIMON_POSTGRES__DSN=postgres.dsn, REPLIMON_KAFKA__BOOTSTRAP_SERVERS="127.0.0.1:1")
    started = time.monotonic()
    done = run(["run"], env, tmp_path)
    assert done.returncode == 1
    assert "cannot reach the Kafka broker at 127.0.0.1:1" in one_line(done.stderr)
    assert time.monotonic() - started < 60
    env["REPLIMON_KAFKA__BOOTSTRAP_SERVERS"] = broker.bootstrap_servers
    env["REPLIMON_KAFKA__TOPICS__DECISIONS"] = f"{topic_prefix}absent"
    done = run(["run"], env, tmp_path)
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert "has no topic" in line and f"{topic_prefix}absent" in line


def _cmdline(pid: int) -> str:
    """The command line of ``pid``; "" once it has exited (a short-lived helper of the server
    may go between listing the processes and reading this)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        kids = [p for p, parent in parents.items() if parent == current]
        found += kids
        todo += kids
    return found


def _start(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([*REPLIMON, *argv], env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _ready(proc: subprocess.Popen[str], prefix: str) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith(prefix), line
    return line.strip().split("=", 1)[1]


def test_db_notices_its_server_died(tmp_path: Path) -> None:
    proc = _start(["db"], clean_environ(), tmp_path)
    try:
        _ready(proc, "REPLIMON_POSTGRES__DSN=")
        postmaster = [p for p in _children(proc.pid) if "postgres" in _cmdline(p)]
        assert postmaster
        for pid in postmaster:
            os.kill(pid, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("replimon: db: PostgreSQL") and "exited on its own" in lines[-1]
    # Its temporary data directory (and log) goes with it: the line quotes the log, never names it.
    assert "its log's last line: " in lines[-1] and "postgres.log" not in lines[-1], lines[-1]
    assert "Traceback" not in stderr


def _serve_once(argv: list[str], cwd: Path, prefix: str, use: Any) -> None:
    """``replimon ARGV``, ``use`` its printed value, then SIGTERM: it stops with status 0."""
    proc = _start(argv, clean_environ(), cwd)
    try:
        use(_ready(proc, prefix))
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_db_keeps_its_data_and_port_across_a_restart(tmp_path: Path) -> None:
    """``replimon db --port P --data-dir D`` twice: the same DSN, and what the first wrote is
    there for the second (an operator's outage rehearsal with the product's own command)."""
    import shutil
    import tempfile

    import psycopg

    from replimon.embedded.processes import free_port

    # Not under tmp_path: its 0700 parents keep the unprivileged server user out (as root).
    searchable = Path(tempfile.mkdtemp(prefix="replimon-test-"))
    searchable.chmod(0o711)
    port, data = free_port(), searchable / "pg"
    argv = ["db", "--port", str(port), "--data-dir", str(data)]
    dsns: list[str] = []

    def write(dsn: str) -> None:
        dsns.append(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (v int)")
            conn.execute("INSERT INTO kept VALUES (42)")

    def read(dsn: str) -> None:
        dsns.append(dsn)
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT v FROM kept").fetchall() == [(42,)]

    try:
        _serve_once(argv, tmp_path, "REPLIMON_POSTGRES__DSN=", write)
        _serve_once(argv, tmp_path, "REPLIMON_POSTGRES__DSN=", read)
    finally:
        shutil.rmtree(searchable, ignore_errors=True)
    assert dsns[0] == dsns[1] and f":{port}/" in dsns[0]


def test_broker_comes_back_on_its_port(tmp_path: Path) -> None:
    """``replimon broker --port P`` twice: the same address, with replimon's topics (its storage
    is memory only: the records of the first are gone)."""
    from replimon.embedded.processes import free_port
    from replimon.kafka import KafkaClient

    port = free_port()
    seen: list[tuple[str, list[str]]] = []

    def topics(servers: str) -> None:
        with KafkaClient({"bootstrap.servers": servers}, timeout_s=20) as client:
            seen.append((servers, sorted({t for t, _ in client.topic_partitions(lambda tp: True)})))

    for _ in range(2):
        _serve_once(["broker", "--port", str(port)], tmp_path, "REPLIMON_KAFKA__BOOTSTRAP_SERVERS=", topics)
    assert seen[0] == seen[1] and seen[0][0] == f"127.0.0.1:{port}", seen
    assert "replica.decisions" in seen[0][1]


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)], ids=["ctrl-c", "sigterm"])
@pytest.mark.parametrize("command", ["db", "broker"])
def test_stopping_a_server(tmp_path: Path, command: str, sig: int, status: int) -> None:
    proc = _start([command], clean_environ(), tmp_path)
    try:
        _ready(proc, "REPLIMON_")
        children = _children(proc.pid)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == status
    assert "Traceback" not in stderr
    assert not [p for p in children if Path(f"/proc/{p}").exists()
                and "Z" not in (Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[:1])]


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)], ids=["ctrl-c", "sigterm"])
def test_stopping_run_is_clean(tmp_path: Path, postgres: EmbeddedPostgres, broker: EmbeddedBroker,
                               topic_prefix: str, sig: int, status: int) -> None:
    """``replimon run`` stopped while it works: the running batch finishes, no trace, 130 after
    Ctrl-C and 0 after SIGTERM."""
    from replimon.config import load_settings
    from replimon.producers.publisher import Publisher
    from replimon.producers.simulator import SimOptions, Simulator

    names = {f: f"{topic_prefix}{f}" for f in ("decisions", "executions", "heartbeats", "config",
                                                 "alerts", "state", "dead_letters")}
    broker.create_topics(list(names.values()), 2)
    env = clean_environ(REPLIMON_POSTGRES__DSN=postgres.dsn, REPLIMON_KAFKA__BOOTSTRAP_SERVERS=broker.bootstrap_servers,
                        REPLIMON_PATHS__CHECKPOINT_DIR=str(tmp_path / "ck"),
                        **{f"REPLIMON_KAFKA__TOPICS__{f.upper()}": n for f, n in names.items()})
    settings: Any = load_settings(**{"kafka": {"bootstrap_servers": broker.bootstrap_servers, "topics": names}})
    with Publisher.from_settings(settings) as publisher:
        Simulator(SimOptions(groups=3, duration_ms=20_000, start_ms=int(time.time() * 1000) - 20_000),
                  [], publisher.send).run()
        publisher.flush()
    proc = subprocess.Popen([*REPLIMON, "run", "--run-id", topic_prefix.strip("-")], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    seen: list[str] = []
    try:
        for line in proc.stderr:
            seen.append(line)
            if "replimon.job batch 1:" in line:  # the job works: stop it now
                break
        proc.send_signal(sig)
        rest, _ = proc.communicate(timeout=180)[1], None
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = "".join(seen) + rest
    assert proc.returncode == status, stderr[-3000:]
    assert "replimon.run stopped" in stderr
    for word in NOISE:
        assert word not in stderr, f"{word!r} in:\n{stderr[-3000:]}"
