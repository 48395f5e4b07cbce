"""What the ``replimon`` command prints: its summaries and tables (rich on a terminal, plain lines
otherwise), and the time flags it reads. ``cli.py`` is the commands; this is their output."""

from __future__ import annotations

import dataclasses
import importlib
import threading
import time
from typing import Any

import typer
from rich.console import Console

from replimon.config import Settings, load_settings

err = Console(stderr=True)


def parse_time(text: str, flag: str = "--start") -> int:
    if text.isdigit():
        return int(text)
    from datetime import datetime

    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{flag}: not ISO-8601 or epoch ms: {text!r}") from None
    if dt.tzinfo is None:
        raise ValueError(f"{flag}: give a time zone (e.g. 2026-01-01T00:00:00Z)")
    return int(dt.timestamp() * 1000)


def print_faults(catalogue: dict[str, Any]) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape("simulator fault catalogue (inject with --inject NAME[:GROUP][@TIME])"))
    table.add_column("fault")
    table.add_column("alert it must raise")
    table.add_column("what happens")
    for spec in catalogue.values():
        table.add_row(spec.name, spec.alert, escape(spec.summary))
    Console(width=max(Console().width, 140)).print(table)


def check_summary(result: Any, seconds: float, failed: bool, fail_on: str) -> None:
    """A human summary on stderr: a table on a terminal, plain lines otherwise."""
    from rich.table import Table

    from replimon.check import SEVERITY_RANK

    span = 0.0 if result.first_ts is None else (result.last_ts - result.first_ts) / 1000
    head = (f"{result.events} events from {result.groups} group(s) over {span:.1f} s of event time "
            f"checked in {seconds:.1f} s; {len(result.bad)} bad line(s), {result.duplicates} "
            f"duplicate(s), {result.lost} event(s) lost")
    for bad in result.bad[:20]:
        err.print(f"bad line {bad.source}:{bad.line}: {bad.reason}", highlight=False, markup=False, soft_wrap=True)
    if len(result.bad) > 20:
        err.print(f"... and {len(result.bad) - 20} more bad line(s)", highlight=False, markup=False)
    firing = sorted(result.firing().items(), key=lambda kv: (-SEVERITY_RANK[kv[0][1]], kv[0][0]))
    verdict = f"FAILED (--fail-on {fail_on})" if failed else "ok"
    if err.is_terminal:
        table = Table(title=head, title_justify="left")
        for col in ("kind", "severity", "category", "firing"):
            table.add_column(col)
        for (kind, sev, cat), n in firing:
            table.add_row(kind, sev, cat, str(n))
        err.print(table)
        err.print(f"result: {verdict}", highlight=False, markup=False)
        return
    err.print(head, highlight=False, markup=False, soft_wrap=True)
    for (kind, sev, cat), n in firing:
        err.print(f"  {kind:<26} {sev:<8} {cat:<9} {n}", highlight=False, markup=False)
    err.print(f"result: {verdict}", highlight=False, markup=False)



def validate_summary(result: Any) -> None:
    """The verdict per expectation on stdout: a table on a terminal, plain lines otherwise."""
    from rich.table import Table

    from replimon.quality.command import headline, summary_rows, verdict

    out = Console()
    for line in result.invalid:
        err.print(f"not validated: {line}", highlight=False, markup=False, soft_wrap=True)
    rows = summary_rows(result)
    if out.is_terminal:
        table = Table(title=headline(result), title_justify="left")
        for col in ("suite", "expectation", "result", "evaluated", "unexpected", "samples"):
            table.add_column(col, overflow="fold")
        for row in rows:
            table.add_row(*row, style=None if row[2] == "pass" else "bold red")
        out.print(table, highlight=False, markup=False)
    else:
        out.print(headline(result), highlight=False, markup=False, soft_wrap=True)
        for suite, name, res, evaluated, unexpected, samples in rows:
            out.print(f"  {res:<5} {suite:<20} {name}  evaluated {evaluated or '-'}, unexpected "
                      f"{unexpected or '0'}" + (f"  e.g. {samples}" if samples else ""),
                      highlight=False, markup=False, soft_wrap=True)
    out.print(f"result: {verdict(result)}", highlight=False, markup=False)
    if result.docs is not None:
        out.print(f"data docs: {result.docs}", highlight=False, markup=False, soft_wrap=True)


