"""Pipeline health: is the streaming job keeping up, and is its input sound (docs/dashboards.md,
"Pipeline health").

Micro-batch duration against the trigger interval, alert latency, the batch-cost fit, input and
processing rates, consumer lag, dead letters and data-quality results. Its time axis is processing
time (when a batch ran, when the broker took a record), not the replicas' event time the other
dashboards use.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import barchart
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.models import dashboard as model

from replimon.dashboards import sql
from replimon.dashboards.boards.alerts import bars
from replimon.dashboards.build import (
    GREEN,
    ORANGE,
    RED,
    dashboard,
    stat_panel,
    steps,
    table_panel,
    timeseries_panel,
)
from replimon.dashboards.sql import RUN

METRICS = f"FROM pipeline_metrics\nWHERE run_id = {RUN} AND $__timeFilter(ts)"
DEAD = f"FROM dead_letters\nWHERE run_id = {RUN} AND $__timeFilter(kafka_ts)"
DQ = f"FROM dq_results\nWHERE run_id = {RUN} AND $__timeFilter(ts)"

DURATION = f"""SELECT ts AS "time", duration_ms AS "batch duration", trigger_ms AS "trigger interval"
{METRICS}
ORDER BY 1"""

RATES = f"""SELECT ts AS "time", input_rows_per_s AS "input", processed_rows_per_s AS "processed"
{METRICS}
ORDER BY 1"""

LAG = f"""SELECT ts AS "time", lag_records AS "consumer lag"
{METRICS}
ORDER BY 1"""

ROWS = f"""SELECT ts AS "time", input_rows AS "input rows", groups AS "groups updated"
{METRICS}
ORDER BY 1"""

# While PostgreSQL is down the job goes on and each batch's rows wait in a backlog
# (docs/operations.md, "PostgreSQL outage"): when they are written, each batch's row says how many
# batches were waiting (itself included) and how long its rows waited; 0 for a batch on time.
PG_BACKLOG = f"""SELECT ts AS "time", COALESCE(pg_backlog, 0) AS "batches waiting",
       COALESCE(pg_wait_s, 0) AS "seconds waited"
{METRICS}
ORDER BY 1"""

OUTPUTS = f"""SELECT ts AS "time", alerts, dead_letters AS "dead letters"
{METRICS}
ORDER BY 1"""

DEAD_OVER_TIME = f"""SELECT $__timeGroupAlias(kafka_ts, $__interval), topic AS metric, count(*) AS "dead letters"
{DEAD}
GROUP BY 1, 2
ORDER BY 1, 2"""

DEAD_TABLE = f"""SELECT kafka_ts AS "broker time", topic, partition, "offset", reason,
       encode(substring(raw FROM 1 FOR 200), 'escape') AS "record (first 200 bytes)",
       batch_id AS batch
{DEAD}
ORDER BY kafka_ts DESC, topic, partition, "offset"
LIMIT 500"""

# -- alert latency (docs/dashboards.md, "Alert latency") ---------------------------------------------
# The problem alerts (violations and wedges: firing rows) that live batches of the range wrote,
# each with the moment its batch's rows were in PostgreSQL (``written_at``, just before the
# commit). Replays (``live`` false) store old events: their "latency" would be the events' age.
# Info alerts are events, not problems; data alerts wait for the watermark by design
# (EVENTS_LOST) or come from the data-quality writer: neither is counted.
LIVE_ALERTS = f"""FROM pipeline_metrics m
JOIN alerts a ON a.run_id = m.run_id AND a.batch_id = m.batch_id
WHERE m.run_id = {RUN} AND $__timeFilter(m.ts) AND m.live AND m.written_at IS NOT NULL
  AND a.status = 'firing' AND a.category IN ('violation', 'wedge')"""
# Seconds to the row: from the evidence for a violation; from the detection for a wedge, whose
# evidence is where the condition began, before its threshold (Alerts: time to detect).
LATENCY = ("extract(epoch FROM m.written_at - CASE a.category WHEN 'wedge' THEN a.detected_ts"
           " ELSE a.event_ts END)")
LATEST = 100  # the latest p99 is over this many alerts of a category

LATENCY_OVER_TIME = f"""SELECT $__timeGroupAlias(m.ts, $__interval), a.category AS metric,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY {LATENCY}) AS p50,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY {LATENCY}) AS p99
{LIVE_ALERTS}
GROUP BY 1, 2
ORDER BY 1, 2"""


def latest_p99(category: str) -> str:
    """p99 latency of the latest ``LATEST`` alerts of ``category`` in the range (NULL: none)."""
    return f"""(SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY l.s)
        FROM (SELECT {LATENCY} AS s
              {LIVE_ALERTS.replace(chr(10), chr(10) + '              ')} AND a.category = '{category}'
              ORDER BY m.ts DESC, m.batch_id DESC, a.alert_id
              LIMIT {LATEST}) l)"""


LATEST_P99 = f"""SELECT {latest_p99('violation')} AS violations,
       {latest_p99('wedge')} AS wedges"""

# -- batch cost (docs/dashboards.md, "Batch cost") --------------------------------------------------
# A least-squares line duration = fixed + per_row * rows over every batch of the range with both
# (regr_* skip a NULL): a batch that read nothing (run for timers) is what a batch costs carrying
# nothing, so it anchors the fixed part. Rows are Kafka records read.
FIT_BATCHES = f"""FROM pipeline_metrics
WHERE run_id = {RUN} AND $__timeFilter(ts)"""

COST_FIXED = f"""SELECT regr_intercept(duration_ms, input_rows) AS "fixed per batch"
{FIT_BATCHES}"""

COST_PER_ROW = f"""SELECT regr_slope(duration_ms, input_rows) * 1000 AS "per event"
{FIT_BATCHES}"""

COST_FIT = f"""SELECT regr_count(duration_ms, input_rows) AS batches, regr_r2(duration_ms, input_rows) AS "R²"
{FIT_BATCHES}"""

BINS = 10
DURATION_BY_ROWS = f"""WITH b AS (
    SELECT input_rows AS r, duration_ms AS d
    {FIT_BATCHES.replace(chr(10), chr(10) + '    ')} AND input_rows IS NOT NULL AND duration_ms IS NOT NULL
), f AS (
    SELECT regr_intercept(d, r) AS fixed, regr_slope(d, r) AS per_row, min(r) AS lo, max(r) AS hi
    FROM b
)
SELECT to_char(min(b.r), 'FM999,999,999,999')
       || CASE WHEN max(b.r) > min(b.r) THEN '-' || to_char(max(b.r), 'FM999,999,999,999') ELSE '' END
       || format(' rows (%s)', count(*)) AS "rows",
       avg(b.d) AS "average duration",
       avg(f.fixed + f.per_row * b.r) AS "fit"
