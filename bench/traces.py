"""Simulator traces at a set event rate for the pipeline benchmark, and the process that publishes
them to Kafka paced in real time (``bench/pipeline.py``, points 1 and 5 of its docstring).

A trace is a file of the JSON a message carries with its ``ts_ms`` split out, so the publisher
restamps an event (simulated time 0 = the wall clock at the start) without parsing it."""

from __future__ import annotations

import json
import multiprocessing as mp
import time
import uuid
from bisect import bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stats import spread

from replimon.producers.simulator import Injection, SimOptions, Simulator

FAULTS = ("beyond_horizon", "divergent_decision", "execution_regression")
TICKS_MS = (100, 50, 25, 20, 10)  # the simulator's tick: one decision + one execution per node a tick
WARM_GROUPS, WARM_S = 20, 2
TYPES = ("decision", "execution", "heartbeat", "config")

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
