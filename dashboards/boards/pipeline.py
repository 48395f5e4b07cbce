"""Pipeline health: is the streaming job keeping up, and is its input sound (docs/dashboards.md,
"Pipeline health").

Micro-batch duration against the trigger interval, input and processing rates, consumer lag, dead
letters and data-quality results. Its time axis is processing time (when a batch ran, when the
broker took a record), not the replicas' event time the other dashboards use.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.models import dashboard as model

from replimon.dashboards import sql
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


def build() -> dash.Dashboard:
    """The Pipeline health dashboard."""
    out = dashboard("pipeline", "replimon: Pipeline health",
                    "The streaming job: micro-batch duration against the trigger, rates, consumer "
                    "lag, dead letters, data-quality results (processing time).")
    for panel in stats():
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
