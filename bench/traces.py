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

import fleets  # bench/fleets.py
from fleets import FAMILIES, Family, family_of, run_fleet, split
from stats import spread

from replimon.contract.models import EVENT_TOPICS
from replimon.producers.simulator import Injection, SimOptions

XCOM = FAMILIES[0]
FAULTS = XCOM.faults
TICKS_MS = (100, 50, 25, 20, 10)  # a simulator's tick: e.g. XCom, one decision + one execution per node a tick
WARM_GROUPS, WARM_S = 20, 2
TYPES = tuple(EVENT_TOPICS)  # every family's event types (XCom's first); a trace line has the index

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
    families: dict[str, dict[str, Any]] = field(default_factory=dict)  # per family: groups, options, events
    # The faults whose alert the trace itself raises through the core (``carried_faults``); None:
    # not checked.
    carried: list[dict[str, Any]] | None = None

    @property
    def rate(self) -> float:
        return self.events / self.seconds

    def describe(self) -> dict[str, Any]:
        return {"groups": self.groups, "nodes": self.nodes, "tick_ms": self.tick_ms,
                "decisions_per_s": round(self.decisions_per_s, 3), "seconds": self.seconds,
                "events": self.events, "events_per_s": round(self.rate), "types": self.types,
                "faults": len(self.faults), "families": self.families,
                **({} if self.carried is None else {"faults_carried": len(self.carried)})}


def options(groups: int, nodes: int, seconds: float, tick_ms: int, dps: float, seed: int) -> SimOptions:
    return SimOptions(groups=groups, nodes=nodes, seed=seed, duration_ms=int(seconds * 1000),
                      tick_ms=tick_ms, decisions_per_s=dps)


def measured_rate(groups: int, nodes: int, tick_ms: int, knob: float, seed: int, seconds: float = 12.0,
                  skip: float = 4.0, family: Family = XCOM) -> float:
    """Events per simulated second per group of a short clean simulation of ``family`` (its rate
    option at ``knob``), after its first ``skip`` seconds (the boot is busier than the steady
    state that makes most of a trace)."""
    count = [0]
    after = int(skip * 1000)

    def sink(t: int, _family: str, _ev: dict[str, Any]) -> None:
        if t >= after:
            count[0] += 1

    run_fleet([(family, fleets.options(family, groups, nodes, seconds, seed, tick_ms, knob), ())], sink)
    return count[0] / (seconds - skip) / groups


def calibrate(groups: int, nodes: int, rate: float, seed: int, family: Family = XCOM) -> tuple[int, float]:
    """(tick_ms, rate option) that make ``groups`` groups of ``family`` emit about ``rate`` events/s
    (for XCom the option is ``decisions_per_s``; fleets.FAMILIES names the others').

    Per node and tick a simulator emits a bounded number of events (XCom: at most one decision and
    one execution, plus a heartbeat a second; the others at most one client operation a tick), so a
    group's rate saturates near a multiple of ``1000 / tick_ms``: take the longest tick that leaves
    room, then bisect the option (the rate grows with it) on short simulations of up to 20 groups
    (the rate a group emits does not depend on the others)."""
    per_group = rate / groups
    sample = min(groups, 20)
    for tick in TICKS_MS:
        top = 1000 / tick
        if measured_rate(sample, nodes, tick, top * 4, seed, family=family) >= per_group * 1.02:
            break
    else:
        raise SystemExit(f"{rate:,.0f} events/s is more than {groups} groups of {nodes} nodes ({family.name}) "
                         f"can emit (tick {TICKS_MS[-1]} ms); use more groups")
    lo, hi = 0.05, top * 4
    for _ in range(12):
        mid = (lo + hi) / 2
        got = measured_rate(sample, nodes, tick, mid, seed, family=family)
        if abs(got - per_group) <= 0.01 * per_group:
            return tick, mid
        lo, hi = (mid, hi) if got < per_group else (lo, mid)
    return tick, (lo + hi) / 2


def fault_plan(groups: int, count: int, start_s: float, span_s: float,
               families: Sequence[Family] = (XCOM,)) -> list[Injection]:
    """``count`` faults evenly over the window, each in its own group: the families in turn (one of
    XCom's, one of generations', ...), each family's quick faults (fleets.FAMILIES) in turn, spread
    over that family's groups (``groups`` split evenly over the families, as ``fleet_specs``)."""
    count = min(count, groups)
    per = dict(zip([f.name for f in families], split(groups, len(families)), strict=True))
    order = [families[i % len(families)] for i in range(count)]
    planned = Counter(f.name for f in order)
    seen: Counter[str] = Counter()
    out = []
    for i, fam in enumerate(order):
        k = seen[fam.name]
        seen[fam.name] += 1
        at_ms = int((start_s + (i + 0.5) * span_s / count) * 1000)
        group = f"{fam.prefix}{1 + (k * per[fam.name]) // planned[fam.name]}"
        out.append(Injection(fam.faults[k % len(fam.faults)], group, at_ms))
    return out


