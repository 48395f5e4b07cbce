"""The floor under the streaming job: what Spark itself costs per micro-batch on this machine.

The job's shape is fixed by the stack (a Python Kafka source, a Python validation stage, a
shuffle by state key, the Python ``transformWithState`` operator, ``foreachBatch``). This
measures that shape with the work taken out, stage by stage, on the same topic and the same
session settings as the job, so the job's own cost can be told from the framework's:

* ``rate``: Spark's own ``rate-micro-batch`` source (``rowsPerBatch`` rows a batch, no Python,
  no Kafka) into the ``noop`` sink: what any micro-batch costs here (planning, the offset log,
  a task per core, the commit log), the floor under every other variant. Not in the default set.
* ``source``: the replimon Kafka source (alignTimestamps, maxPartitions as the job sets them)
  into the ``noop`` sink. The baseline of the ratios.
* ``+arrow``: plus a ``mapInArrow`` stage that packs each Arrow batch into one row per group
  (its records' values joined, no parsing) with the job's bucket key.
* ``+state``: plus ``groupBy(bucket).transformWithStateInPandas`` with a trivial processor (one
  ValueState read and write per bucket, one output row per group), into ``foreachBatch`` that
  collects the rows: the whole shape, with nothing of the monitor.
* ``job``: the real ``build()`` (contract validation, the monitor in the core, snapshots) into
  ``foreachBatch`` that collects the rows (no Kafka or PostgreSQL writes).

A variant may name a state bucket count after ``@`` (``+state@8``, ``job@8``): the same with
``streaming.state_buckets`` set to it (one state key per bucket, so fewer state calls a batch).

Every variant reads the same recorded topic (simulator events of ``--groups`` groups of 5 nodes)
in micro-batches of ``--batch`` records, as fast as Spark runs them; the figure is the median
micro-batch time (``triggerExecution``) over the batches after the first, per repetition, and
the median over repetitions; events/s = batch size / that time.

Fixed cost per batch: ``--batch`` may list several sizes (``2000,50000``); then every variant
also gets the least-squares line ``batch ms = fixed + per record * records`` over its batches of
all sizes (``stats.batch_cost``, as ``bench/pipeline.py`` fits the live job), and the table says
how much fixed cost each layer adds to the one before it.

    .venv/bin/python bench/floor.py [--groups 1000] [--batch 50000] [--batches 6] [--repeat 3]
    .venv/bin/python bench/floor.py --batch 2000,50000 --variants rate,source,+state,job --out bench/results/floor-fixed.json

Before and after (``--base COMMIT``): the ``source`` and ``job`` variants run once per repetition
in a child process for each tree, in alternating order, over the same recorded topic: the earlier
commit checked out into a temporary worktree (``bench/versions.py``'s ``base_tree``) and this one.
The figure is, per repetition, the job's events/s of this tree over the base's, raw and normalised
by each child's own ``source`` rate, and the median over repetitions (the JSON's ``versions``).
The children check that Spark's Python workers import ``replimon`` from their tree.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import render_tables  # noqa: E402
from stats import batch_cost  # noqa: E402

VARIANTS = ("source", "+arrow", "+state", "job")
EXTRA_VARIANTS = ("rate",)  # known, not run by default
BUCKETED = ("+state", "job")  # may take @BUCKETS


def log(msg: str) -> None:
    print(f"[floor {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def record(settings: Any, bootstrap: str, groups: int, total: int, seed: int) -> int:
    """Publish simulator events of ``groups`` groups until ``total`` are on the topics."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from replimon.producers.simulator import SimOptions, Simulator

    topics = settings.kafka.topics
    names = [topics.decisions, topics.executions, topics.heartbeats, topics.config]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(t, 4, 1) for t in names]).values():
        fut.result()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000})
    sent = 0
    seconds = 30
    while sent < total:
        events: list[dict[str, Any]] = []
        Simulator(SimOptions(groups=groups, nodes=5, duration_ms=seconds * 1000, seed=seed + sent), [],
                  events.append).run()
        for ev in events[: total - sent]:
            while True:
                try:
                    producer.produce(topics.for_event_type(ev["type"]), key=ev["group"].encode(),
                                     value=json.dumps(ev, separators=(",", ":")).encode())
                    break
                except BufferError:
                    producer.poll(0.1)
        sent += min(len(events), total - sent)
    producer.flush(120)
    return sent


