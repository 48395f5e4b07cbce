"""Benchmark of the whole streaming job: sustained throughput, alert latency, replay throughput.

Run from the repository root with the project's interpreter::

    .venv/bin/python bench/pipeline.py                  # full run: 20 to 40 minutes (bench/README.md)
    .venv/bin/python bench/pipeline.py --quick          # about 2 minutes: smoke run, figures not to quote
    .venv/bin/python bench/pipeline.py --groups 1000 --rates 40000,50000,60000 --repeat 3

The script starts its own embedded broker (Tansu) and PostgreSQL, one Spark session
(``streaming.master``, ``streaming.shuffle_partitions``), and drives the job only through its
public entry point ``replimon.streaming.runner.start_query`` with the real ``BatchWriter`` (Kafka
out and PostgreSQL), plus ``runner.MetricsListener`` as ``replimon run`` has. Every run gets its
own topics (``settings.kafka.partitions`` partitions each), checkpoint and run id.

What it measures, per group count G (``--groups``, default 100 and 1000; 5 nodes a group):

1. **Traces.** Simulator traces whose event rate is set, not hoped for: for each target rate R
   (``--rates``) the tick (100 ms down to 10 ms: a node emits at most one decision and one
   execution event a tick) and ``decisions_per_s`` are found by bisection on short simulations,
   then the trace is generated and its real rate (events per simulated second) is what is
   reported and published. A trace is written to a file as the JSON a message carries, with its
   ``ts_ms`` split out, so a publisher can restamp it without parsing.
2. **Core ceiling** (the baseline of the same run): one thread, the trace of the highest rate
   (first ``--core-events`` events) as message bytes; ``parse_event(raw)`` then
   ``Monitor().process(json.loads(raw))`` per event (what the job does per event, minus Spark,
   Kafka and PostgreSQL), and each of the two alone; median of ``--core-repeat`` repetitions, the
   events out of the garbage collector's reach (``gc.freeze``, as ``bench/core.py``). Pipeline
   rates are also given as a ratio to this chain. Spark runs on 2 cores and the chain on one, so
   the ratio can in principle exceed 1.
3. **Capacity** (a recorded topic read as fast as the job goes): the highest-rate trace's first
   ``--backlog`` simulated seconds are published up front, stamped 10 minutes in the future (so
   processing time never reaches a silence deadline), then the live query (ProcessingTime)
   reads them with ``maxOffsetsPerTrigger = --max-offsets`` and a 1 ms trigger (back to back),
   until ``--steady-batches`` steady batches or the whole backlog. From Spark's progress: the
   first 2 batches with input are warm-up; of the rest, the batches with at least half of
   ``--max-offsets`` rows are steady; capacity = sum(numInputRows) /
   sum(durationMs.triggerExecution) over the steady batches (and the median batch figures).
4. **Replay** over the same recorded topic: ``availableNow`` in event time (``REPLAY``), the
   settings' ``max_offsets_per_trigger``; events/s = events / wall time from ``start_query`` to
   the query's end (whole replay, query start included), and rows / sum of batch times.
5. **Sustained at rate R** (live, ProcessingTime, ``--trigger`` s): the query is started and fed
   a small warm-up trace (20 other groups, stamped now; their batch is not measured); then a
   separate publisher process publishes the rate-R trace paced in real time (tick by tick), each
   event's ``ts_ms`` shifted by one constant so simulated time 0 is the wall clock at the start
   (relative order and node clock offsets kept). The first ``--warmup`` s are not measured; the
   window is the next ``--duration`` s. The trace carries ``--faults`` injected faults
   (``beyond_horizon``, ``divergent_decision``, ``execution_regression`` in turn, each in its own
   group, evenly over the window), each raising its alert at once. Figures over the batches that
   start in the window:
   - published rate = events the publisher handed to Kafka in the window / window;
     processed rate = input rows of the window's batches / window;
   - batch duration = ``durationMs.triggerExecution`` (median, p90, max);
   - backlog after a batch = events published by the batch's end - events read so far;
   - **keeps up** = processed >= 95% of published, the backlog after the window's last batch is
     at most one trigger's worth of events above the one after its first batch, and the median
     and the p90 batch duration are <= the trigger interval;
   - **alert latency** = ``alerts.inserted_at`` (PostgreSQL ``now()``: the start of the batch's
     write transaction) - ``alerts.event_ts`` (the restamped ``ts_ms`` of the event the alert is
     about), over the alert rows of the injected faults (their group and kind): p50, p99 (nearest
     rank), max; "visible" is the same to the moment the batch's commit returned (a writer
     observer in this process). In live mode an alert's ``detected_ts`` is the processing time of
     the micro-batch that read the event (its trigger time), so the latency splits into
     ``detected - event`` (waiting for a batch to start) and ``inserted - detected`` (that batch
     up to its PostgreSQL write); both are reported. Alerts of other kinds (not info) in other
     groups are counted: under overload they show up as false NODE_SILENT / EVENTS_LOST;
   - CPU: processor time of this process tree between the window's ends (from /proc), split into
     the driver (this process: foreachBatch, PostgreSQL client), the Spark JVM, Spark's Python
     workers (source, validation, the stateful monitor), the broker, PostgreSQL and the publisher,
     and the machine's busy time (others = machine - ours).
   Rates run in the order given; after the first rate not kept up, higher ones are skipped unless
   ``--all-rates``. The highest rate kept up is reported, with its latency.
6. **Batch cost**: a least-squares line ``batch ms = fixed + per_event * rows`` over the steady
   capacity batches and the sustained runs' batches of a group count. The fixed part is what a
   micro-batch costs whatever it carries (it alone caps the live rate when it nears the trigger
   interval); ``1 / per_event`` is the rate no batch size can beat.

Timing on a shared machine: a warning is printed when the 1-minute load average exceeds 1.5 at
the start; the load at start and end and the other processes' CPU share are in the JSON. Figures
from a loaded machine measure the machine, not the job.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import math
import multiprocessing as mp
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from report import render_tables  # bench/report.py (the scripts run from bench/)

from replimon.contract import parse_event
from replimon.core import Monitor
from replimon.producers.simulator import Injection, SimOptions, Simulator

SCHEMA = 1
BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = BENCH_DIR / "results" / "pipeline.json"
TARGET_GROUPS, TARGET_EVENTS_PER_S, TARGET_P99_S = 1000, 50_000, 3.0
FAULTS = ("beyond_horizon", "divergent_decision", "execution_regression")
TICKS_MS = (100, 50, 25, 20, 10)  # the simulator's tick: one decision + one execution per node a tick
WARM_GROUPS, WARM_S = 20, 2
FUTURE_MS = 600_000  # the backlog is stamped this far ahead: no processing-time silence fires
TYPES = ("decision", "execution", "heartbeat", "config")
LOAD_WARNING = 1.5
MIN_STEADY = 3  # steady capacity batches below this: the figure is flagged


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- statistics ----------------------------------------------------------------------------------
def nearest_rank(values: Sequence[float], q: float) -> float:
    """The q-quantile by nearest rank (p99 of 40 values is the 40th smallest: the max)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def spread(values: Sequence[float], digits: int = 1) -> dict[str, Any]:
    if not values:
        return {"n": 0, "median": None, "p90": None, "p99": None, "min": None, "max": None}
    return {"n": len(values), "median": round(statistics.median(values), digits),
            "p90": round(nearest_rank(values, 0.90), digits), "p99": round(nearest_rank(values, 0.99), digits),
            "min": round(min(values), digits), "max": round(max(values), digits)}


