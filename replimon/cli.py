"""The ``replimon`` command: thin glue over the library (every command is callable from Python).

Errors an operator can cause (a bad flag, a bad config value, an unreadable file) end with one
line on stderr naming what is wrong and exit status 2; never a traceback.
"""

# ruff: noqa: E402
from __future__ import annotations

import signal
import threading


def _stopped_while_starting(signum: int, frame: object) -> None:
    """Ctrl-C or SIGTERM while the command's modules are still being imported (before ``main``
    handles them): exit as a stop then would, 130 or 0, with no traceback and nothing started."""
    raise SystemExit(130 if signum == signal.SIGINT else 0)


_BEFORE: dict[int, object] = {}
if threading.current_thread() is threading.main_thread():
    for _sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(_sig) is not signal.SIG_IGN:  # an ignored signal stays ignored (nohup, &)
            _BEFORE[_sig] = signal.signal(_sig, _stopped_while_starting)

# The imports below come after those handlers (E402): they take a second or more.
import importlib
import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from replimon.cli_dashboards import dashboards_app
from replimon.config import ConfigError, load_settings
from replimon.console import (
    Terminated,
    build_simulator,
    check_summary,
    err,
    fail,
    inside_run,
    on_sigterm,
    parse_time,
    print_faults,
    publish_live,
    quiet_logs,
    serve,
    sim_options,
    state,
    validate_summary,
)

try:  # typer >= 0.20 vendors click; its exceptions live there
    from typer._click import exceptions as click_exc
except ImportError:  # pragma: no cover - older typer on plain click
    from click import exceptions as click_exc  # type: ignore[no-redef]

app = typer.Typer(
    name="replimon",
    help="Live safety and liveness monitoring for replicated database groups.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def _root(
    config: Annotated[
        str | None,
        typer.Option("--config", "-c", envvar="REPLIMON_CONFIG", help="YAML config file [env REPLIMON_CONFIG; default conf/replimon.yaml]"),
    ] = None,
) -> None:
    state.config_path = config


