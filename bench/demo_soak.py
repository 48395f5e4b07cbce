"""A long ``replimon demo`` with faults of every family through the run: is every fault detected
once, is nothing else raised, does the job's memory stay flat?

Run from the repository root with the project's interpreter::

    .venv/bin/python bench/demo_soak.py                   # 20 minutes of demo (issue 16 item 5)
    .venv/bin/python bench/demo_soak.py --minutes 4       # a shorter look, same verdicts
    .venv/bin/python bench/demo_soak.py --offline         # seconds: the same fleet through the core only

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

Output: a table on stdout and JSON (``--out``, default ``bench/results/demo_soak.json``) with the
machine (``bench/machine.py``), the plan, every fault's detections, the samples.
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

from machine import machine  # bench/machine.py (the scripts run from bench/)
from report import render_tables  # bench/report.py
from stats import log

from replimon.config import load_settings
from replimon.demo import DemoPlan, plan_demo, run_demo
from replimon.demo_fleet import FAMILIES, family_of
from replimon.producers.fleet_run import Injection

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = BENCH_DIR / "results" / "demo_soak.json"
IMPLIED: dict[str, frozenset[str]] = {k: v for f in FAMILIES for k, v in getattr(f.sim, "IMPLIED", {}).items()}


# -- the plan ------------------------------------------------------------------------------------
def injections(first_s: float, last_s: float, clean: int) -> tuple[list[str], dict[str, int]]:
    """Every catalogue entry of every family in a group of its own, the families in turn, evenly
    over [first_s, last_s]; and each family's group count (its entries + ``clean``)."""
    queues = {f.name: [(f, name) for name in sorted(f.sim.CATALOGUE)] for f in FAMILIES}
    counts = {name: len(q) + clean for name, q in queues.items()}
    order: list[tuple[Any, str]] = []
    while any(queues.values()):
        for q in queues.values():
            if q:
                order.append(q.pop(0))
    used: Counter[str] = Counter()
    out = []
    step = (last_s - first_s) / max(1, len(order) - 1)
    for i, (fam, fault) in enumerate(order):
        used[fam.name] += 1
        group = fam.names(used[fam.name])[-1]
        out.append(f"{fault}:{group}@{first_s + i * step:.0f}s")
    return out, counts


def expected(inj: Injection) -> str | None:
    return family_of(inj).sim.CATALOGUE[inj.fault].alert


def command_line(plan: DemoPlan, texts: list[str], minutes: float) -> str:
    c = plan.choice
    parts = ["replimon demo --plain", f"--duration {minutes:g}m", f"--groups {c.groups}",
             f"--gen-groups {c.gen_groups}", f"--qlog-groups {c.qlog_groups}",
             f"--chain-groups {c.chain_groups}"]
    return " ".join(parts + [f"-i {t}" for t in texts])


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

    def attach(self, job: Any) -> None:
        self.job = job
        self.began = time.monotonic()
        threading.Thread(target=self._loop, name="soak-sampler", daemon=True).start()

    def _loop(self) -> None:
        last = self.meter.sample()
        while not self.stop.wait(self.every):
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


# -- output --------------------------------------------------------------------------------------
def tables(result: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    out = []
    for name in ("offline", "live"):
        v = result.get(name)
        if not v:
            continue
        rows = [["faults detected once", f"{v['detected']} of {v['expected']}"],
                ["near misses (must be silent)", str(v["near_misses"])],
                ["alerts a fault raised: faults", ", ".join(f"{k}: {n}" for k, n in sorted(v["alerts_per_fault"].items()))],
                ["missed or repeated", ", ".join(f"{f['fault']}:{f['group']} {f['alerts']} repeated {len(f['repeated'])}"
                                                 for f in v["missed_or_repeated"]) or "none"],
                ["false alerts", ", ".join(f"{a['group']}:{a['kind']}" for a in v["false_alerts"][:10])
                 + (f" (+{len(v['false_alerts']) - 10})" if len(v["false_alerts"]) > 10 else "") or "none"],
                ["info alerts", ", ".join(f"{k} {n}" for k, n in sorted(v["info"].items())) or "none"]]
        if name == "live":
            rows += [["events published", f"{result['run']['delivered']:,} ({result['run']['failed']} failed)"],
                     ["micro-batches", f"{result['run']['batches']:,}"],
                     ["dead letters", str(result["run"]["dead_letters"])]]
        out.append((f"demo soak, {name}", ["", ""], rows))
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
    ap.add_argument("--clean", type=int, default=2, help="clean groups per family (default 2)")
    ap.add_argument("--sample-every", type=float, default=10.0, help="seconds between memory samples")
    ap.add_argument("--offline", action="store_true", help="only the fleet through the core, in event time")
    ap.add_argument("--linger-ms", type=int, default=200,
                    help="the fleet publisher's linger (default 200; 0: the settings', 5 ms): the embedded "
                         "broker's fetch cost grows with a partition's record batches (docs/demo.md, "
                         "\"Long runs on the embedded broker\"); at 50 ms the job fell behind after ~11 minutes")
    ap.add_argument("--live-only", action="store_true", help="skip the offline pass after the live run")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    settings = load_settings() if not args.linger_ms else load_settings(
        kafka={"producer": {"linger_ms": args.linger_ms}})
    last = args.minutes * 60 - args.tail
    if last <= args.first:
        ap.error(f"--minutes {args.minutes:g} leaves no time for faults between --first and --tail")
    texts, counts = injections(args.first, last, args.clean)
    plan = plan_demo(settings, families="xcom,gen,qlog,chain", groups=counts["xcom"], gen_groups=counts["gen"],
                     qlog_groups=counts["qlog"], chain_groups=counts["chain"], nodes=3,
                     duration=f"{args.minutes * 60:.0f}s", inject=texts)
    result: dict[str, Any] = {"machine": machine(), "args": {k: str(v) for k, v in vars(args).items()},
                              "groups": counts, "command": command_line(plan, texts, args.minutes)}
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
        sampler.stop.set()
        result["run"] = {"events": run["events"], "delivered": run["delivered"], "failed": run["failed"],
                         "batches": run["batches"], "dead_letters": dead[0]}
        result["live"] = verdict(plan, alerts)
        result["memory"] = flatness(sampler.samples, args.first)
        result["samples"] = sampler.samples
    if args.offline or not args.live_only:
        log("offline: the fleet through the core in event time ...")
        result["offline"] = offline(settings, plan)
    result["load_average_at_end"] = machine()["load_average_at_start_1_5_15"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    render_tables(tables(result))
    log(f"wrote {args.out}")
    bad = [v for v in (result.get("offline"), result.get("live")) if v and (v["missed_or_repeated"] or v["false_alerts"])]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
