"""Benchmark of the monitor core: events/s of ``Monitor.process`` and memory per group.

Run from the repository root with the project's interpreter::

    .venv/bin/python bench/core.py                 # full run (a few minutes), >= 5 repetitions
    .venv/bin/python bench/core.py --quick         # seconds: a smoke run, figures not to quote

What it measures (see bench/README.md for how to read and quote the figures):

* A clean fleet from the simulator (groups of 3, 4 and 5 nodes, with the simulator's background
  restarts and reconfigurations) is generated first, as contract-v1 dicts and as the JSON bytes a
  Kafka message would carry, so only the code under test is timed.
* Per repetition, back to back, on one thread: a trivial baseline (a per-group dict lookup and a
  counter update behind the same ``process(ev)`` call shape), ``Monitor.process`` on a fresh
  ``Monitor``, ``replimon.contract.parse_event`` and ``decode_event`` on the bytes (for context:
  what the streaming job pays before the monitor), and the job's per-event chain as it is (each
  message decoded once) and as it was (validated by the models, then parsed again), from
  ``bench/chain.py``. Ratios are taken within each repetition, then the median.
* A mixed fleet (``--families``, default the four families; bench/fleets.py): the same number of
  groups split evenly over the families' simulators, stepped in lockstep; timed in the same
  repetitions: ``Monitor.process`` and the chain over the merged events, ``Monitor.process`` over
  each family's events alone, and the state JSON per group per family at the end.
* Memory per group at the end of the run: the size of ``json.dumps(GroupMonitor.to_state())``
  (what Spark's state store keeps) and the bytes ``tracemalloc`` sees retained by a monitor fed
  with events decoded from the bytes (as a streaming job would get them).
* Scaling: many groups of 3 nodes, generated and monitored in chunks of simulated time (so the
  events never all sit in memory), with every group's state size taken after the first minute
  and at the end: per-group state must not grow with the length of the history.

Timing uses ``time.perf_counter``; the events are moved out of the garbage collector's reach
(``gc.freeze``) once generated, so a collection does not walk a million pre-generated dicts that
a streaming job would never hold at once. The same measure without the freeze is reported beside
it (an artifact of pre-generation, not a property of the monitor; it grows with the event list).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import chain  # bench/chain.py (the scripts run from bench/)
import fleets  # bench/fleets.py
from report import render_tables  # bench/report.py

from replimon.contract import Invalid, parse_event
from replimon.core import Monitor
from replimon.core.rules.base import FIRED_MEMORY
from replimon.producers.simulator import SimOptions, Simulator
from replimon.producers.simulator_gen import SimOptions as GenOptions
from replimon.producers.simulator_gen import Simulator as GenSimulator

TARGET_EVENTS_PER_S = 200_000
SCHEMA = 1
BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = BENCH_DIR / "results" / "core.json"


# -- workload ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Workload:
    """The fleet a run measures."""

    groups: int
    node_mix: tuple[int, ...]  # groups are spread evenly over these starting sizes
    duration_ms: int
    seed: int


@dataclass(frozen=True)
class Scaling:
    """The many-groups line: state size after ``first_ms`` and after ``total_ms`` simulated."""

    groups: int
    nodes: int
    first_ms: int
    total_ms: int
    chunk_ms: int
    seed: int


def split(total: int, parts: int) -> list[int]:
    """``total`` spread over ``parts`` as evenly as possible (the first ones get the remainder)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def fleet(work: Workload) -> tuple[list[Simulator], list[dict[str, Any]]]:
    """Simulators for the node mix, all emitting into one list (groups renamed ``g<i>-m<nodes>``).

    They are stepped in lockstep, so the list interleaves the groups tick by tick as one fleet
    would; each size gets its own seed so groups of different sizes do not share random draws.
    """
    events: list[dict[str, Any]] = []
    sims = []
    for nodes, count in zip(work.node_mix, split(work.groups, len(work.node_mix)), strict=True):
        if count == 0:
            continue
        suffix = f"-m{nodes}"

        def sink(ev: dict[str, Any], suffix: str = suffix) -> None:
            events.append({**ev, "group": ev["group"] + suffix})

        options = SimOptions(groups=count, nodes=nodes, duration_ms=work.duration_ms,
                             seed=work.seed + 1000 * nodes)
        sims.append(Simulator(options, [], sink))
    return sims, events


def generate(work: Workload) -> list[dict[str, Any]]:
    sims, events = fleet(work)
    while sims[0].t < work.duration_ms:
        for sim in sims:
            sim.step()
    return events