# Libraries that log at INFO on every micro-batch (Py4J's callback server, Great Expectations'
# registrations) or on every lost connection: off unless --verbose (docs/operations.md, "Logs").
# "pyspark" also decides the JVM's own log (streaming/session.py, verbose_jvm): Spark's startup
# lines and WARNs only with --verbose.
CHATTY_LOGGERS = ("py4j", "great_expectations", "urllib3", "asyncio", "pyspark")


def quiet_logs(verbose: bool) -> None:
    """One log line per event that matters: replimon's loggers at INFO, the libraries' at WARNING
    (everything at INFO with ``verbose``)."""
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.CRITICAL)
    if not verbose:
        # Some libraries log through the root logger (py4j's "Exception while sending command."
        # when the JVM goes away under a call): judged by where the record was made, not its name.
        for handler in logging.getLogger().handlers:
            handler.addFilter(_not_from_chatty_libraries)


def _not_from_chatty_libraries(record: Any) -> bool:
    path = record.pathname.replace("\\", "/")
    return not any(f"/{name}/" in path for name in CHATTY_LOGGERS)



class Terminated(BaseException):
    """SIGTERM arrived (``on_sigterm``): unwinds like Ctrl-C, so ``with`` blocks stop servers."""


def on_sigterm() -> None:
    """From now on SIGTERM raises `Terminated` in the main thread (``replimon db``/``broker``:
    the way a service manager stops them is a clean stop, exit 0)."""
    import signal

    def raise_terminated(*_: Any) -> None:
        raise Terminated

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, raise_terminated)


def serve(server: Any, command: str, what: str | Any, poll_s: float = 0.5) -> int:
    """Wait for Ctrl-C (130), SIGTERM (0; see `on_sigterm`) or for the server to die on its own
    (one line, 1; ``what`` names the server, or a function that names it then). The caller's
    ``with`` block then stops the server."""
    try:
        while (status := server.exit_status()) is None:
            time.sleep(poll_s)
    except KeyboardInterrupt:
        err.print("stopping")
        return 130
    except Terminated:
        err.print("stopping")
        return 0
    err.print(f"replimon: {command}: {what() if callable(what) else what} exited on its own with status {status}; stopping",
              highlight=False, markup=False, soft_wrap=True)
    return 1


class PublishProgress:
    """What ``simulate --kafka`` shows while it publishes: events sent, delivered and failed,
    a line every ``every_s`` seconds; the first failure of each kind at once; the total at the
    end. Failures are counted as the delivery reports come (``delivered`` is the publisher's
    ``on_delivery`` callback)."""

    def __init__(self, bootstrap: str, every_s: float = 5.0) -> None:
        self.bootstrap = bootstrap
        self.every_s = every_s
        self.publisher: Any = None
        self._kinds: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = time.monotonic()

    def start(self, publisher: Any) -> None:
        self.publisher = publisher
        self._thread = threading.Thread(target=self._loop, name="publish-progress", daemon=True)
        self._thread.start()

    def delivered(self, report: Any) -> None:
        if report.error is None:
            return
        kind = report.error.split(":", 1)[0]
        if kind not in self._kinds:  # once per kind: a broker outage fails thousands alike
            self._kinds.add(kind)
            err.print(f"delivery failed ({report.error}, topic {report.topic}); counting further "
                      f"failures of this kind", highlight=False, markup=False, soft_wrap=True)

    def line(self) -> str:
        st = self.publisher.stats()
        renewed = f", {st.renewed} producer restart(s)" if st.renewed else ""
        return (f"{time.monotonic() - self._started:5.0f} s: {st.sent} sent, {st.delivered} delivered, "
                f"{st.failed + st.rejected} failed, {st.in_flight} in flight{renewed}")

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            err.print(self.line(), highlight=False, markup=False)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def finish(self) -> bool:
        """Print the total; True when anything was lost (not delivered)."""
        if self.publisher is None:
            return False
        st = self.publisher.stats()
        lost = st.failed + st.rejected + st.in_flight
        err.print(f"published {st.delivered} of {st.sent + st.rejected} events to {self.bootstrap}"
                  + (f"; {lost} LOST (not delivered)" if lost else "; none lost"),
                  highlight=False, markup=False, soft_wrap=True)
        return lost > 0


