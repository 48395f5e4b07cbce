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
   ``ts_ms`` split out, so a publisher can restamp it without parsing. ``--families`` (default
   ``xcom``, as before; ``xcom,gen,qlog,chain`` is the mixed fleet): the groups are split evenly
   over the families' simulators (names ``g``, ``pg``, ``ql``, ``ch`` + a number: they never
   collide), each family calibrated the same way on its own rate option (generations
   ``xacts_per_s``, quorum-log ``decrees_per_s``, chain ``writes_per_s``) so that every group emits
   about R / G events/s, and their events merged in time order into one trace; its description
   gives each family's groups, tick, rate option, events and faults (``bench/fleets.py``).
2. **Core ceiling** (the baseline of the same run): one thread, the trace of the highest rate
   (first ``--core-events`` events) as message bytes through ``bench/chain.py``'s
   ``parse_once`` (``decode_event``, the decoded dicts packed and unpacked, ``Monitor.process``:
   what the job does per event, minus Spark, Kafka and PostgreSQL), the same path as it was before
   events were parsed once (``parse_twice``), and ``Monitor.process`` and ``decode_event`` alone; median of ``--core-repeat`` repetitions, the
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
   group, evenly over the window), each raising its alert at once. In a mixed fleet the families
   take turns (one XCom fault, one generations fault, ...), each with its own quick safety
   violations in turn (``bench/fleets.py``: they raise their alert at once or within about 2 s;
   no wedges), each in its own group of its family. "Faults found" counts the faults the trace
   carries: those whose alert the trace's own events raise through the core (``Monitor``, to the
   trace's end; ``traces.carried_faults``); a fault the simulator armed but whose group never
   executed or appended again before the end is shown as armed, not missed. Figures over the
   batches that start in the window:
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
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import chain  # bench/chain.py (the scripts run from bench/)
from fleets import parse_families
from machine import load_average, machine
from plot import write_latency_curve  # bench/plot.py
from report import render_tables  # bench/report.py
from spark_runs import Bench
from stats import batch_cost, fmt, log, median_or_none, ratio
from traces import (
    Trace,
    carried_faults,
    fault_plan,
    fleet_specs,
    read_raws,
    warm_trace,
    write_fleet,
)

SCHEMA = 1
BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = BENCH_DIR / "results" / "pipeline.json"
TARGET_GROUPS = 1000
TARGETS = ((10_000, 1.5), (40_000, 3.0))  # (events/s kept up, p99 alert latency s) at 1,000 groups
DEFAULT_PLOT = BENCH_DIR.parent / "docs" / "img" / "pipeline-latency.svg"
LOAD_WARNING = 1.5
MIN_STEADY = 3  # steady capacity batches below this: the figure is flagged


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


