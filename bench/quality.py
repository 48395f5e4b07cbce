"""What the data-quality sink costs the streaming job: replays of one recorded topic with the sink
off and on, interleaved.

Workload: simulator events of ``--groups`` groups of ``--nodes`` nodes (no faults), published
once to the embedded broker with their event times as record timestamps (``--events`` records).
Each run replays the whole topic through the real job (``replimon.streaming.runner.start_query``:
availableNow, event time, micro-batches of ``--max-offsets`` records, the real ``BatchWriter``
with Kafka out and PostgreSQL) under a fresh run id and checkpoint, with ``quality.enabled``
false ("off") or true with the cadence under test ("on": by default the shipped defaults,
``quality.every_s`` and ``quality.every_batches`` of conf/replimon.yaml). Each repetition runs
both, in alternating order (off/on, then on/off), so a slow spell of the machine hits both alike.

Figures, per run: events / wall time from ``start_query`` to the query's end (``events/s``), the
same over the batches' own time (Spark's ``triggerExecution``), the validations the hook wrote
(distinct batches in ``dq_results``) and the time spent in the hook (measured around
``QualitySink.validate``). Per repetition the ratio on / off of events/s; the table gives the
median ratio over repetitions and the medians, min and max of each variant. Target:
the default cadence costs under 10 % of the throughput (median ratio >= 0.90). Before the
repetitions Great Expectations is imported and its context built (about 6 s, paid once per
process by the job too, in a background thread at its start) and one replay runs unmeasured (the
first query of a session starts Spark's Python workers).

    .venv/bin/python bench/quality.py                     # full: 1,000 groups x 5 nodes, 5 repetitions
    .venv/bin/python bench/quality.py --quick             # smoke run: seconds of work, figures not to quote
    .venv/bin/python bench/quality.py --every-batches 1   # the cost of validating every batch
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import git, load_average  # noqa: E402  (bench/machine.py: the machine's description)
from machine import machine as describe_machine  # noqa: E402
from report import render_tables  # noqa: E402

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = BENCH_DIR / "results" / "quality.json"
TARGET_RATIO = 0.90


def log(msg: str) -> None:
    print(f"[quality {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def record(settings: Any, groups: int, nodes: int, total: int, seed: int) -> dict[str, Any]:
    """Publish ``total`` simulator events (record timestamp = ts_ms) on the settings' topics."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from replimon.producers.simulator import SimOptions, Simulator

    topics = settings.kafka.topics
    admin = AdminClient({"bootstrap.servers": settings.kafka.bootstrap_servers})
    for fut in admin.create_topics([NewTopic(t, settings.kafka.partitions, 1) for t in topics.inputs]).values():
        fut.result()
    producer = Producer({"bootstrap.servers": settings.kafka.bootstrap_servers, "linger.ms": 20,
                         "batch.num.messages": 10_000, "compression.type": "lz4"})
    sent, seconds, start = 0, 10, None
    while sent < total:
        events: list[dict[str, Any]] = []
        options = SimOptions(groups=groups, nodes=nodes, duration_ms=seconds * 1000, seed=seed + sent,
                             **({} if start is None else {"start_ms": start}))
        Simulator(options, [], events.append).run()
        start = max(e["ts_ms"] for e in events) + 1_000  # the next chunk follows in event time
        for ev in events[: total - sent]:
            while True:
                try:
                    producer.produce(topics.for_event_type(ev["type"]), key=ev["group"].encode(),
                                     value=json.dumps(ev, separators=(",", ":")).encode(), timestamp=ev["ts_ms"])
                    break
                except BufferError:
                    producer.poll(0.1)
        sent += min(len(events), total - sent)
    assert producer.flush(300) == 0
    return {"events": sent, "groups": groups, "nodes": nodes}


class HookTimer:
    """Time spent in ``QualitySink.validate`` (all data-quality sinks of this process)."""

    def __init__(self) -> None:
        from replimon.streaming.sinks.quality import QualitySink

        self.seconds = 0.0
        self.calls = 0
        original = QualitySink.validate
        timer = self

        def timed(hook: Any, result: Any) -> bool:
            started = time.perf_counter()
            try:
                done: bool = original(hook, result)
                return done
            finally:
                timer.seconds += time.perf_counter() - started
                timer.calls += 1

        QualitySink.validate = timed  # type: ignore[method-assign]

    def take(self) -> tuple[float, int]:
        out = (self.seconds, self.calls)
        self.seconds, self.calls = 0.0, 0
        return out


def warm_up() -> float:
    """Import Great Expectations and build its context (paid once per process)."""
    import pandas as pd

    from replimon.config import load_settings
    from replimon.quality import engine
    from replimon.quality.suites import parameters

    started = time.perf_counter()
    engine.validate({"monitor.state.nodes": pd.DataFrame({
        "group": ["g"], "node": ["n"], "member": [True], "executed": [1], "decided": [1],
        "effective_horizon": [11]})}, parameters(load_settings(None), int(time.time() * 1000)))
    return time.perf_counter() - started