# ------------------------------------------------------------------------------- simulate
@app.command()
def simulate(
    seed: Annotated[int | None, typer.Option(help="RNG seed [config simulator.seed]")] = None,
    groups: Annotated[int | None, typer.Option(min=1, help="groups [config simulator.groups]")] = None,
    nodes: Annotated[int | None, typer.Option(min=1, max=9, help="nodes per group [config simulator.nodes]")] = None,
    duration: Annotated[str, typer.Option(help="simulated time, e.g. 30s, 5m; 0 = until Ctrl-C (with --kafka)")] = "30s",
    rate: Annotated[float | None, typer.Option(min=0.001, help="decisions per second per group [config simulator.decisions_per_s]")] = None,
    out: Annotated[str | None, typer.Option("--out", "-o", help="write JSONL here ('-' = stdout)")] = None,
    kafka: Annotated[bool, typer.Option("--kafka", help="publish to Kafka (kafka.bootstrap_servers) in real time")] = False,
    inject: Annotated[list[str] | None, typer.Option("--inject", "-i", help="fault NAME[:GROUP][@TIME], repeatable (see --list-faults)")] = None,
    start: Annotated[str | None, typer.Option(help="event time of t=0: ISO-8601 or epoch ms [default 2026-01-01T00:00:00Z for files, now for --kafka]")] = None,
    manifest: Annotated[str | None, typer.Option(help="write the injected faults (JSON) here [default OUT.faults.json]")] = None,
    list_faults: Annotated[bool, typer.Option("--list-faults", help="print the fault catalogue and exit")] = False,
    family: Annotated[str, typer.Option(help="protocol family: xcom, gen (generations, Postgres multimaster), qlog (quorum-log reconfiguration) or chain (chain replication views)")] = "xcom",
) -> None:
    """Simulate a fleet of XCom (or generations, quorum-log or chain) groups; write contract-v1 events to JSONL or Kafka."""
    modules = {"xcom": "simulator", "gen": "simulator_gen", "qlog": "simulator_qlog", "chain": "simulator_chain"}
    if family not in modules:
        raise fail(f"simulate: --family must be xcom, gen, qlog or chain, not {family!r}")
    sim_module = importlib.import_module("replimon.producers." + modules[family])
    from replimon.producers.simulator import DEFAULT_START_MS, JsonlSink, parse_duration_ms

    CATALOGUE, Simulator, parse_injection = sim_module.CATALOGUE, sim_module.Simulator, sim_module.parse_injection
    if list_faults:
        print_faults(CATALOGUE)
        return
    if (out is None) == (not kafka):
        raise fail("simulate: give exactly one of --out FILE or --kafka")
    try:
        duration_ms = parse_duration_ms(duration)
        injections = [parse_injection(text) for text in inject or []]
        start_ms = parse_time(start) if start else (int(time.time() * 1000) if kafka else DEFAULT_START_MS)
    except ValueError as exc:
        raise fail(f"simulate: {exc}") from None
    if duration_ms <= 0 and not kafka:
        raise fail("simulate: --duration must be positive when writing a file")
    inside_run("simulate", injections, duration_ms, duration)
    settings = state.settings()
    options = sim_options(family, settings, seed=seed, groups=groups, nodes=nodes, rate=rate,
                          duration_ms=duration_ms, start_ms=start_ms)
    code = 0
    if kafka:
        code, summary = publish_live(settings, lambda send: build_simulator(Simulator, options, injections, send))
    else:
        assert out is not None
        build_simulator(Simulator, options, injections, None)  # validate before touching OUT
        sink = JsonlSink(out)
        sim = Simulator(options, injections, sink)  # a simulator may emit as it is built
        try:
            summary = sim.run()
        finally:
            sink.close()
        err.print(f"wrote {summary.events} events ({summary.duration_ms / 1000:.1f} s simulated) to {out}")
    path = manifest or (f"{out}.faults.json" if out and out != "-" else None)
    if path and summary.faults:
        Path(path).write_text(json.dumps(summary.faults, indent=2) + "\n", encoding="utf-8")
        err.print(f"injected faults listed in {path}")
    if kafka and code:
        raise typer.Exit(code)


# ------------------------------------------------------------------------ embedded servers
@app.command()
def broker(
    partitions: Annotated[int | None, typer.Option(min=1, help="partitions per topic [config kafka.partitions]")] = None,
    port: Annotated[int | None, typer.Option(min=1, max=65535, help="listen on this port (default: a free one); the same port after a restart keeps clients' configuration valid")] = None,
) -> None:
    """Run the embedded Kafka-compatible broker (Tansu) with replimon's topics until Ctrl-C.

    Its storage is memory only: a broker stopped and started again (on the same --port) comes
    back empty, with the topics created again (docs/operations.md, "Rehearsing an outage")."""
    from replimon.embedded import EmbeddedBroker

    settings = state.settings()
    on_sigterm()
    with EmbeddedBroker(port=port) as b:
        b.create_topics(list(settings.kafka.topics.all), partitions or settings.kafka.partitions)
        print(f"REPLIMON_KAFKA__BOOTSTRAP_SERVERS={b.bootstrap_servers}", flush=True)
        err.print("broker ready; Ctrl-C stops it")
        code = serve(b, "broker", lambda: "the broker")
    raise typer.Exit(code)


