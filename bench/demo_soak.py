"""A long ``replimon demo`` with faults of every family through the run: is every fault detected
once, is nothing else raised, does the job's memory stay flat, does it keep up?

Run from the repository root with the project's interpreter::

    .venv/bin/python bench/demo_soak.py                   # 20 minutes of demo
    .venv/bin/python bench/demo_soak.py --minutes 4       # a shorter look, same verdicts
    .venv/bin/python bench/demo_soak.py --offline         # minutes: the same fleet through the core only
    .venv/bin/python bench/demo_soak.py --groups 1000 --rate 10000                        # the rate mode
    .venv/bin/python bench/demo_soak.py --groups 1000 --rate-from bench/results/pipeline.json

The fleet is the demo's mixed fleet of the four families, sized so that every entry of every
family's fault catalogue (docs/simulator.md: the faults and their legal near misses) gets a group
of its own, plus ``--clean`` clean groups per family. The entries are injected one after another,
the families in turn, evenly from ``--first`` seconds to ``--tail`` seconds before the end (the
slowest fault needs about 150 s to fire). The run is the demo's own (``replimon.demo.plan_demo``
and ``run_demo``: embedded broker and PostgreSQL, the simulators paced in real time, the Spark job
live with processing-time timers); the equivalent command line is printed. This script adds two
observers: every micro-batch's alerts, and a sampler (every ``--sample-every`` s) of

* RSS (``VmRSS``) of the driver (this process: the job's ``foreachBatch`` *and* the simulators,
  whose own histories grow), the Spark JVM, Spark's Python workers (summed), the broker and
  PostgreSQL;
* the state store, from the query's last progress: rows, memory used, and the checkpoint's
  ``state/`` directory on disk.

Verdicts, the same for the live run and ``--offline`` (the same fleet's events through
``replimon.core.Monitor`` in event time, no Spark): a fault whose catalogue entry names alert K
must raise K exactly once in its group (firing records; a wedge's resolution is not a second
detection), besides the kinds K implies (``simulator_chain.IMPLIED``), once each; any other
warning or critical alert anywhere is a false alert; info alerts (configurations installed,
elections, views) are counted, never judged. Memory: the medians of the samples of the first
minute after ``--first`` and of the last minute, and their ratio.

**The rate mode** (the soak at the pipeline benchmark's scale and rate):
``--groups G`` with ``--rate R`` (events/s) or ``--rate-from`` a ``bench/pipeline.py`` result
(the highest rate kept up at G groups there, with that run's nodes, trigger and families; none
kept up: it says so and stops). The fleet is G groups of ``--nodes`` (default 5) of
``--families`` (default ``xcom``, as ``bench/pipeline.py``), split evenly over the families;
each family's catalogue entries (faults and near misses; ``--skip`` leaves some out) are spread
over its groups, one entry a group, injected one after another from ``--first`` to ``--tail``
before the end as above, and every other group is clean. Each family's rate option (XCom
``decisions_per_s``, ...) is calibrated as ``bench/pipeline.py`` calibrates its traces
(``bench/traces.py``'s ``calibrate``: short clean simulations, bisection) so that every group
emits about R / G events/s, at the demo's 100 ms tick; the job runs with the trigger given
(``--trigger``, or the result's). At 1,000 groups a few thousand events/s is a few events a
second a group, most of them heartbeats: faults that need the group to decide (XCom
``executor_lag`` waits for a lag of 1,000 instances, ``horizon_wedge`` for the horizon to fill in
20 s) cannot act at that rate; ``--offline`` shows which entries the core misses for a given
fleet, and a live miss the offline pass shares is marked "(offline too)". ``--offline`` also runs
the simulators alone, unpaced, each event encoded as the publisher does, and reports the CPU they
take per simulated minute: the share of a core pacing them in real time takes in the driver
(which also runs the job's ``foreachBatch``). The live run adds **kept up?** (``kept_up``: over
the batches after ``--first``, published vs processed events/s, Spark's input vs processed rows/s,
batch duration vs the trigger, the first vs the last minute's batches, the events published but
not read when the run ended) and the driver's CPU; exit status 1 when it did not keep up, too.

Output: tables on stdout and JSON (``--out``, default ``bench/results/demo_soak.json``, the rate
mode ``bench/results/demo_soak_rate.json``) with the machine (``bench/machine.py``), the plan,
every fault's detections, the samples and every batch's progress.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fleets import BY_NAME, split  # bench/fleets.py
from machine import machine  # bench/machine.py (the scripts run from bench/)
from report import render_tables  # bench/report.py
from stats import fmt, keeps_up, log, spread

from replimon.config import load_settings
from replimon.demo import DemoPlan, plan_demo, run_demo
from replimon.demo_fleet import FAMILIES, Family, family_of, parse_families
from replimon.kafka import offsets_total
from replimon.producers.fleet_run import Injection

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = BENCH_DIR / "results" / "demo_soak.json"
DEFAULT_RATE_OUT = BENCH_DIR / "results" / "demo_soak_rate.json"
DEMO_TICK_MS = 100  # the demo's simulators tick every 100 ms (replimon.demo_fleet.DemoFleet)
IMPLIED: dict[str, frozenset[str]] = {k: v for f in FAMILIES for k, v in getattr(f.sim, "IMPLIED", {}).items()}


# -- the plan ------------------------------------------------------------------------------------
def injections(first_s: float, last_s: float, clean: int, families: Iterable[Family] = FAMILIES,
               groups: dict[str, int] | None = None, skip: Iterable[str] = ()) -> tuple[list[str], dict[str, int]]:
    """Every catalogue entry of every family in a group of its own, the families in turn, evenly
    over [first_s, last_s]; and each family's group count. Without ``groups``, a family has its
    entries + ``clean`` groups, the entries in its first groups; with ``groups`` (the rate mode's
    fleet: a count per family) the entries are spread evenly over the family's groups and the
    others are clean. ``skip``: entries left out."""
    queues = {f.name: [(f, name) for name in sorted(f.sim.CATALOGUE) if name not in skip] for f in families}
    counts = dict(groups) if groups else {name: len(q) + clean for name, q in queues.items()}
    sizes = {name: len(q) for name, q in queues.items()}
    short = [name for name, q in queues.items() if counts[name] < len(q)]
    if short:
        raise ValueError(f"{short[0]}: {counts[short[0]]} groups for {len(queues[short[0]])} catalogue entries "
                         "(each needs a group of its own): use more groups")
    order: list[tuple[Any, str]] = []
    while any(queues.values()):
        for q in queues.values():
            if q:
                order.append(q.pop(0))
    used: Counter[str] = Counter()
    out = []
    step = (last_s - first_s) / max(1, len(order) - 1)
    for i, (fam, fault) in enumerate(order):
        k = used[fam.name]
        used[fam.name] += 1
        index = 1 + k * counts[fam.name] // sizes[fam.name] if groups else k + 1
        group = fam.names(index)[-1]
        out.append(f"{fault}:{group}@{first_s + i * step:.0f}s")
    return out, counts


def expected(inj: Injection) -> str | None:
    return family_of(inj).sim.CATALOGUE[inj.fault].alert


def command_line(plan: DemoPlan, texts: list[str], minutes: float, env: dict[str, str] | None = None) -> str:
    """The ``replimon demo`` command line of the plan; ``env``: settings as environment variables
    before it. A rate option of a family other than XCom has no flag or setting of
    ``replimon demo``: it is named in a comment after the line."""
    c = plan.choice
    parts = [f"{k}={v}" for k, v in (env or {}).items()]
    parts += ["replimon demo --plain", f"--duration {minutes:g}m", f"--families {','.join(c.families)}",
              f"--nodes {c.nodes}", f"--groups {c.groups}", f"--gen-groups {c.gen_groups}",
              f"--qlog-groups {c.qlog_groups}", f"--chain-groups {c.chain_groups}"]
    others = [f"{fam} {BY_NAME[fam].knob}={rate:.4g}" for fam, rate in c.rates if fam != "xcom"]
    note = [f"# and {', '.join(others)} (no flag of replimon demo)"] if others else []
    return " ".join(parts + [f"-i {t}" for t in texts] + note)


# -- the rate mode: a fleet that publishes about R events/s --------------------------------------
def rate_from(path: Path, groups: int) -> dict[str, Any]:
    """The highest rate kept up at ``groups`` groups in a ``bench/pipeline.py`` result, with that
    run's nodes, trigger and families; SystemExit (one line) when it has none."""
    data = json.loads(path.read_text())
    st = data.get("settings", {})
    per = next((g for g in data.get("groups", []) if g.get("groups") == groups), None)
    if per is None:
        have = ", ".join(str(g.get("groups")) for g in data.get("groups", [])) or "none"
        raise SystemExit(f"--rate-from {path}: no run at {groups} groups (group counts: {have}); give --rate")
    best = per.get("highest_kept_up")
    if not best:
        tried = "; ".join(
            f"{s['summary']['published_events_per_s']:,} events/s: batch median {fmt(s['summary']['batch_ms_median'])} ms"
            for s in per.get("sustained", []) if s.get("summary"))
        raise SystemExit(f"--rate-from {path}: no rate was kept up at {groups} groups "
                         f"(trigger {st.get('trigger_s')} s; {tried or 'no sustained run'}); give --rate")
    return {"events_per_s": best["published_events_per_s"], "nodes": st.get("nodes"),
            "trigger_s": st.get("trigger_s"), "families": ",".join(st.get("families") or ["xcom"]),
            "source": str(path), "summary": best}


