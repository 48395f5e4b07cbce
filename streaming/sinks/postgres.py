"""The streaming job's PostgreSQL writer: alerts, group and node state, time series, dead letters
and pipeline metrics of each micro-batch, written once with an exactly-once effect.

Guarantee: `PostgresSink.write_batch` writes a micro-batch in one transaction that first advances
``pipeline_batches(run_id, pipeline).last_batch_id`` to the batch id, and only if the batch id is
higher than the one stored (``replimon.store.writes.ADVANCE``). Spark's ``foreachBatch`` is
at-least-once: a retried batch (same id) or an older one is skipped and writes nothing; a batch
that fails half-way leaves nothing and can be retried. All rows are keyed by facts of the history
(alert id and status, group, group clock, Kafka offset), so even without the guard a re-run of the
same events gives the same keys (docs/postgres.md "Exactly-once effect").

Only the writing is here. The schema and `migrate`, the rows each snapshot becomes (every
family's, ``replimon.store.rows``), the value conversions, the guard and alert
statements (shared with the data-quality results writer) and every read of the stored runs are
the PostgreSQL store's, ``replimon.store`` (docs/postgres.md "Where each part lives").
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

import psycopg
from psycopg.types.json import Jsonb

from replimon.kafka.outage import STILL_EVERY_S
from replimon.store.rows import dead_letter_row as _dead_letter_row
from replimon.store.rows import group_row as _group_row
from replimon.store.rows import node_rows as _node_rows
from replimon.store.rows import node_series_rows as _node_series_rows
from replimon.store.rows import series_row as _series_row
from replimon.store.runs import DEFAULT_PIPELINE, LIVE_RUN, last_batch_id
from replimon.store.schema import migrate
from replimon.store.values import ts_from_ms
from replimon.store.writes import ADVANCE, INSERT_ALERT, INSERT_ALERTS_JSON, alert_row, json_array
from replimon.streaming.sinks.backlog import Backlog, Backoff, Pending

_T = TypeVar("_T")
log = logging.getLogger("replimon.job")


# -- statements ------------------------------------------------------------------------------------
# The guard (ADVANCE) and the alert insert are the store's: the data-quality writer uses them too.
_GROUP = """
INSERT INTO group_state AS g (run_id, group_id, history, trusted, clock_ts, decided, active_start,
                              active_event_horizon, members, pending, effective_horizon,
                              executed_majority, window_use, window_fraction, family, config,
                              open_alerts, snapshot, batch_id, updated_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, now())
ON CONFLICT (run_id, group_id) DO UPDATE SET
    history = EXCLUDED.history, trusted = EXCLUDED.trusted, clock_ts = EXCLUDED.clock_ts,
    decided = EXCLUDED.decided, active_start = EXCLUDED.active_start,
    active_event_horizon = EXCLUDED.active_event_horizon, members = EXCLUDED.members,
    pending = EXCLUDED.pending, effective_horizon = EXCLUDED.effective_horizon,
    executed_majority = EXCLUDED.executed_majority, window_use = EXCLUDED.window_use,
    window_fraction = EXCLUDED.window_fraction, family = EXCLUDED.family, config = EXCLUDED.config,
    open_alerts = EXCLUDED.open_alerts, snapshot = EXCLUDED.snapshot, batch_id = EXCLUDED.batch_id,
    updated_at = EXCLUDED.updated_at"""

_NODE = """
INSERT INTO node_state (run_id, group_id, node_id, member, executed, decided, incarnation,
                        protocol, status, last_ts, suspects, effective_horizon, silent,
                        family_state, batch_id, updated_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, now())
