"""Replay throughput: ``replimon replay`` over a window of a recorded topic of 1,000 groups of
5 nodes, from checkpoint records, with each engine (``batch``: the bounded Spark batch job, the
default; ``stream``: the monitoring query, ``availableNow``), beside the single-thread core chain
over the window's events measured in the same run (the baseline).

One simulator trace (``--groups`` x 5 nodes, ``--seconds`` of event time, records stamped with
their ``ts_ms``) is published to the embedded broker and run once through the job in many
micro-batches as the live job would (run id ``live``, checkpoint records every
``--checkpoint-s`` s to ``monitor.state``). Then, ``--repeat`` times, interleaved, the window from
``--from-s`` to ``--to-s`` is replayed through ``replimon.replay.run.replay`` by the batch engine
(the streaming one in the first ``--stream-repeat`` repetitions), and by the batch engine over
shorter windows from the same start (``--fit-s``) for a fit of its cost (fixed + per record read).
Each figure is records read / wall time of the ``replay`` call (planning, the Spark job or query,
PostgreSQL writes included), as a median over the repetitions; the core chain is measured before
and after the replays (``--core-repeat`` times each) and its median over both is the ceiling.
The target: window events/s at least the one-thread chain's (half of two cores').

    .venv/bin/python bench/replay.py                     # about 15 minutes
    .venv/bin/python bench/replay.py --groups 50 --seconds 60 --from-s 30 --to-s 50 --checkpoint-s 10 \
        --repeat 1 --core-repeat 1 --fit-s 10 --out /tmp/r.json    # smoke, 3 minutes
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import chain  # noqa: E402  (bench/chain.py)
from report import render_tables  # noqa: E402


def log(msg: str) -> None:
    print(f"[replay {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def fit(points: list[tuple[float, float]]) -> dict[str, Any] | None:
    """Least squares ``seconds = fixed + per_record * records`` over the batch engine's runs."""
    from stats import batch_cost

    got = batch_cost([(x, y * 1000) for x, y in points])
    if got is None:
        return None
    return {"runs": got["batches"], "records_range": got["rows_range"], "fixed_s": round(got["fixed_ms"] / 1000, 2),
            "us_per_record": got["us_per_event"], "marginal_records_per_s": got["marginal_events_per_s"]}