def replay(spark: Any, settings: Any, variant: str, total: int, workdir: Path, timer: HookTimer,
           timeout: float) -> dict[str, Any]:
    import psycopg

    from replimon.streaming.processor import REPLAY
    from replimon.streaming.runner import start_query
    from replimon.streaming.sinks.postgres import PostgresSink

    run_id = f"bench-q-{variant}-{uuid.uuid4().hex[:6]}"
    sink = PostgresSink(settings.postgres.dsn, run_id=run_id)
    timer.take()
    started = time.perf_counter()
    query = start_query(spark, settings, run_id=run_id, time_mode=REPLAY, available_now=True, pg=sink,
                        kafka_out=True, checkpoint=str(workdir / "ckpt" / run_id), metrics_listener=False)
    try:
        ended = query.awaitTermination(timeout)
        wall = time.perf_counter() - started
        if query.isActive:
            query.stop()
        if query.exception() is not None:
            raise RuntimeError(f"{variant}: {query.exception()}")
        progress = list(query.recentProgress)
    finally:
        sink.close()
    hook_s, hook_calls = timer.take()
    rows = sum(int(p["numInputRows"]) for p in progress)
    in_batches = sum(int(p["durationMs"]["triggerExecution"]) for p in progress) / 1000
    with psycopg.connect(settings.postgres.dsn) as conn:
        (validations,) = conn.execute("SELECT count(DISTINCT batch_id) FROM dq_results WHERE run_id = %s",
                                      (run_id,)).fetchone() or (0,)
    if not ended or rows < total:
        raise RuntimeError(f"{variant}: the replay read {rows:,} of {total:,} records (ended: {ended})")
    return {"variant": variant, "run_id": run_id, "rows": rows, "batches": len(progress),
            "wall_s": round(wall, 2), "events_per_s": round(rows / wall),
            "events_per_s_in_batches": round(rows / in_batches) if in_batches else None,
            "validations": int(validations), "hook_calls": hook_calls, "hook_s": round(hook_s, 3)}


def sources_digest() -> str:
    """A digest of the sources the measure depends on (contract, core, streaming, quality)."""
    import replimon.contract
    import replimon.core
    import replimon.quality
    import replimon.streaming

    h = hashlib.sha256()
    for mod in (replimon.contract, replimon.core, replimon.streaming, replimon.quality):
        root = Path(mod.__file__ or "").resolve().parent
        for path in sorted(root.rglob("*.py")) + sorted(root.rglob("*.sql")):
            h.update(str(path.relative_to(root.parent)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--events", type=int, default=1_000_000, help="records in the recorded topic")
    ap.add_argument("--max-offsets", type=int, default=None,
                    help="records per micro-batch [streaming.max_offsets_per_trigger]")
    ap.add_argument("--repeat", type=int, default=5, help="repetitions (each runs off and on)")
    ap.add_argument("--every-s", type=float, default=None, help="the 'on' cadence in seconds [quality.every_s]")
    ap.add_argument("--every-batches", type=int, default=None, help="... in batches [quality.every_batches]")
    ap.add_argument("--sample", type=int, default=None, help="records validated per batch [quality.sample_records]")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per replay")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 20 groups, 20,000 events, 1 repetition")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    if args.quick:
        args.groups, args.events, args.repeat = 20, 20_000, 1
        args.max_offsets = args.max_offsets or 5_000

    from replimon.config import load_settings
    from replimon.embedded import EmbeddedBroker, EmbeddedPostgres
    from replimon.streaming.session import get_session

    host = describe_machine()
    host["sources_sha256_16"] = sources_digest()
    host["uncommitted_changes_in_replimon_streaming_producers"] = bool(
        git("status", "--porcelain", "--", "replimon", "streaming", "producers"))
    runs: list[dict[str, Any]] = []
    started = time.perf_counter()
    with EmbeddedBroker() as broker, EmbeddedPostgres() as pg, \
            tempfile.TemporaryDirectory(prefix="replimon-bench-quality-") as tmp:
        prefix = f"bq-{uuid.uuid4().hex[:6]}-"
        base = load_settings(None, kafka={"bootstrap_servers": broker.bootstrap_servers, "topics": {
            k: prefix + k for k in ("decisions", "executions", "heartbeats", "config", "alerts", "state",
                                    "dead_letters")}}, postgres={"dsn": pg.dsn})
        if args.max_offsets is None:
            args.max_offsets = base.streaming.max_offsets_per_trigger
        q = base.quality
        on = q.model_copy(update={"enabled": True,
                                  "every_s": q.every_s if args.every_s is None else args.every_s,
                                  "every_batches": q.every_batches if args.every_batches is None else args.every_batches,
                                  "sample_records": q.sample_records if args.sample is None else args.sample})
        variants = {
            "off": base.model_copy(update={"quality": q.model_copy(update={"enabled": False})}),
            "on": base.model_copy(update={"quality": on}),
        }
        for name, s in variants.items():
            variants[name] = s.model_copy(update={"streaming": s.streaming.model_copy(
                update={"max_offsets_per_trigger": args.max_offsets})})
        log(f"publishing {args.events:,} events of {args.groups} groups x {args.nodes} nodes")
        workload = record(base, args.groups, args.nodes, args.events, args.seed)
        log("warming up Great Expectations")
        gx_s = warm_up()
        timer = HookTimer()
        st = base.streaming
        spark = get_session(st.master, st.shuffle_partitions, **st.spark_conf)
        try:
            # Not measured: the first replay of a session starts Spark's Python workers.
            replay(spark, variants["off"], "warm-up", workload["events"], Path(tmp), timer, args.timeout)
            for rep in range(args.repeat):
                order = ("off", "on") if rep % 2 == 0 else ("on", "off")
                for name in order:
                    r = replay(spark, variants[name], name, workload["events"], Path(tmp), timer, args.timeout)
                    r["repetition"] = rep
                    runs.append(r)
                    log(f"rep {rep + 1}/{args.repeat} {name:3s}: {r['events_per_s']:,} ev/s "
                        f"({r['wall_s']} s, {r['batches']} batches, {r['validations']} validated, "
                        f"hook {r['hook_s']} s)")
        finally:
            spark.stop()
    host["load_average_at_end_1_5_15"] = load_average()
    res = summarise(args, runs, workload, host, gx_s, on.model_dump(), round(time.perf_counter() - started))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2, default=str) + "\n", encoding="utf-8")
    render(res)
    if args.quick:
        print("\n(--quick: a smoke run; do not quote these figures)")
    print(f"\nwritten: {args.out} ({res['elapsed_s']} s)")
    return 0