def _pack_plain(buckets: int) -> Any:
    def run(batches: Any) -> Any:
        import pyarrow as pa

        from replimon.streaming.rows import bucket_of

        schema = pa.schema([("bucket", pa.int32()), ("group", pa.string()), ("events", pa.string())])
        for batch in batches:
            packs: dict[str, list[str]] = {}
            for key, value in zip(batch.column("key").to_pylist(), batch.column("value").to_pylist(),
                                  strict=True):
                packs.setdefault(key.decode(), []).append(value.decode())
            names = list(packs)
            yield pa.RecordBatch.from_arrays(
                [pa.array([bucket_of(g, buckets) for g in names], pa.int32()), pa.array(names, pa.string()),
                 pa.array(["[" + ",".join(packs[g]) + "]" for g in names], pa.string())], schema=schema)

    return run


def _trivial_processor() -> Any:
    from pyspark.sql.streaming import StatefulProcessor

    class Trivial(StatefulProcessor):  # type: ignore[misc]
        def init(self, handle: Any) -> None:
            self.state = handle.getValueState("n", "n LONG")

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:  # noqa: N802, N803
            import pandas as pd

            n = self.state.get()[0] if self.state.exists() else 0
            names: list[str] = []
            for pdf in rows:
                names.extend(pdf["group"].tolist())
                n += int(pdf["events"].str.len().sum())
            self.state.update((n,))
            yield pd.DataFrame({"out": ["state"] * len(names), "group_id": names})

        def close(self) -> None:
            pass

    return Trivial()


def split_variant(variant: str) -> tuple[str, int | None]:
    """``job@8`` -> (``job``, 8); ``job`` -> (``job``, None)."""
    name, _, buckets = variant.partition("@")
    return name, int(buckets) if buckets else None


def known_variant(variant: str) -> bool:
    name, _, buckets = variant.partition("@")
    if buckets:
        return name in BUCKETED and buckets.isdigit() and int(buckets) > 0
    return name in VARIANTS + EXTRA_VARIANTS


def query(spark: Any, settings: Any, variant: str, batch: int, ckpt: str) -> Any:
    from replimon.streaming.job import build, read_source
    from replimon.streaming.processor import REPLAY

    variant, buckets = split_variant(variant)
    if buckets is not None:
        settings = settings.model_copy(update={"streaming": settings.streaming.model_copy(
            update={"state_buckets": buckets})})
    if variant == "rate":
        return (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", batch).load()
                .writeStream.format("noop").option("checkpointLocation", ckpt)
                .trigger(processingTime="0 seconds").start())
    raw = read_source(spark, settings, starting="earliest", max_offsets=batch)
    if variant == "job":
        out = build(spark, raw, settings, time_mode=REPLAY)
    elif variant == "source":
        out = raw
    else:
        out = raw.select("key", "value").mapInArrow(_pack_plain(settings.streaming.state_buckets),
                                                    "bucket int, group string, events string")
        if variant == "+state":
            out = out.groupBy("bucket").transformWithStateInPandas(
                _trivial_processor(), "out string, group_id string", "Append", "None")
    stream = out.writeStream.option("checkpointLocation", ckpt).trigger(processingTime="0 seconds")
    if variant in ("source", "+arrow"):
        stream = stream.format("noop")
    else:
        stream = stream.foreachBatch(lambda df, _id: df.collect())
    return stream.start()