def live_batches(sustained: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(rows, ms) of the sustained runs' measured batches with input: the live job at its trigger,
    batch sizes set by the rates. The capacity run's batches are left out of the fit: capped at
    ``--max-offsets``, each pays the source's alignment of the topics' cut in ``latestOffset``
    (seconds on the embedded broker, docs/kafka-source.md), which a live batch does not."""
    return [(float(rows), float(ms)) for s in sustained for r in s.get("runs", [])
            for _, rows, ms, _ in r.get("batches", []) if rows > 0]


def fault_cell(fa: dict[str, Any]) -> str:
    """Faults found / carried by the trace (and armed, where more were)."""
    carried = fa.get("carried", fa["injected"])
    armed = f" ({fa['injected']} armed)" if carried != fa["injected"] else ""
    return f"{fa['found']}/{carried}{armed}"


def describe_families(trace: Trace | dict[str, Any]) -> str:
    """Per family: groups, tick, rate option, events, faults (one family: as the XCom line was)."""
    fams = trace.families if isinstance(trace, Trace) else trace["families"]
    return "; ".join(f"{name} {f['groups']} groups, tick {f['tick_ms']} ms, "
                     + ", ".join(f"{k} {v:g}" for k, v in f.items() if k.endswith("_per_s"))
                     + f", {f['events']:,} events, {f['faults']} faults" for name, f in fams.items())


def run_groups(g: int, args: argparse.Namespace, workdir: Path, bench: Bench | None) -> dict[str, Any]:
    """Traces, the core ceiling, the recorded-topic runs and the sustained runs for G groups."""
    span = args.warmup + args.duration
    top = max(args.rates)
    traces: dict[int, Trace] = {}
    for rate in args.rates:
        t = time.perf_counter()
        seconds = max(span, args.backlog) if rate == top else span
        specs = fleet_specs(args.families, g, args.nodes, rate, seconds, args.seed)
        trace = write_fleet(workdir / f"trace-{g}-{rate}.tsv", specs,
                            fault_plan(g, args.faults, args.warmup, args.duration, args.families))
        trace.carried = carried_faults(trace)
        traces[rate] = trace
        log(f"  trace for {rate:,} ev/s: {trace.rate:,.0f} ev/s simulated ({describe_families(trace)}), "
            f"{trace.events:,} events, {len(trace.faults)} faults ({len(trace.carried)} carried: the core "
            f"raises their alert over the trace), in {time.perf_counter() - t:.1f} s")
    raws = read_raws(traces[top].path, args.core_events)
    log(f"  core ceiling: {len(raws):,} events of the {top:,} ev/s trace, {args.core_repeat} repetition(s) ...")
    core = chain.ceiling(raws, args.core_repeat)
    del raws
    cm = core["events_per_s"]
    log(f"  core: chain {cm['chain']['median']:,} ev/s (parsing twice {cm['chain_parse_twice']['median']:,}), "
        f"Monitor.process {cm['monitor']['median']:,}, decode_event {cm['decode_event']['median']:,}")
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
    capped = [(float(rows), float(ms)) for c in rec["capacity"] for _, rows, ms in c["batches"][2:]]
    out["batch_cost"] = batch_cost(live_batches(out["sustained"]))
    out["batch_cost_with_capacity"] = batch_cost(capped + live_batches(out["sustained"]))
    kept = [s["summary"] for s in out["sustained"] if "summary" in s and s["summary"]["keeps_up"]]
    best = max(kept, key=lambda s: s["published_events_per_s"] or 0, default=None)
    out["highest_kept_up"] = best
    ceiling = cm["chain"]["median"]
    out["ratio_to_core_chain"] = {
        "capacity": ratio(out["capacity"]["events_per_s"], ceiling),
        "replay_wall": ratio(out["replay"]["events_per_s_wall"], ceiling),
        "sustained_highest_kept_up": ratio(best["published_events_per_s"] if best else None, ceiling),
    }
    for t in [*traces.values(), warm]:
        t.path.unlink(missing_ok=True)
    return out


def tables(res: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """The result as (title, header, rows) tables, for rich or for plain text."""
    per = res["groups"]
    st = res["settings"]
    names = [f"{g['groups']} groups" for g in per]
    work = []
    for g in per:
        for rate, w in g["workload"].items():
            work.append([f"{g['groups']} x {g['nodes']} nodes, target {int(rate):,}",
                         f"{w['events_per_s']:,} ev/s simulated, {w['seconds']:g} s, {w['events']:,} events, "
                         f"{w['faults']} faults: {describe_families(w)}"])
    out = [("Workload (simulator traces)", ["", ""], work)]

    def cell(x: float | None, base: float) -> str:
        return "-" if x is None else f"{x:,.0f} ({x / base:.2f}x)"

    thr: list[list[str]] = [
        ["core chain: decode_event + pack + Monitor.process, 1 thread (ceiling)", *[f"{g['core']['events_per_s']['chain']['median']:,}" for g in per]],
        ["  the chain before parsing once (parse_event + json.loads)",
         *[f"{g['core']['events_per_s']['chain_parse_twice']['median']:,} (now {g['core']['chain_to_chain_parse_twice']:.2f}x)" for g in per]],
        ["  Monitor.process alone", *[f"{g['core']['events_per_s']['monitor']['median']:,}" for g in per]],
        ["  decode_event alone", *[f"{g['core']['events_per_s']['decode_event']['median']:,}" for g in per]],
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
            faults = fault_cell(r0["fault_alerts"]) if r0 else "-"
            other = (", ".join(f"{k} {v}" for k, v in r0["other_alerts"].items()) or "none") if r0 else "-"
            sus.append([str(g["groups"]), f"{m['target_events_per_s']:,}", fmt(m["published_events_per_s"]),
                        fmt(m["processed_events_per_s"]),
                        f"{fmt(m['batch_ms_median'])} / {fmt(m['batch_ms_p90'])} / {fmt(m['batch_ms_max'])}",
                        fmt(m["backlog_end_s"], 1), "yes" if m["keeps_up"] else "NO", faults,
                        f"{fmt(m['latency_s_p50'], 2)} / {fmt(m['latency_s_p99'], 2)} / {fmt(m['latency_s_max'], 2)}",
                        fmt(m["visible_s_p99"], 2), other])
    out.append((f"Sustained, live (trigger {st['trigger_s']:g} s, {st['duration_s']:g} s measured after "
                f"{st['warmup_s']:g} s; medians of {st['repeat']} run(s))",
                ["groups", "target", "published ev/s", "read ev/s", "batch ms med/p90/max", "backlog end s",
                 "kept up", "faults found", "latency s p50/p99/max", "visible p99 s", "other alerts"], sus))
    where = []
    for g in per:
        fit = g.get("batch_cost")
        if fit:
            over = (f"over {fit['batches']} live batches of "
                    f"{fit['rows_range'][0]:,.0f}-{fit['rows_range'][1]:,.0f} rows")
            ts = fit.get("theil_sen")
            robust = (f"Theil-Sen {ts['fixed_ms']:,} ms + {ts['us_per_event']:g} us/event; " if ts else "")
            where.append([f"{g['groups']} groups, batch cost",
                          robust + f"least squares {fit['fixed_ms']:,} ms + {fit['us_per_event']:g} us/event "
                          f"({over})"])
        for c in g["recorded"]["capacity"][:1]:
            parts = c["duration_parts_ms_median"]
            where.append([f"{g['groups']} groups, capacity",
                          ", ".join(f"{k} {v:,.0f}" for k, v in parts.items() if k != "triggerExecution")
                          + f"; PostgreSQL write {fmt(c['postgres_write_ms_median'])} ms; "
                            f"{fmt(c['snapshots_per_batch_median'])} group snapshots a batch"])
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
                              + f"; PostgreSQL write {fmt(r['postgres_write_ms_median'])} ms"
                              + "; processes started in the window (at least): "
                              + (", ".join(f"{k} {v}" for k, v in cpu.get("processes_started_in_window", {}).items())
                                 or "none")
                              + f" in {r['batches_in_window']} batches"])
    out.append(("Where the time goes (medians per batch; CPU over the measured window, first run)", ["", ""], where))
    t = res["targets"]
    if t is not None and "each" in t:  # older results judged another target
        out.append((f"Targets at {TARGET_GROUPS} groups (highest rate kept up: "
                    f"{fmt(t['highest_kept_up_events_per_s'])} ev/s)", ["target", "verdict"], [
            [f"{x['events_per_s']:,} ev/s kept up with p99 <= {x['p99_s']:g} s",
             ("met" if x["met"] else "NOT met") + f" ({x['why']})"] for x in t["each"]]))
    return out


def render(res: dict[str, Any], stream: Any = None) -> None:
    render_tables(tables(res), stream)


def targets(per: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The targets (``TARGETS``) judged on the run at ``TARGET_GROUPS`` groups: a
    target is met by a rate run at or above its rate that kept up with its p99 at most the
    target's; ``why`` says what the nearest run showed."""
    g = next((x for x in per if x["groups"] == TARGET_GROUPS and "highest_kept_up" in x), None)
    if g is None:
        return None
    best = g["highest_kept_up"]
    runs = [s["summary"] for s in g["sustained"] if "summary" in s]
    each = []
    for rate, p99 in TARGETS:
        at = [m for m in runs if (m["published_events_per_s"] or 0) >= 0.95 * rate]
        met = [m for m in at if m["keeps_up"] and m["latency_s_p99"] is not None and m["latency_s_p99"] <= p99]
        if met:
            why = f"{met[0]['published_events_per_s']:,} ev/s, p99 {met[0]['latency_s_p99']:.2f} s"
        elif at:
            m = at[0]
            why = (f"at {m['published_events_per_s']:,} ev/s: " + ("kept up" if m["keeps_up"] else "not kept up")
                   + f", p99 {fmt(m['latency_s_p99'], 2)} s")
        else:
            why = "no run at that rate (a lower one was not kept up, or it was not asked for)"
        each.append({"events_per_s": rate, "p99_s": p99, "met": bool(met), "why": why})
    return {"groups": TARGET_GROUPS, "highest_kept_up_events_per_s": best["published_events_per_s"] if best else None,
            "latency_s_p99": best["latency_s_p99"] if best else None, "each": each}


# -- main ----------------------------------------------------------------------------------------
def _ints(text: str) -> list[int]:
    return [int(float(x)) for x in text.split(",") if x.strip()]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small workload for a smoke run (figures not to quote)")
    p.add_argument("--groups", type=_ints, default=None, help="group counts, comma-separated (default 100,1000; 20 with --quick)")
    p.add_argument("--nodes", type=int, default=5, help="nodes a group (default 5)")
    p.add_argument("--families", default="xcom",
                   help="protocol families of the fleet, comma-separated (default xcom; "
                        "xcom,gen,qlog,chain: the mixed fleet, groups split evenly)")
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
    p.add_argument("--plot", type=Path, default=None,
                   help="the latency curve (SVG, bench/plot.py) of the run; default "
                        f"{DEFAULT_PLOT.relative_to(BENCH_DIR.parent)} for a full run with Spark, none with --quick; "
                        "'-': none")
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
    try:
        args.families = parse_families(args.families)
    except ValueError as exc:
        p.error(str(exc))
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
                     "families": [f.name for f in args.families],
                     "fault_kinds": [k for f in args.families for k in f.faults], "backlog_s": args.backlog,
                     "max_offsets": args.max_offsets if args.max_offsets is not None else st.max_offsets_per_trigger,
                     "repeat": args.repeat, "core_events": args.core_events, "core_repeat": args.core_repeat,
                     "seed": args.seed, "spark_master": st.master, "shuffle_partitions": st.shuffle_partitions,
                     "state_buckets": st.state_buckets, "source_format": st.source_format,
                     "replay_max_offsets_per_trigger": st.max_offsets_per_trigger,
                     "kafka_partitions": base.kafka.partitions},
        "groups": per,
        "targets": targets(per),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2, default=str) + "\n", encoding="utf-8")
    render(res)
    plot = args.plot if args.plot is not None else (None if args.quick or args.no_spark else DEFAULT_PLOT)
    if plot is not None and str(plot) != "-" and write_latency_curve(res, plot, TARGETS):
        print(f"\nlatency curve: {plot}")
    for w in warnings:
        print(f"\nWARNING: {w}")
    if args.quick:
        print("\n(--quick: a smoke run; do not quote these figures)")
    print(f"\nwritten: {args.out} ({res['elapsed_s']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
