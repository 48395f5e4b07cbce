"""Replay throughput: ``replimon replay`` over a window of a recorded topic of 1,000
groups of 5 nodes, from checkpoint records and from the earliest offset, beside the single-thread
core chain over the window's events (the baseline of the same run).

One simulator trace (``--groups`` x 5 nodes, ``--seconds`` of event time, records stamped with
their ``ts_ms``) is published to the embedded broker and run once through the job in many
micro-batches as the live job would (run id ``live``, checkpoint records every
``--checkpoint-s`` s to ``monitor.state``). Then, ``--repeat`` times, interleaved, the window from
``--from-s`` to ``--to-s`` is replayed through ``replimon.replay.run.replay`` both ways; each
figure is records read / wall time of the replay (planning, Spark query start to end, PostgreSQL
writes included), as a median over the repetitions.

    .venv/bin/python bench/replay.py                     # about 10 minutes
    .venv/bin/python bench/replay.py --groups 50 --seconds 60 --from-s 30 --to-s 50 --checkpoint-s 10 \
        --repeat 1 --core-repeat 1 --out /tmp/r.json    # smoke, 3 minutes
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import chain  # noqa: E402  (bench/chain.py)
from report import render_tables  # noqa: E402


def log(msg: str) -> None:
    print(f"[replay {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--seconds", type=int, default=90, help="event time of the recorded trace")
    ap.add_argument("--rate", type=float, default=1.0, help="decisions per second per group (~12 events/s a group at 1)")
    ap.add_argument("--from-s", type=int, default=60, help="window start, s into the trace")
    ap.add_argument("--to-s", type=int, default=90, help="window end, s into the trace")
    ap.add_argument("--checkpoint-s", type=float, default=30.0, help="streaming.replay_checkpoint_s of the base run")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--core-repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "replay.json"))
    args = ap.parse_args()
    if not 0 <= args.from_s < args.to_s <= args.seconds:
        ap.error("--from-s and --to-s must satisfy 0 <= from < to <= --seconds")

    from confluent_kafka import Producer

    from replimon.config import load_settings
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
    results: dict[str, Any] = {"benchmark": "replay", "date": datetime.now(UTC).isoformat(timespec="seconds"),
                               "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                           "load_average": list(os.getloadavg())},
                               "settings": vars(args), "events": len(events), "window_events": len(in_window)}
    log("core chain over the window's events")
    results["core"] = chain.ceiling(in_window, args.core_repeat)
    ceiling = results["core"]["events_per_s"]["chain"]["median"]
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
        runs: dict[str, list[dict[str, Any]]] = {"checkpoint": [], "earliest": []}
        for rep in range(args.repeat):
            for mode in runs:
                r = replay(settings, lo, hi, spark=spark, state_from=mode)
                runs[mode].append({"run_id": r.run_id, "records": r.records_read, "seconds": round(r.seconds, 2),
                                   "records_per_s": round(r.records_read / r.seconds),
                                   "window_events_per_s": round(len(in_window) / r.seconds),
                                   "groups_from_checkpoints": len(r.start.checkpoints), "alerts": r.alerts})
                log(f"rep {rep + 1}/{args.repeat} {mode:10s} {r.records_read:,} records in {r.seconds:.1f} s")
        spark.stop()
    table = []
    results["modes"] = {}
    for mode, rs in runs.items():
        med = {k: statistics.median(x[k] for x in rs) for k in ("records", "seconds", "records_per_s",
                                                                  "window_events_per_s")}
        med["ratio_window_to_core_chain"] = round(med["window_events_per_s"] / ceiling, 3)
        results["modes"][mode] = {"median": med, "runs": rs}
        table.append([mode, f"{med['records']:,.0f}", f"{med['seconds']:.1f}",
                      " / ".join(f"{x['seconds']:.1f}" for x in rs), f"{med['records_per_s']:,.0f}",
                      f"{med['window_events_per_s']:,.0f}", f"{med['ratio_window_to_core_chain']:.2f}"])
    table.append(["core chain (1 thread, window events)", f"{len(in_window):,}", "", "", "", f"{ceiling:,}", "1.00"])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    render_tables([(f"Replay of a {args.to_s - args.from_s} s window, {args.groups} groups x 5 nodes, "
                    f"{args.repeat} runs (median; ratio: window events/s over the core chain's)",
                    ["state from", "records read", "s (median)", "s per run", "records/s",
                     "window events/s", "ratio"], table)])
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