ON CONFLICT (run_id, group_id, node_id) DO UPDATE SET
    member = EXCLUDED.member, executed = EXCLUDED.executed, decided = EXCLUDED.decided,
    incarnation = EXCLUDED.incarnation, protocol = EXCLUDED.protocol, status = EXCLUDED.status,
    last_ts = EXCLUDED.last_ts, suspects = EXCLUDED.suspects,
    effective_horizon = EXCLUDED.effective_horizon, silent = EXCLUDED.silent,
    family_state = EXCLUDED.family_state, batch_id = EXCLUDED.batch_id,
    updated_at = EXCLUDED.updated_at"""

_SERIES = """
INSERT INTO group_timeseries (run_id, group_id, ts, decided, executed_majority, effective_horizon,
                              event_horizon, window_use, window_fraction, members, pending,
                              active_start, active_config, pending_configs, config_version)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (run_id, group_id, ts) DO UPDATE SET
    decided = EXCLUDED.decided, executed_majority = EXCLUDED.executed_majority,
    effective_horizon = EXCLUDED.effective_horizon, event_horizon = EXCLUDED.event_horizon,
    window_use = EXCLUDED.window_use, window_fraction = EXCLUDED.window_fraction,
    members = EXCLUDED.members, pending = EXCLUDED.pending, active_start = EXCLUDED.active_start,
    active_config = EXCLUDED.active_config, pending_configs = EXCLUDED.pending_configs,
    config_version = EXCLUDED.config_version"""

_NODE_SERIES = """
INSERT INTO node_timeseries (run_id, group_id, node_id, ts, member, decided, executed, last_ts,
                             heartbeat_age_ms, silent)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (run_id, group_id, node_id, ts) DO UPDATE SET
    member = EXCLUDED.member, decided = EXCLUDED.decided, executed = EXCLUDED.executed,
    last_ts = EXCLUDED.last_ts, heartbeat_age_ms = EXCLUDED.heartbeat_age_ms,
    silent = EXCLUDED.silent"""

_DEAD = """
INSERT INTO dead_letters (run_id, topic, partition, "offset", raw, reason, kafka_ts, batch_id)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (run_id, topic, partition, "offset") DO NOTHING"""

# Metrics of a batch may come in two parts (counts with the batch, durations and rates from the
# query listener afterwards): each column keeps the first value it was given, so a retry or a
# replayed progress event changes nothing. ``written_at`` is set by the batch's own write only
# (its last statement, so the clock then is when its rows are all in, just before the commit):
# the moment its alerts became visible, for their latency (docs/dashboards.md, "Alert latency").
_METRICS = """
INSERT INTO pipeline_metrics AS m (run_id, batch_id, ts, duration_ms, input_rows, input_rows_per_s,
                                   processed_rows_per_s, alerts, dead_letters, groups, trigger_ms,
                                   lag_records, pg_backlog, pg_wait_s, live, written_at)
VALUES (%s, %s, COALESCE(%s, now()), %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,
        CASE WHEN %s THEN clock_timestamp() END)