FROM b CROSS JOIN f
GROUP BY width_bucket(b.r, f.lo, f.hi + 1, {BINS})
ORDER BY width_bucket(b.r, f.lo, f.hi + 1, {BINS})"""

DQ_LATEST = f"""SELECT d.suite, d.expectation, CASE WHEN d.success THEN 'ok' ELSE 'critical' END AS result,
       d.evaluated, d.unexpected, d.ts AS "evaluated at", d.batch_id AS batch,
       d.details::text AS details
FROM (
    SELECT DISTINCT ON (suite, expectation) *
    {DQ.replace(chr(10), chr(10) + '    ')}
    ORDER BY suite, expectation, ts DESC
) d
ORDER BY d.success, d.suite, d.expectation"""

DQ_FAILURES = f"""SELECT $__timeGroupAlias(ts, $__interval), suite AS metric,
       count(*) FILTER (WHERE NOT success) AS "failed expectations"
{DQ}
GROUP BY 1, 2
ORDER BY 1, 2"""


def stats() -> list[cogbuilder.Builder[model.Panel]]:
    """The top line."""
    return [
        stat_panel("Micro-batches", f"SELECT count(*) AS batches\n{METRICS}",
                   "Micro-batches that ran in the range."),
        stat_panel("Last batch duration", f"""SELECT (SELECT duration_ms
        {METRICS.replace(chr(10), ' ')}
        ORDER BY batch_id DESC LIMIT 1) AS duration""",
                   "Duration of the latest micro-batch in the range.", unit="ms"),
        stat_panel("Rows read", f"SELECT coalesce(sum(input_rows), 0) AS rows\n{METRICS}",
                   "Input records of the micro-batches in the range.", unit="short"),
        stat_panel("Lag now", f"""SELECT (SELECT lag_records
        {METRICS.replace(chr(10), ' ')} AND lag_records IS NOT NULL
        ORDER BY batch_id DESC LIMIT 1) AS lag""",
                   "Records on the input topics not read yet at the end of the latest batch.",
                   unit="short", thresholds=steps(GREEN, (10_000, ORANGE), (100_000, RED))),
        stat_panel("Dead letters in range", f'SELECT count(*) AS "dead letters"\n{DEAD}',
                   "Records refused by validation in the range (by broker time).",
                   thresholds=steps(GREEN, (1, ORANGE))),
        stat_panel("Failed expectations", f"""SELECT count(*) FILTER (WHERE NOT d.success) AS failed
