"""Alert latency of the live job, part by part: where a violation's alert spends the time between
its event and its row in PostgreSQL.

One process starts the embedded broker and PostgreSQL (``EmbeddedStack``, as ``replimon demo``)
and one Spark session, then runs the demo's own path once per variant (each on its own topics,
checkpoint and run id): the job through ``runner.start_query`` with the real writer (Kafka, then
PostgreSQL, then data quality), and the demo's fleet (``DemoFleet``) stepped against the wall
clock into ``producers.publisher.Publisher`` exactly as ``replimon/demo.py`` does. Each group of
the fleet gets one violation fault (``VIOLATIONS``), spread evenly over the run after
``--settle`` seconds (the job's first batches are its start-up, not its steady state).

For every firing violation alert row the run joins:

* ``E``: the alert's ``event_ts`` (the ``ts_ms`` of the event that completed the violation);
* ``S``: when the fleet handed that event to ``Publisher.send`` (the event is found by its
  evidence: group, node, incarnation, seq);
* ``D``: when librdkafka reported its delivery (a thread serves delivery reports every 10 ms;
  the evidence gives topic, partition and offset);
* ``R``: the processing time (``batchTimestampMs`` in the checkpoint's offsets log) of the
  micro-batch whose offset range held that record (the query progress'
  ``startOffset``/``endOffset``);
* ``T``: the alert's ``detected_ts``: in live mode the processing time of the batch that raised
  it;
* ``I``: ``inserted_at`` (PostgreSQL ``now()`` of the batch's write transaction).

and splits ``I - E`` into parts that add up exactly:

===============  ==========  =============================================================
part             span        what it is
===============  ==========  =============================================================
``stamp``        S - E       the fleet's loop behind its own clock (the simulators stamp
                             events at their tick; the loop steps when the wall clock is there)
``publish``      D - S       librdkafka: ``linger.ms``, the produce request, the broker's ack
``wait``         R - D       the record on the broker until a batch starts that reads it: the
                             trigger interval and the batch in progress (negative when it came
                             in while that batch was planning)
``hold``         T - R       batches between reading the event and raising the alert: the
                             monitor's skew hold (a cross-node rule is judged against the group
                             clock minus ``thresholds.skew_s``), 0 when raised by the batch that
                             read it
``batch``        I - T       the raising batch itself up to its PostgreSQL write: planning
                             (``latestOffset``, ``walCommit``), Spark's stages, the Kafka sink
===============  ==========  =============================================================

Only violations whose event came after the end of the query's third batch with input count (the
first batches are the query's start-up; in the first variant of a session also the JVM's and the
Python workers' warm-up). Printed: per variant the median and p99 (nearest rank) of each part and
of the whole, each part's share of the median total, batch figures (duration, idle gap before a
batch, batches between read and raise, and the raising batch's own parts on the driver: until
its output rows were collected, then each sink's ``write``), and the load average at each
variant's start and end; then the ratio of the variants' p50 and p99. ``before`` is the job as it
was (trigger 1 s, publisher ``linger.ms`` 20, the Kafka sink starting a producer every batch),
``now`` the tree's settings. JSON: ``bench/results/latency.json`` (``--out``).

    .venv/bin/python bench/latency.py                          # demo fleet, before and now
    .venv/bin/python bench/latency.py --groups 94 --duration 150   # 100 groups (94 + 3 + 3)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from array import array
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from machine import load_average, machine
from report import render_tables
from stats import log, nearest_rank

BENCH = Path(__file__).resolve().parent
PARTS = ("stamp", "publish", "wait", "hold", "batch")
# One violation fault per group, cycling through each family's list (all raise a violation alert).
VIOLATIONS = {
    "xcom": ("beyond_horizon", "divergent_decision", "eh_out_of_domain", "execution_regression"),
    "gen": ("gen_regression",),
    "qlog": ("qlog_divergent_decree",),
    "chain": ("chain_view_conflict",),
}
# The settings each variant runs with; None: the tree's (conf/replimon.yaml as it is now). "sink":
# the job's Kafka sink keeps one producer (now) or starts one every batch (before).
BEFORE: dict[str, dict[str, Any]] = {"streaming": {"trigger_interval_s": 1.0}, "kafka.producer": {"linger_ms": 20},
          "sink": {"keep_producer": False}}
# "buckets64": the job now with the 64 state keys it had before (docs/performance.md, "Fixed cost
# per batch": every bucket is a key of the stateful operator in every live batch, by its clock row).
VARIANTS: dict[str, dict[str, dict[str, Any]] | None] = {"before": BEFORE, "now": None,
                                                         "buckets64": {"streaming": {"state_buckets": 64}}}


def ms(t: datetime) -> float:
    return t.timestamp() * 1000


class Deliveries:
    """Delivery time of every record, by topic, partition and offset (an array per partition)."""

    def __init__(self) -> None:
        self.at: dict[tuple[str, int], array] = {}
        self.lock = threading.Lock()

    def __call__(self, report: Any) -> None:
        if report.error is not None or report.offset is None:
            return
        now = time.time() * 1000
        with self.lock:
            arr = self.at.setdefault((report.topic, report.partition), array("d"))
            if len(arr) <= report.offset:
                arr.extend([float("nan")] * (report.offset + 1 - len(arr)))
            arr[report.offset] = now

    def get(self, topic: str, partition: int, offset: int) -> float | None:
        arr = self.at.get((topic, partition))
        if arr is None or offset >= len(arr) or arr[offset] != arr[offset]:
            return None
        return arr[offset]


def injections(choice: Any, settle_s: float, duration_s: float) -> list[Any]:
    """One violation per group, spread evenly over ``[settle, duration - 20 s]``."""
    from replimon.demo_fleet import FAMILIES, parse_injection

    names = [(fam.name, g) for fam in choice.chosen() for g in fam.names(choice.count(fam.name))]
    # Interleave the families so each part of the run sees all of them.
    names.sort(key=lambda fg: (int("".join(c for c in fg[1] if c.isdigit()) or 0), fg[0]))
    span = max(1.0, duration_s - 20 - settle_s)
    out = []
    counts: Counter[str] = Counter()
    for i, (family, group) in enumerate(names):
        faults = VIOLATIONS[family]
        fault = faults[counts[family] % len(faults)]
        counts[family] += 1
        at = settle_s + span * i / max(1, len(names) - 1)
        out.append(parse_injection(f"{fault}:{group}@{int(at * 1000)}ms"))
    assert all(any(i.fault in f.sim.CATALOGUE for f in FAMILIES) for i in out)
    return out


def settings_for(base: Any, stack: Any, prefix: str, overrides: dict[str, dict[str, Any]] | None) -> Any:
    names = ("decisions", "executions", "heartbeats", "config", "alerts", "state", "dead_letters")
    topics = base.kafka.topics.model_copy(update={n: f"{prefix}{n}" for n in names})
    producer = base.kafka.producer
    streaming = base.streaming
    if overrides:
        producer = producer.model_copy(update=overrides.get("kafka.producer", {}))
        streaming = streaming.model_copy(update=overrides.get("streaming", {}))
    settings = base.model_copy(update={
        "kafka": base.kafka.model_copy(update={"topics": topics, "producer": producer,
                                               "bootstrap_servers": stack.bootstrap_servers}),
        "postgres": base.postgres.model_copy(update={"dsn": stack.dsn}),
        "streaming": streaming})
    stack.broker.create_topics(list(settings.kafka.topics.all), settings.kafka.partitions)
    return settings


class Progress:
    """Every query progress of the session, as JSON, by query id (``spark_runs``' listener)."""

    def __init__(self, spark: Any) -> None:
        from spark_runs import progress_listener

        self.by_query: dict[str, list[dict[str, Any]]] = {}
        spark.streams.addListener(progress_listener(self.by_query))


class SinkTimes:
    """When each part of the driver's ``foreachBatch`` ran, per batch: the collect (Spark's stages
    up to the output rows on the driver) and each sink's ``write``, as wall-clock ms."""

    def __init__(self) -> None:
        from replimon.streaming import writer
        from replimon.streaming.sinks import kafka, postgres, quality

        self.at: dict[int, dict[str, list[float]]] = {}
        times = self.at
        for name, cls in (("kafka", kafka.KafkaSink), ("postgres", postgres.PostgresBatchSink),
                          ("quality", quality.QualitySink)):
            cls.write = self._timed(cls.write, name, times)
        collect = writer.batch_result

        def timed_result(batch_id: int, rows: Any, *a: Any, **kw: Any) -> Any:
            times.setdefault(batch_id, {})["collected"] = [time.time() * 1000]
            return collect(batch_id, rows, *a, **kw)

        writer.batch_result = timed_result

    @staticmethod
    def _timed(write: Any, name: str, times: dict[int, dict[str, list[float]]]) -> Any:
        def timed(self: Any, result: Any) -> Any:
            t = time.time() * 1000
            try:
                return write(self, result)
            finally:
                times.setdefault(result.batch_id, {})[name] = [t, time.time() * 1000]

        return timed


def run_variant(name: str, args: argparse.Namespace, base: Any, stack: Any, spark: Any,
                progress: Progress, sinks: SinkTimes) -> dict[str, Any]:
    from replimon.demo_fleet import DemoFleet, FleetChoice
    from replimon.producers.publisher import Publisher
    from replimon.streaming.runner import start_query
    from replimon.streaming.sinks.kafka import KafkaSink
    from replimon.streaming.sinks.postgres import PostgresSink

    overrides = VARIANTS[name]
    KafkaSink.keep_producer = bool((overrides or {}).get("sink", {}).get("keep_producer", True))
    settings = settings_for(base, stack, f"lat-{uuid.uuid4().hex[:6]}-", overrides)
    run_id = f"lat-{name}-{uuid.uuid4().hex[:6]}"
    choice = FleetChoice(groups=args.groups, gen_groups=args.gen_groups, qlog_groups=args.qlog_groups,
                         nodes=args.nodes)
    faults = injections(choice, args.settle, args.duration)
    load_start = load_average()
    sinks.at.clear()
    log(f"{name}: trigger {settings.streaming.trigger_interval_s} s, linger {settings.kafka.producer.linger_ms} ms, "
        f"{len(faults)} faults, load {load_start}")

    deliveries = Deliveries()
    sent: dict[tuple[str, str, int, int], float] = {}
    watch = {i.group: i.at_ms for i in faults}
    publisher = Publisher.from_settings(settings, on_delivery=deliveries)
    start_ms = int(time.time() * 1000)

    def send(event: dict[str, Any]) -> None:
        at = watch.get(event["group"])
        if at is not None and start_ms + at - 2000 <= event["ts_ms"] <= start_ms + at + 30_000:
            sent[(event["group"], event["node"], event["incarnation"], event["seq"])] = time.time() * 1000
        publisher.send(event)

    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            publisher.poll(0.01)

    pg = PostgresSink(settings.postgres.dsn, run_id=run_id)
    ckpt = tempfile.mkdtemp(prefix="replimon-latency-ckpt-")
    # As the demo: the query starts, then the fleet publishes in real time from now.
    query = start_query(spark, settings, run_id=run_id, checkpoint=ckpt, pg=pg, starting="earliest")
    fleet = DemoFleet(settings, choice, faults, start_ms=start_ms, duration_ms=int(args.duration * 1000))
    fleet.attach(send)
    poller = threading.Thread(target=serve, daemon=True)
    poller.start()
    began = time.monotonic() - (time.time() * 1000 - start_ms) / 1000
    late: list[float] = []
    try:
        while fleet.t < args.duration * 1000:
            ahead = fleet.t / 1000 - (time.monotonic() - began)
            if ahead > 0:
                time.sleep(ahead)
            else:
                late.append(-ahead)
            fleet.step()
            publisher.poll(0)
            if not query.isActive:
                raise RuntimeError(f"the query stopped: {query.exception()}")
        publisher.flush(30)
        time.sleep(args.drain)  # the last faults' alerts
    finally:
        stop.set()
        poller.join(5)
        try:
            query.stop()
            query.awaitTermination(60)
        finally:
            pg.close()
            publisher.close(10)
    load_end = load_average()
    batches = sorted(progress.by_query.get(str(query.id), []), key=lambda p: p["batchId"])
    rows = alert_rows(settings.postgres.dsn, run_id)
    stamps = batch_times(Path(ckpt))
    shutil.rmtree(ckpt, ignore_errors=True)
    res = figures(rows, batches, stamps, deliveries, sent, start_ms, args)
    res["driver_ms"] = driver_parts(batches, stamps, sinks.at, res.pop("steady_ms"))
    res.update({"variant": name, "settings": {"trigger_interval_s": settings.streaming.trigger_interval_s,
                                              "linger_ms": settings.kafka.producer.linger_ms,
                                              "keep_producer": KafkaSink.keep_producer,
                                              "overrides": overrides},
                "run_id": run_id, "faults": len(faults), "events": fleet.events,
                "events_per_s": round(fleet.events / args.duration),
                "loop_late_ms": {"steps": len(late), "p99": round(nearest_rank(late, 0.99) * 1000) if late else 0},
                "load_average": {"start": load_start, "end": load_end}})
    return res


def alert_rows(dsn: str, run_id: str) -> list[dict[str, Any]]:
    import psycopg

    cols = ("alert_id", "status", "group_id", "kind", "category", "event_ts", "detected_ts", "inserted_at",
            "batch_id", "evidence")
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(f"SELECT {', '.join(cols)} FROM alerts WHERE run_id = %s", (run_id,)).fetchall()
    return [dict(zip(cols, r, strict=True)) for r in rows]


def batch_times(ckpt: Path) -> dict[int, int]:
    """Each batch's ``batchTimestampMs`` from the offsets log: its processing time, which live
    mode gives an alert as ``detected_ts``."""
    out = {}
    for f in (ckpt / "offsets").iterdir():
        if f.name.isdigit():
            meta = json.loads(f.read_text().splitlines()[1])
            out[int(f.name)] = int(meta["batchTimestampMs"])
    return out


def batch_start(p: dict[str, Any]) -> float:
    return datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp() * 1000


def read_by(batches: list[dict[str, Any]], topic: str, partition: int, offset: int) -> dict[str, Any] | None:
    """The batch whose offset range holds the record."""
    for p in batches:
        for src in p["sources"]:
            start = json.loads(src["startOffset"]) if isinstance(src["startOffset"], str) else src["startOffset"]
            end = json.loads(src["endOffset"]) if isinstance(src["endOffset"], str) else src["endOffset"]
            lo = ((start or {}).get(topic) or {}).get(str(partition), 0)
            hi = ((end or {}).get(topic) or {}).get(str(partition))
            if hi is not None and lo <= offset < hi:
                return p
    return None


def figures(rows: list[dict[str, Any]], batches: list[dict[str, Any]], stamps: dict[int, int], deliveries: Deliveries,
            sent: dict[tuple[str, str, int, int], float], start_ms: int, args: argparse.Namespace) -> dict[str, Any]:
    with_input = [b for b in batches if b["numInputRows"] > 0]
    # Steady state: events after the end of the job's third batch with input.
    steady_ms = (batch_start(with_input[2]) + with_input[2]["durationMs"].get("triggerExecution", 0)
                 if len(with_input) > 2 else float("inf"))
    by_id = {b["batchId"]: b for b in batches}
    samples: list[dict[str, Any]] = []
    missing: Counter[str] = Counter()
    early: list[list[Any]] = []
    violations = [r for r in rows if r["status"] == "firing" and r["category"] == "violation"]
    for r in violations:
        e = ms(r["event_ts"])
        if e < steady_ms:
            missing["before steady state"] += 1
            early.append([r["kind"], r["group_id"], round((e - start_ms) / 1000, 1)])
            continue
        ev = next((x for x in r["evidence"] if x.get("ts_ms") == round(e) and "offset" in x), None)
        if ev is None:
            missing["no evidence with an offset at event_ts"] += 1
            continue
        s = sent.get((r["group_id"], ev["node"], ev["incarnation"], ev["seq"]))
        d = deliveries.get(ev["topic"], ev["partition"], ev["offset"])
        rb = read_by(batches, ev["topic"], ev["partition"], ev["offset"])
        if s is None or d is None or rb is None:
            missing["send, delivery or reading batch not found"] += 1
            continue
        rs, t, i = stamps[rb["batchId"]], ms(r["detected_ts"]), ms(r["inserted_at"])
        raised = by_id.get(r["batch_id"])
        samples.append({
            "alert": r["kind"], "group": r["group_id"], "event_ms": round(e),
            "stamp": s - e, "publish": d - s, "wait": rs - d, "hold": t - rs, "batch": i - t, "total": i - e,
            "read_batch": rb["batchId"], "raised_batch": r["batch_id"],
            "raised_latest_offset_ms": raised["durationMs"].get("latestOffset") if raised else None,
            "raised_wal_commit_ms": raised["durationMs"].get("walCommit") if raised else None,
            "raised_started_ms": round(t - batch_start(raised)) if raised else None,
        })
    parts = {k: summary([s[k] for s in samples]) for k in (*PARTS, "total")}
    med_total = parts["total"]["median"] or 0
    share = {k: (round(parts[k]["median"] / med_total, 3) if med_total and parts[k]["median"] is not None else None)
             for k in PARTS}
    steady = [b for b in batches if batch_start(b) >= steady_ms]
    gaps = [batch_start(b) - (batch_start(a) + a["durationMs"].get("triggerExecution", 0))
            for a, b in zip(steady, steady[1:], strict=False)]
    return {
        "violations": len(violations), "measured": len(samples), "left_out": dict(missing),
        "left_out_early": early,
        "steady_ms": steady_ms,
        "steady_from_s": round((steady_ms - start_ms) / 1000, 1) if steady_ms != float("inf") else None,
        "first_batches": [[b["batchId"], round((batch_start(b) - start_ms) / 1000, 1), b["numInputRows"],
                           b["durationMs"].get("triggerExecution")] for b in batches[:6]],
        "kinds": dict(Counter(s["alert"] for s in samples)),
        "parts_ms": parts, "share_of_median_total": share,
        "batches_between_read_and_raise": summary([s["raised_batch"] - s["read_batch"] for s in samples]),
        "batch_ms": summary([b["durationMs"].get("triggerExecution", 0) for b in steady]),
        "idle_before_batch_ms": summary(gaps),
        "latest_offset_ms": summary([b["durationMs"].get("latestOffset", 0) for b in steady]),
        "add_batch_ms": summary([b["durationMs"].get("addBatch", 0) for b in steady]),
        "batches": len(batches),
        # Raised while the fleet published, by the batch's processing time (a lease wedge's
        # event time is the last renewal's): in the drain after it (``--drain``) the nodes fall
        # silent and their chain leases (ttl + skew, 4 s) expire, as they should.
        "other_alerts": dict(Counter(r["kind"] for r in rows if r["status"] == "firing"
                                     and r["category"] not in ("violation", "info")
                                     and ms(r["detected_ts"]) < start_ms + args.duration * 1000)),
        "other_alerts_after_the_fleet": dict(Counter(
            r["kind"] for r in rows if r["status"] == "firing" and r["category"] not in ("violation", "info")
            and ms(r["detected_ts"]) >= start_ms + args.duration * 1000)),
        "samples": samples,
    }


def driver_parts(batches: list[dict[str, Any]], stamps: dict[int, int], at: dict[int, dict[str, list[float]]],
                 steady_ms: float) -> dict[str, Any]:
    """Per steady batch, from its processing time: until the output rows were on the driver
    (planning and Spark's stages), then each sink's write; and how many batches ran the quality
    sink's validation (``quality`` longer than 50 ms) with their durations."""
    parts: dict[str, list[float]] = {"to_rows": [], "kafka": [], "postgres": [], "quality": [], "after": []}
    validated: list[float] = []
    for b in batches:
        bid = b["batchId"]
        t = at.get(bid)
        if bid not in stamps or not t or "collected" not in t or stamps[bid] < steady_ms:
            continue
        parts["to_rows"].append(t["collected"][0] - stamps[bid])
        for k in ("kafka", "postgres", "quality"):
            if k in t:
                parts[k].append(t[k][1] - t[k][0])
        last = max(v[-1] for v in t.values())
        parts["after"].append(batch_start(b) + b["durationMs"].get("triggerExecution", 0) - last)
        if "quality" in t and t["quality"][1] - t["quality"][0] > 50:
            validated.append(b["durationMs"].get("triggerExecution", 0))
    out: dict[str, Any] = {k: summary(v) for k, v in parts.items()}
    out["validated_batches"] = summary(validated)
    return out


def summary(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0, "median": None, "p99": None, "max": None}
    return {"n": len(values), "median": round(statistics.median(values), 1),
            "p99": round(nearest_rank(values, 0.99), 1), "max": round(max(values), 1)}


def table(results: list[dict[str, Any]]) -> list[tuple[str, list[str], list[list[str]]]]:
    def f(x: Any, digits: int = 0) -> str:
        return "-" if x is None else f"{x:,.{digits}f}"

    out = []
    for res in results:
        rows = []
        for k in (*PARTS, "total"):
            p = res["parts_ms"][k]
            sh = res["share_of_median_total"].get(k)
            rows.append([k, f(p["median"]), f(p["p99"]), "" if sh is None else f"{sh:.0%}"])
        load = res["load_average"]
        title = (f"{res['variant']}: trigger {res['settings']['trigger_interval_s']:g} s, linger "
                 f"{res['settings']['linger_ms']} ms; {res['measured']} of {res['violations']} violations, "
                 f"{res['events_per_s']:,} events/s; load {load['start'][0] if load['start'] else '-'} -> "
                 f"{load['end'][0] if load['end'] else '-'}")
        out.append((title, ["part", "median ms", "p99 ms", "share of median"], rows))
        out.append((f"{res['variant']}: batches", ["", ""], [
            ["batch ms median / p99", f"{f(res['batch_ms']['median'])} / {f(res['batch_ms']['p99'])}"],
            ["idle before a batch ms median / p99",
             f"{f(res['idle_before_batch_ms']['median'])} / {f(res['idle_before_batch_ms']['p99'])}"],
            ["latestOffset ms median", f(res["latest_offset_ms"]["median"])],
            ["batches from read to raise median / max",
             f"{f(res['batches_between_read_and_raise']['median'])} / "
             f"{f(res['batches_between_read_and_raise']['max'])}"],
            *[[f"batch: {k} ms median / p99", f"{f(v['median'])} / {f(v['p99'])}"]
              for k, v in res.get("driver_ms", {}).items() if k != "validated_batches"],
            ["batches with a data-quality validation: n, ms median / max",
             f"{res.get('driver_ms', {}).get('validated_batches', {}).get('n', 0)}, "
             f"{f(res.get('driver_ms', {}).get('validated_batches', {}).get('median'))} / "
             f"{f(res.get('driver_ms', {}).get('validated_batches', {}).get('max'))}"],
            ["other alerts (not violation, not info)", json.dumps(res["other_alerts"])],
            ["... after the fleet stopped (the drain)", json.dumps(res.get("other_alerts_after_the_fleet", {}))],
            ["left out", json.dumps(res["left_out"])],
        ]))
    names = list(dict.fromkeys(r["variant"] for r in results))
    if len(names) >= 2:  # within each repetition: the first variant over each other one
        rows = []
        for rep in range(0, len(results) - len(names) + 1, len(names)):
            first = results[rep]
            base = first["parts_ms"]["total"]
            for res in results[rep + 1:rep + len(names)]:
                tot = res["parts_ms"]["total"]
                rows.append([f"{rep // len(names) + 1}", f"{first['variant']} / {res['variant']}",
                             f(base["median"] / tot["median"], 2) if base["median"] and tot["median"] else "-",
                             f(base["p99"] / tot["p99"], 2) if base["p99"] and tot["p99"] else "-"])
        out.append(("ratio of total latency (above 1: the second is faster)",
                    ["repetition", "variants", "p50", "p99"], rows))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=6, help="XCom groups (the demo's 6; 94 for 100 in all)")
    ap.add_argument("--gen-groups", type=int, default=3)
    ap.add_argument("--qlog-groups", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--decisions-per-s", type=float, default=None,
                    help="XCom instances decided per second per group (default: simulator.decisions_per_s, 20)")
    ap.add_argument("--duration", type=float, default=120.0, help="seconds of fleet per variant")
    ap.add_argument("--settle", type=float, default=45.0, help="first fault at this time (the job's start-up)")
    ap.add_argument("--drain", type=float, default=10.0, help="seconds after the fleet's end before stopping")
    ap.add_argument("--variants", default="before,now", help=f"of {', '.join(VARIANTS)}, run in this order")
    ap.add_argument("--repeat", type=int, default=1, help="the variants' sequence this many times")
    ap.add_argument("--out", type=Path, default=BENCH / "results" / "latency.json")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", __import__("sys").executable)

    from replimon.config import load_settings
    from replimon.embedded import EmbeddedStack
    from replimon.store.schema import migrate
    from replimon.streaming.session import get_session

    base = load_settings(None)
    if args.decisions_per_s is not None:
        base = base.model_copy(update={"simulator": base.simulator.model_copy(
            update={"decisions_per_s": args.decisions_per_s})})
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    results: list[dict[str, Any]] = []
    info = machine()
    with EmbeddedStack(["lat-warm"], base.kafka.partitions) as stack:
        migrate(stack.dsn)
        st = base.streaming
        spark = get_session(st.master, st.shuffle_partitions, **st.spark_conf)
        progress = Progress(spark)
        sinks = SinkTimes()
        try:
            for _ in range(args.repeat):
                for name in names:
                    results.append(run_variant(name, args, base, stack, spark, progress, sinks))
                    render_tables(table([results[-1]]), stream=__import__("sys").stderr)
        finally:
            spark.stop()
    render_tables(table(results))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"bench": "latency", "machine": info, "args": {k: str(v) for k, v in vars(args).items()},
           "results": results}
    args.out.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