def measure(spark: Any, settings: Any, variant: str, batch: int, batches: int, workdir: Path) -> dict[str, Any]:
    q = query(spark, settings, variant, batch, str(workdir / f"ckpt-{uuid.uuid4().hex[:8]}"))
    deadline = time.monotonic() + 600
    try:
        while len(q.recentProgress) < batches + 1 and q.isActive and time.monotonic() < deadline:
            time.sleep(0.5)
        progress = [p for p in q.recentProgress if p["numInputRows"]]
    finally:
        q.stop()
    if q.exception() is not None:
        raise RuntimeError(f"{variant}: {q.exception()}")
    steady = progress[1: batches + 1]  # the first batch pays the Python workers' start
    times = [p["durationMs"]["triggerExecution"] for p in steady]
    rows = [p["numInputRows"] for p in steady]
    parts = {k: statistics.median(p["durationMs"].get(k, 0) for p in steady)
             for k in ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets")}
    return {"batch_ms": times, "rows": rows, "median_ms": statistics.median(times),
            "median_rows": statistics.median(rows), "parts_ms": parts,
            "run_id": str(q.runId), "batch_ids": [p["batchId"] for p in steady]}


# -- where a batch's time goes inside Spark (``--stages``) ----------------------------------------
def event_log_conf(directory: Path) -> dict[str, str]:
    """Spark's event log, uncompressed, into ``directory``: it has every stage and task."""
    return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": directory.as_uri(),
            "spark.eventLog.compress": "false"}


def stage_spans(directory: Path) -> dict[tuple[str, int], list[dict[str, float]]]:
    """From the event log: (query run id, batch id) -> the batch's stages in submission order, each
    with its wall time (submitted to completed) and its tasks' longest run time."""
    import re

    jobs: dict[int, tuple[str, int]] = {}
    stage_job: dict[int, tuple[str, int]] = {}
    stages: dict[int, dict[str, float]] = {}
    runs: dict[int, list[float]] = {}
    for path in sorted(directory.rglob("events_*")):
        for line in path.open(encoding="utf-8"):
            ev = json.loads(line)
            kind = ev["Event"]
            if kind == "SparkListenerJobStart":
                props = ev.get("Properties") or {}
                run = re.search(r"runId = (\S+)", props.get("spark.job.description", ""))
                if run and props.get("streaming.sql.batchId") is not None:
                    jobs[ev["Job ID"]] = key = (run.group(1), int(props["streaming.sql.batchId"]))
                    stage_job.update({sid: key for sid in ev["Stage IDs"]})
            elif kind == "SparkListenerStageCompleted":
                info = ev["Stage Info"]
                if info.get("Submission Time") is not None:
                    stages[info["Stage ID"]] = {"submitted": info["Submission Time"],
                                                "ms": info["Completion Time"] - info["Submission Time"]}
            elif kind == "SparkListenerTaskEnd":
                runs.setdefault(ev["Stage ID"], []).append((ev.get("Task Metrics") or {}).get("Executor Run Time", 0))
    out: dict[tuple[str, int], list[dict[str, float]]] = {}
    for sid, span in sorted(stages.items(), key=lambda kv: kv[1]["submitted"]):
        if sid in stage_job:
            out.setdefault(stage_job[sid], []).append(
                {"ms": span["ms"], "task_run_ms_max": max(runs.get(sid, [0])), "tasks": len(runs.get(sid, []))})
    return out


def stage_summary(rs: list[dict[str, Any]], spans: dict[tuple[str, int], list[dict[str, float]]]) -> dict[str, Any]:
    """Medians over a variant's steady batches: each stage's wall time by position, the longest task
    of each, and the batch's time outside its stages (planning, offsets, logs, the driver)."""
    batches = [(spans.get((r["run_id"], b), []), ms) for r in rs
               for b, ms in zip(r["batch_ids"], r["batch_ms"], strict=True)]
    depth = max((len(st) for st, _ in batches), default=0)
    per = [[st[i] for st, _ in batches if len(st) > i] for i in range(depth)]
    return {"stages_ms": [statistics.median(s["ms"] for s in col) for col in per],
            "longest_task_ms": [statistics.median(s["task_run_ms_max"] for s in col) for col in per],
            "tasks": [statistics.median(s["tasks"] for s in col) for col in per],
            "outside_stages_ms": statistics.median(ms - sum(s["ms"] for s in st) for st, ms in batches)}