@app.command()
def db(
    port: Annotated[int | None, typer.Option(min=1, max=65535, help="listen on this port (default: a free one)")] = None,
    data_dir: Annotated[str | None, typer.Option("--data-dir", help="keep the database here, across restarts (default: a temporary directory, deleted when it stops)")] = None,
) -> None:
    """Run the embedded PostgreSQL until Ctrl-C (exit 1 if the server dies on its own)."""
    from replimon.embedded import EmbeddedPostgres

    on_sigterm()
    with EmbeddedPostgres(data_dir, port=port) as pg:
        print(f"REPLIMON_POSTGRES__DSN={pg.dsn}", flush=True)
        err.print("PostgreSQL ready" + (f" (data in {data_dir})" if data_dir else "") + "; Ctrl-C stops it")

        def what() -> str:
            # A temporary data directory goes with the server: its log's last line, not its name.
            if data_dir:
                return f"PostgreSQL (log: {pg.log_path})"
            return f"PostgreSQL (its log's last line: {last_line(pg.log_path)})"

        code = serve(pg, "db", what)
    raise typer.Exit(code)


def last_line(path: Path) -> str:
    """The last non-empty line of a text file, '-' when there is none."""
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines()]
    except OSError:
        return "-"
    return next((line for line in reversed(lines) if line), "-")[:300]


@app.command()
def demo(
    duration: Annotated[str, typer.Option(help="how long to run, e.g. 2m; 0 = until Ctrl-C")] = "0",
    groups: Annotated[int, typer.Option(min=1, help="XCom groups in the demo fleet (g1, g2, ...)")] = 6,
    nodes: Annotated[int, typer.Option(min=1, max=9, help="nodes per group")] = 3,
    inject: Annotated[list[str] | None, typer.Option("--inject", "-i", help="faults to inject, of any family's catalogue (default: a few of each)")] = None,
    plain: Annotated[bool, typer.Option("--plain", help="print a line every few seconds instead of a live table")] = False,
    job: Annotated[bool, typer.Option("--job/--no-job", help="run the Spark monitoring job (default) or only publish")] = True,
    families: Annotated[str, typer.Option(help="the fleet's protocol families, comma-separated: xcom, gen, qlog, chain")] = "xcom,gen,qlog,chain",
    gen_groups: Annotated[int, typer.Option(min=1, help="generations groups in the demo fleet (pg1, pg2, ...)")] = 3,
    qlog_groups: Annotated[int, typer.Option(min=1, help="quorum-log groups in the demo fleet (ql1, ql2, ...)")] = 3,
    chain_groups: Annotated[int, typer.Option(min=1, help="chain replication groups in the demo fleet (ch1, ch2, ...)")] = 3,
) -> None:
    """The embedded default: broker, PostgreSQL, a mixed fleet (XCom, generations, quorum-log and
    chain groups), the Spark job and a live view."""
    from replimon.demo import plan_demo, run_demo

    settings = state.settings()
    try:
        plan = plan_demo(settings, families=families, groups=groups, gen_groups=gen_groups, nodes=nodes,
                         duration=duration, inject=inject, qlog_groups=qlog_groups, chain_groups=chain_groups)
    except ValueError as exc:
        raise fail(f"demo: {exc}") from None
    run_demo(settings, plan, plain=plain, with_job=job)


# ------------------------------------------------------------------------------ utilities
@app.command()
def schema(
    check: Annotated[bool, typer.Option("--check", help="exit 1 if the checked-in schema is stale")] = False,
    write: Annotated[bool, typer.Option("--write", help="regenerate replimon/contract/event-v1.schema.json")] = False,
) -> None:
    """Print (or check, or regenerate) the JSON Schema of event contract v1."""
    from replimon.contract.parse import SCHEMA_PATH, json_schema, write_json_schema

    text = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    if write:
        err.print(f"wrote {write_json_schema()}")
    elif check:
        current = SCHEMA_PATH.read_text(encoding="utf-8") if SCHEMA_PATH.exists() else ""
        if current != text:
            err.print(f"{SCHEMA_PATH} is stale: run `replimon schema --write`")
            raise typer.Exit(1)
        err.print("schema is up to date")
    else:
        sys.stdout.write(text)


