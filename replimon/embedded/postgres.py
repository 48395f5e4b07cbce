"""Embedded PostgreSQL: a real server from the ``pgserver`` wheel's binaries, on TCP loopback.

We use pgserver only for its bundled, relocatable PostgreSQL 16 build (``pgserver/pginstall``),
not its `PostgresServer` class: that class listens on a unix socket only, keeps a machine-wide
lock and pid list, and when run as root it creates a system user with ``useradd`` and widens the
permissions of every parent directory of the data dir and of the virtualenv. Running initdb and
postgres ourselves gives a TCP port, one process we own, and no changes outside the data dir.

PostgreSQL refuses to run as root. As root the server runs as an unprivileged user (default
``nobody``; override with ``run_as`` or ``$REPLIMON_PG_USER``) through `subprocess` ``user=``,
so no ``su``/``runuser``/``setpriv`` is needed. If the pgserver binaries are missing or cannot
run, Debian's ``/usr/lib/postgresql/<version>/bin`` is used when present; ``$REPLIMON_PG_BINDIR``
forces a directory.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import psycopg

from replimon.embedded.processes import die_with_parent, free_port

HOST = "127.0.0.1"
SUPERUSER = "postgres"
DATABASE = "replimon"
_PORT_ATTEMPTS = 5


class PostgresStartError(RuntimeError):
    """PostgreSQL could not be initialised or did not become ready; carries the log tail."""


def candidate_bin_dirs() -> list[Path]:
    """PostgreSQL bin directories to try, best first."""
    if forced := os.environ.get("REPLIMON_PG_BINDIR"):
        return [Path(forced)]
    dirs: list[Path] = []
    # Located without importing pgserver, whose import sets up machine-wide lock paths.
    spec = importlib.util.find_spec("pgserver")
    if spec is not None and spec.submodule_search_locations:
        dirs.append(Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin")
    debian = sorted(Path("/usr/lib/postgresql").glob("*/bin"),
                    key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
                    reverse=True)
    return dirs + debian


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(log unreadable: {exc})"


class EmbeddedPostgres:
    """A PostgreSQL server on 127.0.0.1 with database ``replimon`` (superuser ``postgres``,
    trust authentication: for local development and tests only).

    Guarantees: after `start`, `dsn` accepts psycopg connections; the postmaster runs in its own
    process group and `stop` (also the context manager and an atexit hook) shuts it down with
    ``pg_ctl stop -m fast`` and waits for it, killing the group only if that fails. A temporary
    data dir (the default) is deleted on stop and runs with ``fsync=off``; a given data dir keeps
    PostgreSQL's durable defaults and is reused across runs.
    """

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, *, port: int | None = None,
                 run_as: str | None = None, startup_timeout: float = 60.0) -> None:
        self._given_dir = Path(data_dir) if data_dir is not None else None
        self._fixed_port = port
        self._run_as = run_as or os.environ.get("REPLIMON_PG_USER", "nobody")
        self._startup_timeout = startup_timeout
        self._dir: Path | None = None
        self._bin: Path | None = None
        self._port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> EmbeddedPostgres:
        """Initialise (first time), start, wait for connections, create the database."""
        if self._proc is not None:
            return self
        if self._given_dir is not None:
            self._given_dir.mkdir(parents=True, exist_ok=True)
            self._dir = self._given_dir.resolve()
        else:
            self._dir = Path(tempfile.mkdtemp(prefix="replimon-pg-"))
        atexit.register(self.stop)
        deadline = time.monotonic() + self._startup_timeout
        try:
            self._prepare_dirs()
            self._bin = self._pick_bin_dir()
            if not (self.pgdata / "PG_VERSION").exists():
                self._run([str(self._bin / "initdb"), "-D", str(self.pgdata), "-U", SUPERUSER,
                           "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"],
                          deadline)
            for _attempt in range(_PORT_ATTEMPTS if self._fixed_port is None else 1):
                port = self._fixed_port or free_port(HOST)
                self._launch(port)
                if self._wait_ready(port, deadline):
                    self._port = port
                    self._create_database()
                    return self
                self._kill_group()  # port taken between free_port() and bind: try another
            raise PostgresStartError(f"no free port after {_PORT_ATTEMPTS} attempts:\n"
                                     f"{_tail(self.log_path)}")
        except BaseException:
            self.stop()
            raise

    @property
    def _user(self) -> pwd.struct_passwd | None:
        """The account the server runs as: None means the current one (not root)."""
        if os.geteuid() != 0:
            return None
        try:
            return pwd.getpwnam(self._run_as)
        except KeyError as exc:
            raise PostgresStartError(f"running as root and user {self._run_as!r} does not exist;"
                                     " set REPLIMON_PG_USER to an unprivileged user") from exc

    def _prepare_dirs(self) -> None:
        assert self._dir is not None
        self.pgdata.mkdir(mode=0o700, exist_ok=True)
        if (user := self._user) is not None:
            # The server user must traverse the (root-owned, 0700 from mkdtemp) parent and own
            # its data dir; the log file is opened by us and inherited, so it stays root-owned.
            self._dir.chmod(self._dir.stat().st_mode | 0o111)
            os.chown(self.pgdata, user.pw_uid, user.pw_gid)
            # Directories above ours are not ours to open up: fail with a clear message.
            groups = set(os.getgrouplist(user.pw_name, user.pw_gid))
            for parent in self._dir.parents:
                st = parent.stat()
                if not (st.st_mode & 0o001 or (st.st_gid in groups and st.st_mode & 0o010)
                        or (st.st_uid == user.pw_uid and st.st_mode & 0o100)):
                    raise PostgresStartError(
                        f"PostgreSQL runs as {user.pw_name!r} (not as root) and cannot reach "
                        f"{self._dir}: {parent} is not searchable by it. Use a data dir under "
                        f"a searchable path (e.g. /tmp or /var/lib) or set REPLIMON_PG_USER.")

    def _run(self, cmd: list[str], deadline: float) -> None:
        """Run a PostgreSQL tool as the server user, appending its output to the log."""
        with open(self.log_path, "ab") as log:
            result = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT,
                                    timeout=max(deadline - time.monotonic(), 1),
                                    **self._child_kwargs())
        if result.returncode != 0:
            raise PostgresStartError(f"{Path(cmd[0]).name} failed ({result.returncode}):\n"
                                     f"{_tail(self.log_path)}")

    def _child_kwargs(self) -> dict[str, Any]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update(LC_ALL="C", LANG="C")
        kwargs: dict[str, Any] = {"env": env, "cwd": str(self.pgdata)}
        if (user := self._user) is not None:
            kwargs.update(user=user.pw_uid, group=user.pw_gid, extra_groups=[])
            env["HOME"] = str(self.pgdata)
        return kwargs

    def _pick_bin_dir(self) -> Path:
        problems = []
        for bin_dir in candidate_bin_dirs():
            postgres = bin_dir / "postgres"
            if not postgres.is_file():
                problems.append(f"{bin_dir}: no postgres")
                continue
            try:
                # Proves the server user can execute it and load its libraries.
                out = subprocess.run([str(postgres), "--version"], capture_output=True,
                                     timeout=30, **self._child_kwargs())
            except (OSError, subprocess.SubprocessError) as exc:
                problems.append(f"{bin_dir}: {exc}")
                continue
            if out.returncode == 0:
                return bin_dir
            problems.append(f"{bin_dir}: exit {out.returncode} {out.stderr!r}")
        raise PostgresStartError("no usable PostgreSQL binaries: " + "; ".join(problems))

    def _launch(self, port: int) -> None:
        assert self._bin is not None
        settings = {"listen_addresses": HOST, "port": str(port),
                    # TCP only: no socket-path length limits, nothing outside the data dir.
                    "unix_socket_directories": ""}
        if self._given_dir is None:
            # Throw-away data: durability only costs time.
            settings.update(fsync="off", synchronous_commit="off", full_page_writes="off")
        cmd = [str(self._bin / "postgres"), "-D", str(self.pgdata)]
        for key, value in settings.items():
            cmd += ["-c", f"{key}={value}"]
        with open(self.log_path, "ab") as log:
            # SIGINT: PostgreSQL's fast shutdown (its sessions' client is gone with the parent).
            self._proc = subprocess.Popen(die_with_parent(cmd, "INT"), stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True,
                                          **self._child_kwargs())

    def _wait_ready(self, port: int, deadline: float) -> bool:
        """True once a connection succeeds; False if the server died because the port is taken."""
        proc = self._proc
        assert proc is not None
        while True:
            if proc.poll() is not None:
                if "Address already in use" in _tail(self.log_path):
                    return False
                raise PostgresStartError(f"postgres exited with {proc.returncode}:\n"
                                         f"{_tail(self.log_path)}")
            try:
                with psycopg.connect(self._dsn(port, "postgres"), connect_timeout=2):
                    return True
            except psycopg.OperationalError as exc:
                if time.monotonic() > deadline:
                    raise PostgresStartError(f"postgres not ready on port {port} within "
                                             f"{self._startup_timeout} s ({exc}):\n"
                                             f"{_tail(self.log_path)}") from exc
            time.sleep(0.05)

    def _create_database(self) -> None:
        assert self._port is not None
        with psycopg.connect(self._dsn(self._port, "postgres"), autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                            (DATABASE,)).fetchone() is None:
                conn.execute(f"CREATE DATABASE {DATABASE}")

    def _kill_group(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        # Signal the group only while the postmaster is unreaped (its pid cannot be reused).
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def stop(self, timeout: float = 30.0) -> None:
        """Fast shutdown (``pg_ctl stop -m fast``), wait for the postmaster; idempotent."""
        proc = self._proc
        if proc is not None and proc.poll() is None and self._bin is not None:
            with contextlib.suppress(PostgresStartError, subprocess.TimeoutExpired):
                self._run([str(self._bin / "pg_ctl"), "stop", "-D", str(self.pgdata),
                           "-m", "fast", "-w", "-t", str(int(timeout))],
                          time.monotonic() + timeout + 5)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout)
        self._kill_group()  # no-op after a clean shutdown
        self._port = None
        atexit.unregister(self.stop)
        if self._dir is not None and self._given_dir is None:
            shutil.rmtree(self._dir, ignore_errors=True)
        self._dir = None

    def __enter__(self) -> EmbeddedPostgres:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- use ---------------------------------------------------------------------------------

    def _dsn(self, port: int, database: str) -> str:
        return f"postgresql://{SUPERUSER}@{HOST}:{port}/{database}"

    @property
    def dsn(self) -> str:
        """libpq URI of the ``replimon`` database, e.g. postgresql://postgres@127.0.0.1:PORT/replimon."""
        if self._port is None:
            raise RuntimeError("postgres is not running")
        return self._dsn(self._port, DATABASE)

    @property
    def port(self) -> int | None:
        return self._port

    def exit_status(self) -> int | None:
        """The postmaster's exit status if it died on its own (crash, kill, OOM), None while it
        runs or when it was never started: ``replimon db``/``broker`` poll it to notice a dead
        server instead of printing "ready" over a defunct child."""
        proc = self._proc
        return None if proc is None else proc.poll()

    @property
    def pid(self) -> int | None:
        """Pid of the postmaster (also its process group id), None when stopped."""
        return self._proc.pid if self._proc is not None else None

    @property
    def bin_dir(self) -> Path | None:
        """The PostgreSQL bin directory in use (pgserver's unless it was unusable)."""
        return self._bin

    @property
    def pgdata(self) -> Path:
        if self._dir is None:
            raise RuntimeError("postgres has no data dir (not started)")
        return self._dir / "pgdata"

    @property
    def log_path(self) -> Path:
        """initdb, server and pg_ctl output."""
        if self._dir is None:
            raise RuntimeError("postgres has no data dir (not started)")
        return self._dir / "postgres.log"