def summarise(args: Any, runs: list[dict[str, Any]], workload: dict[str, Any], host: dict[str, Any],
              gx_s: float, quality: dict[str, Any], elapsed: int) -> dict[str, Any]:
    by = {v: [r for r in runs if r["variant"] == v] for v in ("off", "on")}
    ratios = []
    for rep in range(args.repeat):
        off = next(r for r in by["off"] if r["repetition"] == rep)
        on = next(r for r in by["on"] if r["repetition"] == rep)
        ratios.append(on["events_per_s"] / off["events_per_s"])
    ratio = statistics.median(ratios)
    return {
        "benchmark": "quality", "command": " ".join(["bench/quality.py", *(sys.argv[1:])]),
        "quick": args.quick, "machine": host, "elapsed_s": elapsed,
        "settings": {"groups": args.groups, "nodes": args.nodes, "events": workload["events"],
                     "max_offsets": args.max_offsets, "repeat": args.repeat, "seed": args.seed,
                     "quality_on": quality, "gx_warm_up_s": round(gx_s, 2), "cpus": os.cpu_count()},
        "variants": {v: {"events_per_s": spread([r["events_per_s"] for r in rs]),
                         "events_per_s_in_batches": spread([r["events_per_s_in_batches"] or 0 for r in rs]),
                         "wall_s": spread([r["wall_s"] for r in rs]),
                         "validations": spread([r["validations"] for r in rs]),
                         "hook_s": spread([r["hook_s"] for r in rs])} for v, rs in by.items()},
        "ratios_on_off": [round(x, 4) for x in ratios], "median_ratio": round(ratio, 4),
        "target": {"median_ratio_at_least": TARGET_RATIO, "met": ratio >= TARGET_RATIO},
        "runs": runs,
    }


def render(res: dict[str, Any]) -> None:
    s, v = res["settings"], res["variants"]

    def fmt(d: dict[str, float], digits: int = 0) -> list[str]:
        return [f"{d[k]:,.{digits}f}" for k in ("median", "min", "max")]

    rows = [[name, *fmt(v[name]["events_per_s"]), *fmt(v[name]["events_per_s_in_batches"])[:1],
             fmt(v[name]["wall_s"], 1)[0], fmt(v[name]["validations"])[0], fmt(v[name]["hook_s"], 2)[0]]
            for name in ("off", "on")]
    q = s["quality_on"]
    render_tables([
        (f"Data-quality hook: {s['events']:,} events of {s['groups']} groups x {s['nodes']} nodes replayed in "
         f"batches of {s['max_offsets']:,}, {s['repeat']} repetitions (medians; on = every {q['every_s']:g} s / "
         f"every {q['every_batches']} batches, {q['sample_records']:,} records)",
         ["variant", "events/s", "min", "max", "events/s in batches", "wall s", "validated batches", "hook s"], rows),
        ("Ratio on / off (events/s, per repetition)", ["", ""], [
            ["per repetition", " ".join(f"{x:.3f}" for x in res["ratios_on_off"])],
            ["median", f"{res['median_ratio']:.3f}"],
            [f"target: median >= {TARGET_RATIO}", "met" if res["target"]["met"] else "NOT met"]]),
    ])


if __name__ == "__main__":
    raise SystemExit(main())
