"""Where a micro-batch's Python time goes, without Spark: the job's per-batch work at a fleet size,
part by part, on one thread.

The streaming job's Python work per micro-batch is the decode stage (``streaming/decode.py``),
the stateful operator's calls per bucket (``streaming/processor.py``'s ``MonitorLogic``) and the
driver's ``foreachBatch`` (``streaming/writer.py``'s ``batch_result`` and the PostgreSQL sink's
row building). This replays a simulated fleet in one-second micro-batches through exactly that
code with in-memory stand-ins for Spark's ValueState and timers, and times each part:

* ``decode``: ``decode_batches`` over the batch as one Arrow batch (JSON, contract, packing).
* per bucket: ``load`` (state text -> groups), ``monitor`` (a group's ``from_state``: JSON and
  objects), ``feed`` (unpack, sort, ``on_event``), ``due``, ``keep`` (``to_state`` JSON),
  ``rows`` (alerts and snapshots as output rows), ``arm`` and ``save``; ``clock only``: buckets
  that got only the batch's clock row.
* ``driver``: ``batch_result`` over the output rows, the snapshots decoded, and the PostgreSQL
  sink's rows built from them (no database).

State calls and timer calls are counted (each is a round trip to the JVM in Spark: about a
millisecond here, ``docs/streaming.md``), and the output rows by kind. Three variants run on the
same batches, interleaved in every repetition (the order rotating): ``before`` (a snapshot of
every touched group every batch, every group rebuilt from its state text), ``cadence`` (the live
job's snapshot cadence, groups still rebuilt) and ``after`` (the cadence and monitors kept warm
in the worker: the job now, ``streaming/processor.py``). The table gives, per part, the median
over repetitions of the mean over the measured batches (work done once a period counts for its
share of each batch), and the median ratio of the totals.

    .venv/bin/python bench/batch_parts.py [--groups 1000] [--rate 10000] [--batches 10] [--repeat 3] [--snapshot-ms 5000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import render_tables  # noqa: E402


class FakeState:
    """A ValueState in memory; counts calls."""

    def __init__(self, calls: Counter[str]) -> None:
        self.value: Any = None
        self.calls = calls

    def get(self) -> Any:
        self.calls["state.get"] += 1
        return self.value

    def update(self, value: Any) -> None:
        self.calls["state.update"] += 1
        self.value = value


class FakeHandle:
    """The processor handle's timer calls, in memory; counts calls."""

    def __init__(self, calls: Counter[str]) -> None:
        self.timers: set[int] = set()
        self.calls = calls

    def registerTimer(self, when: int) -> None:  # noqa: N802
        self.calls["timer.register"] += 1
        self.timers.add(when)

    def deleteTimer(self, when: int) -> None:  # noqa: N802
        self.calls["timer.delete"] += 1
        self.timers.discard(when)