def fleet_specs(families: Sequence[Family], groups: int, nodes: int, rate: float, seconds: float,
                seed: int) -> list[tuple[Family, Any]]:
    """Each family's share of the groups (split evenly) with its options calibrated so that every
    group emits about ``rate / groups`` events/s, whatever its family: the whole fleet then emits
    about ``rate``, each family in proportion to its groups."""
    out = []
    for fam, n in zip(families, split(groups, len(families)), strict=True):
        if n == 0:
            continue
        tick, knob = calibrate(n, nodes, rate * n / groups, seed, fam)
        out.append((fam, fleets.options(fam, n, nodes, seconds, seed, tick, knob)))
    return out


def split_event(ev: dict[str, Any]) -> tuple[str, str]:
    text = json.dumps(ev, separators=(",", ":"), ensure_ascii=False)
    marker = f'"ts_ms":{ev["ts_ms"]}'
    i = text.index(marker)
    return text[:i], text[i + len(marker):]


def write_trace(path: Path, opts: Any, injections: Sequence[Injection]) -> Trace:
    """An XCom trace (``opts``: the XCom simulator's options)."""
    return write_fleet(path, [(XCOM, opts)], injections)


def write_fleet(path: Path, specs: Sequence[tuple[Family, Any]], injections: Sequence[Injection]) -> Trace:
    """The trace of the families' simulators (family, options) run side by side, their events
    merged in time order; each injection goes to the simulator of its group's family."""
    types: Counter[str] = Counter()
    per: dict[str, Counter[str]] = {fam.name: Counter() for fam, _ in specs}
    fh = path.open("w", encoding="utf-8", newline="\n")

    def sink(t: int, family: str, ev: dict[str, Any]) -> None:
        head, tail = split_event(ev)
        types[ev["type"]] += 1
        per[family][ev["type"]] += 1
        fh.write(f"{t}\t{TYPES.index(ev['type'])}\t{ev['group']}\t{ev['ts_ms']}\t{head}\t{tail}\n")

    try:
        sims = run_fleet([(fam, opts, [i for i in injections if family_of(i.group) == fam.name])
                          for fam, opts in specs], sink)
    finally:
        fh.close()
    summaries = [sim.summary() for sim in sims]
    first = specs[0][1]
    xcom = next((opts for fam, opts in specs if fam is XCOM), None)
    families = {fam.name: {"groups": opts.groups, "tick_ms": opts.tick_ms, fam.knob: round(getattr(opts, fam.knob), 3),
                           "events": sum(per[fam.name].values()), "types": dict(sorted(per[fam.name].items())),
                           "faults": len(summary.faults)}
                for (fam, opts), summary in zip(specs, summaries, strict=True)}
    return Trace(path=path, groups=sum(opts.groups for _, opts in specs), nodes=first.nodes,
                 tick_ms=(xcom or first).tick_ms, decisions_per_s=xcom.decisions_per_s if xcom else 0.0,
                 seconds=max(opts.duration_ms for _, opts in specs) / 1000,
                 events=sum(s.events for s in summaries), start_ms=first.start_ms,
                 types=dict(sorted(types.items())), faults=[f for s in summaries for f in s.faults],
                 families=families)


def carried_faults(trace: Trace) -> list[dict[str, Any]]:
    """The trace's faults whose alert the trace itself raises: its events through the core
    (``Monitor``, event time, then the end of input), as ``replimon check`` would. A fault the
    simulator armed may never act within the trace: one that bends a group's next execution or
    append, when at the trace's rate that group has none before the end."""
    from replimon.core import Monitor

    monitor = Monitor()
    fired: set[tuple[str, str]] = set()
    with trace.path.open(encoding="utf-8") as fh:
        for line in fh:
            _, _, _, ts, head, tail = line.rstrip("\n").split("\t")
            fired.update((a.group, a.kind) for a in monitor.process(json.loads(f'{head}"ts_ms":{ts}{tail}'))
                         if a.status == "firing")
    fired.update((a.group, a.kind) for a in monitor.finish() if a.status == "firing")
    return [f for f in trace.faults if (f["group"], f["alert"]) in fired]


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