ON CONFLICT (run_id, batch_id) DO UPDATE SET
    duration_ms = COALESCE(m.duration_ms, EXCLUDED.duration_ms),
    input_rows = COALESCE(m.input_rows, EXCLUDED.input_rows),
    input_rows_per_s = COALESCE(m.input_rows_per_s, EXCLUDED.input_rows_per_s),
    processed_rows_per_s = COALESCE(m.processed_rows_per_s, EXCLUDED.processed_rows_per_s),
    alerts = COALESCE(m.alerts, EXCLUDED.alerts),
    dead_letters = COALESCE(m.dead_letters, EXCLUDED.dead_letters),
    groups = COALESCE(m.groups, EXCLUDED.groups),
    trigger_ms = COALESCE(m.trigger_ms, EXCLUDED.trigger_ms),
    lag_records = COALESCE(m.lag_records, EXCLUDED.lag_records),
    pg_backlog = COALESCE(m.pg_backlog, EXCLUDED.pg_backlog),
    pg_wait_s = COALESCE(m.pg_wait_s, EXCLUDED.pg_wait_s),
    live = COALESCE(m.live, EXCLUDED.live),
    written_at = COALESCE(m.written_at, EXCLUDED.written_at)"""

# From this many rows a statement's rows go through COPY into a temporary table and one
# INSERT ... SELECT with the same ON CONFLICT clause (measured: about 4x faster than a pipelined
# executemany for a batch of 1,000 groups: 1,000 group rows, 5,000 node rows, 1,000 points).
_COPY_FROM = 50
_INSERT_PARTS = re.compile(
    r"^\s*INSERT INTO (\w+)(?: AS (\w+))? \(([^)]*)\)\s*VALUES \(([^)]*(?:\([^)]*\))?[^)]*)\)\s*(ON CONFLICT .*)$",
    re.S)


def _copy_upsert(cur: psycopg.Cursor[Any], stmt: str, rows: list[tuple[Any, ...]]) -> None:
    """``executemany(stmt, rows)`` for an ``INSERT ... VALUES (%s, ...) ON CONFLICT ...`` through
    COPY: the rows go to a temporary copy of the table (emptied at commit), then one INSERT ...
    SELECT applies the statement's own conflict clause. Constant values in VALUES (``now()``)
    are kept; rows must not repeat a key (as in executemany with DO UPDATE, which would apply
    them in turn; write_batch keeps one row per key)."""
    match = _INSERT_PARTS.match(stmt)
    if match is None:  # pragma: no cover - the statements above all match
        raise ValueError(f"not an INSERT ... VALUES ... ON CONFLICT statement: {stmt[:60]}")
    table, alias, columns, values, conflict = match.groups()
    names = [c.strip() for c in columns.split(",")]
    exprs = [v.strip() for v in re.split(r",(?![^(]*\))", values)]
    copied = [n for n, v in zip(names, exprs, strict=True) if v == "%s"]
    select = ", ".join(n if v == "%s" else v for n, v in zip(names, exprs, strict=True))
    temp = f"_copy_{table}"
    # LIKE copies NOT NULL constraints; the columns filled by expressions are left out of the
    # copy, so the temporary table has only the copied ones.
    cur.execute(f"CREATE TEMP TABLE IF NOT EXISTS {temp} ON COMMIT DELETE ROWS AS "
                f"SELECT {', '.join(copied)} FROM {table} WITH NO DATA")
    with cur.copy(f"COPY {temp} ({', '.join(copied)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
    cur.execute(f"INSERT INTO {table} AS {alias or table} ({', '.join(names)}) SELECT {select} "
                f"FROM {temp} {conflict}")


_METRIC_KEYS = ("ts", "duration_ms", "input_rows", "input_rows_per_s", "processed_rows_per_s",
                "alerts", "dead_letters", "groups", "trigger_ms", "lag_records", "pg_backlog", "pg_wait_s",
                "live")


# -- the sink --------------------------------------------------------------------------------------
class PostgresSink:
    """Writes micro-batches of one run (``run_id``, 'live' for the live job) and one pipeline.

    One connection per sink, opened on first use; a call that meets an `psycopg.OperationalError`
    (server restart, broken connection) reconnects and retries once, which is safe because the
    batch guard makes a retry of committed work a no-op. Calls are serialized by a lock, so the
    batch writer and a query listener (`write_metrics`, another thread) can share one sink.
    """

    def __init__(self, dsn: str, *, run_id: str = LIVE_RUN, pipeline: str = DEFAULT_PIPELINE,
                 migrate_schema: bool = True, connect_timeout: int = 10,
                 migrate_on_connect: bool = False) -> None:
        """``migrate_schema``: apply the migrations now (PostgreSQL must answer);
        ``migrate_on_connect``: apply them when a connection is first opened instead (the live
        job, which may start while PostgreSQL is down: docs/operations.md)."""
        if not dsn:
            raise ValueError("PostgresSink needs a DSN (postgres.dsn)")
        self.dsn, self.run_id, self.pipeline = dsn, run_id, pipeline
        self._connect_timeout = connect_timeout
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()
        self._migrate = migrate_on_connect
        if migrate_schema:
            migrate(dsn)

    def migrate(self) -> list[str]:
        """Apply the migrations now (raises like a write when PostgreSQL is down); the versions
        applied."""
        with self._lock:
            applied = migrate(self.dsn)
            self._migrate = False
        if applied:
            log.info("applied PostgreSQL migrations %s", applied)
        return applied

    # -- connection ----------------------------------------------------------------------------
    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            if self._migrate:  # the job started while PostgreSQL was down (``migrate_on_connect``)
                applied = migrate(self.dsn)
                self._migrate = False
                if applied:
                    log.info("applied PostgreSQL migrations %s", applied)
            self._conn = psycopg.connect(self.dsn, autocommit=True,
                                         connect_timeout=self._connect_timeout,
                                         application_name=f"replimon-sink-{self.pipeline}")
        return self._conn

    def _call(self, fn: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        with self._lock:
            try:
                return fn(self._connection())
            except psycopg.OperationalError:
                self._drop()
                return fn(self._connection())

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        with self._lock:
            self._drop()

    def __enter__(self) -> PostgresSink:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- writing -------------------------------------------------------------------------------
    def write_batch(self, batch_id: int, *, alerts: list[dict[str, Any]] | list[str],
                    snapshots: list[dict[str, Any]], dead_letters: list[dict[str, Any]],
                    metrics: dict[str, Any] | None) -> bool:
        """Write one micro-batch; True if written, False if ``batch_id`` was already committed
        (<= ``last_batch_id``: a retried or stale batch, nothing written).

        ``alerts``: ``Alert.to_dict`` payloads, as dicts or as the JSON text the monitor encoded
        (the job's path: PostgreSQL reads the text; an (alert_id, status) row never changes once
        stored). ``snapshots``: ``GroupMonitor.snapshot()`` payloads in the order they were taken;
        the last one per group becomes its group and node state, each one with a clock becomes a
        time-series point of the group and of each of its nodes. ``dead_letters``: dicts with
        topic, partition, offset, raw (bytes), reason and kafka_ts (epoch ms or aware datetime). ``metrics``: pipeline_metrics columns
        (``ts`` in epoch ms or datetime; counts default to this batch's; ``live``: the job ran in
        live mode, False for a replay). The metrics row of a written batch also records when its
        rows were written (``written_at``).
        On any error the transaction rolls back and the exception propagates.
        """
        run = self.run_id
        texts = [a for a in alerts if isinstance(a, str)]
        alert_rows = [alert_row(a, run, batch_id) for a in alerts if not isinstance(a, str)]
        latest: dict[str, dict[str, Any]] = {}
        series: dict[tuple[str, datetime], tuple[Any, ...]] = {}
        node_series: dict[tuple[str, str, datetime], tuple[Any, ...]] = {}
        for s in snapshots:
            latest[s["group"]] = s
            row = _series_row(s, run)
            if row is not None:
                series[(row[1], row[2])] = row
            for nrow in _node_series_rows(s, run):
                node_series[(nrow[1], nrow[2], nrow[3])] = nrow
        group_rows = [_group_row(s, run, batch_id) for s in latest.values()]
        node_rows = [r for s in latest.values() for r in _node_rows(s, run, batch_id)]
        dead_rows = [_dead_letter_row(d, run, batch_id) for d in dead_letters]
        metric_row = None
        if metrics is not None:
            if unknown := set(metrics) - set(_METRIC_KEYS):
                raise TypeError(f"unknown pipeline metrics: {sorted(unknown)}")
            metric_row = self._metric_row(batch_id, {
                "alerts": len(alerts), "dead_letters": len(dead_letters), "groups": len(latest),
                **metrics}, written=True)

        def write(conn: psycopg.Connection[Any]) -> bool:
            with conn.transaction(), conn.cursor() as cur:
                # Takes the guard row's lock first: a concurrent writer of the same pipeline waits
                # here, then sees the committed id and skips.
                cur.execute(ADVANCE, (run, self.pipeline, batch_id))
                if cur.fetchone() is None:
                    return False
                if texts:
                    cur.execute(INSERT_ALERTS_JSON, {"run": run, "alerts": json_array(texts), "batch": batch_id})
                for stmt, rows in ((INSERT_ALERT, alert_rows), (_GROUP, group_rows), (_NODE, node_rows),
                                   (_SERIES, list(series.values())),
                                   (_NODE_SERIES, list(node_series.values())), (_DEAD, dead_rows)):
                    if len(rows) >= _COPY_FROM:
                        _copy_upsert(cur, stmt, rows)
                    elif rows:
                        cur.executemany(stmt, rows)
                if metric_row is not None:
                    cur.execute(_METRICS, metric_row)
                return True

        return self._call(write)

    def _metric_row(self, batch_id: int, m: Mapping[str, Any], *, written: bool = False) -> tuple[Any, ...]:
        return (self.run_id, batch_id, ts_from_ms(m.get("ts")), m.get("duration_ms"),
                m.get("input_rows"), m.get("input_rows_per_s"), m.get("processed_rows_per_s"),
                m.get("alerts"), m.get("dead_letters"), m.get("groups"), m.get("trigger_ms"),
                m.get("lag_records"), m.get("pg_backlog"), m.get("pg_wait_s"), m.get("live"), written)

    def record_run(self, params: Mapping[str, Any], status: str) -> None:
        """This run's ``replay_runs`` row (a replay: its parameters and status); ``finished_at``
        is set when the status is not ``running``."""
        def write(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                "INSERT INTO replay_runs (run_id, params, status) VALUES (%s, %s, %s)"
                " ON CONFLICT (run_id) DO UPDATE SET params = EXCLUDED.params, status = EXCLUDED.status,"
                " finished_at = CASE WHEN EXCLUDED.status = 'running' THEN NULL ELSE now() END",
                (self.run_id, Jsonb(dict(params)), status))

        self._call(write)

    def write_metrics(self, batch_id: int, **metrics: Any) -> None:
        """Record a batch's metrics outside its transaction (e.g. from a StreamingQueryListener's
        progress event, which comes after the batch committed): ts (epoch ms or datetime; default
        now), duration_ms, input_rows, input_rows_per_s, processed_rows_per_s, alerts,
        dead_letters, groups, trigger_ms, lag_records, pg_backlog, pg_wait_s, live. Merges into
        the batch's row: a column already set keeps its value (``written_at`` is the batch write's
        alone).
        """
        if unknown := set(metrics) - set(_METRIC_KEYS):
            raise TypeError(f"unknown pipeline metrics: {sorted(unknown)}")
        row = self._metric_row(batch_id, metrics)
        self._call(lambda conn: conn.execute(_METRICS, row))

    # -- where this sink stands ------------------------------------------------------------------
    def last_batch_id(self) -> int | None:
        """The last batch this sink's pipeline committed for its run (its guard; None: none yet):
        the batch writer skips re-sending a batch to Kafka that PostgreSQL already holds."""
        return self._call(lambda conn: last_batch_id(conn, self.run_id, self.pipeline))



class PostgresBatchSink:
    """``PostgresSink`` as a sink of whole batches (``sinks/base.py``), and the writer's guard;
    it rides out a PostgreSQL outage (docs/operations.md, "PostgreSQL outage").

    Batch ids restart at 0 with a new checkpoint: the guard row is per checkpoint (Spark's stream
    id in the checkpoint's ``metadata``), so a fresh checkpoint never finds its batches already
    "committed" by an older one.

    When PostgreSQL cannot be reached, a batch's rows join the ``backlog`` (``sinks/backlog.py``)
    instead of failing the batch: the query goes on and the Kafka sink still sends every alert.
    Each later batch first tries to write the backlog, oldest first, no sooner than the
    ``backoff`` allows; a batch in the backlog counts as committed (it went to Kafka already).
    Three log lines per outage: lost, still retrying, back."""

    def __init__(self, pg: PostgresSink, stream_id: Callable[[], str | None] | None = None, *,
                 backlog: Backlog | None = None, backoff: Backoff | None = None,
                 live: bool | None = None) -> None:
        self.pg = pg
        # Whether the job runs live (processing time) or replays (event time): on each batch's
        # metrics row, so Pipeline health measures alert latency on live batches only.
        self.live = live
        self._stream_id = stream_id
        self._bound = stream_id is None
        self.backlog = backlog if backlog is not None else Backlog()
        self.backoff = backoff if backoff is not None else Backoff()
        self.down_since: float | None = None  # monotonic time PostgreSQL was lost; None: up
        self._retrying = False
        self._said = 0.0  # when "still unreachable" was said last
        self._last: int | None = None  # the committed batch id last read from PostgreSQL
        self._queued: dict[int, float] = {}  # batch id -> when it joined the backlog (this run)
        if self.backlog:
            self.down_since = time.monotonic()
            log.warning("PostgreSQL: %d batch(es) left by the last run wait to be written", len(self.backlog))

    def _bind(self) -> None:
        if not self._bound and self._stream_id is not None:
            stream = self._stream_id()
            if stream:
                self.pg.pipeline = f"{DEFAULT_PIPELINE}:{stream}"
            self._bound = True

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def committed(self, batch_id: int) -> bool:
        self._bind()
        last_queued = self.backlog.last_id
        if last_queued is not None and batch_id <= last_queued:
            return True  # sent to Kafka, its rows wait in the backlog (or were written)
        if self.down:
            # No question to PostgreSQL here while it is down: each one pushed the backoff, so
            # the backlog was never retried ("still unreachable" never said). ``drain`` asks.
            self.drain()
        if not self.down:
            try:
                self._last = self.pg.last_batch_id()
            except OUTAGE as exc:
                self._lost(exc)
        return self._last is not None and batch_id <= self._last

    def write(self, result: Any) -> None:
        if result.repeated:
            return
        self._bind()
        pending = Pending(result.batch_id, [a.payload for a in result.alert_rows], result.snapshots,
                          result.dead_letters)
        if not self.down and not self.backlog:
            try:
                # False: another writer of this pipeline committed it meanwhile (nothing written).
                # Counts now; the metrics listener adds durations and rates.
                result.written = self.pg.write_batch(
                    result.batch_id, alerts=pending.alerts, snapshots=pending.snapshots,
                    dead_letters=pending.dead_letters, metrics={"live": self.live})
                return
            except OUTAGE as exc:
                self._lost(exc)
        self.backlog.add(pending)
        self._queued.setdefault(pending.batch_id, time.monotonic())
        self.drain()
        result.deferred = pending.batch_id in self.backlog

    def drain(self) -> None:
        """Write the backlog, oldest first, if the backoff allows an attempt now."""
        if not self.backoff.due():
            return
        if not self.backlog:
            if self.down:  # lost before anything waited (a job started without PostgreSQL)
                try:
                    self._last = self.pg.last_batch_id()
                except OUTAGE as exc:
                    self._still(exc)
                    return
                self._back()
            return
        try:
            while self.backlog:
                p = self.backlog.items[0]
                waited = time.monotonic() - self._queued.get(p.batch_id, self.down_since or time.monotonic())
                self.pg.write_batch(p.batch_id, alerts=p.alerts, snapshots=p.snapshots,
                                    dead_letters=p.dead_letters,
                                    metrics={"pg_backlog": len(self.backlog), "pg_wait_s": round(waited, 3),
                                             "live": self.live})
                self.backlog.pop_first()
                self._queued.pop(p.batch_id, None)
        except OUTAGE as exc:
            self._still(exc)
            return
        self._back()

    def _still(self, exc: BaseException) -> None:
        """A retry failed: said at the first one, then once a minute while it lasts."""
        delay = self.backoff.failed()
        now = time.monotonic()
        if not self._retrying or now - self._said >= STILL_EVERY_S:
            self._retrying = True
            self._said = now
            log.warning("PostgreSQL: still unreachable (%s); %d batch(es) wait; retrying with "
                        "backoff up to %.0f s", _reason(exc), len(self.backlog), self.backoff.max_s)
        log.debug("PostgreSQL: next attempt in %.1f s", delay)

    def _lost(self, exc: BaseException) -> None:
        if self.down_since is None:
            self.down_since = time.monotonic()
            log.warning("PostgreSQL: lost (%s); the job goes on, alerts still go to Kafka, the "
                        "tables' rows wait in a backlog", _reason(exc))
        self.backoff.failed()

    def _back(self) -> None:
        if self.down_since is not None:
            log.warning("PostgreSQL: back after %.0f s; the backlog is written",
                        time.monotonic() - self.down_since)
        self.down_since = None
        self._retrying = False
        self.backoff.reset()

    def close(self) -> None:
        pass


# PostgreSQL cannot be reached (refused, reset, shut down, a broken connection): worth waiting for.
OUTAGE = (psycopg.OperationalError, psycopg.InterfaceError)


def _reason(exc: BaseException) -> str:
    """libpq's message on one line (it spans several), shortened."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."
