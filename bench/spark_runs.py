"""The Spark side of the pipeline benchmark: one embedded broker, PostgreSQL and Spark session
(``Bench``), and its runs over them: the recorded-topic capacity and replay runs and the
sustained runs at a set rate (``bench/pipeline.py``, points 3 to 5 of its docstring)."""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cpu import CpuMeter
from stats import fmt, keeps_up, log, median_or_none, spread
from traces import TYPES, WARM_S, Publisher, Trace, published_at

FUTURE_MS = 600_000  # the backlog is stamped this far ahead: no processing-time silence fires
MIN_STEADY = 3  # steady capacity batches below this: the figure is flagged

# -- the Spark side ------------------------------------------------------------------------------
def batch_bounds(p: dict[str, Any]) -> tuple[float, float]:
    start = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
    return start, start + p["durationMs"].get("triggerExecution", 0) / 1000


def duration_parts(batches: Sequence[dict[str, Any]]) -> dict[str, float]:
    keys = sorted({k for b in batches for k in b["durationMs"]})
    return {k: statistics.median([b["durationMs"].get(k, 0) for b in batches]) for k in keys}


def progress_listener(store: dict[str, list[dict[str, Any]]]) -> Any:
    """A listener that keeps every query progress of the session, as JSON, by query id."""
    from pyspark.sql.streaming import StreamingQueryListener

    class _Progress(StreamingQueryListener):  # type: ignore[misc]
        def onQueryStarted(self, event: Any) -> None:  # noqa: N802
            pass

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            p = json.loads(event.progress.json)
            store.setdefault(str(p["id"]), []).append(p)

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            pass

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            pass

    return _Progress()


@dataclass
class Run:
    query: Any
    sink: Any
    listener: Any
    run_id: str
    started: float
    committed: dict[int, tuple[float, int, int]]  # batch id -> (wall after commit, alerts, snapshots)