def simulate(groups: int, nodes: int, rate: float, seconds: float, seed: int) -> tuple[list[list[bytes]], float]:
    """The fleet's messages in one-second batches of simulated time, and the real rate."""
    from traces import calibrate, options

    from replimon.producers.simulator import Simulator

    tick, dps = calibrate(groups, nodes, rate, seed)
    opts = options(groups, nodes, seconds, tick, dps, seed)
    batches: defaultdict[int, list[bytes]] = defaultdict(list)
    start = opts.start_ms

    def sink(ev: dict[str, Any]) -> None:
        batches[(ev["ts_ms"] - start) // 1000].append(json.dumps(ev, separators=(",", ":")).encode())

    Simulator(opts, [], sink).run()
    out = [batches[k] for k in sorted(batches)]
    return out, sum(len(b) for b in out) / seconds


def timed_methods(obj: Any, names: list[str], spent: Counter[str]) -> None:
    """Replace ``obj``'s methods with wrappers that add their time to ``spent[name]``."""
    for name in names:
        fn = getattr(obj, name)

        def wrap(*args: Any, _fn: Callable[..., Any] = fn, _name: str = name, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return _fn(*args, **kw)
            finally:
                spent[_name] += time.perf_counter() - t

        setattr(obj, name, wrap)


VARIANTS = {"before": (0, True), "cadence": (None, True), "after": (None, False)}  # name: (snapshot_ms, cold)


def measure(args: argparse.Namespace, batches: list[list[bytes]], snapshot_ms: int, cold: bool) -> dict[str, float]:
    """One pass of the whole fleet's batches; the medians of the measured batches."""
    import pyarrow as pa

    from replimon.config import load_settings
    from replimon.core.limits import Limits
    from replimon.streaming import processor
    from replimon.streaming.decode import decode_batches
    from replimon.streaming.processor import DEAD_BUCKET, MonitorLogic
    from replimon.streaming.rows import CLOCK_KEY
    from replimon.streaming.sinks import postgres as pgsink
    from replimon.streaming.writer import batch_result

    settings = load_settings()
    types = dict(settings.kafka.topics.input_types)
    topic_of = {v: k for k, v in types.items()}
    decode = decode_batches(types, args.buckets, clock=True)
    logic = MonitorLogic(Limits.from_settings(settings), buckets=args.buckets, snapshot_ms=snapshot_ms)
    processor._warm.clear()
    warm_groups = processor.WARM_GROUPS
    if cold:
        processor.WARM_GROUPS = 0  # every group rebuilt from its state text, as before warm monitors
    calls: Counter[str] = Counter()
    states = {b: FakeState(calls) for b in range(args.buckets)}
    handles = {b: FakeHandle(calls) for b in range(args.buckets)}
    spent: Counter[str] = Counter()
    timed_methods(logic, ["load", "monitor", "feed", "due", "keep", "rows", "arm", "save", "_clock_only",
                          "on_timer"], spent)
    per_batch: list[dict[str, float]] = []
    start_ms = json.loads(batches[0][0])["ts_ms"]
    try:
        for i, raws in enumerate(batches):
            types_of = [json.loads(r)["type"] for r in raws]
            table = pa.RecordBatch.from_arrays(
                [pa.array(raws, pa.binary()), pa.array([topic_of[t] for t in types_of], pa.string()),
                 pa.array([0] * len(raws), pa.int32()), pa.array(range(len(raws)), pa.int64()),
                 pa.array([0] * len(raws), pa.timestamp("us"))],
                names=["value", "topic", "partition", "offset", "timestamp"])
            spent.clear()
            calls.clear()
            t0 = time.perf_counter()
            packed = list(decode(iter([table])))
            t1 = time.perf_counter()
            rows_by_bucket: defaultdict[int, list[tuple[str, bytes]]] = defaultdict(list)
            for rb in packed:
                for b, g, items in zip(rb.column("bucket").to_pylist(), rb.column("group").to_pylist(),
                                       rb.column("items").to_pylist(), strict=True):
                    rows_by_bucket[b].append((g, items))
            now = start_ms + (i + 1) * 1000 + 200
            out: list[tuple[Any, ...]] = []
            busy = 0
            t2 = time.perf_counter()
            for b in sorted(rows_by_bucket):
                if b == DEAD_BUCKET:
                    continue
                out.extend(logic.on_rows(handles[b], states[b], rows_by_bucket[b], now))
                busy += any(g != CLOCK_KEY for g, _ in rows_by_bucket[b])
            for b, handle in handles.items():  # Spark's order: timers after the data
                due = [t for t in handle.timers if t <= now]
                if due:
                    handle.timers.difference_update(due)
                    calls["timer.fired"] += 1
                    out.extend(logic.on_timer(handle, states[b], now))
            t3 = time.perf_counter()
            result = batch_result(i, [SimpleNamespace(out=r[0], group_id=r[1], id=r[2], status=r[3], ts_ms=r[4],
                                                      payload=r[5], raw=r[6]) for r in out])
            snaps = result.snapshots
            latest = {s["group"]: s for s in snaps}
            built = [pgsink._group_row(s, "bench", i) for s in latest.values()]
            built += [r for s in latest.values() for r in pgsink._node_rows(s, "bench", i)]
            built += [pgsink._series_row(s, "bench") for s in snaps]
            built += [r for s in snaps for r in pgsink._node_series_rows(s, "bench")]
            t4 = time.perf_counter()
            if i < args.warmup:
                continue
            kinds = Counter(r[0] for r in out)
            per_batch.append({
                "events": len(raws), "decode_ms": (t1 - t0) * 1000, "operator_ms": (t3 - t2) * 1000,
                "driver_ms": (t4 - t3) * 1000, "total_ms": (t4 - t0) * 1000, "buckets_with_groups": busy,
                **{f"{k}_ms": v * 1000 for k, v in spent.items()},
                **{f"calls_{k}": v for k, v in calls.items()},
                **{f"rows_{k}": v for k, v in kinds.items()}, "pg_rows": len(built)})
    finally:
        processor.WARM_GROUPS = warm_groups
    keys = sorted({k for b in per_batch for k in b})
    # Means, not medians, over the batches: work done once a period (snapshots) counts for its
    # share of every batch.
    return {k: statistics.fmean(b.get(k, 0) for b in per_batch) for k in keys}


def run(args: argparse.Namespace) -> dict[str, Any]:
    seconds = args.warmup + args.batches
    print(f"simulating {args.groups} groups x {args.nodes} nodes, {seconds} s at ~{args.rate:,} events/s",
          file=sys.stderr)
    batches, real_rate = simulate(args.groups, args.nodes, args.rate, seconds, args.seed)
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    names = list(VARIANTS)
    for rep in range(args.repeat):
        # The order rotates each repetition: a variant run later in a process ran measurably
        # slower here whatever it was, so none always goes first.
        for name in names[rep % len(names):] + names[:rep % len(names)]:
            snapshot_ms, cold = VARIANTS[name]
            print(f"repetition {rep + 1}/{args.repeat}: {name}", file=sys.stderr)
            runs[name].append(measure(args, batches, args.snapshot_ms if snapshot_ms is None else snapshot_ms, cold))
    medians = {name: {k: statistics.median(r.get(k, 0) for r in rs) for k in sorted({k for r in rs for k in r})}
               for name, rs in runs.items()}
    ratio = statistics.median(b["total_ms"] / a["total_ms"] for a, b in zip(runs["after"], runs["before"], strict=True))
    return {"groups": args.groups, "nodes": args.nodes, "buckets": args.buckets, "rate": round(real_rate),
            "snapshot_ms": args.snapshot_ms, "batches": args.batches, "repeat": args.repeat,
            "load_avg": os.getloadavg(), "median": medians, "runs": runs, "before_over_after_total": round(ratio, 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--rate", type=int, default=10_000, help="events/s of the fleet")
    ap.add_argument("--batches", type=int, default=10, help="one-second batches measured")
    ap.add_argument("--warmup", type=int, default=20, help="one-second batches before them")
    ap.add_argument("--buckets", type=int, default=64)
    ap.add_argument("--snapshot-ms", type=int, default=None,
                    help="snapshot cadence (default: the live job's; 0: every batch)")
    ap.add_argument("--repeat", type=int, default=3, help="repetitions of each variant, interleaved")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "batch_parts.json"))
    args = ap.parse_args(argv)
    if args.snapshot_ms is None:
        from replimon.streaming.processor import DEFAULT_SNAPSHOT_MS

        args.snapshot_ms = DEFAULT_SNAPSHOT_MS
    res = run(args)
    med = res["median"]
    keys = sorted({k for v in med.values() for k in v})
    rows = [[k, *(f"{med[v].get(k, 0):,.1f}" for v in VARIANTS)] for k in keys]
    render_tables([(f"Per one-second batch: medians over {res['repeat']} repetitions of the mean of "
                    f"{res['batches']} batches ({res['groups']} groups, {res['rate']:,} events/s, "
                    f"{res['buckets']} buckets; after: warm monitors, snapshots every {res['snapshot_ms']} ms)",
                    ["part", *VARIANTS], rows),
                   ("Ratio", ["", ""], [["total before / after (median of per-repetition ratios)",
                                          f"{res['before_over_after_total']}"],
                                         ["load average at the end", " ".join(f"{x:.2f}" for x in res["load_avg"])]])])
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