def breakdown(r: Any, wall: float) -> dict[str, Any]:
    """Where one run's wall time went (the batch engine reports its parts in ``params``)."""
    parts = r.params.get("seconds") or {}
    out: dict[str, Any] = {"wall": round(wall, 2), "plan_and_setup": round(wall - r.seconds, 2)}
    if parts:
        tasks = parts["tasks"]
        out.update(spark_job=parts["spark"], write=parts["write"],
                   other=round(r.seconds - parts["spark"] - parts["write"], 2),
                   tasks=len(tasks), task_read_sum=round(sum(t.get("read", 0) for t in tasks), 2),
                   task_decode_sum=round(sum(t.get("decode", 0) for t in tasks), 2),
                   task_monitor_sum=round(sum(t.get("monitor", 0) for t in tasks), 2),
                   task_longest=round(max((sum(t.get(k, 0) for k in ("read", "decode", "monitor")) for t in tasks),
                                          default=0), 2))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--seconds", type=int, default=90, help="event time of the recorded trace")
    ap.add_argument("--rate", type=float, default=1.0, help="decisions per second per group (~12 events/s a group at 1)")
    ap.add_argument("--from-s", type=int, default=60, help="window start, s into the trace")
    ap.add_argument("--to-s", type=int, default=90, help="window end, s into the trace")
    ap.add_argument("--checkpoint-s", type=float, default=30.0, help="streaming.replay_checkpoint_s of the base run")
    ap.add_argument("--repeat", type=int, default=3, help="repetitions of the batch engine's replay")
    ap.add_argument("--stream-repeat", type=int, default=1, help="of which also with the streaming engine")
    ap.add_argument("--fit-s", default="10,20", help="shorter windows from --from-s (s, comma-separated) for the fit")
    ap.add_argument("--core-repeat", type=int, default=3, help="core chain runs before and after the replays")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "replay.json"))
    args = ap.parse_args()
    if not 0 <= args.from_s < args.to_s <= args.seconds:
        ap.error("--from-s and --to-s must satisfy 0 <= from < to <= --seconds")

    from confluent_kafka import Producer

    from replimon.config import load_settings
    from replimon.core import Monitor
    from replimon.embedded import EmbeddedBroker, EmbeddedPostgres
    from replimon.producers.simulator import SimOptions, Simulator
    from replimon.streaming.processor import REPLAY
    from replimon.streaming.replay import replay
    from replimon.streaming.runner import start_query
    from replimon.streaming.session import get_session
    from replimon.streaming.sinks.postgres import PostgresSink

    events: list[dict[str, Any]] = []
    Simulator(SimOptions(groups=args.groups, nodes=5, duration_ms=args.seconds * 1000, seed=args.seed,
                         decisions_per_s=args.rate), [], events.append).run()
    t0 = min(e["ts_ms"] for e in events)
    lo, hi = t0 + args.from_s * 1000, t0 + args.to_s * 1000
    raws = [json.dumps(e, separators=(",", ":")).encode() for e in events]
    in_window = [r for r, e in zip(raws, events, strict=True) if lo <= e["ts_ms"] < hi]
    log(f"{len(events):,} events of {args.groups} groups x {args.seconds} s; window {len(in_window):,}")
    from machine import load_average, machine

    results: dict[str, Any] = {"benchmark": "replay", "machine": machine(), "settings": vars(args),
                               "events": len(events), "window_events": len(in_window), "load_average": []}

    def note_load(what: str) -> None:
        results["load_average"].append({"at": what, "1_5_15": load_average()})

    note_load("start")
    log("core chain over the window's events")
    core = [chain.ceiling(in_window, args.core_repeat)]
    with EmbeddedBroker() as broker, EmbeddedPostgres() as pgserver, \
            tempfile.TemporaryDirectory(prefix="replimon-bench-replay-") as tmp:
        prefix = f"br-{uuid.uuid4().hex[:8]}-"
        topics = {n: f"{prefix}{n}" for n in ("decisions", "executions", "heartbeats", "config", "alerts",
                                              "state", "dead_letters")}
        settings = load_settings(None, kafka={"bootstrap_servers": broker.bootstrap_servers, "topics": topics},
                                 postgres={"dsn": pgserver.dsn},
                                 paths={"checkpoint_dir": f"{tmp}/ckpt", "data_dir": f"{tmp}/data"},
                                 streaming={"replay_checkpoint_s": args.checkpoint_s, "max_offsets_per_trigger": 50_000})
        broker.create_topics(list(settings.kafka.topics.all), settings.kafka.partitions)
        p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20})
        for ev, raw in zip(events, raws, strict=True):
            while True:
                try:
                    p.produce(settings.kafka.topics.for_event_type(ev["type"]), key=ev["group"].encode(),
                              value=raw, timestamp=ev["ts_ms"])
                    break
                except BufferError:
                    p.poll(0.1)
        assert p.flush(120) == 0
        spark = get_session(settings.streaming.master, settings.streaming.shuffle_partitions)
        log("base run (as live: micro-batches of 50,000, checkpoint records)")
        pg = PostgresSink(settings.postgres.dsn, run_id="live")
        started = time.monotonic()
        q = start_query(spark, settings, run_id="live", time_mode=REPLAY, available_now=True, pg=pg,
                        checkpoint=f"{tmp}/base")
        q.awaitTermination()
        assert q.exception() is None, q.exception()
        pg.close()
        results["base_s"] = round(time.monotonic() - started, 1)
        note_load("after the base run")
        runs: dict[str, list[dict[str, Any]]] = {"batch": [], "stream": []}
        points: list[tuple[float, float]] = []
        fits = [int(x) for x in args.fit_s.split(",") if x.strip()] if args.fit_s else []

        def one(engine: str, upto: int) -> dict[str, Any]:
            t = time.monotonic()
            r = replay(settings, lo, upto, spark=spark, engine=engine)
            wall = time.monotonic() - t
            assert r.params["engine"] == engine, r.params["engine"]
            return {"run_id": r.run_id, "records": r.records_read, "seconds": round(wall, 2),
                    "replay_seconds": round(r.seconds, 2), "records_per_s": round(r.records_read / wall),
                    "groups_from_checkpoints": len(r.start.checkpoints), "alerts": r.alerts,
                    "window_records": r.window.records, "breakdown": breakdown(r, wall),
                    "load_average_after": load_average()}

        def chain_now() -> float:
            """One run of the core chain over the window's events, next to a replay (the load
            moves: each replay's ratio is to the chain measured beside it)."""
            import gc

            gc.collect()
            gc.freeze()
            try:
                t = time.perf_counter()
                chain.parse_once(in_window, Monitor().process)
                return len(in_window) / (time.perf_counter() - t)
            finally:
                gc.unfreeze()

        for rep in range(args.repeat):
            order = ["batch", "stream"] if rep < args.stream_repeat else ["batch"]
            for engine in order if rep % 2 == 0 else order[::-1]:
                beside = chain_now()
                x = one(engine, hi)
                x["window_events_per_s"] = round(len(in_window) / x["seconds"])
                x["chain_beside_events_per_s"] = round(beside)
                x["ratio_records_to_chain_beside"] = round(x["records_per_s"] / beside, 3)
                x["ratio_window_to_chain_beside"] = round(x["window_events_per_s"] / beside, 3)
                log(f"   chain beside {beside:,.0f} events/s; breakdown {x['breakdown']}")
                runs[engine].append(x)
                if engine == "batch":
                    points.append((x["records"], x["seconds"]))
                log(f"rep {rep + 1}/{args.repeat} {engine:6s} {x['records']:,} records in {x['seconds']:.1f} s "
                    f"(load {x['load_average_after']})")
            for s_ in fits:
                x = one("batch", lo + s_ * 1000)
                points.append((x["records"], x["seconds"]))
                runs.setdefault(f"batch_{s_}s", []).append(x)
                log(f"rep {rep + 1}/{args.repeat} batch over {s_} s: {x['records']:,} records in {x['seconds']:.1f} s; "
                    f"{x['breakdown']}")
        spark.stop()
    note_load("after the replays")
    log("core chain again")
    core.append(chain.ceiling(in_window, args.core_repeat))
    note_load("end")
    chain_runs = [v for c in core for v in c["events_per_s"]["chain"]["runs"]]
    ceiling = round(statistics.median(chain_runs))
    results["core"] = {"before": core[0], "after": core[1], "chain_median_events_per_s": ceiling,
                       "chain_runs": chain_runs}
    results["fit_batch"] = fit(points)
    table = []
    results["modes"] = {}
    for mode, rs in runs.items():
        if not rs:
            continue
        med: dict[str, Any] = {k: statistics.median(x[k] for x in rs) for k in ("records", "seconds", "records_per_s")}
        if "window_events_per_s" in rs[0]:
            med["window_events_per_s"] = statistics.median(x["window_events_per_s"] for x in rs)
            med["ratio_window_to_core_chain"] = round(med["window_events_per_s"] / ceiling, 3)
        med["ratio_records_to_core_chain"] = round(med["records_per_s"] / ceiling, 3)
        if "chain_beside_events_per_s" in rs[0]:
            for k in ("chain_beside_events_per_s", "ratio_records_to_chain_beside", "ratio_window_to_chain_beside"):
                med[k] = statistics.median(x[k] for x in rs)
        results["modes"][mode] = {"median": med, "runs": rs}
        table.append([mode, f"{med['records']:,.0f}", f"{med['seconds']:.1f}",
                      " / ".join(f"{x['seconds']:.1f}" for x in rs), f"{med['records_per_s']:,.0f}",
                      f"{med['ratio_records_to_core_chain']:.2f}",
                      f"{med['window_events_per_s']:,.0f}" if "window_events_per_s" in med else "-",
                      f"{med['ratio_window_to_core_chain']:.2f}" if "ratio_window_to_core_chain" in med else "-"])
    table.append(["core chain (1 thread, window events)", f"{len(in_window):,}", "", "", f"{ceiling:,}", "1.00",
                  f"{ceiling:,}", "1.00"])
    beside = [[m, f"{v['median']['chain_beside_events_per_s']:,.0f}", f"{v['median']['ratio_records_to_chain_beside']:.2f}",
               f"{v['median']['ratio_window_to_chain_beside']:.2f}",
               " / ".join(f"{x['ratio_window_to_chain_beside']:.2f}" for x in v["runs"])]
              for m, v in results["modes"].items() if "chain_beside_events_per_s" in v["median"]]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    parts = [x["breakdown"] for x in runs["batch"]]
    rows = []
    for k in ("wall", "plan_and_setup", "spark_job", "task_longest", "task_read_sum", "task_decode_sum",
              "task_monitor_sum", "write", "other"):
        vals = [b[k] for b in parts if k in b]
        if vals:
            rows.append([k, f"{statistics.median(vals):.2f}", " / ".join(f"{v:.2f}" for v in vals)])
    f = results["fit_batch"]
    if f:
        rows.append(["fit: fixed s + us per record read", f"{f['fixed_s']:.2f} + {f['us_per_record']:.1f} us",
                     f"{f['runs']} runs, {f['records_range'][0]:,.0f}-{f['records_range'][1]:,.0f} records; "
                     f"marginal {f['marginal_records_per_s'] or 0:,} records/s (0: the load moved more than the "
                     "records)"])
    loads = " -> ".join(f"{x['1_5_15'][0]:.1f}" for x in results["load_average"] if x["1_5_15"])
    render_tables([(f"Replay of a {args.to_s - args.from_s} s window from checkpoint records, {args.groups} groups "
                    f"x 5 nodes (median over runs; ratios to the one-thread core chain of this run; load average "
                    f"{loads})",
                    ["engine / window", "records read", "s (median)", "s per run", "records/s", "ratio",
                     "window events/s", "ratio"], table),
                   ("Each replay against the core chain run just before it (median of the per-run ratios)",
                    ["engine", "chain beside, events/s", "records/s ratio", "window events/s ratio",
                     "window ratio per run"], beside),
                   ("Batch engine: where a run's time goes (seconds; sums over tasks run 2 at a time)",
                    ["part", "median", "per run"], rows)])
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