class Bench:
    """The embedded services, the Spark session and the runs."""

    def __init__(self, args: argparse.Namespace, workdir: Path, broker: Any, pg_dsn: str) -> None:
        from replimon.config import load_settings
        from replimon.store.schema import migrate
        from replimon.streaming.session import get_session

        self.args, self.workdir, self.broker, self.dsn = args, workdir, broker, pg_dsn
        migrate(pg_dsn)
        self.base = load_settings(None, kafka={"bootstrap_servers": broker.bootstrap_servers},
                                  postgres={"dsn": pg_dsn})
        st = self.base.streaming
        self.spark = get_session(st.master, st.shuffle_partitions)
        self.progress: dict[str, list[dict[str, Any]]] = {}
        self.spark.streams.addListener(self._progress_listener())
        self.sink_class = self._timed_sink_class()

    # -- plumbing ----------------------------------------------------------------------------
    def _progress_listener(self) -> Any:
        return progress_listener(self.progress)

    @staticmethod
    def _timed_sink_class() -> Any:
        from replimon.streaming.sinks.postgres import PostgresSink

        class TimedSink(PostgresSink):  # type: ignore[misc]
            """The product's sink, timing each batch's write (one transaction)."""

            def __init__(self, *a: Any, **kw: Any) -> None:
                super().__init__(*a, **kw)
                self.write_s: dict[int, float] = {}

            def write_batch(self, batch_id: int, *a: Any, **kw: Any) -> Any:
                t = time.perf_counter()
                try:
                    return super().write_batch(batch_id, *a, **kw)
                finally:
                    self.write_s[batch_id] = time.perf_counter() - t

        return TimedSink

    def settings_for(self, prefix: str) -> Any:
        names = ("decisions", "executions", "heartbeats", "config", "alerts", "state", "dead_letters")
        topics = {n: f"{prefix}{n}" for n in names}
        settings = self.base.model_copy(update={"kafka": self.base.kafka.model_copy(
            update={"topics": self.base.kafka.topics.model_copy(update=topics)})})
        self.broker.create_topics(list(settings.kafka.topics.all), settings.kafka.partitions)
        return settings

    def drop_topics(self, settings: Any) -> None:
        """Free the in-memory broker (best effort: a failure only costs memory)."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.broker.bootstrap_servers})  # alive until done
        try:
            futures = admin.delete_topics(list(settings.kafka.topics.all), request_timeout=30)
            for f in futures.values():
                f.result(timeout=30)
        except Exception as exc:  # noqa: BLE001 - best effort
            log(f"  (could not delete topics: {exc})")
        finally:
            del admin

    def input_topics(self, settings: Any) -> list[str]:
        return [settings.kafka.topics.for_event_type(t) for t in TYPES]

    def producer_conf(self) -> dict[str, Any]:
        p = self.base.kafka.producer
        return {"linger.ms": p.linger_ms, "compression.type": p.compression}

    def publisher(self, trace: Trace, settings: Any, shift_ms: int | None, *, paced: bool,
                  until_ms: int) -> Publisher:
        pub = Publisher(trace, settings.kafka.bootstrap_servers, self.input_topics(settings), self.producer_conf(),
                        shift_ms, paced=paced, until_ms=until_ms, workdir=self.workdir)
        pub.start()
        return pub

    def start(self, settings: Any, run_id: str, **kw: Any) -> Run:
        from replimon.streaming.runner import MetricsListener, start_query

        sink = self.sink_class(settings.postgres.dsn, run_id=run_id)
        listener = MetricsListener(sink).make()
        self.spark.streams.addListener(listener)
        committed: dict[int, tuple[float, int, int]] = {}

        def observe(result: Any) -> None:
            committed[result.batch_id] = (time.time(), len(result.alerts), len(result.snapshots))

        started = time.time()
        query = start_query(self.spark, settings, run_id=run_id, checkpoint=str(self.workdir / "ckpt" / run_id),
                            observers=[observe], pg=sink, kafka_out=True, metrics_listener=False, **kw)
        return Run(query, sink, listener, run_id, started, committed)

    def finish(self, run: Run, timeout: float = 120.0) -> str | None:
        error = None
        try:
            if run.query.isActive:
                run.query.stop()
            run.query.awaitTermination(timeout)
            exc = run.query.exception()
            error = None if exc is None else str(exc)[:2000]
        finally:
            self.spark.streams.removeListener(run.listener)
            run.sink.close()
        return error

    def batches(self, run: Run) -> list[dict[str, Any]]:
        return sorted(self.progress.get(str(run.query.id), []), key=lambda p: p["batchId"])

    def rows_read(self, run: Run) -> int:
        return sum(int(p["numInputRows"]) for p in self.batches(run))

    def wait_rows(self, run: Run, rows: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.rows_read(run) < rows:
            if not run.query.isActive:
                raise RuntimeError(f"the query stopped: {run.query.exception()}")
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
        return True

    def alerts(self, run_id: str) -> list[dict[str, Any]]:
        import psycopg

        cols = ("alert_id", "status", "group_id", "kind", "category", "event_ts", "detected_ts",
                "inserted_at", "batch_id")
        with psycopg.connect(self.dsn) as conn:
            rows = conn.execute(f"SELECT {', '.join(cols)} FROM alerts WHERE run_id = %s", (run_id,)).fetchall()
        return [dict(zip(cols, r, strict=True)) for r in rows]

    def publish_now(self, trace: Trace, settings: Any, shift_ms: int, until_ms: int | None = None) -> dict[str, Any]:
        pub = self.publisher(trace, settings, shift_ms, paced=False,
                             until_ms=until_ms if until_ms is not None else int(trace.seconds * 1000) + 1)
        pub.go(time.time())
        report = pub.join(timeout=3600)
        if report["not_delivered"]:
            raise RuntimeError(f"{report['not_delivered']} events not delivered to the broker")
        return report

    # -- capacity and replay over a recorded topic ---------------------------------------------
    def recorded(self, g: int, trace: Trace) -> dict[str, Any]:
        args = self.args
        settings = self.settings_for(f"bench-{uuid.uuid4().hex[:8]}-")
        backlog_ms = int(args.backlog * 1000)
        shift = int(time.time() * 1000) + FUTURE_MS - trace.start_ms
        t = time.perf_counter()
        report = self.publish_now(trace, settings, shift, backlog_ms)
        total = report["produced"]
        log(f"  recorded topic: {total:,} events ({args.backlog:g} s of the {trace.rate:,.0f} ev/s trace) "
            f"published in {time.perf_counter() - t:.1f} s")
        out: dict[str, Any] = {"events": total, "simulated_s": args.backlog, "max_offsets": args.max_offsets,
                               "capacity": [], "replay": []}
        for rep in range(args.repeat):
            out["capacity"].append(self.capacity(g, settings, total, rep))
            out["replay"].append(self.replay(g, settings, total, rep))
        self.drop_topics(settings)
        return out

    def capacity(self, g: int, settings: Any, total: int, rep: int) -> dict[str, Any]:
        from replimon.streaming.processor import LIVE

        m = self.args.max_offsets
        run = self.start(settings, f"cap-{g}-{rep}-{uuid.uuid4().hex[:6]}", time_mode=LIVE, trigger_s=0.001,
                         max_offsets=m)
        done = False
        enough = 2 + self.args.steady_batches
        deadline = time.monotonic() + self.args.run_timeout
        try:
            while True:  # all of the backlog, or enough full batches
                read = [b for b in self.batches(run) if b["numInputRows"] > 0]
                done = sum(b["numInputRows"] for b in read) >= total
                if done or len([b for b in read[2:] if b["numInputRows"] >= m / 2]) >= self.args.steady_batches \
                        or len(read) >= enough + 2 or time.monotonic() > deadline:
                    break
                if not run.query.isActive:
                    raise RuntimeError(f"the query stopped: {run.query.exception()}")
                time.sleep(0.2)
        finally:
            error = self.finish(run)
        batches = [b for b in self.batches(run) if b["numInputRows"] > 0]
        steady = [b for b in batches[2:] if b["numInputRows"] >= m / 2][:self.args.steady_batches]
        rows = sum(b["numInputRows"] for b in steady)
        ms = sum(b["durationMs"]["triggerExecution"] for b in steady)
        res = {
            "read_all": done, "error": error, "batches_with_input": len(batches), "steady_batches": len(steady),
            "few_steady_batches": len(steady) < MIN_STEADY,
            "rows_read": sum(b["numInputRows"] for b in batches),
            "events_per_s": round(rows / ms * 1000) if ms else None,
            "batch_events_per_s": spread([b["numInputRows"] / b["durationMs"]["triggerExecution"] * 1000
                                          for b in steady], 0),
            "batch_rows_median": statistics.median([b["numInputRows"] for b in steady]) if steady else None,
            "batch_ms": spread([b["durationMs"]["triggerExecution"] for b in steady], 0),
            "duration_parts_ms_median": duration_parts(steady) if steady else {},
            "postgres_write_ms_median": _median_ms([run.sink.write_s.get(b["batchId"]) for b in steady]),
            "snapshots_per_batch_median": median_or_none([run.committed.get(b["batchId"], (0, 0, None))[2]
                                                          for b in steady]),
            "alerts": sum(c[1] for c in run.committed.values()),
            "batches": [[b["batchId"], b["numInputRows"], b["durationMs"]["triggerExecution"]] for b in batches],
        }
        log(f"  capacity ({len(steady)} steady batches of {m:,}"
            f"{', too few: make --backlog longer' if res['few_steady_batches'] else ''}): "
            f"{fmt(res['events_per_s'])} ev/s, median batch {res['batch_ms']['median']} ms"
            f"{'' if steady else ' (no steady batch)'}")
        return res

    def replay(self, g: int, settings: Any, total: int, rep: int) -> dict[str, Any]:
        from replimon.streaming.processor import REPLAY

        run = self.start(settings, f"replay-{g}-{rep}-{uuid.uuid4().hex[:6]}", time_mode=REPLAY,
                         available_now=True)
        ended = run.query.awaitTermination(self.args.run_timeout)
        wall = time.time() - run.started
        error = self.finish(run)
        batches = [b for b in self.batches(run) if b["numInputRows"] > 0]
        rows = sum(b["numInputRows"] for b in batches)
        ms = sum(b["durationMs"]["triggerExecution"] for b in self.batches(run))
        res = {"completed": bool(ended) and rows >= total, "error": error, "rows_read": rows,
               "batches": len(self.batches(run)), "batches_with_input": len(batches), "wall_s": round(wall, 1),
               "events_per_s_wall": round(rows / wall), "events_per_s_in_batches": round(rows / ms * 1000) if ms else None,
               "batch_ms": spread([b["durationMs"]["triggerExecution"] for b in batches], 0),
               "alerts": sum(c[1] for c in run.committed.values())}
        log(f"  replay (availableNow): {rows:,} events in {wall:.1f} s = {res['events_per_s_wall']:,} ev/s "
            f"({fmt(res['events_per_s_in_batches'])} ev/s in batches)")
        return res

    # -- sustained, live -------------------------------------------------------------------------
    def sustained(self, g: int, trace: Trace, warm: Trace, rep: int) -> dict[str, Any]:
        from replimon.streaming.processor import LIVE

        args = self.args
        settings = self.settings_for(f"bench-{uuid.uuid4().hex[:8]}-")
        run = self.start(settings, f"live-{g}-{round(trace.rate)}-{rep}-{uuid.uuid4().hex[:6]}", time_mode=LIVE,
                         trigger_s=args.trigger)
        pub: Publisher | None = None
        error: str | None = None
        res: dict[str, Any] = {"target_events_per_s": round(trace.rate), "keeps_up": False}
        try:
            # Warm-up: other groups, stamped now, in the query's first batches (not measured).
            warm_report = self.publish_now(warm, settings, int(time.time() * 1000) - warm.start_ms - WARM_S * 1000)
            warm_rows = warm_report["produced"]
            if not self.wait_rows(run, warm_rows, args.run_timeout):
                raise RuntimeError("the live query did not read the warm-up events")
            seen = len(self.batches(run))
            deadline = time.monotonic() + max(10.0, 5 * args.trigger)
            while len(self.batches(run)) <= seen and time.monotonic() < deadline:
                time.sleep(0.1)  # one more batch (timers, or none): the query is idle and warm
            pub = self.publisher(trace, settings, None, paced=True, until_ms=int(trace.seconds * 1000) + 1)
            t0 = time.time() + 0.5
            pub.go(t0)
            meter = CpuMeter(pub.pid)
            ws, we = t0 + args.warmup, t0 + args.warmup + args.duration
            _sleep_until(ws)
            cpu_a = meter.sample()
            watching = threading.Event()
            seen = meter.watch(watching)
            _sleep_until(we)
            cpu_b = meter.sample()
            watching.set()
            report = pub.join(timeout=600)
            drained = self.wait_rows(run, warm_rows + report["produced"], args.drain_timeout)
            cpu = meter.between(cpu_a, cpu_b)
            at_start = {pid for pid in cpu_a[1] if meter.part(pid, cpu_a[1]) is not None}
            cpu["processes_started_in_window"] = {k: len(v - at_start) for k, v in seen.items() if v - at_start}
            res = self._sustained_figures(run, trace, warm_rows, report, ws, we, drained, cpu)
            if res["batches_in_window"]:
                per = cpu["seconds"] / res["batches_in_window"]
                cpu["cpu_s_per_batch"] = {k: round(v * per, 2) for k, v in cpu["cores"].items()}
        except Exception as exc:  # noqa: BLE001 - reported in the results; the next run goes on
            error = f"{type(exc).__name__}: {exc}"
            log(f"  run failed: {error}")
        finally:
            if pub is not None and pub.proc.is_alive():
                pub.stop.set()
                pub.proc.join(60)
            error = error or self.finish(run)
            self.drop_topics(settings)
        res["error"] = error
        if "batch_ms" in res:
            lat = res["latency_s"]["inserted"]
            log(f"  {res['published_events_per_s']:,} ev/s published, {res['processed_events_per_s']:,} read; "
                f"batch median {res['batch_ms']['median']} ms, p90 {res['batch_ms']['p90']} ms; backlog at the end "
                f"{res['backlog_end_s']} s; keeps up: {res['keeps_up']}; fault alerts {res['fault_alerts']['rows']}, "
                f"latency p50 {lat['median']} s, p99 {lat['p99']} s")
        return res

    def _sustained_figures(self, run: Run, trace: Trace, warm_rows: int, report: dict[str, Any],
                           ws: float, we: float, drained: bool, cpu: dict[str, Any]) -> dict[str, Any]:
        args = self.args
        timeline = report["timeline"]
        batches = self.batches(run)
        cum, points = 0, []  # (batch, start, end, events read so far of the trace, backlog after it)
        for b in batches:
            cum += int(b["numInputRows"])
            start, end = batch_bounds(b)
            read = max(0, cum - warm_rows)
            points.append((b, start, end, read, published_at(timeline, end) - read))
        window = [pt for pt in points if ws <= pt[1] < we]
        secs = we - ws
        published = published_at(timeline, we) - published_at(timeline, ws)
        processed = sum(int(pt[0]["numInputRows"]) for pt in window)
        durations = [pt[0]["durationMs"].get("triggerExecution", 0) for pt in window]
        rate = published / secs if secs else 0.0
        backlog_start = window[0][4] if window else None
        backlog_end = window[-1][4] if window else None
        bms = spread(durations, 0)
        bounded = (backlog_end is not None and backlog_start is not None
                   and backlog_end - backlog_start <= rate * args.trigger)
        drain_s = None
        if drained:
            total = warm_rows + report["produced"]
            done = next((pt for pt in points if pt[3] + warm_rows >= total), None)
            drain_s = round(done[2] - report["ended"], 1) if done else None
        figures = self._latency(run, trace)
        return {
            "target_events_per_s": round(trace.rate),
            "trace": trace.describe(),
            "window_s": round(secs, 1), "warmup_s": args.warmup, "trigger_s": args.trigger,
            "published_events_per_s": round(rate), "processed_events_per_s": round(processed / secs) if secs else 0,
            "published_total": report["produced"], "publisher_lateness_ms": report["lateness_ms"],
            "batches_in_window": len(window),
            "batch_ms": bms,
            "batch_rows": spread([pt[0]["numInputRows"] for pt in window], 0),
            "batches": [[pt[0]["batchId"], pt[0]["numInputRows"], pt[0]["durationMs"].get("triggerExecution", 0),
                         pt[4]] for pt in window],  # id, rows, ms, backlog after it
            "duration_parts_ms_median": duration_parts([pt[0] for pt in window]) if window else {},
            "postgres_write_ms_median": _median_ms([run.sink.write_s.get(pt[0]["batchId"]) for pt in window]),
            "backlog_events": {"after_first_window_batch": backlog_start, "after_last_window_batch": backlog_end,
                               "max": max((pt[4] for pt in window), default=None)},
            "backlog_end_s": round(backlog_end / rate, 2) if backlog_end is not None and rate else None,
            "drained": drained, "drain_s_after_publisher_end": drain_s,
            **keeps_up(processed, published, bms, args.trigger, ("backlog_bounded", bounded)),
            "cpu": cpu,
            **figures,
        }

    def _latency(self, run: Run, trace: Trace) -> dict[str, Any]:
        rows = self.alerts(run.run_id)
        expected = {(f["group"], f["alert"]) for f in trace.faults}
        fault = [r for r in rows if r["status"] == "firing" and (r["group_id"], r["kind"]) in expected]
        def secs(a: datetime, b: datetime) -> float:
            return (a - b).total_seconds()

        inserted = [secs(r["inserted_at"], r["event_ts"]) for r in fault]
        visible = [run.committed[r["batch_id"]][0] - r["event_ts"].timestamp() for r in fault
                   if r["batch_id"] in run.committed]
        waited = [secs(r["detected_ts"], r["event_ts"]) for r in fault]
        batch = [secs(r["inserted_at"], r["detected_ts"]) for r in fault]
        others = Counter(r["kind"] for r in rows if not r["group_id"].startswith("warm-")
                         and r["category"] != "info" and (r["group_id"], r["kind"]) not in expected)
        return {
            # found: of the faults the trace carries (``traces.carried_faults``), where it was checked.
            "fault_alerts": {"injected": len(trace.faults), "found": len({(r["group_id"], r["kind"]) for r in fault}),
                             "rows": len(fault),
                             **({} if trace.carried is None else {"carried": len(trace.carried)})},
            "latency_s": {"inserted": spread(inserted, 3), "visible": spread(visible, 3),
                          "event_to_batch": spread(waited, 3), "batch_to_insert": spread(batch, 3)},
            "other_alerts": dict(sorted(others.items())),
            "alert_rows": len(rows),
        }


def _median_ms(values: Sequence[float | None]) -> float | None:
    m = median_or_none(values)
    return None if m is None else round(m * 1000, 1)


def _sleep_until(wall: float) -> None:
    while True:
        left = wall - time.time()
        if left <= 0:
            return
        time.sleep(min(left, 0.5))