def generate_gen(work: Workload) -> list[dict[str, Any]]:
    """A clean generations fleet of the same size and length (groups of 3 nodes; the simulator's
    voting, switching, recovery, restarts and sampled transactions; docs/simulator.md)."""
    events: list[dict[str, Any]] = []
    GenSimulator(GenOptions(groups=work.groups, nodes=3, duration_ms=work.duration_ms, seed=work.seed),
                 [], events.append).run()
    return events


@dataclass
class Mixed:
    """A clean fleet of several families side by side (bench/fleets.py): the merged events and
    each family's alone."""

    families: tuple[str, ...]
    events: list[dict[str, Any]]
    by_family: dict[str, list[dict[str, Any]]]
    info: dict[str, Any]


def generate_mixed(work: Workload, families: Sequence[fleets.Family]) -> Mixed:
    """``work.groups`` split evenly over the families, each simulator with its defaults (nodes,
    rate, background disturbances), the same length and seed; events in time order."""
    events: list[dict[str, Any]] = []
    by_family: dict[str, list[dict[str, Any]]] = {f.name: [] for f in families}

    def sink(_t: int, family: str, ev: dict[str, Any]) -> None:
        events.append(ev)
        by_family[family].append(ev)

    specs = [(f, fleets.options(f, n, None, work.duration_ms / 1000, work.seed), ())
             for f, n in zip(families, fleets.split(work.groups, len(families)), strict=True) if n]
    fleets.run_fleet(specs, sink)
    info = {"families": {f.name: {"groups": opts.groups, "nodes": opts.nodes, "events": len(by_family[f.name]),
                                  "types": dict(sorted(Counter(ev["type"] for ev in by_family[f.name]).items()))}
                         for f, opts, _ in specs},
            "groups": sum(opts.groups for _, opts, _ in specs), "events": len(events)}
    return Mixed(tuple(f.name for f, _, _ in specs), events, {k: v for k, v in by_family.items() if v}, info)


def mixed_state(mixed: Mixed) -> dict[str, Any]:
    """State JSON bytes per group at the end of the mixed run, per family; and the alerts."""
    mon = Monitor()
    alerts: Counter[str] = Counter()
    for ev in mixed.events:
        alerts.update(f"{a.kind}/{a.status}" for a in mon.process(ev))
    sizes = state_sizes(mon)
    return {"state_json_bytes_per_group": {
                fam: size_summary(v for g, v in sizes.items() if fleets.family_of(g) == fam)
                for fam in mixed.families},
            "alerts": dict(sorted(alerts.items()))}