def median_or_none(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


# -- traces --------------------------------------------------------------------------------------
@dataclass
class Trace:
    """A simulator trace on disk: ``tick_ms TAB type_index TAB group TAB ts_ms TAB head TAB tail``
    per event, where the message value is ``head + '"ts_ms":' + ts + tail``."""

    path: Path
    groups: int
    nodes: int
    tick_ms: int
    decisions_per_s: float
    seconds: float
    events: int
    start_ms: int
    types: dict[str, int]
    faults: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.events / self.seconds

    def describe(self) -> dict[str, Any]:
        return {"groups": self.groups, "nodes": self.nodes, "tick_ms": self.tick_ms,
                "decisions_per_s": round(self.decisions_per_s, 3), "seconds": self.seconds,
                "events": self.events, "events_per_s": round(self.rate), "types": self.types,
                "faults": len(self.faults)}


def options(groups: int, nodes: int, seconds: float, tick_ms: int, dps: float, seed: int) -> SimOptions:
    return SimOptions(groups=groups, nodes=nodes, seed=seed, duration_ms=int(seconds * 1000),
                      tick_ms=tick_ms, decisions_per_s=dps)


def measured_rate(groups: int, nodes: int, tick_ms: int, dps: float, seed: int, seconds: float = 12.0,
                  skip: float = 4.0) -> float:
    """Events per simulated second per group of a short clean simulation, after its first
    ``skip`` seconds (the boot is busier than the steady state that makes most of a trace)."""
    count = [0]
    holder: list[Simulator] = []
    after = int(skip * 1000)

    def sink(_ev: dict[str, Any]) -> None:
        if holder[0].t >= after:
            count[0] += 1

    holder.append(Simulator(options(groups, nodes, seconds, tick_ms, dps, seed), [], sink))
    holder[0].run()
    return count[0] / (seconds - skip) / groups


def calibrate(groups: int, nodes: int, rate: float, seed: int) -> tuple[int, float]:
    """(tick_ms, decisions_per_s) that make ``groups`` groups emit about ``rate`` events/s.

    Per node and tick the simulator emits at most one decision and one execution event (plus a
    heartbeat a second), so a group's rate saturates near ``2 * nodes * 1000 / tick_ms``: take the
    longest tick that leaves room, then bisect ``decisions_per_s`` (the rate grows with it) on
    short simulations of up to 20 groups (the rate a group emits does not depend on the others)."""
    per_group = rate / groups
    sample = min(groups, 20)
    for tick in TICKS_MS:
        top = 1000 / tick
        if measured_rate(sample, nodes, tick, top * 4, seed) >= per_group * 1.02:
            break
    else:
        raise SystemExit(f"{rate:,.0f} events/s is more than {groups} groups of {nodes} nodes can emit "
                         f"(tick {TICKS_MS[-1]} ms); use more groups")
    lo, hi = 0.05, top * 4
    for _ in range(12):
        mid = (lo + hi) / 2
        got = measured_rate(sample, nodes, tick, mid, seed)
        if abs(got - per_group) <= 0.01 * per_group:
            return tick, mid
        lo, hi = (mid, hi) if got < per_group else (lo, mid)
    return tick, (lo + hi) / 2


def fault_plan(groups: int, count: int, start_s: float, span_s: float) -> list[Injection]:
    """``count`` faults (``FAULTS`` in turn), each in its own group, evenly over the window."""
    count = min(count, groups)
    out = []
    for i in range(count):
        at_ms = int((start_s + (i + 0.5) * span_s / count) * 1000)
        out.append(Injection(FAULTS[i % len(FAULTS)], f"g{1 + (i * groups) // count}", at_ms))
    return out


def split_event(ev: dict[str, Any]) -> tuple[str, str]:
    text = json.dumps(ev, separators=(",", ":"), ensure_ascii=False)
    marker = f'"ts_ms":{ev["ts_ms"]}'
    i = text.index(marker)
    return text[:i], text[i + len(marker):]


def write_trace(path: Path, opts: SimOptions, injections: Sequence[Injection]) -> Trace:
    types: Counter[str] = Counter()
    fh = path.open("w", encoding="utf-8", newline="\n")
    holder: list[Simulator] = []

    def sink(ev: dict[str, Any]) -> None:
        head, tail = split_event(ev)
        types[ev["type"]] += 1
        fh.write(f"{holder[0].t}\t{TYPES.index(ev['type'])}\t{ev['group']}\t{ev['ts_ms']}\t{head}\t{tail}\n")

    sim = Simulator(opts, list(injections), sink)
    holder.append(sim)
    try:
        summary = sim.run()
    finally:
        fh.close()
    return Trace(path=path, groups=opts.groups, nodes=opts.nodes, tick_ms=opts.tick_ms,
                 decisions_per_s=opts.decisions_per_s, seconds=opts.duration_ms / 1000,
                 events=summary.events, start_ms=opts.start_ms, types=dict(sorted(types.items())),
                 faults=summary.faults)


def read_raws(path: Path, limit: int) -> list[bytes]:
    """The first ``limit`` message values of a trace, as recorded (no restamping)."""
    out = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if len(out) >= limit:
                break
            _, _, _, ts, head, tail = line.rstrip("\n").split("\t")
            out.append(f'{head}"ts_ms":{ts}{tail}'.encode())
    return out


def warm_trace(path: Path, nodes: int, seed: int) -> Trace:
    """A few other groups (``warm-g<i>``) for the live query's first batch."""
    opts = options(WARM_GROUPS, nodes, WARM_S, 100, 5.0, seed + 99)
    trace = write_trace(path, opts, [])
    text = path.read_text(encoding="utf-8").replace('"group":"g', '"group":"warm-g').replace("\tg", "\twarm-g")
    path.write_text(text, encoding="utf-8")
    return trace


# -- the publisher (a separate process) ----------------------------------------------------------
def publisher_main(trace_path: str, start_ms: int, bootstrap: str, topics: list[str],
                   producer_conf: dict[str, Any], shift_ms: int | None, paced: bool, until_ms: int,
                   ready: Any, go: Any, stop: Any, t0: Any, out_path: str) -> None:
    """Publish a trace file, key = group, every ``ts_ms`` shifted by ``shift_ms`` (None: so that
    simulated time 0 is the wall clock ``t0``, known only at ``go``); paced (the events of tick
    ``t`` ms go out at wall ``t0 + t``) or as fast as possible; ticks from ``until_ms`` on are left
    out. Writes a JSON report to ``out_path``."""
    from confluent_kafka import Producer

    errors = [0]

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors[0] += 1

    p = Producer({"bootstrap.servers": bootstrap, "client.id": "replimon-bench-publisher",
                  "enable.idempotence": True, "queue.buffering.max.messages": 1_000_000,
                  "delivery.report.only.error": True, **producer_conf})
    produce, poll = p.produce, p.poll
    timeline: list[tuple[float, int]] = []
    lateness: list[float] = []
    sent, tick = 0, -1
    ready.set()
    go.wait()
    start = t0.value
    shift = shift_ms if shift_ms is not None else round(start * 1000) - start_ms
    timeline.append((time.time(), 0))
    with open(trace_path, encoding="utf-8") as fh:
        for line in fh:
            t_s, ti, group, ts, head, tail = line.rstrip("\n").split("\t")
            t = int(t_s)
            if t != tick:
                if t >= until_ms or stop.is_set():
                    break
                poll(0)
                now = time.time()
                timeline.append((now, sent))
                tick = t
                if paced:
                    due = start + t / 1000
                    if due > now:
                        time.sleep(due - now)
                    lateness.append(max(0.0, time.time() - due))
            value = f'{head}"ts_ms":{int(ts) + shift}{tail}'.encode()
            while True:
                try:
                    produce(topics[int(ti)], value, group.encode(), on_delivery=delivered)
                    break
                except BufferError:
                    poll(0.05)
            sent += 1
    timeline.append((time.time(), sent))
    left = p.flush(120)
    report = {"produced": sent, "not_delivered": left + errors[0], "ended": time.time(),
              "lateness_ms": spread([x * 1000 for x in lateness], 1) if lateness else None,
              "timeline": timeline}
    Path(out_path).write_text(json.dumps(report), encoding="utf-8")


class Publisher:
    """The publisher process: ``start`` spawns it, ``go`` releases it at a wall-clock time."""

    def __init__(self, trace: Trace, bootstrap: str, topics: list[str], producer_conf: dict[str, Any],
                 shift_ms: int | None, *, paced: bool, until_ms: int, workdir: Path) -> None:
        ctx = mp.get_context("spawn")  # never fork a process that holds a JVM gateway
        self.ready, self.go_event, self.stop = ctx.Event(), ctx.Event(), ctx.Event()
        self.t0 = ctx.Value("d", 0.0)
        self.out = workdir / f"publisher-{uuid.uuid4().hex[:8]}.json"
        self.proc = ctx.Process(target=publisher_main, daemon=True, args=(
            str(trace.path), trace.start_ms, bootstrap, topics, producer_conf, shift_ms, paced, until_ms, self.ready,
            self.go_event, self.stop, self.t0, str(self.out)))

    def start(self, timeout: float = 120.0) -> None:
        self.proc.start()
        if not self.ready.wait(timeout):
            raise RuntimeError("the publisher process did not start")

    @property
    def pid(self) -> int | None:
        return self.proc.pid

    def go(self, at: float) -> None:
        self.t0.value = at
        self.go_event.set()

    def join(self, timeout: float) -> dict[str, Any]:
        self.proc.join(timeout)
        if self.proc.is_alive():
            self.stop.set()
            self.proc.join(180)
        if self.proc.exitcode != 0 or not self.out.exists():
            raise RuntimeError(f"the publisher failed (exit code {self.proc.exitcode})")
        return dict(json.loads(self.out.read_text(encoding="utf-8")))


def published_at(timeline: Sequence[Sequence[float]], wall: float) -> int:
    """Events the publisher had handed to Kafka at ``wall`` (its timeline is a step function)."""
    walls = [w for w, _ in timeline]
    i = bisect_right(walls, wall) - 1
    return int(timeline[i][1]) if i >= 0 else 0


# -- core ceiling --------------------------------------------------------------------------------
def core_ceiling(raws: list[bytes], repeat: int) -> dict[str, Any]:
    """Events/s on one thread: parse_event, Monitor.process, and both per event (the chain)."""
    loads = json.loads
    events = [loads(r) for r in raws]
    n = len(raws)
    rates: dict[str, list[float]] = {"chain": [], "monitor": [], "parse_event": []}
    gc.collect()
    gc.freeze()
    try:
        for _ in range(repeat):
            process = Monitor().process
            gc.collect()
            t = time.perf_counter()
            for raw in raws:
                parse_event(raw)
                process(loads(raw))
            rates["chain"].append(n / (time.perf_counter() - t))
            process = Monitor().process
            gc.collect()
            t = time.perf_counter()
            for ev in events:
                process(ev)
            rates["monitor"].append(n / (time.perf_counter() - t))
            gc.collect()
            t = time.perf_counter()
            for raw in raws:
                parse_event(raw)
            rates["parse_event"].append(n / (time.perf_counter() - t))
    finally:
        gc.unfreeze()
    return {"events": n, "repeat": repeat,
            "events_per_s": {k: {"median": round(statistics.median(v)), "min": round(min(v)),
                                 "max": round(max(v)), "runs": [round(x) for x in v]} for k, v in rates.items()}}


# -- CPU of the process tree ---------------------------------------------------------------------
CPU_PARTS = ("driver", "jvm", "python_workers", "broker", "postgres", "publisher", "other_ours")
Procs = dict[int, tuple[int, str, str, int, int]]


def _procs() -> Procs:
    """pid -> (ppid, comm, argv[0], own utime+stime, the same + reaped children's), clock ticks."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            argv0 = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        f = stat[stat.rindex(")") + 2:].split()
        own = int(f[11]) + int(f[12])
        out[int(entry)] = (int(f[1]), comm, argv0, own, own + int(f[13]) + int(f[14]))
    return out


def _machine_busy() -> int:
    parts = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(parts) - parts[3] - (parts[4] if len(parts) > 4 else 0)


class CpuMeter:
    """CPU seconds of this process tree by part, and of the whole machine, between two samples.

    A process counts with the time of its children it has reaped (Spark's Python daemon reaps
    its workers), except this process (the driver), which counts its own time only."""

    def __init__(self, publisher_pid: int | None = None) -> None:
        self.publisher_pid = publisher_pid
        self.hz = os.sysconf("SC_CLK_TCK")

    @staticmethod
    def sample() -> tuple[float, Procs, int]:
        return time.time(), _procs(), _machine_busy()

    def part(self, pid: int, procs: Procs) -> str | None:
        me = os.getpid()
        if pid == me:
            return "driver"
        chain, cur = [], pid
        while cur in procs and cur != me and len(chain) < 64:
            chain.append(cur)
            cur = procs[cur][0]
        if cur != me:
            return None  # not ours
        if self.publisher_pid is not None and self.publisher_pid in chain:
            return "publisher"
        _, comm, argv0, _, _ = procs[pid]
        if "tansu" in comm or "tansu" in argv0:
            return "broker"
        if comm.startswith("postgres") or argv0.endswith("/postgres") or argv0.startswith("postgres:"):
            return "postgres"
        if comm == "java":
            return "jvm"
        if any(procs[a][1] == "java" for a in chain[1:]):
            return "python_workers"
        return "other_ours"

    def watch(self, stop: Any, interval: float = 0.5) -> dict[str, set[int]]:
        """Start a thread that notes every process of the tree it sees (by part) until ``stop``
        is set: a part that keeps starting processes (Python workers per task) shows here. Processes
        that live less than ``interval`` may be missed, so the counts are lower bounds."""
        seen: dict[str, set[int]] = {k: set() for k in CPU_PARTS}

        def loop() -> None:
            while not stop.is_set():
                procs = _procs()
                for pid in procs:
                    name = self.part(pid, procs)
                    if name is not None:
                        seen[name].add(pid)
                stop.wait(interval)

        threading.Thread(target=loop, name="bench-proc-watch", daemon=True).start()
        return seen

    def between(self, a: tuple[float, Procs, int], b: tuple[float, Procs, int]) -> dict[str, Any]:
        (wa, pa, ma), (wb, pb, mb) = a, b
        secs = max(wb - wa, 1e-9)
        used = dict.fromkeys(CPU_PARTS, 0.0)
        for pid, entry in pb.items():
            name = self.part(pid, pb)
            if name is None:
                continue
            col = 3 if name == "driver" else 4
            old = pa.get(pid)
            before = old[col] if old is not None and old[1] == entry[1] else 0
            used[name] += max(0, entry[col] - before) / self.hz
        ours = sum(used.values())
        machine = (mb - ma) / self.hz
        return {"seconds": round(secs, 1), "cpus": os.cpu_count(),
                "cores": {k: round(v / secs, 2) for k, v in used.items()},
                "ours": round(ours / secs, 2), "machine": round(machine / secs, 2),
                "others": round(max(0.0, machine - ours) / secs, 2)}


# -- the Spark side ------------------------------------------------------------------------------
def batch_bounds(p: dict[str, Any]) -> tuple[float, float]:
    start = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
    return start, start + p["durationMs"].get("triggerExecution", 0) / 1000


def duration_parts(batches: Sequence[dict[str, Any]]) -> dict[str, float]:
    keys = sorted({k for b in batches for k in b["durationMs"]})
    return {k: statistics.median([b["durationMs"].get(k, 0) for b in batches]) for k in keys}


@dataclass
class Run:
    query: Any
    sink: Any
    listener: Any
    run_id: str
    started: float
    committed: dict[int, tuple[float, int, int]]  # batch id -> (wall after commit, alerts, snapshots)


class Bench:
    """The embedded services, the Spark session and the runs."""

    def __init__(self, args: argparse.Namespace, workdir: Path, broker: Any, pg_dsn: str) -> None:
        from replimon.config import load_settings
        from replimon.store.schema import migrate
        from replimon.streaming.session import get_session

        self.args, self.workdir, self.broker, self.dsn = args, workdir, broker, pg_dsn
        migrate(pg_dsn)
        self.base = load_settings(None, kafka={"bootstrap_servers": broker.bootstrap_servers},
                                  postgres={"dsn": pg_dsn})
        st = self.base.streaming
        self.spark = get_session(st.master, st.shuffle_partitions)
        self.progress: dict[str, list[dict[str, Any]]] = {}
        self.spark.streams.addListener(self._progress_listener())
        self.sink_class = self._timed_sink_class()

    # -- plumbing ----------------------------------------------------------------------------
    def _progress_listener(self) -> Any:
        from pyspark.sql.streaming import StreamingQueryListener

        store = self.progress

        class _Progress(StreamingQueryListener):  # type: ignore[misc]
            def onQueryStarted(self, event: Any) -> None:  # noqa: N802
                pass

            def onQueryProgress(self, event: Any) -> None:  # noqa: N802
                p = json.loads(event.progress.json)
                store.setdefault(str(p["id"]), []).append(p)

            def onQueryIdle(self, event: Any) -> None:  # noqa: N802
                pass

            def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
                pass

        return _Progress()

    @staticmethod
    def _timed_sink_class() -> Any:
        from replimon.streaming.sinks.postgres import PostgresSink

        class TimedSink(PostgresSink):  # type: ignore[misc]
            """The product's sink, timing each batch's write (one transaction)."""

            def __init__(self, *a: Any, **kw: Any) -> None:
                super().__init__(*a, **kw)
                self.write_s: dict[int, float] = {}

            def write_batch(self, batch_id: int, *a: Any, **kw: Any) -> Any:
                t = time.perf_counter()
                try:
                    return super().write_batch(batch_id, *a, **kw)
                finally:
                    self.write_s[batch_id] = time.perf_counter() - t

        return TimedSink

    def settings_for(self, prefix: str) -> Any:
        names = ("decisions", "executions", "heartbeats", "config", "alerts", "state", "dead_letters")
        topics = {n: f"{prefix}{n}" for n in names}
        settings = self.base.model_copy(update={"kafka": self.base.kafka.model_copy(
            update={"topics": self.base.kafka.topics.model_copy(update=topics)})})
        self.broker.create_topics(list(settings.kafka.topics.all), settings.kafka.partitions)
        return settings

    def drop_topics(self, settings: Any) -> None:
        """Free the in-memory broker (best effort: a failure only costs memory)."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.broker.bootstrap_servers})  # alive until done
        try:
            futures = admin.delete_topics(list(settings.kafka.topics.all), request_timeout=30)
            for f in futures.values():
                f.result(timeout=30)
        except Exception as exc:  # noqa: BLE001 - best effort
            log(f"  (could not delete topics: {exc})")
        finally:
            del admin

    def input_topics(self, settings: Any) -> list[str]:
        return [settings.kafka.topics.for_event_type(t) for t in TYPES]

    def producer_conf(self) -> dict[str, Any]:
        p = self.base.kafka.producer
        return {"linger.ms": p.linger_ms, "compression.type": p.compression}

    def publisher(self, trace: Trace, settings: Any, shift_ms: int | None, *, paced: bool,
                  until_ms: int) -> Publisher:
        pub = Publisher(trace, settings.kafka.bootstrap_servers, self.input_topics(settings), self.producer_conf(),
                        shift_ms, paced=paced, until_ms=until_ms, workdir=self.workdir)
        pub.start()
        return pub

    def start(self, settings: Any, run_id: str, **kw: Any) -> Run:
        from replimon.streaming.runner import MetricsListener, start_query

        sink = self.sink_class(settings.postgres.dsn, run_id=run_id)
        listener = MetricsListener(sink).make()
        self.spark.streams.addListener(listener)
        committed: dict[int, tuple[float, int, int]] = {}

        def observe(result: Any) -> None:
            committed[result.batch_id] = (time.time(), len(result.alerts), len(result.snapshots))

        started = time.time()
        query = start_query(self.spark, settings, run_id=run_id, checkpoint=str(self.workdir / "ckpt" / run_id),
                            observers=[observe], pg=sink, kafka_out=True, metrics_listener=False, **kw)
        return Run(query, sink, listener, run_id, started, committed)

    def finish(self, run: Run, timeout: float = 120.0) -> str | None:
        error = None
        try:
            if run.query.isActive:
                run.query.stop()
            run.query.awaitTermination(timeout)
            exc = run.query.exception()
            error = None if exc is None else str(exc)[:2000]
        finally:
            self.spark.streams.removeListener(run.listener)
            run.sink.close()
        return error

    def batches(self, run: Run) -> list[dict[str, Any]]:
        return sorted(self.progress.get(str(run.query.id), []), key=lambda p: p["batchId"])

    def rows_read(self, run: Run) -> int:
        return sum(int(p["numInputRows"]) for p in self.batches(run))

    def wait_rows(self, run: Run, rows: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.rows_read(run) < rows:
            if not run.query.isActive:
                raise RuntimeError(f"the query stopped: {run.query.exception()}")
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
        return True

    def alerts(self, run_id: str) -> list[dict[str, Any]]:
        import psycopg

        cols = ("alert_id", "status", "group_id", "kind", "category", "event_ts", "detected_ts",
                "inserted_at", "batch_id")
        with psycopg.connect(self.dsn) as conn:
            rows = conn.execute(f"SELECT {', '.join(cols)} FROM alerts WHERE run_id = %s", (run_id,)).fetchall()
        return [dict(zip(cols, r, strict=True)) for r in rows]

    def publish_now(self, trace: Trace, settings: Any, shift_ms: int, until_ms: int | None = None) -> dict[str, Any]:
        pub = self.publisher(trace, settings, shift_ms, paced=False,
                             until_ms=until_ms if until_ms is not None else int(trace.seconds * 1000) + 1)
        pub.go(time.time())
        report = pub.join(timeout=3600)
        if report["not_delivered"]:
            raise RuntimeError(f"{report['not_delivered']} events not delivered to the broker")
        return report

    # -- capacity and replay over a recorded topic ---------------------------------------------
    def recorded(self, g: int, trace: Trace) -> dict[str, Any]:
        args = self.args
        settings = self.settings_for(f"bench-{uuid.uuid4().hex[:8]}-")
        backlog_ms = int(args.backlog * 1000)
        shift = int(time.time() * 1000) + FUTURE_MS - trace.start_ms
        t = time.perf_counter()
        report = self.publish_now(trace, settings, shift, backlog_ms)
        total = report["produced"]
        log(f"  recorded topic: {total:,} events ({args.backlog:g} s of the {trace.rate:,.0f} ev/s trace) "
            f"published in {time.perf_counter() - t:.1f} s")
        out: dict[str, Any] = {"events": total, "simulated_s": args.backlog, "max_offsets": args.max_offsets,
                               "capacity": [], "replay": []}
        for rep in range(args.repeat):
            out["capacity"].append(self.capacity(g, settings, total, rep))
            out["replay"].append(self.replay(g, settings, total, rep))
        self.drop_topics(settings)
        return out

    def capacity(self, g: int, settings: Any, total: int, rep: int) -> dict[str, Any]:
        from replimon.streaming.processor import LIVE

        m = self.args.max_offsets
        run = self.start(settings, f"cap-{g}-{rep}-{uuid.uuid4().hex[:6]}", time_mode=LIVE, trigger_s=0.001,
                         max_offsets=m)
        done = False
        enough = 2 + self.args.steady_batches
        deadline = time.monotonic() + self.args.run_timeout
        try:
            while True:  # all of the backlog, or enough full batches
                read = [b for b in self.batches(run) if b["numInputRows"] > 0]
                done = sum(b["numInputRows"] for b in read) >= total
                if done or len([b for b in read[2:] if b["numInputRows"] >= m / 2]) >= self.args.steady_batches \
                        or len(read) >= enough + 2 or time.monotonic() > deadline:
                    break
                if not run.query.isActive:
                    raise RuntimeError(f"the query stopped: {run.query.exception()}")
                time.sleep(0.2)
        finally:
            error = self.finish(run)
        batches = [b for b in self.batches(run) if b["numInputRows"] > 0]
        steady = [b for b in batches[2:] if b["numInputRows"] >= m / 2][:self.args.steady_batches]
        rows = sum(b["numInputRows"] for b in steady)
        ms = sum(b["durationMs"]["triggerExecution"] for b in steady)
        res = {
            "read_all": done, "error": error, "batches_with_input": len(batches), "steady_batches": len(steady),
            "few_steady_batches": len(steady) < MIN_STEADY,
            "rows_read": sum(b["numInputRows"] for b in batches),
            "events_per_s": round(rows / ms * 1000) if ms else None,
            "batch_events_per_s": spread([b["numInputRows"] / b["durationMs"]["triggerExecution"] * 1000
                                          for b in steady], 0),
            "batch_rows_median": statistics.median([b["numInputRows"] for b in steady]) if steady else None,
            "batch_ms": spread([b["durationMs"]["triggerExecution"] for b in steady], 0),
            "duration_parts_ms_median": duration_parts(steady) if steady else {},
            "postgres_write_ms_median": _median_ms([run.sink.write_s.get(b["batchId"]) for b in steady]),
            "snapshots_per_batch_median": median_or_none([run.committed.get(b["batchId"], (0, 0, None))[2]
                                                          for b in steady]),
            "alerts": sum(c[1] for c in run.committed.values()),
            "batches": [[b["batchId"], b["numInputRows"], b["durationMs"]["triggerExecution"]] for b in batches],
        }
        log(f"  capacity ({len(steady)} steady batches of {m:,}"
            f"{', too few: make --backlog longer' if res['few_steady_batches'] else ''}): "
            f"{_fmt(res['events_per_s'])} ev/s, median batch {res['batch_ms']['median']} ms"
            f"{'' if steady else ' (no steady batch)'}")
        return res

    def replay(self, g: int, settings: Any, total: int, rep: int) -> dict[str, Any]:
        from replimon.streaming.processor import REPLAY

        run = self.start(settings, f"replay-{g}-{rep}-{uuid.uuid4().hex[:6]}", time_mode=REPLAY,
                         available_now=True)
        ended = run.query.awaitTermination(self.args.run_timeout)
        wall = time.time() - run.started
        error = self.finish(run)
        batches = [b for b in self.batches(run) if b["numInputRows"] > 0]
        rows = sum(b["numInputRows"] for b in batches)
        ms = sum(b["durationMs"]["triggerExecution"] for b in self.batches(run))
        res = {"completed": bool(ended) and rows >= total, "error": error, "rows_read": rows,
               "batches": len(self.batches(run)), "batches_with_input": len(batches), "wall_s": round(wall, 1),
               "events_per_s_wall": round(rows / wall), "events_per_s_in_batches": round(rows / ms * 1000) if ms else None,
               "batch_ms": spread([b["durationMs"]["triggerExecution"] for b in batches], 0),
               "alerts": sum(c[1] for c in run.committed.values())}
        log(f"  replay (availableNow): {rows:,} events in {wall:.1f} s = {res['events_per_s_wall']:,} ev/s "
            f"({_fmt(res['events_per_s_in_batches'])} ev/s in batches)")
        return res

    # -- sustained, live -------------------------------------------------------------------------
    def sustained(self, g: int, trace: Trace, warm: Trace, rep: int) -> dict[str, Any]:
        from replimon.streaming.processor import LIVE

        args = self.args
        settings = self.settings_for(f"bench-{uuid.uuid4().hex[:8]}-")
        run = self.start(settings, f"live-{g}-{round(trace.rate)}-{rep}-{uuid.uuid4().hex[:6]}", time_mode=LIVE,
                         trigger_s=args.trigger)
        pub: Publisher | None = None
        error: str | None = None
        res: dict[str, Any] = {"target_events_per_s": round(trace.rate), "keeps_up": False}
        try:
            # Warm-up: other groups, stamped now, in the query's first batches (not measured).
            warm_report = self.publish_now(warm, settings, int(time.time() * 1000) - warm.start_ms - WARM_S * 1000)
            warm_rows = warm_report["produced"]
            if not self.wait_rows(run, warm_rows, args.run_timeout):
                raise RuntimeError("the live query did not read the warm-up events")
            seen = len(self.batches(run))
            deadline = time.monotonic() + max(10.0, 5 * args.trigger)
            while len(self.batches(run)) <= seen and time.monotonic() < deadline:
                time.sleep(0.1)  # one more batch (timers, or none): the query is idle and warm
            pub = self.publisher(trace, settings, None, paced=True, until_ms=int(trace.seconds * 1000) + 1)
            t0 = time.time() + 0.5
            pub.go(t0)
            meter = CpuMeter(pub.pid)
            ws, we = t0 + args.warmup, t0 + args.warmup + args.duration
            _sleep_until(ws)
            cpu_a = meter.sample()
            watching = threading.Event()
            seen = meter.watch(watching)
            _sleep_until(we)
            cpu_b = meter.sample()
            watching.set()
            report = pub.join(timeout=600)
            drained = self.wait_rows(run, warm_rows + report["produced"], args.drain_timeout)
            cpu = meter.between(cpu_a, cpu_b)
            at_start = {pid for pid in cpu_a[1] if meter.part(pid, cpu_a[1]) is not None}
            cpu["processes_started_in_window"] = {k: len(v - at_start) for k, v in seen.items() if v - at_start}
            res = self._sustained_figures(run, trace, warm_rows, report, ws, we, drained, cpu)
            if res["batches_in_window"]:
                per = cpu["seconds"] / res["batches_in_window"]
                cpu["cpu_s_per_batch"] = {k: round(v * per, 2) for k, v in cpu["cores"].items()}
        except Exception as exc:  # noqa: BLE001 - reported in the results; the next run goes on
            error = f"{type(exc).__name__}: {exc}"
            log(f"  run failed: {error}")
        finally:
            if pub is not None and pub.proc.is_alive():
                pub.stop.set()
                pub.proc.join(60)
            error = error or self.finish(run)
            self.drop_topics(settings)
        res["error"] = error
        if "batch_ms" in res:
            lat = res["latency_s"]["inserted"]
            log(f"  {res['published_events_per_s']:,} ev/s published, {res['processed_events_per_s']:,} read; "
                f"batch median {res['batch_ms']['median']} ms, p90 {res['batch_ms']['p90']} ms; backlog at the end "
                f"{res['backlog_end_s']} s; keeps up: {res['keeps_up']}; fault alerts {res['fault_alerts']['rows']}, "
                f"latency p50 {lat['median']} s, p99 {lat['p99']} s")
        return res

    def _sustained_figures(self, run: Run, trace: Trace, warm_rows: int, report: dict[str, Any],
                           ws: float, we: float, drained: bool, cpu: dict[str, Any]) -> dict[str, Any]:
        args = self.args
        timeline = report["timeline"]
        batches = self.batches(run)
        cum, points = 0, []  # (batch, start, end, events read so far of the trace, backlog after it)
        for b in batches:
            cum += int(b["numInputRows"])
            start, end = batch_bounds(b)
            read = max(0, cum - warm_rows)
            points.append((b, start, end, read, published_at(timeline, end) - read))
        window = [pt for pt in points if ws <= pt[1] < we]
        secs = we - ws
        published = published_at(timeline, we) - published_at(timeline, ws)
        processed = sum(int(pt[0]["numInputRows"]) for pt in window)
        durations = [pt[0]["durationMs"].get("triggerExecution", 0) for pt in window]
        rate = published / secs if secs else 0.0
        backlog_start = window[0][4] if window else None
        backlog_end = window[-1][4] if window else None
        trigger_ms = args.trigger * 1000
        bms = spread(durations, 0)
        matched = processed >= 0.95 * published if published else False
        bounded = (backlog_end is not None and backlog_start is not None
                   and backlog_end - backlog_start <= rate * args.trigger)
        fast = bool(durations) and bms["median"] <= trigger_ms and bms["p90"] <= trigger_ms
        drain_s = None
        if drained:
            total = warm_rows + report["produced"]
            done = next((pt for pt in points if pt[3] + warm_rows >= total), None)
            drain_s = round(done[2] - report["ended"], 1) if done else None
        figures = self._latency(run, trace)
        return {
            "target_events_per_s": round(trace.rate),
            "trace": trace.describe(),
            "window_s": round(secs, 1), "warmup_s": args.warmup, "trigger_s": args.trigger,
            "published_events_per_s": round(rate), "processed_events_per_s": round(processed / secs) if secs else 0,
            "published_total": report["produced"], "publisher_lateness_ms": report["lateness_ms"],
            "batches_in_window": len(window),
            "batch_ms": bms,
            "batch_rows": spread([pt[0]["numInputRows"] for pt in window], 0),
            "batches": [[pt[0]["batchId"], pt[0]["numInputRows"], pt[0]["durationMs"].get("triggerExecution", 0),
                         pt[4]] for pt in window],  # id, rows, ms, backlog after it
            "duration_parts_ms_median": duration_parts([pt[0] for pt in window]) if window else {},
            "postgres_write_ms_median": _median_ms([run.sink.write_s.get(pt[0]["batchId"]) for pt in window]),
            "backlog_events": {"after_first_window_batch": backlog_start, "after_last_window_batch": backlog_end,
                               "max": max((pt[4] for pt in window), default=None)},
            "backlog_end_s": round(backlog_end / rate, 2) if backlog_end is not None and rate else None,
            "drained": drained, "drain_s_after_publisher_end": drain_s,
            "criteria": {"rate_matched": matched, "backlog_bounded": bounded, "batch_ms_within_trigger": fast},
            "keeps_up": bool(matched and bounded and fast),
            "cpu": cpu,
            **figures,
        }

    def _latency(self, run: Run, trace: Trace) -> dict[str, Any]:
        rows = self.alerts(run.run_id)
        expected = {(f["group"], f["alert"]) for f in trace.faults}
        fault = [r for r in rows if r["status"] == "firing" and (r["group_id"], r["kind"]) in expected]
        def secs(a: datetime, b: datetime) -> float:
            return (a - b).total_seconds()

        inserted = [secs(r["inserted_at"], r["event_ts"]) for r in fault]
        visible = [run.committed[r["batch_id"]][0] - r["event_ts"].timestamp() for r in fault
                   if r["batch_id"] in run.committed]
        waited = [secs(r["detected_ts"], r["event_ts"]) for r in fault]
        batch = [secs(r["inserted_at"], r["detected_ts"]) for r in fault]
        others = Counter(r["kind"] for r in rows if not r["group_id"].startswith("warm-")
                         and r["category"] != "info" and (r["group_id"], r["kind"]) not in expected)
        return {
            "fault_alerts": {"injected": len(trace.faults), "found": len({(r["group_id"], r["kind"]) for r in fault}),
                             "rows": len(fault)},
            "latency_s": {"inserted": spread(inserted, 3), "visible": spread(visible, 3),
                          "event_to_batch": spread(waited, 3), "batch_to_insert": spread(batch, 3)},
            "other_alerts": dict(sorted(others.items())),
            "alert_rows": len(rows),
        }


def _median_ms(values: Sequence[float | None]) -> float | None:
    m = median_or_none(values)
    return None if m is None else round(m * 1000, 1)


def _sleep_until(wall: float) -> None:
    while True:
        left = wall - time.time()
        if left <= 0:
            return
        time.sleep(min(left, 0.5))


def _fmt(x: float | int | None, digits: int = 0) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


# -- one group count -----------------------------------------------------------------------------
def summarize_rate(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the repetitions of one rate; kept up only if every repetition kept up."""
    ok = [r for r in runs if "batch_ms" in r]

    def med(get: Callable[[dict[str, Any]], Any]) -> Any:
        m = median_or_none([get(r) for r in ok])
        return None if m is None else round(m, 3)

    return {
        "target_events_per_s": runs[0]["target_events_per_s"], "repetitions": len(runs), "failed": len(runs) - len(ok),
        "keeps_up": bool(ok) and len(ok) == len(runs) and all(r["keeps_up"] for r in ok),
        "published_events_per_s": med(lambda r: r["published_events_per_s"]),
        "processed_events_per_s": med(lambda r: r["processed_events_per_s"]),
        "batch_ms_median": med(lambda r: r["batch_ms"]["median"]),
        "batch_ms_p90": med(lambda r: r["batch_ms"]["p90"]),
        "batch_ms_max": med(lambda r: r["batch_ms"]["max"]),
        "backlog_end_s": med(lambda r: r["backlog_end_s"]),
        "latency_s_p50": med(lambda r: r["latency_s"]["inserted"]["median"]),
        "latency_s_p99": med(lambda r: r["latency_s"]["inserted"]["p99"]),
        "latency_s_max": med(lambda r: r["latency_s"]["inserted"]["max"]),
        "visible_s_p99": med(lambda r: r["latency_s"]["visible"]["p99"]),
        "fault_alert_rows": med(lambda r: r["fault_alerts"]["rows"]),
    }


def run_groups(g: int, args: argparse.Namespace, workdir: Path, bench: Bench | None) -> dict[str, Any]:
    """Traces, the core ceiling, the recorded-topic runs and the sustained runs for G groups."""
    span = args.warmup + args.duration
    top = max(args.rates)
    traces: dict[int, Trace] = {}
    for rate in args.rates:
        t = time.perf_counter()
        tick, dps = calibrate(g, args.nodes, rate, args.seed)
        seconds = max(span, args.backlog) if rate == top else span
        trace = write_trace(workdir / f"trace-{g}-{rate}.tsv", options(g, args.nodes, seconds, tick, dps, args.seed),
                            fault_plan(g, args.faults, args.warmup, args.duration))
        traces[rate] = trace
        log(f"  trace for {rate:,} ev/s: {trace.rate:,.0f} ev/s simulated (tick {tick} ms, {dps:.2f} decisions/s "
            f"a group), {trace.events:,} events, {len(trace.faults)} faults, in {time.perf_counter() - t:.1f} s")
    raws = read_raws(traces[top].path, args.core_events)
    log(f"  core ceiling: {len(raws):,} events of the {top:,} ev/s trace, {args.core_repeat} repetition(s) ...")
    core = core_ceiling(raws, args.core_repeat)
    del raws
    cm = core["events_per_s"]
    log(f"  core: chain {cm['chain']['median']:,} ev/s, Monitor.process {cm['monitor']['median']:,}, "
        f"parse_event {cm['parse_event']['median']:,}")
    out: dict[str, Any] = {"groups": g, "nodes": args.nodes, "workload": {str(r): t.describe() for r, t in traces.items()},
                           "core": core}
    if bench is None:
        for t in traces.values():
            t.path.unlink(missing_ok=True)
        return out
    warm = warm_trace(workdir / f"warm-{g}.tsv", args.nodes, args.seed)
    out["recorded"] = bench.recorded(g, traces[top])
    rec = out["recorded"]
    out["capacity"] = {"events_per_s": median_or_none([c["events_per_s"] for c in rec["capacity"]]),
                       "batch_ms_median": median_or_none([c["batch_ms"]["median"] for c in rec["capacity"]]),
                       "steady_batches": min(c["steady_batches"] for c in rec["capacity"])}
    out["replay"] = {"events_per_s_wall": median_or_none([r["events_per_s_wall"] for r in rec["replay"]]),
                     "events_per_s_in_batches": median_or_none([r["events_per_s_in_batches"] for r in rec["replay"]])}
    out["sustained"] = []
    failed = False
    for rate in args.rates:
        trace = traces[rate]
        if failed and not args.all_rates:
            out["sustained"].append({"target_events_per_s": round(trace.rate), "skipped": "a lower rate was not kept up"})
            continue
        runs = []
        for rep in range(args.repeat):
            log(f"  sustained {trace.rate:,.0f} ev/s, repetition {rep + 1}/{args.repeat} "
                f"({args.warmup:g} s warm-up + {args.duration:g} s measured) ...")
            runs.append(bench.sustained(g, trace, warm, rep))
        summary = summarize_rate(runs)
        out["sustained"].append({"summary": summary, "runs": runs})
        failed = failed or not summary["keeps_up"]
    points = [(float(rows), float(ms)) for c in rec["capacity"] for _, rows, ms in c["batches"][2:]]
    points += [(float(rows), float(ms)) for s in out["sustained"] for r in s.get("runs", [])
               for _, rows, ms, _ in r.get("batches", []) if rows > 0]
    out["batch_cost"] = batch_cost(points)
    kept = [s["summary"] for s in out["sustained"] if "summary" in s and s["summary"]["keeps_up"]]
    best = max(kept, key=lambda s: s["published_events_per_s"] or 0, default=None)
    out["highest_kept_up"] = best
    chain = cm["chain"]["median"]
    out["ratio_to_core_chain"] = {
        "capacity": _ratio(out["capacity"]["events_per_s"], chain),
        "replay_wall": _ratio(out["replay"]["events_per_s_wall"], chain),
        "sustained_highest_kept_up": _ratio(best["published_events_per_s"] if best else None, chain),
    }
    for t in [*traces.values(), warm]:
        t.path.unlink(missing_ok=True)
    return out


def batch_cost(points: Sequence[tuple[float, float]]) -> dict[str, Any] | None:
    """Least squares ``batch ms = fixed + per_event * rows`` over batches of a group count: the
    fixed part bounds the rate a trigger interval allows, the per-event part the rate at any batch
    size (``1 / per_event``)."""
    if len(points) < 3 or len({x for x, _ in points}) < 2:
        return None
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    fixed = my - slope * mx
    return {"batches": len(points), "rows_range": [min(x for x, _ in points), max(x for x, _ in points)],
            "fixed_ms": round(fixed), "us_per_event": round(slope * 1000, 2),
            "marginal_events_per_s": round(1e6 / (slope * 1000)) if slope > 0 else None}


def _ratio(x: float | None, base: float) -> float | None:
    return None if x is None or not base else round(x / base, 3)


# -- machine and output --------------------------------------------------------------------------
def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(BENCH_DIR.parent), *args], capture_output=True, text=True,
                             timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def sources_digest() -> str:
    """A digest of the sources this process imported (contract, core, streaming)."""
    import replimon.contract
    import replimon.core
    import replimon.streaming

    h = hashlib.sha256()
    for mod in (replimon.contract, replimon.core, replimon.streaming):
        root = Path(mod.__file__).resolve().parent
        for path in sorted(root.rglob("*.py")) + sorted(root.rglob("*.sql")):
            h.update(str(path.relative_to(root.parent)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def load_average() -> list[float] | None:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def machine() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem_gb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        mem_gb = None
    dirty = _git("status", "--porcelain", "--", "replimon", "streaming", "producers")
    return {"cpu_count": os.cpu_count(), "cpus_usable": len(os.sched_getaffinity(0)), "cpu_model": model,
            "memory_gb": mem_gb, "python": platform.python_version(), "platform": platform.platform(),
            "date": datetime.now(UTC).isoformat(timespec="seconds"), "load_average_at_start_1_5_15": load_average(),
            "git_commit": _git("rev-parse", "HEAD"),
            "uncommitted_changes_in_replimon_streaming_producers": None if dirty is None else bool(dirty),
            "sources_sha256_16": sources_digest()}


def tables(res: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """The result as (title, header, rows) tables, for rich or for plain text."""
    per = res["groups"]
    st = res["settings"]
    names = [f"{g['groups']} groups" for g in per]
    work = []
    for g in per:
        for rate, w in g["workload"].items():
            work.append([f"{g['groups']} x {g['nodes']} nodes, target {int(rate):,}",
                         f"{w['events_per_s']:,} ev/s simulated, tick {w['tick_ms']} ms, "
                         f"{w['decisions_per_s']:g} decisions/s a group, {w['seconds']:g} s, {w['events']:,} events, "
                         f"{w['faults']} faults"])
    out = [("Workload (simulator traces)", ["", ""], work)]

    def cell(x: float | None, chain: float) -> str:
        return "-" if x is None else f"{x:,.0f} ({x / chain:.2f}x)"

    thr: list[list[str]] = [
        ["core chain: parse_event + Monitor.process, 1 thread (ceiling)", *[f"{g['core']['events_per_s']['chain']['median']:,}" for g in per]],
        ["  Monitor.process alone", *[f"{g['core']['events_per_s']['monitor']['median']:,}" for g in per]],
        ["  parse_event alone", *[f"{g['core']['events_per_s']['parse_event']['median']:,}" for g in per]],
    ]
    if all("capacity" in g for g in per):
        chains = [g["core"]["events_per_s"]["chain"]["median"] for g in per]
        thr += [
            [f"capacity: live, batches of {st['max_offsets']:,}, back to back (steady batches)",
             *[cell(g["capacity"]["events_per_s"], c) for g, c in zip(per, chains, strict=True)]],
            ["replay: availableNow, whole run incl. start (wall)",
             *[cell(g["replay"]["events_per_s_wall"], c) for g, c in zip(per, chains, strict=True)]],
            ["replay: rows / batch time", *[cell(g["replay"]["events_per_s_in_batches"], c) for g, c in zip(per, chains, strict=True)]],
            [f"sustained: highest rate kept up (trigger {st['trigger_s']:g} s)",
             *[cell(g["highest_kept_up"]["published_events_per_s"] if g["highest_kept_up"] else None, c)
               for g, c in zip(per, chains, strict=True)]],
        ]
    out.append((f"Throughput, events/s (ratio to the core chain); core: median of {st['core_repeat']}",
                ["measure", *names], thr))
    if not all("sustained" in g for g in per):
        return out
    sus = []
    for g in per:
        for s in g["sustained"]:
            if "summary" not in s:
                sus.append([str(g["groups"]), f"{s['target_events_per_s']:,}", "skipped", *[""] * 9])
                continue
            m = s["summary"]
            r0 = next((r for r in s["runs"] if "batch_ms" in r), None)
            faults = f"{r0['fault_alerts']['found']}/{r0['fault_alerts']['injected']}" if r0 else "-"
            other = (", ".join(f"{k} {v}" for k, v in r0["other_alerts"].items()) or "none") if r0 else "-"
            sus.append([str(g["groups"]), f"{m['target_events_per_s']:,}", _fmt(m["published_events_per_s"]),
                        _fmt(m["processed_events_per_s"]),
                        f"{_fmt(m['batch_ms_median'])} / {_fmt(m['batch_ms_p90'])} / {_fmt(m['batch_ms_max'])}",
                        _fmt(m["backlog_end_s"], 1), "yes" if m["keeps_up"] else "NO", faults,
                        f"{_fmt(m['latency_s_p50'], 2)} / {_fmt(m['latency_s_p99'], 2)} / {_fmt(m['latency_s_max'], 2)}",
                        _fmt(m["visible_s_p99"], 2), other])
    out.append((f"Sustained, live (trigger {st['trigger_s']:g} s, {st['duration_s']:g} s measured after "
                f"{st['warmup_s']:g} s; medians of {st['repeat']} run(s))",
                ["groups", "target", "published ev/s", "read ev/s", "batch ms med/p90/max", "backlog end s",
                 "kept up", "faults found", "latency s p50/p99/max", "visible p99 s", "other alerts"], sus))
    where = []
    for g in per:
        fit = g.get("batch_cost")
        if fit:
            over = (f"least squares over {fit['batches']} batches of "
                    f"{fit['rows_range'][0]:,.0f}-{fit['rows_range'][1]:,.0f} rows")
            where.append([f"{g['groups']} groups, batch cost",
                          f"{fit['fixed_ms']:,} ms + {fit['us_per_event']:g} us/event ({over}): at most "
                          f"{_fmt(fit['marginal_events_per_s'])} ev/s at any batch size"
                          if fit["marginal_events_per_s"] else
                          f"about {fit['fixed_ms']:,} ms a batch whatever its rows ({over}): the cost per "
                          "event is lost in the noise"])
        for c in g["recorded"]["capacity"][:1]:
            parts = c["duration_parts_ms_median"]
            where.append([f"{g['groups']} groups, capacity",
                          ", ".join(f"{k} {v:,.0f}" for k, v in parts.items() if k != "triggerExecution")
                          + f"; PostgreSQL write {_fmt(c['postgres_write_ms_median'])} ms; "
                            f"{_fmt(c['snapshots_per_batch_median'])} group snapshots a batch"])
        for s in g["sustained"]:
            for r in s.get("runs", [])[:1]:
                if "cpu" not in r:
                    continue
                cpu = r["cpu"]
                if cpu.get("cpu_s_per_batch"):
                    where.append([f"{g['groups']} groups, {r['target_events_per_s']:,} ev/s, CPU s a batch",
                                  ", ".join(f"{k} {v:g}" for k, v in cpu["cpu_s_per_batch"].items() if v)])
                where.append([f"{g['groups']} groups, {r['target_events_per_s']:,} ev/s",
                              "CPU cores: " + ", ".join(f"{k} {v:g}" for k, v in cpu["cores"].items())
                              + f"; ours {cpu['ours']:g}, machine {cpu['machine']:g} of {cpu['cpus']}, others "
                                f"{cpu['others']:g}; batch ms parts: "
                              + ", ".join(f"{k} {v:,.0f}" for k, v in r["duration_parts_ms_median"].items()
                                          if k != "triggerExecution")
                              + f"; PostgreSQL write {_fmt(r['postgres_write_ms_median'])} ms"
                              + "; processes started in the window (at least): "
                              + (", ".join(f"{k} {v}" for k, v in cpu.get("processes_started_in_window", {}).items())
                                 or "none")
                              + f" in {r['batches_in_window']} batches"])
    out.append(("Where the time goes (medians per batch; CPU over the measured window, first run)", ["", ""], where))
    t = res["targets"]
    if t is not None:
        out.append((f"Targets at {TARGET_GROUPS} groups", ["", ""], [
            [f"sustained >= {TARGET_EVENTS_PER_S:,} ev/s", ("met" if t["rate_met"] else "NOT met")
             + f" (highest kept up: {_fmt(t['highest_kept_up_events_per_s'])} ev/s)"],
            [f"p99 alert latency < {TARGET_P99_S:g} s at that rate", ("met" if t["latency_met"] else "NOT met")
             + f" (p99 {_fmt(t['latency_s_p99'], 2)} s)"],
        ]))
    return out


def render(res: dict[str, Any], stream: Any = None) -> None:
    render_tables(tables(res), stream)


def targets(per: list[dict[str, Any]]) -> dict[str, Any] | None:
    g = next((x for x in per if x["groups"] == TARGET_GROUPS and "highest_kept_up" in x), None)
    if g is None:
        return None
    best = g["highest_kept_up"]
    rate = best["published_events_per_s"] if best else None
    p99 = best["latency_s_p99"] if best else None
    return {"groups": TARGET_GROUPS, "events_per_s": TARGET_EVENTS_PER_S, "p99_s": TARGET_P99_S,
            "highest_kept_up_events_per_s": rate, "latency_s_p99": p99,
            "rate_met": rate is not None and rate >= TARGET_EVENTS_PER_S,
            "latency_met": rate is not None and rate >= TARGET_EVENTS_PER_S and p99 is not None and p99 < TARGET_P99_S}


# -- main ----------------------------------------------------------------------------------------
def _ints(text: str) -> list[int]:
    return [int(float(x)) for x in text.split(",") if x.strip()]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small workload for a smoke run (figures not to quote)")
    p.add_argument("--groups", type=_ints, default=None, help="group counts, comma-separated (default 100,1000; 20 with --quick)")
    p.add_argument("--nodes", type=int, default=5, help="nodes a group (default 5)")
    p.add_argument("--rates", type=_ints, default=None, help="sustained target rates in events/s, ascending (default 10000,25000,50000; 2000 with --quick)")
    p.add_argument("--trigger", type=float, default=None, help="live trigger interval, s (default: streaming.trigger_interval_s)")
    p.add_argument("--duration", type=float, default=None, help="measured seconds of a sustained run (default 60; 8 with --quick)")
    p.add_argument("--warmup", type=float, default=None, help="seconds published before the measured window (default 10; 4 with --quick)")
    p.add_argument("--faults", type=int, default=None, help="faults injected in a sustained run (default 60; 6 with --quick)")
    p.add_argument("--backlog", type=float, default=None, help="simulated seconds of the recorded topic (default 40; 6 with --quick)")
    p.add_argument("--max-offsets", type=int, default=None, help="maxOffsetsPerTrigger of the capacity run (default: streaming.max_offsets_per_trigger; 2000 with --quick)")
    p.add_argument("--steady-batches", type=int, default=6, help="steady batches a capacity run needs before it stops (default 6)")
    p.add_argument("--repeat", type=int, default=1, help="repetitions of each pipeline run; medians are reported (default 1)")
    p.add_argument("--core-events", type=int, default=None, help="events of the core ceiling (default 300000; 20000 with --quick)")
    p.add_argument("--core-repeat", type=int, default=None, help="repetitions of the core ceiling (default 3; 1 with --quick)")
    p.add_argument("--all-rates", action="store_true", help="run every rate even after one was not kept up")
    p.add_argument("--no-spark", action="store_true", help="traces and core ceiling only (no broker, PostgreSQL or Spark)")
    p.add_argument("--drain-timeout", type=float, default=90.0, help="seconds to wait for the job to read the rest after publishing")
    p.add_argument("--run-timeout", type=float, default=900.0, help="limit of one capacity or replay run, s")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON result file (default {DEFAULT_OUT.relative_to(BENCH_DIR.parent)})")
    args = p.parse_args(argv)
    q = args.quick

    def pick(value: Any, full: Any, small: Any) -> Any:
        return value if value is not None else (small if q else full)

    args.groups = pick(args.groups, [100, 1000], [20])
    args.rates = pick(args.rates, [10_000, 25_000, 50_000], [2_000])
    args.duration = pick(args.duration, 60.0, 8.0)
    args.warmup = pick(args.warmup, 10.0, 4.0)
    args.faults = pick(args.faults, 60, 6)
    args.backlog = pick(args.backlog, 40.0, 6.0)
    args.core_events = pick(args.core_events, 300_000, 20_000)
    args.core_repeat = pick(args.core_repeat, 3, 1)
    if q and args.max_offsets is None:
        args.max_offsets = 2_000
    if args.repeat < 1 or args.core_repeat < 1:
        p.error("--repeat and --core-repeat must be at least 1")
    if args.rates != sorted(args.rates):
        p.error("--rates must be ascending")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    host = machine()
    warnings = []
    load = host["load_average_at_start_1_5_15"]
    if load and load[0] > LOAD_WARNING:
        warnings.append(f"load average {load[0]} at the start (> {LOAD_WARNING}): the machine is shared; "
                        "these figures measure the machine as much as the job")
        log(f"WARNING: {warnings[-1]}")
    workdir = Path(tempfile.mkdtemp(prefix="replimon-bench-pipeline-"))
    per: list[dict[str, Any]] = []
    started = time.perf_counter()
    try:
        if args.no_spark:
            from replimon.config import load_settings

            base = load_settings(None)
            for g in args.groups:
                log(f"{g} groups x {args.nodes} nodes")
                per.append(run_groups(g, args, workdir, None))
        else:
            from replimon.embedded import EmbeddedBroker, EmbeddedPostgres

            with EmbeddedBroker() as broker, EmbeddedPostgres() as pgserver:
                bench = Bench(args, workdir, broker, pgserver.dsn)
                base = bench.base
                if args.max_offsets is None:
                    args.max_offsets = base.streaming.max_offsets_per_trigger
                if args.trigger is None:
                    args.trigger = base.streaming.trigger_interval_s
                for g in args.groups:
                    log(f"{g} groups x {args.nodes} nodes")
                    per.append(run_groups(g, args, workdir, bench))
                bench.spark.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    host["load_average_at_end_1_5_15"] = load_average()
    st = base.streaming
    res = {
        "benchmark": "pipeline", "schema": SCHEMA,
        "command": " ".join([Path(sys.executable).name, *sys.argv]) if argv is None else " ".join(argv),
        "quick": args.quick, "machine": host, "warnings": warnings,
        "elapsed_s": round(time.perf_counter() - started),
        "settings": {"groups": args.groups, "nodes": args.nodes, "rates": args.rates,
                     "trigger_s": args.trigger if args.trigger is not None else st.trigger_interval_s,
                     "duration_s": args.duration, "warmup_s": args.warmup, "faults": args.faults,
                     "fault_kinds": list(FAULTS), "backlog_s": args.backlog,
                     "max_offsets": args.max_offsets if args.max_offsets is not None else st.max_offsets_per_trigger,
                     "repeat": args.repeat, "core_events": args.core_events, "core_repeat": args.core_repeat,
                     "seed": args.seed, "spark_master": st.master, "shuffle_partitions": st.shuffle_partitions,
                     "state_buckets": st.state_buckets, "validator": st.validator, "source_format": st.source_format,
                     "replay_max_offsets_per_trigger": st.max_offsets_per_trigger,
                     "kafka_partitions": base.kafka.partitions},
        "groups": per,
        "targets": targets(per),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2, default=str) + "\n", encoding="utf-8")
    render(res)
    for w in warnings:
        print(f"\nWARNING: {w}")
    if args.quick:
        print("\n(--quick: a smoke run; do not quote these figures)")
    print(f"\nwritten: {args.out} ({res['elapsed_s']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