def check_worker_imports(spark: Any) -> None:
    """Spark's Python workers must import ``replimon`` from the tree this process does."""
    import replimon.core

    here = str(Path(replimon.core.__file__).resolve().parent)
    seen = spark.sparkContext.parallelize([0], 1).map(
        lambda _: str(Path(__import__("replimon.core").core.__file__).resolve().parent)).collect()
    if seen != [here]:
        raise SystemExit(f"Spark's workers import replimon.core from {seen}, not {here}")


def versions(args: argparse.Namespace) -> None:
    """``--base``: the job before and after, one child per tree and repetition (module docstring)."""
    from machine import machine  # bench/machine.py
    from versions import ROOT, base_tree, child_env, drop_tree  # bench/versions.py

    from replimon.config import load_settings
    from replimon.embedded import EmbeddedBroker

    host = machine()
    total = args.batch * (args.batches + 2)
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory(prefix="replimon-floor-") as tmp:
        settings = load_settings(None, kafka={"bootstrap_servers": broker.bootstrap_servers})
        log(f"publishing {total:,} events of {args.groups} groups")
        record(settings, broker.bootstrap_servers, args.groups, total, args.seed)
        trees = {"before": base_tree(args.base, Path(tmp) / "base"), "after": ROOT}
        try:
            for rep in range(args.repeat):
                for name in (("before", "after") if rep % 2 == 0 else ("after", "before")):
                    out = Path(tmp) / f"{name}-{rep}.json"
                    cmd = [sys.executable, str(Path(__file__).resolve()), "--bootstrap", broker.bootstrap_servers,
                           "--variants", "source,job", "--repeat", "1", "--groups", str(args.groups),
                           "--batch", str(args.batch), "--batches", str(args.batches), "--out", str(out)]
                    done = subprocess.run(cmd, env=child_env(trees[name]), check=False)
                    if done.returncode != 0:
                        raise SystemExit(f"the {name} child failed (exit {done.returncode})")
                    variants = json.loads(out.read_text())["variants"]
                    runs[name].append({v: variants[v]["events_per_s"] for v in ("source", "job")})
                    log(f"rep {rep + 1}/{args.repeat} {name}: job {runs[name][-1]['job']:,} ev/s, "
                        f"source {runs[name][-1]['source']:,} ev/s")
        finally:
            drop_tree(trees["before"])
    pairs = list(zip(runs["after"], runs["before"], strict=True))
    raw = [a["job"] / b["job"] for a, b in pairs]
    norm = [(a["job"] / a["source"]) / (b["job"] / b["source"]) for a, b in pairs]

    def med(xs: list[float]) -> dict[str, Any]:
        return {"median": round(statistics.median(xs), 3), "min": round(min(xs), 3),
                "max": round(max(xs), 3), "n": len(xs)}

    base = subprocess.run(["git", "-C", str(ROOT), "rev-parse", args.base], capture_output=True, text=True,
                          check=False).stdout.strip()
    result = {"benchmark": "floor-versions", "machine": host, "base": base,
              "load_average_at_end": list(os.getloadavg()),
              "settings": {"groups": args.groups, "nodes": 5, "batch": args.batch, "batches": args.batches,
                           "repeat": args.repeat},
              "runs": runs, "versions": {"job_after_over_before": med(raw),
                                         "job_normalised_by_source": med(norm)}}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    rows = [[name, f"{statistics.median(r['job'] for r in rs):,.0f}",
             f"{statistics.median(r['source'] for r in rs):,.0f}"] for name, rs in runs.items()]
    rows.append(["after / before", f"{med(raw)['median']:.3f}", f"normalised {med(norm)['median']:.3f}"])
    render_tables([(f"The job in Spark, before ({base[:9]}) and after, {args.groups} groups, "
                    f"batches of {args.batch:,}, medians of {args.repeat}",
                    ["tree", "job events/s", "source events/s"], rows)])
    log(f"wrote {args.out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--batch", default="50000",
                    help="records per micro-batch; several, comma-separated, for the fixed cost per batch")
    ap.add_argument("--batches", type=int, default=5, help="steady batches measured per run")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help=f"of {', '.join(VARIANTS + EXTRA_VARIANTS)}; {' and '.join(BUCKETED)} may add @BUCKETS")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--stages", action="store_true",
                    help="also split each batch into Spark's stages (from Spark's event log)")
    ap.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting of the session (repeatable), e.g. "
                         "spark.hadoop.fs.file.impl=org.apache.hadoop.fs.LocalFileSystem: Hadoop's own "
                         "local file system, a chmod process per checkpoint file (docs/streaming.md, "
                         "\"Checkpoint writes\")")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "floor.json"))
    ap.add_argument("--base", default=None, help="an earlier commit: measure the job before and after")
    ap.add_argument("--bootstrap", default=None, help="a broker whose topics already hold the events "
                    "(set by --base for its children)")
    args = ap.parse_args()
    try:
        sizes = [int(x) for x in str(args.batch).split(",") if x]
    except ValueError:
        ap.error(f"--batch: not a list of record counts: {args.batch!r}")
    if not sizes or min(sizes) < 1:
        ap.error(f"--batch: not a list of record counts: {args.batch!r}")
    if args.base:
        if len(sizes) != 1:
            ap.error("--base: one --batch size")
        args.batch = sizes[0]
        versions(args)
        return
    given = dict(kv.split("=", 1) for kv in args.spark_conf if "=" in kv)
    if len(given) != len(args.spark_conf):
        ap.error(f"--spark-conf: KEY=VALUE expected, got {args.spark_conf!r}")
    variants = [v for v in args.variants.split(",") if v]
    bad = [v for v in variants if not known_variant(v)]
    if bad:
        ap.error(f"--variants: unknown {', '.join(bad)} (known: {', '.join(VARIANTS + EXTRA_VARIANTS)}; "
                 f"{' and '.join(BUCKETED)} may add @BUCKETS)")

    from replimon.config import load_settings
    from replimon.embedded import EmbeddedBroker
    from replimon.streaming.session import get_session

    total = max(sizes) * (args.batches + 2)
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {(v, n): [] for n in sizes for v in variants}
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="replimon-floor-"))
        bootstrap = args.bootstrap or stack.enter_context(EmbeddedBroker()).bootstrap_servers
        settings = load_settings(None, kafka={"bootstrap_servers": bootstrap})
        if not args.bootstrap:
            log(f"publishing {total:,} events of {args.groups} groups")
            record(settings, bootstrap, args.groups, total, args.seed)
        s = settings.streaming
        events = Path(tmp) / "events"
        if args.stages:
            events.mkdir()
        spark = get_session(s.master, s.shuffle_partitions,
                            **(event_log_conf(events) if args.stages else {}), **given)
        fs_impl = spark.sparkContext.getConf().get("spark.hadoop.fs.file.impl", "Hadoop's LocalFileSystem")
        if args.bootstrap:
            check_worker_imports(spark)
        for rep in range(args.repeat):
            for size in sizes:
                for variant in variants:  # interleaved: a slow spell of the machine hits all alike
                    r = measure(spark, settings, variant, size, args.batches, Path(tmp))
                    runs[(variant, size)].append(r)
                    log(f"rep {rep + 1}/{args.repeat} {variant:9s} median {r['median_ms']:.0f} ms "
                        f"per {r['median_rows']:,.0f} records")
        spark.stop()
        spans = stage_spans(events) if args.stages else {}

    result: dict[str, Any] = {
        "benchmark": "floor",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_average": list(os.getloadavg())},
        "settings": {"groups": args.groups, "nodes": 5, "batch": sizes[0] if len(sizes) == 1 else sizes,
                     "batches": args.batches, "repeat": args.repeat,
                     "shuffle_partitions": settings.streaming.shuffle_partitions,
                     "state_buckets": settings.streaming.state_buckets,
                     "spark_conf": given, "file_system": fs_impl},
        "variants": {},
    }
    tables = []
    for size in sizes:
        summary = summarize({v: runs[(v, size)] for v in variants})
        if spans:
            for v in variants:
                summary[v]["stages"] = stage_summary(runs[(v, size)], spans)
        if len(sizes) == 1:
            result["variants"] = summary
        else:
            result.setdefault("sizes", {})[str(size)] = summary
        tables.append(variant_table(summary, args.groups, args.repeat, size))
        if spans:
            tables.append(stage_table(summary, size))
    if len(sizes) > 1:
        result["fixed_cost"] = fits = {v: batch_cost([(rows, ms) for size in sizes for r in runs[(v, size)]
                                                      for rows, ms in zip(r["rows"], r["batch_ms"], strict=True)])
                                       for v in variants}
        tables.append(fit_table(fits, args.groups, sizes))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    render_tables(tables)
    log(f"wrote {args.out}")


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per variant, over its repetitions at one batch size: the median batch, its parts and rate
    (ratios to the first variant's rate)."""
    out: dict[str, Any] = {}
    base = None
    for variant, rs in runs.items():
        ms = statistics.median(r["median_ms"] for r in rs)
        rows = statistics.median(r["median_rows"] for r in rs)
        rate = rows / (ms / 1000)
        base = base or rate
        out[variant] = {
            "median_batch_ms": ms, "records_per_batch": rows, "events_per_s": round(rate),
            "ratio_to_first": round(rate / base, 3),
            "parts_ms_median": {k: statistics.median(r["parts_ms"][k] for r in rs) for k in rs[0]["parts_ms"]},
            "per_run_median_ms": [r["median_ms"] for r in rs], "runs": rs}
    return out


def variant_table(summary: dict[str, Any], groups: int, repeat: int, size: int) -> tuple[str, list[str], list[list[str]]]:
    first = next(iter(summary))
    rows = [[v, f"{d['median_batch_ms']:,.0f}", " / ".join(f"{x:,.0f}" for x in d["per_run_median_ms"]),
             f"{d['parts_ms_median']['latestOffset']:,.0f}", f"{d['parts_ms_median']['addBatch']:,.0f}",
             f"{d['records_per_batch']:,.0f}", f"{d['events_per_s']:,}", f"{d['ratio_to_first']:.2f}"]
            for v, d in summary.items()]
    return (f"Micro-batch floor, {groups} groups x 5 nodes, batches of {size:,}, {repeat} runs "
            f"(ratios: events/s / {first})",
            ["variant", "batch ms (median)", "per run", "latestOffset ms", "addBatch ms", "records",
             "events/s", "ratio"], rows)


def stage_table(summary: dict[str, Any], size: int) -> tuple[str, list[str], list[list[str]]]:
    rows = [[v, f"{d['median_batch_ms']:,.0f}", f"{d['stages']['outside_stages_ms']:,.0f}",
             " + ".join(f"{ms:,.0f}" for ms in d["stages"]["stages_ms"]) or "-",
             " / ".join(f"{ms:,.0f}" for ms in d["stages"]["longest_task_ms"]) or "-",
             " / ".join(f"{n:g}" for n in d["stages"]["tasks"]) or "-"]
            for v, d in summary.items()]
    return (f"Where a batch of {size:,} records goes (Spark's event log; medians over the steady batches)",
            ["variant", "batch ms", "outside stages ms", "stages ms, in order", "longest task ms", "tasks"],
            rows)


def fit_table(fits: dict[str, dict[str, Any] | None], groups: int,
              sizes: list[int]) -> tuple[str, list[str], list[list[str]]]:
    """Each variant's fixed cost per batch and cost per record, and the fixed cost it adds to the
    variant before it (the layers in the order given)."""
    rows = []
    before: float | None = None
    for variant, fit in fits.items():
        if fit is None:
            rows.append([variant, "-", "-", "-"])
            continue
        added = "" if before is None else f"{fit['fixed_ms'] - before:+,.0f}"
        rows.append([variant, f"{fit['fixed_ms']:,}", f"{fit['us_per_event']:g}", added])
        before = fit["fixed_ms"]
    return (f"Fixed cost per batch, {groups} groups x 5 nodes: least squares over the batches of "
            f"{', '.join(f'{n:,}' for n in sizes)} records",
            ["variant", "fixed ms a batch", "us a record", "fixed ms added to the row above"], rows)


if __name__ == "__main__":
    main()