def describe_mix(events: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Event-type mix and what the history contains (restarts, config commands)."""
    types = Counter(ev["type"] for ev in events)
    kinds = Counter(ev["kind"] for ev in events if ev["type"] == "decision")
    ops = Counter(ev["config"]["op"] for ev in events if ev["type"] == "decision" and ev["kind"] == "config")
    commands = {(ev["group"], ev["instance"]) for ev in events
                if ev["type"] == "decision" and ev["kind"] == "config"}
    outcomes = Counter(ev["outcome"] for ev in events if ev["type"] == "config")
    instances = sum(ev.get("count", 1) for ev in events if ev["type"] == "decision" and ev["node"] == ev["proposer"])
    n = len(events) or 1
    return {
        "events": len(events),
        "groups": len({ev["group"] for ev in events}),
        "nodes": len({(ev["group"], ev["node"]) for ev in events}),
        "types": dict(sorted(types.items())),
        "type_share": {k: round(v / n, 4) for k, v in sorted(types.items())},
        "decision_kinds": dict(sorted(kinds.items())),
        "config_commands": len(commands),
        "config_decision_events_by_op": dict(sorted(ops.items())),
        "config_reports_by_outcome": dict(sorted(outcomes.items())),
        "restarts": sum(1 for ev in events if ev["incarnation"] > 0 and ev["seq"] == 0),
        "instances_decided": instances,
    }


# -- what is timed -------------------------------------------------------------------------------
class TrivialMonitor:
    """Baseline: the least a per-group monitor does with an event (lookup by group, count it)."""

    def __init__(self) -> None:
        self.groups: dict[str, dict[str, int]] = {}

    def process(self, ev: dict[str, Any]) -> tuple[()]:
        g = self.groups.get(ev["group"])
        if g is None:
            g = self.groups[ev["group"]] = {"events": 0}
        g["events"] += 1
        return ()


def drive(process: Callable[[Any], object], items: Iterable[Any]) -> float:
    """Seconds to hand every item to ``process`` (the same loop for every measure)."""
    gc.collect()
    t0 = time.perf_counter()
    for item in items:
        process(item)
    return time.perf_counter() - t0


def summary(values: Sequence[float], digits: int = 1) -> dict[str, Any]:
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
        "runs": [round(v, digits) for v in values],
    }


def throughput(events: list[dict[str, Any]], raws: list[bytes], repeat: int,
               log: Callable[[str], None], gen: list[dict[str, Any]] | None = None,
               mixed: Mixed | None = None) -> dict[str, Any]:
    """Events/s of each loop (module docstring), ``repeat`` times back to back; ``gen``: a
    generations fleet, timed in the same repetitions (``gen_monitor``, ``gen_chain``); ``mixed``:
    a fleet of several families (``mixed_monitor``, ``mixed_chain``, and ``mixed_<family>_monitor``
    over that family's events alone)."""
    n = len(events)
    rates: dict[str, list[float]] = {"baseline": [], "monitor": [], "parse_event": [], "decode_event": [],
                                     "chain": [], "chain_parse_twice": [], "monitor_gc_unfrozen": []}
    gen_raws = [json.dumps(ev, separators=(",", ":")).encode() for ev in gen or ()]
    if gen:
        rates.update(gen_monitor=[], gen_chain=[])
    mixed_sets: dict[str, list[dict[str, Any]]] = {}
    mixed_raws: list[bytes] = []
    if mixed:
        mixed_sets = {"mixed_monitor": mixed.events,
                      **{f"mixed_{fam}_monitor": evs for fam, evs in mixed.by_family.items()}}
        mixed_raws = [json.dumps(ev, separators=(",", ":")).encode() for ev in mixed.events]
        rates.update({name: [] for name in ["mixed_chain", *mixed_sets]})

    def timed(run: Callable[[], object], count: int = n) -> float:
        gc.collect()
        t0 = time.perf_counter()
        run()
        return count / (time.perf_counter() - t0)

    for rep in range(repeat):
        rates["baseline"].append(n / drive(TrivialMonitor().process, events))
        rates["monitor"].append(n / drive(Monitor().process, events))
        rates["parse_event"].append(n / drive(parse_event, raws))
        rates["decode_event"].append(timed(lambda: chain.decode_only(raws)))
        # the job's per-event path now and before parsing once, back to back (bench/chain.py)
        rates["chain"].append(timed(lambda: chain.parse_once(raws, Monitor().process)))
        rates["chain_parse_twice"].append(timed(lambda: chain.parse_twice(raws, Monitor().process)))
        if gen:
            rates["gen_monitor"].append(len(gen) / drive(Monitor().process, gen))
            rates["gen_chain"].append(timed(lambda: chain.parse_once(gen_raws, Monitor().process), len(gen)))
        for name, evs in mixed_sets.items():
            rates[name].append(len(evs) / drive(Monitor().process, evs))
        if mixed:
            rates["mixed_chain"].append(timed(lambda: chain.parse_once(mixed_raws, Monitor().process),
                                              len(mixed_raws)))
        gc.unfreeze()  # context: collections now walk every pre-generated event as well
        rates["monitor_gc_unfrozen"].append(n / drive(Monitor().process, events))
        gc.freeze()
        log(f"  repetition {rep + 1}/{repeat}: monitor {rates['monitor'][-1]:,.0f} ev/s, "
            f"baseline {rates['baseline'][-1]:,.0f} ev/s, chain {rates['chain'][-1]:,.0f} ev/s "
            f"(parsing twice {rates['chain_parse_twice'][-1]:,.0f}), decode_event "
            f"{rates['decode_event'][-1]:,.0f} ev/s, parse_event {rates['parse_event'][-1]:,.0f} ev/s, "
            f"monitor (gc not frozen) {rates['monitor_gc_unfrozen'][-1]:,.0f} ev/s")

    def ratio(name: str, base: str) -> dict[str, Any]:
        return summary([r / b for r, b in zip(rates[name], rates[base], strict=True)], 4)

    ratios = {f"{name}_to_baseline": ratio(name, "baseline")
              for name in ("monitor", "parse_event", "decode_event", "chain", "chain_parse_twice",
                           "monitor_gc_unfrozen")}
    ratios["chain_to_chain_parse_twice"] = ratio("chain", "chain_parse_twice")
    if gen:
        ratios |= {"gen_monitor_to_baseline": ratio("gen_monitor", "baseline"),
                   "gen_monitor_to_monitor": ratio("gen_monitor", "monitor"),
                   "gen_chain_to_chain": ratio("gen_chain", "chain")}
    ratios |= {f"{name}_to_baseline": ratio(name, "baseline") for name in ["mixed_chain", *mixed_sets]}
    if mixed:
        ratios["mixed_chain_to_chain"] = ratio("mixed_chain", "chain")
    med = statistics.median(rates["monitor"])
    return {
        "repeat": repeat,
        "events_per_s": {name: summary(v, 0) for name, v in rates.items()},
        "us_per_event_median": {name: round(1e6 / statistics.median(v), 3) for name, v in rates.items()},
        "ratios": ratios,
        "target_events_per_s": TARGET_EVENTS_PER_S,
        "meets_target": med >= TARGET_EVENTS_PER_S,
    }


# -- memory --------------------------------------------------------------------------------------
def state_sizes(mon: Monitor) -> dict[str, int]:
    return {name: len(json.dumps(g.to_state(), separators=(",", ":"))) for name, g in mon.groups.items()}


def size_summary(sizes: Iterable[int]) -> dict[str, Any]:
    values = sorted(sizes)
    if not values:
        return {"median": 0, "mean": 0, "p99": 0, "max": 0, "min": 0}
    return {
        "median": int(statistics.median(values)),
        "mean": int(statistics.fmean(values)),
        "p99": values[min(len(values) - 1, int(len(values) * 0.99))],
        "max": values[-1],
        "min": values[0],
    }


def breakdown(state: dict[str, Any]) -> dict[str, int]:
    """Bytes of each top-level part of one group's JSON state, largest first."""
    parts = {k: len(json.dumps(v, separators=(",", ":"))) for k, v in state.items()}
    return dict(sorted(parts.items(), key=lambda kv: -kv[1]))


def memory(raws: list[bytes]) -> tuple[dict[str, Any], Counter[str]]:
    """Feed a fresh monitor events decoded from the bytes while tracemalloc counts what it keeps."""
    loads = json.loads
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    mon = Monitor()
    alerts: Counter[str] = Counter()  # a few keys: what it keeps is negligible
    for raw in raws:
        out = mon.process(loads(raw))
        if out:
            alerts.update(f"{a.kind}/{a.status}" for a in out)
    gc.collect()
    after, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    retained = after - before
    groups = len(mon.groups) or 1
    sizes = state_sizes(mon)
    median_group = sorted(sizes, key=lambda g: (sizes[g], g))[len(sizes) // 2]
    result = {
        "state_json_bytes_per_group": size_summary(sizes.values()),
        "tracemalloc_retained_bytes_total": retained,
        "tracemalloc_retained_bytes_per_group": retained // groups,
        "tracemalloc_peak_bytes": peak - before,
        "median_group": median_group,
        "median_group_state_breakdown": breakdown(mon.groups[median_group].to_state()),
    }
    return result, alerts


# -- scaling -------------------------------------------------------------------------------------
def composition(mon: Monitor) -> dict[str, Any]:
    """What the per-group state is made of: tracked nodes, members, remembered ids, the rest."""
    nodes, members, fired, rest, per_node = [], [], [], [], []
    for g in mon.groups.values():
        st = g.to_state()
        nodes.append(len(st["nodes"]))
        members.append(len(g.family.cmap.latest().members) if g.family.cmap.configs else 0)
        fired.append(len(st["fired"]))
        node_bytes = len(json.dumps(st["nodes"], separators=(",", ":")))
        per_node.append(node_bytes // max(1, len(st["nodes"])))
        rest.append(len(json.dumps({k: v for k, v in st.items() if k not in ("nodes", "fired")},
                                   separators=(",", ":"))))
    med = statistics.median
    return {
        "nodes_tracked_median": med(nodes), "nodes_tracked_max": max(nodes),
        "latest_config_members_median": med(members),
        "bytes_per_tracked_node_median": int(med(per_node)),
        "fired_ids_median": med(fired),
        "rest_bytes": size_summary(rest),  # the state without `nodes` and `fired`
    }


def scaling(sc: Scaling, log: Callable[[str], None]) -> dict[str, Any]:
    """Many groups, generated and monitored chunk by chunk; state sizes at ``first_ms`` and the end."""
    buf: list[dict[str, Any]] = []
    sim = Simulator(SimOptions(groups=sc.groups, nodes=sc.nodes, duration_ms=sc.total_ms, seed=sc.seed),
                    [], buf.append)
    mon = Monitor()
    process = mon.process
    seconds, events = 0.0, 0
    first: dict[str, int] | None = None
    first_parts: dict[str, Any] = {}
    series: list[dict[str, int]] = []  # every chunk: the fleet's state sizes (does it level off?)
    while sim.t < sc.total_ms:
        buf.clear()
        gc.collect()
        stop = min(sim.t + sc.chunk_ms, sc.total_ms)
        while sim.t < stop:
            sim.step()
        gc.freeze()  # as in the main run: the chunk's events are not the monitor's garbage
        seconds += drive(process, buf)
        gc.unfreeze()
        events += len(buf)
        now = state_sizes(mon)
        series.append({"t_s": sim.t // 1000, **{k: v for k, v in size_summary(now.values()).items()
                                                  if k in ("median", "p99", "max")}})
        if first is None and sim.t >= sc.first_ms:
            first, first_parts = now, composition(mon)
            log(f"  {sim.t // 1000} s simulated, {events:,} events: state sizes taken")
    buf.clear()
    end = state_sizes(mon)
    end_parts = composition(mon)
    first = first or end
    first_parts = first_parts or end_parts
    growth = sorted(end[g] / first[g] for g in end if g in first and first[g])
    ordered = sorted(end, key=lambda g: (end[g], g))
    median_group = ordered[len(ordered) // 2]
    return {
        "groups": sc.groups,
        "nodes": sc.nodes,
        "first_checkpoint_ms": sc.first_ms,
        "duration_ms": sc.total_ms,
        "events": events,
        "monitor_events_per_s": round(events / seconds) if seconds else None,
        "state_json_bytes_per_group": {
            "at_first_checkpoint": size_summary(first.values()),
            "at_end": size_summary(end.values()),
        },
        "growth_end_over_first": {
            "median": round(statistics.median(growth), 3) if growth else None,
            "max": round(max(growth), 3) if growth else None,
        },
        "state_json_bytes_series": series,
        "composition": {"at_first_checkpoint": first_parts, "at_end": end_parts},
        "fired_ids_per_group": {
            "at_first_checkpoint_median": first_parts["fired_ids_median"],
            "at_end_median": end_parts["fired_ids_median"],
            "bound": FIRED_MEMORY,
        },
        "median_group": median_group,
        "median_group_state_breakdown": breakdown(mon.groups[median_group].to_state()),
    }


# -- machine and output --------------------------------------------------------------------------
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(BENCH_DIR.parent), "rev-parse", "HEAD"],
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def sources_digest() -> str:
    """A digest of the monitor core's sources as imported, naming exactly what was measured."""
    import hashlib

    import replimon.core

    root = Path(replimon.core.__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def git_dirty() -> bool | None:
    try:
        out = subprocess.run(["git", "-C", str(BENCH_DIR.parent), "status", "--porcelain", "--",
                              "replimon", "producers"],
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(out.stdout.strip()) if out.returncode == 0 else None


def machine() -> dict[str, Any]:
    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = None
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "cpu_model": cpu_model(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "git_commit": git_commit(),
        "uncommitted_changes_in_replimon_or_producers": git_dirty(),
        "core_sources_sha256_16": sources_digest(),
    }


def fmt_int(x: float | int | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def scale_rows(sc: dict[str, Any]) -> list[list[str]]:
    a, b = sc["state_json_bytes_per_group"]["at_first_checkpoint"], sc["state_json_bytes_per_group"]["at_end"]
    fired = sc["fired_ids_per_group"]
    ca, cb = sc["composition"]["at_first_checkpoint"], sc["composition"]["at_end"]
    by_minute = [p for p in sc["state_json_bytes_series"] if p["t_s"] % 60 == 0]
    return [
        ["fleet", f"{sc['groups']} groups x {sc['nodes']} nodes, {sc['duration_ms'] // 1000} s simulated, "
                  f"{sc['events']:,} events"],
        ["Monitor.process (one run, chunked)", f"{fmt_int(sc['monitor_events_per_s'])} ev/s"],
        [f"state JSON after {sc['first_checkpoint_ms'] // 1000} s (bytes)",
         f"median {a['median']:,}, p99 {a['p99']:,}, max {a['max']:,}"],
        [f"state JSON after {sc['duration_ms'] // 1000} s (bytes)",
         f"median {b['median']:,}, p99 {b['p99']:,}, max {b['max']:,}"],
        ["same group, end / first", f"median {sc['growth_end_over_first']['median']}, "
                                    f"max {sc['growth_end_over_first']['max']}"],
        ["fleet median state, each minute", " ".join(f"{p['median']:,}" for p in by_minute) or "-"],
        ["state without nodes and fired (bytes)",
         f"median {ca['rest_bytes']['median']:,} -> {cb['rest_bytes']['median']:,}, "
         f"max {ca['rest_bytes']['max']:,} -> {cb['rest_bytes']['max']:,}"],
        ["nodes tracked (members of latest config)",
         f"median {ca['nodes_tracked_median']:g} ({ca['latest_config_members_median']:g}) -> "
         f"{cb['nodes_tracked_median']:g} ({cb['latest_config_members_median']:g}), "
         f"~{cb['bytes_per_tracked_node_median']:,} bytes each"],
        ["remembered alert ids (fired)",
         f"median {fired['at_first_checkpoint_median']:g} -> {fired['at_end_median']:g} (bound {fired['bound']})"],
        ["largest parts (median group)",
         ", ".join(f"{k} {v:,}" for k, v in list(sc["median_group_state_breakdown"].items())[:4])],
    ]


def tables(res: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """The result as (title, header, rows) tables, for rich or for plain text."""
    w, tp, mem = res["workload"], res["throughput"], res["memory"]
    sc, lh = res["scaling"], res["long_history"]
    mix = w["mix"]
    eps, ratios = tp["events_per_s"], tp["ratios"]
    share = ", ".join(f"{k} {v:.1%}" for k, v in mix["type_share"].items())
    workload_rows = [
        ["fleet", f"{mix['groups']} groups (starting sizes {'/'.join(map(str, w['node_mix']))} nodes), "
                  f"{w['duration_ms'] // 1000} s simulated, seed {w['seed']}"],
        ["events", f"{mix['events']:,} ({share})"],
        ["history", f"{mix['instances_decided']:,} instances decided, {mix['config_commands']} config "
                    f"commands, {mix['restarts']} node restarts"],
        ["alerts (clean fleet)", ", ".join(f"{k} {v}" for k, v in w["alerts"].items()) or "none"],
    ]
    if "gen" in w:
        g = w["gen"]
        workload_rows.append(["generations fleet", f"{g['groups']} groups of {g['nodes']} nodes, "
                              f"{g['events']:,} events ({', '.join(f'{k} {v:,}' for k, v in g['types'].items())})"])
    if "mixed" in w:
        m = w["mixed"]
        workload_rows += [
            ["mixed fleet", f"{m['groups']} groups, {m['events']:,} events: " + ", ".join(
                f"{name} {f['groups']} x {f['nodes']} nodes {f['events']:,}" for name, f in m["families"].items())],
            ["alerts (mixed, clean)", ", ".join(f"{k} {v}" for k, v in m["alerts"].items()) or "none"]]
    base = eps["baseline"]["median"]
    tp_rows = [
        ["baseline (dict lookup + counter)", fmt_int(base), fmt_int(eps["baseline"]["min"]),
         fmt_int(eps["baseline"]["max"]), "1", f"{tp['us_per_event_median']['baseline']:.3f}"],
        ["Monitor.process", fmt_int(eps["monitor"]["median"]), fmt_int(eps["monitor"]["min"]),
         fmt_int(eps["monitor"]["max"]), f"{ratios['monitor_to_baseline']['median']:.4f}",
         f"{tp['us_per_event_median']['monitor']:.3f}"],
        ["parse_event (JSON bytes), context", fmt_int(eps["parse_event"]["median"]),
         fmt_int(eps["parse_event"]["min"]), fmt_int(eps["parse_event"]["max"]),
         f"{ratios['parse_event_to_baseline']['median']:.4f}", f"{tp['us_per_event_median']['parse_event']:.3f}"],
    ]
    for name, label in (("decode_event", "decode_event (JSON bytes), the job's contract check"),
                        ("chain", "chain now: decode_event, pack, unpack, Monitor.process"),
                        ("chain_parse_twice", "chain before: parse_event, join, json.loads, Monitor.process")):
        tp_rows.append([label, fmt_int(eps[name]["median"]), fmt_int(eps[name]["min"]), fmt_int(eps[name]["max"]),
                        f"{ratios[name + '_to_baseline']['median']:.4f}", f"{tp['us_per_event_median'][name]:.3f}"])
    tp_rows.append(["chain now / chain before (median of per-repetition ratios)",
                    f"{ratios['chain_to_chain_parse_twice']['median']:.3f}",
                    f"{ratios['chain_to_chain_parse_twice']['min']:.3f}",
                    f"{ratios['chain_to_chain_parse_twice']['max']:.3f}", "", ""])
    tp_rows.append(
        ["Monitor.process, gc not frozen (artifact)", fmt_int(eps["monitor_gc_unfrozen"]["median"]),
         fmt_int(eps["monitor_gc_unfrozen"]["min"]), fmt_int(eps["monitor_gc_unfrozen"]["max"]),
         f"{ratios['monitor_gc_unfrozen_to_baseline']['median']:.4f}",
         f"{tp['us_per_event_median']['monitor_gc_unfrozen']:.3f}"])
    if "gen_monitor" in eps:
        for name, label, against in (
                ("gen_monitor", "generations fleet: Monitor.process", "gen_monitor_to_monitor"),
                ("gen_chain", "generations fleet: chain now", "gen_chain_to_chain")):
            tp_rows.append([label, fmt_int(eps[name]["median"]), fmt_int(eps[name]["min"]),
                            fmt_int(eps[name]["max"]),
                            f"{ratios[name + '_to_baseline']['median']:.4f}" if name + "_to_baseline" in ratios
                            else f"{ratios[against]['median']:.3f} of XCom's",
                            f"{tp['us_per_event_median'][name]:.3f}"])
    mixed_names = [("mixed_monitor", "mixed fleet: Monitor.process"), ("mixed_chain", "mixed fleet: chain now")]
    mixed_names += [(k, f"  {k.split('_')[1]} events alone: Monitor.process") for k in eps
                    if k.startswith("mixed_") and k.endswith("_monitor") and k != "mixed_monitor"]
    for name, label in mixed_names:
        if name in eps:
            tp_rows.append([label, fmt_int(eps[name]["median"]), fmt_int(eps[name]["min"]), fmt_int(eps[name]["max"]),
                            f"{ratios[name + '_to_baseline']['median']:.4f}", f"{tp['us_per_event_median'][name]:.3f}"])
    verdict = "met" if tp["meets_target"] else "NOT met"
    tp_rows.append([f"target >= {TARGET_EVENTS_PER_S:,} ev/s (Monitor.process median)", verdict, "", "", "", ""])
    js = mem["state_json_bytes_per_group"]
    mem_rows = [
        ["state JSON per group (bytes)", f"median {js['median']:,}, mean {js['mean']:,}, max {js['max']:,}"],
        ["tracemalloc retained per group (bytes)",
         f"{mem['tracemalloc_retained_bytes_per_group']:,} (total {mem['tracemalloc_retained_bytes_total']:,})"],
        ["largest parts of the median group's state",
         ", ".join(f"{k} {v:,}" for k, v in list(mem["median_group_state_breakdown"].items())[:4])],
    ]
    for fam, js in w.get("mixed", {}).get("state_json_bytes_per_group", {}).items():
        mem_rows.append([f"mixed fleet, {fam}: state JSON per group (bytes)",
                         f"median {js['median']:,}, mean {js['mean']:,}, max {js['max']:,}"])
    return [
        ("Workload", ["", ""], workload_rows),
        (f"Throughput, one thread, median of {tp['repeat']} repetitions",
         ["measure", "median ev/s", "min", "max", "ratio to baseline", "us/event"], tp_rows),
        ("Memory per group at the end of the run", ["", ""], mem_rows),
        (f"Scaling: {sc['groups']} groups, state per group", ["", ""], scale_rows(sc)),
        (f"Long history: {lh['groups']} groups for {lh['duration_ms'] // 60_000} min, state per group",
         ["", ""], scale_rows(lh)),
    ]


def render(res: dict[str, Any], stream: Any = None) -> None:
    render_tables(tables(res), stream)


# -- main ----------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small workload for a smoke run (figures not to quote)")
    p.add_argument("--repeat", type=int, default=None, help="repetitions of each timed measure (default 5; 2 with --quick)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON result file (default {DEFAULT_OUT.relative_to(BENCH_DIR.parent)})")
    p.add_argument("--groups", type=int, default=None, help="groups of the main fleet (default 40; 6 with --quick)")
    p.add_argument("--duration", type=float, default=None, help="simulated seconds of the main fleet (default 300; 20 with --quick)")
    p.add_argument("--scale-groups", type=int, default=None, help="groups of the scaling line (default 1000; 30 with --quick)")
    p.add_argument("--scale-duration", type=float, default=None, help="simulated seconds of the scaling line (default 180; 40 with --quick)")
    p.add_argument("--long-groups", type=int, default=None, help="groups of the long-history line (default 50; 5 with --quick)")
    p.add_argument("--long-duration", type=float, default=None, help="simulated seconds of the long-history line (default 900; 60 with --quick)")
    p.add_argument("--families", default=fleets.ALL,
                   help=f"families of the mixed fleet, comma-separated (default {fleets.ALL})")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--pin", type=int, default=None, metavar="CPU", help="pin the process to this CPU (Linux)")
    args = p.parse_args(argv)
    if args.repeat is not None and args.repeat < 1:
        p.error("--repeat must be at least 1")
    try:
        args.families = fleets.parse_families(args.families)
    except ValueError as exc:
        p.error(str(exc))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    quick = args.quick

    def pick(value: Any, full: Any, small: Any) -> Any:
        return value if value is not None else (small if quick else full)

    repeat = pick(args.repeat, 5, 2)
    work = Workload(groups=pick(args.groups, 40, 6), node_mix=(3, 4, 5),
                    duration_ms=int(pick(args.duration, 300, 20) * 1000), seed=args.seed)
    first = 20_000 if quick else 60_000

    def line(groups: int, seconds: float) -> Scaling:
        total = int(seconds * 1000)
        return Scaling(groups=groups, nodes=3, first_ms=min(first, total), total_ms=total,
                       chunk_ms=10_000, seed=args.seed)

    sc = line(pick(args.scale_groups, 1000, 30), pick(args.scale_duration, 180, 40))
    lh = line(pick(args.long_groups, 50, 5), pick(args.long_duration, 900, 60))
    if args.pin is not None:
        os.sched_setaffinity(0, {args.pin})

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    host = machine()  # at the start: the commit and the sources this process imported
    log(f"generating {work.groups} groups x {work.duration_ms // 1000} s ...")
    t0 = time.perf_counter()
    events = generate(work)
    raws = [json.dumps(ev, separators=(",", ":"), ensure_ascii=False).encode() for ev in events]
    bad = [r for r in raws[:1000] if isinstance(parse_event(r), Invalid)]
    if bad:
        raise SystemExit(f"the simulator produced events parse_event rejects: {bad[0]!r}")
    mix = describe_mix(events)
    log(f"generating a generations fleet of {work.groups} groups x {work.duration_ms // 1000} s ...")
    gen = generate_gen(work)
    gen_info = {"groups": work.groups, "nodes": 3, "events": len(gen),
                "types": dict(sorted(Counter(ev["type"] for ev in gen).items()))}
    log(f"generating a mixed fleet ({', '.join(f.name for f in args.families)}) of {work.groups} groups "
        f"x {work.duration_ms // 1000} s ...")
    mixed = generate_mixed(work, args.families)
    mixed_info = {**mixed.info, **mixed_state(mixed)}
    log(f"  {len(events):,} events in {time.perf_counter() - t0:.1f} s")

    log("memory pass (tracemalloc) ...")
    mem, alerts = memory(raws)  # also the warm-up of every code path
    gc.freeze()  # the pre-generated events are not part of what a collection should walk

    log(f"timing, {repeat} repetitions ...")
    tp = throughput(events, raws, repeat, log, gen, mixed)
    del events, raws, gen, mixed
    gc.unfreeze()
    gc.collect()

    log(f"scaling: {sc.groups} groups x {sc.total_ms // 1000} s, in chunks ...")
    scale = scaling(sc, log)
    log(f"long history: {lh.groups} groups x {lh.total_ms // 1000} s, in chunks ...")
    long_history = scaling(lh, log)

    host["load_average_at_end_1_5_15"] = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    res = {
        "benchmark": "core",
        "schema": SCHEMA,
        "command": " ".join([Path(sys.executable).name, *sys.argv]) if argv is None else " ".join(argv),
        "quick": quick,
        "machine": {**host, "pinned_cpu": args.pin},
        "workload": {
            "groups": work.groups, "node_mix": list(work.node_mix), "duration_ms": work.duration_ms,
            "seed": work.seed, "mix": mix,
            "alerts": dict(sorted(alerts.items())),
            "gen": gen_info,
            "mixed": mixed_info,
        },
        "throughput": tp,
        "memory": mem,
        "scaling": scale,
        "long_history": long_history,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    render(res)
    if repeat < 5:
        print(f"\n(only {repeat} repetition(s): a smoke run; quote figures from >= 5)")
    print(f"\nwritten: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