# ------------------------------------------------------------------------------------ run
@app.command("run")
def run_job(
    replay: Annotated[bool, typer.Option("--replay", help="read what the topics hold now (availableNow, event time) and stop")] = False,
    run_id: Annotated[str, typer.Option("--run-id", help="rows in PostgreSQL are keyed by it ('live' for the live job)")] = "live",
    starting: Annotated[str, typer.Option(help="startingOffsets for a new checkpoint: earliest, latest or Spark's JSON")] = "earliest",
    checkpoint: Annotated[str | None, typer.Option(help="checkpoint directory [default paths.checkpoint_dir/RUN_ID]")] = None,
    api: Annotated[str, typer.Option(help="transformWithState API: pandas (default, measured faster) or row")] = "pandas",
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="also log what Py4J, Great Expectations and other libraries say")] = False,
) -> None:
    """Run the Spark monitoring job against kafka.bootstrap_servers and postgres.dsn.

    Ctrl-C (or SIGTERM) lets the running micro-batch finish and stops: exit 130 after Ctrl-C, 0
    after SIGTERM or when a --replay consumed its input; 1 when the broker is unreachable at start
    or the query failed (one line; the whole trace in the log file it names, and on stderr with
    --verbose); 2 for a wrong flag or config value (docs/operations.md). PostgreSQL may be down:
    the job starts without it and writes its rows when it answers."""
    from replimon.preflight import CONFIG, Unavailable, check_kafka, check_postgres

    on_sigterm()  # until the job's own handlers: SIGTERM during the checks is a clean stop
    if api not in ("row", "pandas"):
        raise fail(f"run: --api must be row or pandas (got {api!r})")
    settings = state.settings()
    quiet_logs(verbose)
    try:
        try:
            check_postgres(settings.postgres.dsn)
        except Unavailable as exc:
            if exc.exit_code == CONFIG:
                raise
            err.print(f"replimon: run: {exc}; starting without it (alerts go to Kafka, the tables' rows "
                      "wait in a backlog until it answers)", highlight=False, markup=False, soft_wrap=True)
        check_kafka(settings.kafka.bootstrap_servers, settings.kafka.topics.inputs)
    except Unavailable as exc:
        err.print(f"replimon: run: {exc}", highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(exc.exit_code) from None
    from replimon.streaming.runner import QueryFailed, StopRequested, run

    try:
        code = run(settings, run_id=run_id, replay=replay, api=api, starting=starting, checkpoint=checkpoint)
    except StopRequested as stopped:
        err.print("replimon: run: stopped while starting", highlight=False, markup=False)
        raise typer.Exit(stopped.code) from None
    except QueryFailed as exc:
        where = failure_log(settings, run_id, exc.trace)
        if verbose:
            err.print(exc.trace, highlight=False, markup=False, soft_wrap=True)
        err.print(f"replimon: run: {exc}" + (f" (the whole trace: {where})" if where else ""),
                  highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(1) from None
    raise typer.Exit(code)


def failure_log(settings: Any, run_id: str, trace: str) -> Path | None:
    """Append a failed query's whole trace to ``<paths.data_dir>/logs/run-RUN_ID.log``; the file,
    or None when it cannot be written."""
    from datetime import UTC, datetime

    path = Path(settings.paths.data_dir) / "logs" / f"run-{run_id}.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"--- {datetime.now(UTC).isoformat(timespec='seconds')} the streaming query failed\n")
            f.write(trace.rstrip() + "\n")
    except OSError:
        return None
    return path


# --------------------------------------------------------------------------------- replay
@app.command()
def replay(
    from_: Annotated[str, typer.Option("--from", help="window start: ISO-8601 with a time zone, or epoch ms (record timestamps = event times)", show_default=False)],
    to: Annotated[str, typer.Option("--to", help="window end (exclusive), same forms", show_default=False)],
    groups: Annotated[str | None, typer.Option(help="only these groups, comma-separated [default: all]")] = None,
    state_from: Annotated[str, typer.Option("--state", help="group state at --from: checkpoint (the latest checkpoint record in monitor.state before it) or earliest (read everything Kafka holds before it)")] = "checkpoint",
    run_id: Annotated[str | None, typer.Option("--run-id", help="the run's id in PostgreSQL [default: replay-<time>-<random>]")] = None,
    api: Annotated[str, typer.Option(help="transformWithState API of the stream engine: pandas or row")] = "pandas",
    engine: Annotated[str, typer.Option(help="batch (a bounded Spark batch job over the offset range) or stream (the monitoring query itself); the same rows (docs/replay.md)")] = "batch",
) -> None:
    """Replay what the replica topics hold between two times through the monitoring job, into
    PostgreSQL under a new run id (live results are never touched); ends when the window is done.
    Then: replimon report RUN_ID, replimon diff live RUN_ID."""
    import logging

    from replimon.replay import iso
    from replimon.replay.window import ReplayError
    from replimon.streaming.replay import replay as run_replay

    if api not in ("row", "pandas"):
        raise fail(f"replay: --api must be row or pandas (got {api!r})")
    if engine not in ("batch", "stream"):
        raise fail(f"replay: --engine must be batch or stream (got {engine!r})")
    try:
        from_ms = parse_time(from_, "--from")
        to_ms = parse_time(to, "--to")
    except ValueError as exc:
        raise fail(f"replay: {exc}") from None
    names = [g.strip() for g in groups.split(",") if g.strip()] if groups else None
    settings = state.settings()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    command = ["replimon", "replay", "--from", iso(from_ms), "--to", iso(to_ms), "--state", state_from,
               "--engine", engine]
    if names:
        command += ["--groups", ",".join(names)]
    # The bar appears once the window is planned (a refused window prints its one line only).
    bar = Progress(TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TextColumn("records"),
                   TimeElapsedColumn(), console=err)
    task = bar.add_task("replay", total=None, start=False)

    def progress(read: int, total: int) -> None:
        if not bar.live.is_started:
            bar.start()
            bar.start_task(task)
        bar.update(task, completed=read, total=total)

    try:
        result = run_replay(settings, from_ms, to_ms, groups=names, state_from=state_from, run_id=run_id,
                            api=api, command=command, progress=progress, engine=engine)
    except ReplayError as exc:
        raise fail(f"replay: {exc}") from None
    finally:
        bar.stop()
    started = len(result.start.checkpoints)
    err.print(f"run {result.run_id}: {result.records_read} records read in {result.seconds:.1f} s, "
              f"{result.alerts} alert rows; {started} group(s) started from checkpoint records",
              highlight=False, markup=False)
    print(result.run_id)


@app.command()
def report(
    run_id: Annotated[str, typer.Argument(help="a replay's run id, or live", show_default=False)],
    out: Annotated[str | None, typer.Option("--out", "-o", help="the HTML file [default report-RUN_ID.html]")] = None,
    markdown: Annotated[str | None, typer.Option(help="also write a Markdown summary here [default: beside the HTML, .md]")] = None,
) -> None:
    """Write a self-contained HTML postmortem report of a run (and a Markdown summary)."""
    from replimon.replay.report import write_report
    from replimon.replay.report_events import EventSource

    html_path = Path(out or f"report-{run_id}.html")
    md_path = Path(markdown) if markdown else html_path.with_suffix(".md")
    try:
        write_report(state.settings().postgres.dsn, run_id, html_path, md_path, events=EventSource.from_settings(state.settings()))
    except ValueError as exc:
        raise fail(f"report: {exc}") from None
    err.print(f"wrote {html_path} and {md_path}", highlight=False, markup=False)


@app.command()
def diff(
    run_a: Annotated[str, typer.Argument(help="a run id, or live", show_default=False)],
    run_b: Annotated[str, typer.Argument(help="a run id, or live", show_default=False)],
    from_: Annotated[str | None, typer.Option("--from", help="compare only alerts with event times from here (ISO-8601 or epoch ms)")] = None,
    to: Annotated[str | None, typer.Option("--to", help="... up to here (exclusive)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the difference as JSON")] = False,
) -> None:
    """Compare two runs' alerts and group states; exit 0 when they agree, 1 when they differ."""
    from replimon.replay.diff import diff_runs

    window = None
    try:
        if from_ is not None or to is not None:
            window = (parse_time(from_, "--from") if from_ else 0,
                      parse_time(to, "--to") if to else 10**13)
        result = diff_runs(state.settings().postgres.dsn, run_a, run_b, window=window)
    except ValueError as exc:
        raise fail(f"diff: {exc}") from None
    if as_json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        for line in result.lines():
            print(line)
    raise typer.Exit(0 if result.same else 1)


# ---------------------------------------------------------------------------------- check
@app.command()
def check(
    files: Annotated[list[str], typer.Argument(help="JSONL files of contract-v1 events, read in order; - reads stdin", show_default=False)],
    config: Annotated[str | None, typer.Option("--config", "-c", help="YAML config file (thresholds); overrides the global --config")] = None,
    fail_on: Annotated[str, typer.Option(help="exit 1 when this fired: critical (any critical alert, a violation or a wedge), violation (a critical violation only), warning, never")] = "critical",
    min_severity: Annotated[str, typer.Option(help="print alerts of at least this severity: info, warning, critical")] = "info",
    sort_by_time: Annotated[bool, typer.Option("--sort-by-time", help="order events by ts_ms first (for captures of the four topics in separate files)")] = False,
) -> None:
    """Run the monitor's rules over captured events; one JSON alert per line on stdout.

    Exit status: 0 when nothing in --fail-on fired, 1 when it did, 2 on a usage or unreadable-input
    error or when the input held no valid event at all (nothing was checked). Bad lines are
    reported with their line numbers on stderr and never stop the run.
    """
    from replimon.check import FAIL_ON, SEVERITY_RANK, read_lines
    from replimon.check import check as run_check
    from replimon.core.limits import Limits

    if fail_on not in FAIL_ON:
        raise fail(f"check: --fail-on must be one of {', '.join(FAIL_ON)} (got {fail_on!r})")
    if min_severity not in SEVERITY_RANK:
        raise fail(f"check: --min-severity must be one of info, warning, critical (got {min_severity!r})")
    settings = load_settings(config) if config is not None else state.settings()
    limits = Limits.from_settings(settings)
    streams = []
    for name in files:
        if name == "-":
            streams.append(("<stdin>", sys.stdin.buffer))
            continue
        try:
            streams.append((name, open(name, "rb")))  # noqa: SIM115 - closed below
        except OSError as exc:
            raise fail(f"check: cannot read {name}: {exc.strerror or exc}") from None
    floor = SEVERITY_RANK[min_severity]
    out = sys.stdout

    def show(alert: Any) -> None:
        if SEVERITY_RANK[alert.severity] >= floor:
            out.write(json.dumps(alert.to_dict(), separators=(",", ":")) + "\n")

    def lines() -> Any:
        for name, stream in streams:
            try:
                yield from read_lines(name, stream)
            except OSError as exc:
                raise fail(f"check: cannot read {name}: {exc.strerror or exc}") from None

    started = time.perf_counter()
    try:
        result = run_check(lines(), limits, sort_by_time=sort_by_time, on_alert=show,
                           pins=settings.family_pins)
    finally:
        for name, stream in streams:
            if name != "<stdin>":
                stream.close()
    out.flush()
    if result.events == 0:
        # Nothing was checked: "ok" would pass a CI job on an empty or unreadable capture.
        first = f"; first: {result.bad[0].source}:{result.bad[0].line}: {result.bad[0].reason}" if result.bad else ""
        raise fail(f"check: no valid event in the input ({len(result.bad)} bad line(s){first})")
    failed = result.failed(fail_on)
    check_summary(result, time.perf_counter() - started, failed, fail_on)
    raise typer.Exit(1 if failed else 0)


# ------------------------------------------------------------------------------- validate
@app.command()
def validate(
    files: Annotated[list[str] | None, typer.Argument(help="JSONL files of contract-v1 events (one per line, in arrival order)", show_default=False)] = None,
    from_: Annotated[str | None, typer.Option("--from", help="instead of files: a window of the replica topics from here (ISO-8601 with a time zone, or epoch ms; record times)", show_default=False)] = None,
    to: Annotated[str | None, typer.Option("--to", help="... to here (exclusive)", show_default=False)] = None,
    docs: Annotated[str | None, typer.Option("--docs", help="write Great Expectations data docs (HTML) into this folder")] = None,
    max_records: Annotated[int, typer.Option("--max-records", min=1, help="window: validate at most this many records (whole groups)")] = 1_000_000,
) -> None:
    """Validate events with the data-quality suites (docs/quality.md): the input topics' suites on
    the events, the output suites on what the monitor says about them.

    Exit status: 0 when every expectation passed, 1 when one failed, 2 on a usage error or an
    input that cannot be read."""
    from replimon.quality.command import ValidateError, validate_files, validate_window

    if bool(files) == (from_ is not None or to is not None):
        raise fail("validate: give JSONL files, or --from and --to (not both)")
    if not files and (from_ is None or to is None):
        raise fail("validate: a window needs both --from and --to")
    settings = state.settings()
    folder = Path(docs) if docs else None
    try:
        if files:
            result = validate_files(settings, files, docs=folder)
        else:
            assert from_ is not None and to is not None
            result = validate_window(settings, parse_time(from_, "--from"), parse_time(to, "--to"),
                                     docs=folder, max_records=max_records)
    except (ValidateError, ValueError, OSError) as exc:
        raise fail(f"validate: {exc}") from None
    validate_summary(result)
    raise typer.Exit(1 if result.failed else 0)


app.add_typer(dashboards_app, name="dashboards")


@app.command("config")
def show_config() -> None:
    """Print the effective configuration (file, environment and defaults merged) as JSON."""
    print(state.settings().model_dump_json(indent=2))


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app; one-line errors for usage and config problems."""
    for sig, before in _BEFORE.items():  # from here on, the commands' own handling
        if signal.getsignal(sig) is _stopped_while_starting:
            signal.signal(sig, before)  # type: ignore[arg-type]
    command = typer.main.get_command(app)
    try:
        result = command.main(args=argv, prog_name="replimon", standalone_mode=False)
    except click_exc.NoArgsIsHelpError as exc:
        err.print(exc.ctx.get_help() if exc.ctx else "", highlight=False, markup=False)
        return 2
    except click_exc.UsageError as exc:
        where = f"{exc.ctx.command_path}: " if exc.ctx and exc.ctx.command_path != "replimon" else ""
        err.print(f"replimon: {where.removeprefix('replimon ')}{exc.format_message()}", highlight=False, markup=False, soft_wrap=True)
        return 2
    except typer.Abort:  # click's form of Ctrl-C
        err.print("replimon: interrupted", highlight=False, markup=False)
        return 130
    except typer.Exit as exc:
        return int(exc.exit_code)
    except click_exc.ClickException as exc:
        err.print(f"replimon: {exc.format_message()}", highlight=False, markup=False, soft_wrap=True)
        return 2
    except ConfigError as exc:
        err.print(str(exc), highlight=False, markup=False, soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        err.print("replimon: interrupted", highlight=False, markup=False)
        return 130
    except Terminated:  # SIGTERM while a server was starting (on_sigterm): stopped cleanly
        return 0
    except Exception as exc:
        from replimon.preflight import server_error

        line = server_error(exc)
        if line is None:
            raise
        err.print(f"replimon: {line}", highlight=False, markup=False, soft_wrap=True)
        return 1
    return result if isinstance(result, int) else 0


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()