def fleet_rates(families: Iterable[Family], counts: dict[str, int], nodes: int, rate: float,
                seed: int) -> dict[str, float]:
    """Each family's rate option such that every group emits about ``rate / groups`` events/s
    (``bench/traces.py``'s ``calibrate``, as ``bench/pipeline.py`` sets its traces' rates), at the
    demo's 100 ms tick; SystemExit when that tick cannot reach it."""
    from traces import calibrate  # bench/traces.py

    total = sum(counts.values())
    out = {}
    for fam in families:
        n = counts[fam.name]
        tick, knob = calibrate(n, nodes, rate * n / total, seed, BY_NAME[fam.name])
        if tick != DEMO_TICK_MS:
            raise SystemExit(f"{rate:,.0f} events/s over {total} groups needs a {tick} ms tick for {fam.name}; "
                             f"the demo's simulators tick every {DEMO_TICK_MS} ms: use more groups")
        out[fam.name] = round(knob, 4)
    return out


# -- verdicts ------------------------------------------------------------------------------------
def verdict(plan: DemoPlan, alerts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Each fault's detections, the false alerts, the info alerts by kind.

    A fault is detected when its kind (and what that implies) fires in its group; once, when no
    alert id fires twice (a fault may raise several alerts, one per violation it makes: each
    stale write of ``chain_stale_epoch_write``, each node's regression; each is raised once).
    A warning or critical alert of a kind no fault of its group expects is false."""
    firing = [a for a in alerts if a["status"] == "firing"]
    wanted: dict[str, set[str]] = {}
    faults = []
    for inj in plan.injections:
        kind = expected(inj)
        if kind is not None:
            wanted[inj.group] = {kind, *IMPLIED.get(kind, ())}
        faults.append({"fault": inj.fault, "group": inj.group, "at_s": inj.at_ms / 1000, "expects": kind})
    mine = [a for a in firing if a["kind"] in wanted.get(a["group"], set())]
    info = Counter(a["kind"] for a in firing if a["severity"] == "info" and a not in mine)
    ids = Counter(a["alert_id"] for a in mine)
    for f in faults:
        kinds = sorted(wanted.get(f["group"], set())) if f["expects"] else []
        of = [a for a in mine if a["group"] == f["group"]]
        f["alerts"] = {k: len({a["alert_id"] for a in of if a["kind"] == k}) for k in kinds}
        f["repeated"] = sorted({a["alert_id"] for a in of if ids[a["alert_id"]] > 1})
        f["ok"] = all(f["alerts"].values()) and not f["repeated"]
    false = [{"group": a["group"], "kind": a["kind"], "node": a.get("node"), "message": a["message"]}
             for a in firing if a["severity"] != "info" and a not in mine]
    missed = [f for f in faults if f["expects"] is not None and not f["ok"]]
    return {"faults": faults, "detected": sum(1 for f in faults if f["expects"] and f["ok"]),
            "expected": sum(1 for f in faults if f["expects"]), "near_misses": sum(1 for f in faults if not f["expects"]),
            "alerts_per_fault": Counter(sum(f["alerts"].values()) for f in faults if f["expects"]),
            "missed_or_repeated": missed, "false_alerts": false, "info": dict(info)}


def offline(settings: Any, plan: DemoPlan) -> dict[str, Any]:
    """The plan's fleet through ``Monitor`` in event time (what ``replimon check`` would say)."""
    from replimon.core import Monitor

    monitor = Monitor()
    alerts: list[dict[str, Any]] = []
    fleet = plan.fleet(settings, 1_700_000_000_000)
    fleet.attach(lambda ev: alerts.extend(a.to_dict() for a in monitor.process(ev)))
    while fleet.t < plan.duration_ms:
        fleet.step()
    alerts += [a.to_dict() for a in monitor.finish()]
    return verdict(plan, alerts) | {"events": fleet.events}


def simulators_cpu(settings: Any, plan: DemoPlan) -> dict[str, Any]:
    """The plan's simulators alone, unpaced, each event encoded as ``Publisher.send`` encodes it
    (``encode_event``; not librdkafka's produce): CPU seconds of this process per simulated
    minute. A minute's ``cores`` is the share of a core that pacing the fleet in real time takes
    in ``run_demo``'s driver, where the job's ``foreachBatch`` runs too."""
    from replimon.producers.publisher import encode_event

    fleet = plan.fleet(settings, int(time.time() * 1000))
    cpu0, wall0 = time.process_time(), time.perf_counter()
    fleet.attach(encode_event)
    minutes: list[dict[str, Any]] = []
    last_cpu, last_events, last_t = cpu0, 0, 0
    while fleet.t < plan.duration_ms:
        fleet.step()
        if fleet.t - last_t >= 60_000 or fleet.t >= plan.duration_ms:
            cpu, events = time.process_time(), fleet.events
            sim_s = (fleet.t - last_t) / 1000
            minutes.append({"until_s": fleet.t // 1000, "cpu_s": round(cpu - last_cpu, 2), "events": events - last_events,
                            "events_per_s": round((events - last_events) / sim_s), "cores": round((cpu - last_cpu) / sim_s, 3)})
            last_cpu, last_events, last_t = cpu, events, fleet.t
    cpu = time.process_time() - cpu0
    return {"simulated_s": fleet.t / 1000, "cpu_s": round(cpu, 1), "wall_s": round(time.perf_counter() - wall0, 1),
            "events": fleet.events, "cores": round(cpu / (fleet.t / 1000), 3), "minutes": minutes}


# -- the live run's samples ----------------------------------------------------------------------
def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


class Sampler:
    """Every ``every`` seconds, on a thread: RSS per part of this process tree and the state
    store's size (see the module docstring)."""

    def __init__(self, every: float) -> None:
        from cpu import CpuMeter  # bench/cpu.py: which part of the tree a process is

        self.every, self.meter = every, CpuMeter()
        self.samples: list[dict[str, Any]] = []
        self.began = time.monotonic()
        self.stop = threading.Event()
        self.job: Any = None
        self.progress: list[dict[str, Any]] = []  # every micro-batch's progress, in short
        self._seen: set[tuple[Any, Any]] = set()
        self.began_wall = time.time()

    def attach(self, job: Any) -> None:
        self.job = job
        self.began = time.monotonic()
        self.began_wall = time.time()
        threading.Thread(target=self._loop, name="soak-sampler", daemon=True).start()

    def collect(self) -> None:
        """The query's progress reports not seen yet (Spark keeps the last 100: read every
        ``every`` s, and once more after the run): start (s since ``attach``), trigger duration,
        input rows, Spark's input and processed rates, and the consumer lag after the batch (the
        source's latest offsets, ``reportLatestOffset``, minus the batch's end offsets)."""
        from datetime import datetime

        for p in self.job.query.recentProgress:
            key = (p.get("batchId"), p.get("timestamp"))
            if key in self._seen:
                continue
            self._seen.add(key)
            lag = None
            for src in p.get("sources") or []:
                latest, end = offsets_total(src.get("latestOffset")), offsets_total(src.get("endOffset"))
                if latest is not None and end is not None:
                    lag = (lag or 0) + max(0, latest - end)
            start = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
            self.progress.append({
                "batch": p.get("batchId"), "t_s": round(start - self.began_wall, 1),
                "ms": (p.get("durationMs") or {}).get("triggerExecution"), "rows": p.get("numInputRows") or 0,
                "input_rps": round(p.get("inputRowsPerSecond") or 0), "processed_rps": round(p.get("processedRowsPerSecond") or 0),
                "lag": lag})

    def _loop(self) -> None:
        last = self.meter.sample()
        while not self.stop.wait(self.every):
            self.collect()
            now = self.meter.sample()
            cores = self.meter.between(last, now)["cores"]
            last = now
            procs = now[1]
            rss: Counter[str] = Counter()
            for pid in procs:
                part = self.meter.part(pid, procs)
                if part is not None:
                    rss[part] += _rss_kb(pid)
            progress = self.job.query.lastProgress or {}
            ops = progress.get("stateOperators") or [{}]
            ckpt = Path(self.job.checkpoint) / "state" if self.job.checkpoint else Path("/nonexistent")
            self.samples.append({
                "t_s": round(time.monotonic() - self.began, 1),
                "rss_mb": {k: round(v / 1024, 1) for k, v in sorted(rss.items())},
                "state_rows": sum(op.get("numRowsTotal", 0) for op in ops),
                "state_memory_mb": round(sum(op.get("memoryUsedBytes", 0) for op in ops) / 2**20, 2),
                "state_dir_mb": round(_dir_bytes(ckpt) / 2**20, 2),
                "batch": progress.get("batchId"),
                "batch_ms": (progress.get("durationMs") or {}).get("triggerExecution"),
                "input_rows": progress.get("numInputRows"),
                "cores": {k: v for k, v in cores.items() if v},
            })


def flatness(samples: list[dict[str, Any]], first_s: float, window_s: float = 60.0) -> dict[str, Any]:
    """Medians of the samples of the first ``window_s`` after ``first_s`` and of the last
    ``window_s``, per figure, and end / start."""
    if not samples:
        return {}
    end_t = samples[-1]["t_s"]
    start = [s for s in samples if first_s <= s["t_s"] < first_s + window_s] or samples[:1]
    end = [s for s in samples if s["t_s"] > end_t - window_s]

    def figures(s: dict[str, Any]) -> dict[str, float]:
        out = {f"rss_mb.{k}": v for k, v in s["rss_mb"].items()}
        return out | {k: s[k] for k in ("state_rows", "state_memory_mb", "state_dir_mb")}

    names = sorted({k for s in samples for k in figures(s)})
    out = {}
    for name in names:
        a = statistics.median(figures(s).get(name, 0) for s in start)
        b = statistics.median(figures(s).get(name, 0) for s in end)
        out[name] = {"start": round(a, 2), "end": round(b, 2), "ratio": round(b / a, 3) if a else None,
                     "max": max(figures(s).get(name, 0) for s in samples)}
    return out


def kept_up(progress: list[dict[str, Any]], trigger_s: float, first_s: float, published: int,
            seconds: float) -> dict[str, Any]:
    """Did the job keep up with a fleet that published ``published`` events over ``seconds``?
    Over the batches that start after ``first_s`` (the warm-up), as ``bench/pipeline.py`` judges a
    sustained run: the processed rate (their input rows / the time they span) >= 95% of the
    published rate; the median and p90 batch duration within the trigger; and the lag at the end,
    the events published that the job had not read when the fleet's run ended and the job was
    stopped (published - every batch's input rows), at most one p90 batch and one trigger's worth
    (what arrives while a batch runs waits for the next). Besides: Spark's input and processed
    rates (median per batch), the first and last minute's median batch duration and rows (a job
    falling behind takes ever bigger batches), and the source's lag after a batch (its latest
    offsets minus the batch's end: above 0 only when a batch stopped at
    ``max_offsets_per_trigger``)."""
    window = [p for p in progress if p["t_s"] >= first_s and p["rows"]]
    if not window:
        return {"keeps_up": False, "batches": 0}
    rate = published / seconds if seconds else 0.0
    span = window[-1]["t_s"] + (window[-1]["ms"] or 0) / 1000 - window[0]["t_s"]
    processed = sum(p["rows"] for p in window) / span if span > 0 else 0.0
    bms = spread([p["ms"] or 0 for p in window], 0)
    lag_end = max(0, published - sum(p["rows"] for p in progress))
    lag_end_s = lag_end / rate if rate else None
    lags = [p["lag"] for p in window if p["lag"] is not None]
    head = [p for p in window if p["t_s"] < window[0]["t_s"] + 60]
    tail = [p for p in window if p["t_s"] > window[-1]["t_s"] - 60]

    def minute(ps: list[dict[str, Any]]) -> dict[str, Any]:
        return {"batch_ms": statistics.median(p["ms"] or 0 for p in ps), "rows": statistics.median(p["rows"] for p in ps)}

    bounded = lag_end_s is not None and lag_end_s <= bms["p90"] / 1000 + trigger_s
    return {"trigger_s": trigger_s, "batches": len(window), "window_s": round(span, 1),
            "published_events_per_s": round(rate), "processed_events_per_s": round(processed),
            "input_rps_median": statistics.median(p["input_rps"] for p in window),
            "processed_rps_median": statistics.median(p["processed_rps"] for p in window),
            "batch_ms": bms, "batch_rows": spread([p["rows"] for p in window], 0),
            "first_minute": minute(head), "last_minute": minute(tail),
            "lag_end_events": lag_end, "lag_end_s": None if lag_end_s is None else round(lag_end_s, 2),
            "source_lag_max": max(lags, default=None),
            **keeps_up(processed, rate, bms, trigger_s, ("lag_end_bounded", bounded))}


# -- output --------------------------------------------------------------------------------------
def tables(result: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    out = []
    offline_missed = {(f["fault"], f["group"]) for f in (result.get("offline") or {}).get("missed_or_repeated", [])}
    for name in ("offline", "live"):
        v = result.get(name)
        if not v:
            continue
        also = offline_missed if name == "live" else set()
        rows = [["faults detected once", f"{v['detected']} of {v['expected']}"],
                ["near misses (must be silent)", str(v["near_misses"])],
                ["alerts a fault raised: faults", ", ".join(f"{k}: {n}" for k, n in sorted(v["alerts_per_fault"].items()))],
                ["missed or repeated", ", ".join(f"{f['fault']}:{f['group']} {f['alerts']} repeated {len(f['repeated'])}"
                                                 + (" (offline too)" if (f["fault"], f["group"]) in also else "")
                                                 for f in v["missed_or_repeated"]) or "none"],
                ["false alerts", ", ".join(f"{a['group']}:{a['kind']}" for a in v["false_alerts"][:10])
                 + (f" (+{len(v['false_alerts']) - 10})" if len(v["false_alerts"]) > 10 else "") or "none"],
                ["info alerts", ", ".join(f"{k} {n}" for k, n in sorted(v["info"].items())) or "none"]]
        if name == "live":
            rows += [["events published", f"{result['run']['delivered']:,} ({result['run']['failed']} failed)"],
                     ["micro-batches", f"{result['run']['batches']:,}"],
                     ["dead letters", str(result["run"]["dead_letters"])]]
        out.append((f"demo soak{result.get('title', '')}, {name}", ["", ""], rows))
    sims = result.get("simulators")
    if sims:
        mins = sims["minutes"]
        out.append(("the simulators alone (unpaced, events encoded; the driver paces them in real time)", ["", ""], [
            ["simulated / CPU / wall", f"{sims['simulated_s']:,.0f} s / {sims['cpu_s']:,.1f} s / {sims['wall_s']:,.1f} s"],
            ["events", f"{sims['events']:,} ({sims['events'] / sims['simulated_s']:,.0f}/s)"],
            ["cores to pace them: whole run", f"{sims['cores']:.3f}"],
            ["cores: first minute, last minute", f"{mins[0]['cores']:.3f}, {mins[-1]['cores']:.3f}"]]))
    k = result.get("kept_up")
    if k and k.get("batches"):
        c, b, run = k["criteria"], k["batch_ms"], result["run"]
        yes = {True: "yes", False: "NO"}
        out.append((f"kept up? batches after the first {result['first_s']:g} s", ["", ""], [
            ["published / processed events/s", f"{k['published_events_per_s']:,} / {k['processed_events_per_s']:,} "
                                                f"(>= 95%: {yes[c['rate_matched']]})"],
            ["Spark input / processed rows/s (median)", f"{k['input_rps_median']:,.0f} / {k['processed_rps_median']:,.0f}"],
            ["batch ms median / p90 / max (trigger)", f"{b['median']:,.0f} / {b['p90']:,.0f} / {b['max']:,.0f} "
                                                      f"({k['trigger_s'] * 1000:,.0f}: {yes[c['batch_ms_within_trigger']]})"],
            ["batch ms, rows: first minute -> last", f"{k['first_minute']['batch_ms']:,.0f}, {k['first_minute']['rows']:,.0f} -> "
                                                     f"{k['last_minute']['batch_ms']:,.0f}, {k['last_minute']['rows']:,.0f}"],
            ["lag at the end (published, not read)", f"{k['lag_end_events']:,} events, {fmt(k['lag_end_s'], 1)} s "
                                                     f"(<= p90 batch + trigger: {yes[c['lag_end_bounded']]})"],
            ["source lag after a batch, max", fmt(k["source_lag_max"])],
            ["driver cores (median of samples)", fmt(run.get("driver_cores_median"), 2)],
            ["the fleet's run: simulated / wall", f"{run['simulated_s']:,.0f} s / {run['fleet_wall_s']:,.0f} s"],
            ["keeps up", yes[k["keeps_up"]]]]))
    flat = result.get("memory")
    if flat:
        out.append(("memory and state: first minute after the first fault vs last minute (medians)",
                    ["figure", "start", "end", "end/start", "max"],
                    [[k, f"{v['start']:,.1f}", f"{v['end']:,.1f}", "-" if v["ratio"] is None else f"{v['ratio']:.2f}",
                      f"{v['max']:,.1f}"] for k, v in flat.items()]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=20.0, help="length of the demo (default 20)")
    ap.add_argument("--first", type=float, default=60.0, help="seconds before the first fault (default 60)")
    ap.add_argument("--tail", type=float, default=240.0,
                    help="seconds between the last fault and the end (default 240: the slowest fires after ~150 s)")
    ap.add_argument("--clean", type=int, default=2, help="clean groups per family (default 2; not in the rate mode)")
    ap.add_argument("--groups", type=int, default=None,
                    help="the rate mode: this many groups (e.g. 1000), split evenly over --families, the "
                         "catalogue entries spread over them, at --rate or --rate-from")
    ap.add_argument("--rate", type=float, default=None, help="the rate mode: events/s the whole fleet publishes")
    ap.add_argument("--rate-from", type=Path, default=None,
                    help="the rate mode: the highest rate kept up at --groups in a bench/pipeline.py result "
                         "(e.g. bench/results/pipeline.json), with its nodes, trigger and families")
    ap.add_argument("--nodes", type=int, default=None, help="nodes per group (default 3; the rate mode 5)")
    ap.add_argument("--families", default=None,
                    help="the rate mode's families (default xcom, or --rate-from's; the catalogue mode has all four)")
    ap.add_argument("--skip", default="",
                    help="catalogue entries left out, e.g. executor_lag,horizon_wedge: faults that cannot act "
                         "at the fleet's rate per group (--offline says which the core misses)")
    ap.add_argument("--trigger", type=float, default=None,
                    help="the job's trigger in s (default --rate-from's, else streaming.trigger_interval_s)")
    ap.add_argument("--sample-every", type=float, default=10.0, help="seconds between memory samples")
    ap.add_argument("--offline", action="store_true",
                    help="only the fleet through the core in event time, and the simulators' CPU alone")
    ap.add_argument("--linger-ms", type=int, default=200,
                    help="the fleet publisher's linger (default 200; 0: the settings', 5 ms): the embedded "
                         "broker's fetch cost grows with a partition's record batches (docs/demo.md, "
                         "\"Long runs on the embedded broker\"); at 50 ms the job fell behind after ~11 minutes")
    ap.add_argument("--live-only", action="store_true", help="skip the offline pass after the live run")
    ap.add_argument("--out", type=Path, default=None,
                    help=f"default {DEFAULT_OUT.relative_to(BENCH_DIR.parent)}, "
                         f"the rate mode {DEFAULT_RATE_OUT.relative_to(BENCH_DIR.parent)}")
    args = ap.parse_args(argv)
    rated = args.groups is not None
    if rated == (args.rate is None and args.rate_from is None) or (args.rate is not None and args.rate_from is not None):
        ap.error("the rate mode takes --groups and one of --rate, --rate-from; the catalogue mode none of them")
    source = rate_from(args.rate_from, args.groups) if args.rate_from else {}
    rate = args.rate or source.get("events_per_s")
    nodes = args.nodes or source.get("nodes") or (5 if rated else 3)
    trigger = args.trigger or source.get("trigger_s")
    overrides: dict[str, Any] = {}
    env: dict[str, str] = {}
    if args.linger_ms:
        overrides["kafka"] = {"producer": {"linger_ms": args.linger_ms}}
        env["REPLIMON_KAFKA__PRODUCER__LINGER_MS"] = str(args.linger_ms)
    if trigger:
        overrides["streaming"] = {"trigger_interval_s": trigger}
        env["REPLIMON_STREAMING__TRIGGER_INTERVAL_S"] = f"{trigger:g}"
    settings = load_settings(**overrides)
    trigger = settings.streaming.trigger_interval_s
    last = args.minutes * 60 - args.tail
    if last <= args.first:
        ap.error(f"--minutes {args.minutes:g} leaves no time for faults between --first and --tail")
    rates: dict[str, float] = {}
    skip = {t.strip() for t in args.skip.split(",") if t.strip()}
    unknown = sorted(skip - {name for f in FAMILIES for name in f.sim.CATALOGUE})
    if unknown:
        ap.error(f"--skip {unknown[0]}: not a catalogue entry")
    try:
        if rated:
            names = parse_families(args.families or source.get("families") or "xcom")
            fams = [f for f in FAMILIES if f.name in names]
            counts = dict(zip(names, split(args.groups, len(names)), strict=True))
            texts, counts = injections(args.first, last, 0, fams, counts, skip)
            log(f"calibrating the simulators' rates for {rate:,.0f} events/s over {args.groups} groups of {nodes} ...")
            rates = fleet_rates(fams, counts, nodes, rate, settings.simulator.seed)
            if "xcom" in rates:
                env["REPLIMON_SIMULATOR__DECISIONS_PER_S"] = f"{rates['xcom']:g}"
        else:
            texts, counts = injections(args.first, last, args.clean, skip=skip)
    except ValueError as exc:
        ap.error(str(exc))
    plan = plan_demo(settings, families=",".join(counts), groups=counts.get("xcom", 1),
                     gen_groups=counts.get("gen", 1), qlog_groups=counts.get("qlog", 1),
                     chain_groups=counts.get("chain", 1), nodes=nodes,
                     duration=f"{args.minutes * 60:.0f}s", inject=texts, rates=rates)
    result: dict[str, Any] = {"machine": machine(), "args": {k: str(v) for k, v in vars(args).items()},
                              "mode": "rate" if rated else "catalogue", "groups": counts, "nodes": nodes,
                              "trigger_s": trigger, "first_s": args.first, "skipped": sorted(skip),
                              "command": command_line(plan, texts, args.minutes, env)}
    if rated:
        result |= {"title": f" at {rate:,.0f} events/s ({sum(counts.values())} groups of {nodes})",
                   "target_events_per_s": rate, "rate_options": rates, "rate_from": source or None}
    log(f"{len(texts)} catalogue entries over {sum(counts.values())} groups; the same as:\n  {result['command']}")
    if not args.offline:
        alerts: list[dict[str, Any]] = []
        dead = [0]

        def collect(batch: Any) -> None:
            alerts.extend(batch.alerts)
            dead[0] += len(batch.dead_letters)

        from rich.console import Console

        sampler = Sampler(args.sample_every)
        run = run_demo(settings, plan, plain=True, console=Console(file=sys.stderr), observers=[collect],
                       on_job=sampler.attach)
        fleet_wall = time.monotonic() - sampler.began
        sampler.stop.set()
        try:
            sampler.collect()  # the last batches' progress (the query has stopped; its reports stay)
        except Exception as exc:  # noqa: BLE001 - a report, not the verdict
            log(f"the last progress reports: {exc}")
        driver = [s["cores"].get("driver", 0.0) for s in sampler.samples if s["t_s"] >= args.first]
        result["run"] = {"events": run["events"], "delivered": run["delivered"], "failed": run["failed"],
                         "batches": run["batches"], "dead_letters": dead[0], "simulated_s": plan.duration_ms / 1000,
                         "fleet_wall_s": round(fleet_wall, 1),
                         "driver_cores_median": round(statistics.median(driver), 3) if driver else None}
        result["live"] = verdict(plan, alerts)
        # The published rate over the wall time the fleet took: paced in the driver beside
        # foreachBatch, it can fall behind its simulated clock (1,200 simulated s in 1,437 s at
        # 1,000 groups and 10,000 events/s), and the job can only read what was published.
        result["kept_up"] = kept_up(sampler.progress, trigger, args.first, run["delivered"], fleet_wall)
        result["memory"] = flatness(sampler.samples, args.first)
        result["samples"] = sampler.samples
        result["progress"] = sampler.progress
    if args.offline or not args.live_only:
        if args.offline:
            log("the simulators alone, unpaced ...")
            result["simulators"] = simulators_cpu(settings, plan)
        log("offline: the fleet through the core in event time ...")
        result["offline"] = offline(settings, plan)
    result["load_average_at_end"] = machine()["load_average_at_start_1_5_15"]
    out = args.out or (DEFAULT_RATE_OUT if rated else DEFAULT_OUT)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    render_tables(tables(result))
    log(f"wrote {out}")
    bad = [v for v in (result.get("offline"), result.get("live")) if v and (v["missed_or_repeated"] or v["false_alerts"])]
    dead = result.get("run", {}).get("dead_letters", 0)
    behind = rated and "kept_up" in result and not result["kept_up"]["keeps_up"]
    return 1 if bad or dead or behind else 0


if __name__ == "__main__":
    raise SystemExit(main())