def publish_live(settings: Any, make_sim: Any) -> tuple[int, Any]:
    """``simulate --kafka``: run the simulator in real time into a publisher, with progress;
    returns (exit status, the simulator's summary): 1 when any event was not delivered, else
    130 after Ctrl-C, else 0 (docs/operations.md, "Publishing")."""
    import contextlib

    from replimon.producers.publisher import Publisher, PublishError

    progress = PublishProgress(settings.kafka.bootstrap_servers)
    interrupted = False
    try:
        publisher = Publisher.from_settings(settings, on_delivery=progress.delivered)
        progress.start(publisher)
        sim = make_sim(publisher.send)
        try:
            summary = sim.run(realtime=True)
        except KeyboardInterrupt:
            interrupted = True
            summary = sim.summary()
        except PublishError as exc:  # the local queue stayed full: the broker is gone
            err.print(f"replimon: simulate: {exc}; stopping", highlight=False, markup=False, soft_wrap=True)
            summary = sim.summary()
        # Every failure was counted as it happened; the total below says how many.
        with contextlib.suppress(PublishError):
            publisher.close(timeout_s=settings.kafka.producer.delivery_timeout_ms / 1000)
    finally:
        progress.stop()
    if progress.finish():
        return 1, summary
    return (130 if interrupted else 0), summary


# -- the CLI's state and its one-line failures -------------------------------------------------
class _State:
    """What the root command's options set for the others (the config file)."""

    config_path: str | None = None

    def settings(self, **overrides: Any) -> Settings:
        return load_settings(self.config_path, **overrides)


state = _State()


def fail(message: str) -> typer.Exit:
    """Print one line on stderr; the caller raises the returned Exit(2)."""
    err.print(f"replimon: {message}", highlight=False, markup=False, soft_wrap=True)
    return typer.Exit(2)


def inside_run(command: str, injections: Any, duration_ms: int, duration: str) -> None:
    """An injection at or after the end of the run would never happen: say so (exit 2)."""
    late = [i for i in injections if duration_ms > 0 and i.at_ms >= duration_ms]
    if late:
        raise fail(f"{command}: --inject {late[0].fault}:{late[0].group}@{late[0].at_ms / 1000:g}s is at or "
                   f"after the end of the run (--duration {duration}): it would never be injected")


def sim_options(family: str, settings: Any, *, seed: int | None, groups: int | None, nodes: int | None,
                rate: float | None, duration_ms: int, start_ms: int) -> Any:
    """The simulator options of ``family`` from the settings and the flags (a flag wins). For
    generations, ``rate`` is transactions per second per group; for qlog, values decrees; for
    chain, client writes."""
    rate_field = {"gen": "xacts_per_s", "qlog": "decrees_per_s", "chain": "writes_per_s"}.get(family)
    if rate_field is not None:
        module = importlib.import_module(f"replimon.producers.simulator_{family}")
        sim = settings.simulator
        options = module.SimOptions(groups=groups or sim.groups, nodes=nodes or sim.nodes,
                                    seed=sim.seed if seed is None else seed, duration_ms=duration_ms,
                                    start_ms=start_ms)
        return options if rate is None else dataclasses.replace(options, **{rate_field: rate})
    from replimon.producers.simulator import SimOptions

    return SimOptions.from_settings(settings, seed=seed, groups=groups, nodes=nodes, decisions_per_s=rate,
                                    duration_ms=duration_ms, start_ms=start_ms)


def build_simulator(cls: Any, options: Any, injections: Any, sink: Any) -> Any:
    try:
        return cls(options, injections, sink)
    except ValueError as exc:
        raise fail(f"simulate: {exc}") from None