FROM (
    SELECT DISTINCT ON (suite, expectation) success
    {DQ.replace(chr(10), chr(10) + '    ')}
    ORDER BY suite, expectation, ts DESC
) d""", "Data-quality expectations whose latest result in the range failed.",
                   thresholds=steps(GREEN, (1, RED))),
    ]


def cost_stats() -> list[cogbuilder.Builder[model.Panel]]:
    """The second line: alert latency now and the batch-cost fit over the range."""
    return [
        stat_panel("Latest p99 alert latency", LATEST_P99,
                   f"p99 of the latest {LATEST} violations and of the latest {LATEST} wedges "
                   "stored by live batches in the range: seconds from a violation's evidence (a "
                   "wedge's detection) to its row in PostgreSQL. Empty for a replay.",
                   unit="s", thresholds=steps(GREEN, (3, ORANGE), (10, RED)), w=6),
        stat_panel("Fixed cost per batch", COST_FIXED,
                   "What a micro-batch costs whatever it carries: the intercept of the least-"
                   "squares line of batch duration against input rows over the batches of the "
                   "range (those that read nothing anchor it). Near the trigger interval it alone "
                   "caps the rate.",
                   unit="ms", w=6),
        stat_panel("Cost per event", COST_PER_ROW,
                   "Microseconds a batch takes per input record: the slope of the same line. "
                   "1 / this is the rate no batch size can beat.", unit="µs", w=6),
        stat_panel("Cost fit", COST_FIT,
                   "Batches in the fit and its R² (1: durations on the line). With batches of "
                   "about the same size (a steady live rate) the line is poorly determined: "
                   "widen the range to take in batches of other sizes.", w=6),
    ]


def duration_by_rows() -> barchart.Panel:
    """Average batch duration by input rows (equal-width bins) with the fitted line's value."""
    return bars("Batch duration against rows", DURATION_BY_ROWS,
                f"The batches of the range in {BINS} bins of equal width by input rows (each "
                "bin's rows and number of batches): their average duration, and the fitted "
                "line's (fixed + per event x rows) at the same rows. A bin far above the fit "
                "holds batches slowed by something else than their size (a query's first batch "
                "carries its start).", "rows", unit="ms")


def build() -> dash.Dashboard:
    """The Pipeline health dashboard."""
    out = dashboard("pipeline", "replimon: Pipeline health",
                    "The streaming job: micro-batch duration against the trigger, alert latency, "
                    "the batch-cost fit, rates, consumer lag, dead letters, data-quality results "
                    "(processing time).")
    for panel in [*stats(), *cost_stats()]:
        out = out.with_panel(panel)
    return (out
            .with_panel(timeseries_panel(
                "Micro-batch duration vs trigger", [sql.series(DURATION)],
                "How long each micro-batch took against the trigger interval it ran under "
                "(none for an availableNow replay). Durations above the trigger mean the job "
                "falls behind.", unit="ms"))
            .with_panel(timeseries_panel(
                "Input rate", [sql.series(RATES)],
                "Records per second arriving and processed, per micro-batch (Spark's progress).",
                unit="short"))
            .with_panel(timeseries_panel(
                "Alert latency", [sql.series(LATENCY_OVER_TIME)],
                "p50 and p99 per interval of the seconds from a violation's evidence (event "
                "time) to its row in PostgreSQL, and from a wedge's detection to its row, by when "
                "the batch that wrote it ran. Live batches only (a replay stores old events); "
                "info and data alerts are not counted. Target: p99 under 3 s.", unit="s", h=9))
            .with_panel(duration_by_rows())
            .with_panel(timeseries_panel(
                "Consumer lag", [sql.series(LAG)],
                "Records on the input topics not read yet at the end of each micro-batch.",
                unit="short", w=8))
            .with_panel(timeseries_panel(
                "Rows per micro-batch", [sql.series(ROWS)],
                "Input records and groups updated by each micro-batch.", unit="short", w=8))
            .with_panel(timeseries_panel(
                "Alerts and dead letters per micro-batch", [sql.series(OUTPUTS)],
                "Alerts raised and records dead-lettered by each micro-batch.", w=8,
                bars=True).decimals(0))
            .with_panel(timeseries_panel(
                "PostgreSQL backlog", [sql.series(PG_BACKLOG)],
                "Batches whose rows waited for PostgreSQL (an outage: the job went on, alerts went "
                "to Kafka) and how long, by when each was written; 0 when written on time.",
                unit="short", w=24))
            .with_panel(timeseries_panel(
                "Dead letters by topic", [sql.series(DEAD_OVER_TIME)],
                "Records refused per interval (broker time), per input topic.", bars=True)
                        .decimals(0))
            .with_panel(table_panel(
                "Dead letters", DEAD_TABLE, "The latest refused records with the reason and where "
                "they are (topic, partition, offset); non-UTF-8 bytes are shown escaped.", w=12))
            .with_panel(table_panel(
                "Data-quality results", DQ_LATEST, "Each expectation's latest result in the "
                "range, failures first.", w=16, coloured=("result",)))
            .with_panel(timeseries_panel(
                "Data-quality failures", [sql.series(DQ_FAILURES)],
                "Failed expectations per interval, per suite.", w=8, bars=True).decimals(0)))
