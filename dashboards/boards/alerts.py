"""Alerts: what fired in a range, how fast it was detected, how long it lasted, by group and kind
(docs/dashboards.md, "Alerts").

Covers the problems (violations, wedges, data alerts); the info kinds CONFIG_INSTALLED and
RECONFIG_REFUSED are configuration events and appear as annotations on Group detail.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import barchart
from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as model

from replimon.dashboards import sql
from replimon.dashboards.build import (
    BLUE,
    DS,
    GREEN,
    ORANGE,
    RED,
    colour,
    dashboard,
    group_link,
    stat_panel,
    steps,
    table_panel,
    timeseries_panel,
)
from replimon.dashboards.sql import RUN, indent

PROBLEMS = "f.category <> 'info'"
WEDGES = "f.category = 'wedge'"
DETECT = "extract(epoch FROM {0}.detected_ts - {0}.event_ts)"  # seconds from evidence to alert
STORED = "extract(epoch FROM {0}.inserted_at - {0}.event_ts)"  # ... to its row in PostgreSQL


def spans(where: str = PROBLEMS) -> str:
    """``FROM (<alert occurrences overlapping the range>) s`` (sql.alert_spans)."""
    return f"FROM (\n{indent(sql.alert_spans(where), 4)}\n) s"


OVER_TIME = f"""SELECT $__timeGroupAlias(detected_ts, $__interval), kind AS metric, count(*) AS alerts
FROM alerts
WHERE run_id = {RUN} AND $__timeFilter(detected_ts) AND status <> 'resolved' AND category <> 'info'
GROUP BY 1, 2
ORDER BY 1, 2"""

DETECT_BY_KIND = f"""SELECT kind,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY {DETECT.format('a')}) AS "median",
       max({DETECT.format('a')}) AS "max"
FROM alerts a
WHERE a.run_id = {RUN} AND {sql.IN_RANGE.format('a')} AND a.status <> 'resolved' AND a.category <> 'info'
GROUP BY a.kind
ORDER BY 3 DESC, 1"""

FIRING_BY_KIND = f"""SELECT s.kind, sum(s.firing_s) AS "total", max(s.firing_s) AS "longest"
{spans(WEDGES)}
GROUP BY s.kind
ORDER BY 2 DESC, 1"""

BY_GROUP = f"""SELECT s.group_id AS "group",
       count(*) FILTER (WHERE s.severity = 'critical') AS critical,
       count(*) FILTER (WHERE s.severity = 'warning') AS warning,
       count(*) FILTER (WHERE s.severity = 'info') AS info
{spans()}
GROUP BY s.group_id
ORDER BY count(*) DESC, 1
LIMIT 20"""

BY_GROUP_KIND = f"""SELECT s.group_id AS "group", s.kind, s.severity, count(*) AS occurrences,
       count(*) FILTER (WHERE s.category = 'wedge' AND (s.resolved_ts IS NULL OR s.resolved_ts > $__timeTo()))
           AS "firing at end",
       sum(s.firing_s) AS "time firing (s)",
       percentile_cont(0.5) WITHIN GROUP (ORDER BY {DETECT.format('s')}) AS "median time to detect (s)",
       percentile_cont(0.5) WITHIN GROUP (ORDER BY {STORED.format('s')}) AS "median event to stored (s)"
{spans()}
GROUP BY s.group_id, s.kind, s.severity
ORDER BY (s.severity = 'critical') DESC, occurrences DESC, 1, 2"""

HISTORY = f"""SELECT s.event_ts AS "event time", s.detected_ts AS detected, s.resolved_ts AS resolved,
       s.group_id AS "group", s.severity, s.kind, s.category,
       {sql.STATUS} AS status,
       s.node, s.instance,
       {DETECT.format('s')} AS "time to detect (s)",
       s.firing_s AS "time firing (s)",
       s.message
{spans()}
ORDER BY s.event_ts DESC
LIMIT 1000"""


def stats() -> list[cogbuilder.Builder[model.Panel]]:
    """The top line."""
    return [
        stat_panel("Alerts", f"SELECT count(*) AS alerts\n{spans()}",
                   "Alert occurrences (violations, wedges, data) that overlap the range."),
        stat_panel("Violations", "SELECT count(*) AS violations\n" + spans("f.category = 'violation'"),
                   "Safety violations in the range: they never resolve by themselves.",
                   thresholds=steps(GREEN, (1, RED))),
        stat_panel("Wedges", "SELECT count(*) AS wedges\n" + spans(WEDGES),
                   "Liveness alerts (wedges, silences, quorum) that overlap the range.",
                   thresholds=steps(GREEN, (1, ORANGE))),
        stat_panel("Firing at end of range", f"""SELECT count(*) AS firing
FROM (
{indent(sql.open_alerts(), 4)}
) o""", "Critical and warning alerts open at the end of the range.",
                   thresholds=steps(GREEN, (1, RED))),
        stat_panel("Median time to detect", f"""SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY {DETECT.format('a')}) AS "time to detect"
FROM alerts a
WHERE a.run_id = {RUN} AND {sql.IN_RANGE.format('a')} AND a.status <> 'resolved' AND a.category <> 'info'""",
                   "Median of detected - event time: how long after its evidence an alert fired "
                   "(a wedge's threshold is part of it).", unit="s"),
        stat_panel("Time firing", 'SELECT sum(s.firing_s) AS "time firing"\n' + spans(WEDGES),
                   "Wedge-seconds in the range: each wedge from its detection to its resolution "
                   "(or the end of the range).", unit="s"),
    ]


def bars(title: str, query: str, description: str, x: str, *, unit: str | None = None,
         stacked: bool = False, w: int = 12) -> barchart.Panel:
    """A horizontal bar chart of one text column ``x`` and numeric columns."""
    panel = (barchart.Panel().title(title).description(description).datasource(DS)
             .with_target(sql.table(query)).span(w).height(9)
             .x_field(x).orientation(cm.VizOrientation.HORIZONTAL)
             .stacking(cm.StackingMode.NORMAL if stacked else cm.StackingMode.NONE)
             .show_value(cm.VisibilityMode.AUTO)
             .legend(cb.VizLegendOptions().display_mode(cm.LegendDisplayMode.LIST)
                     .placement(cm.LegendPlacement.BOTTOM).show_legend(True).calcs([]))
             .tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.NONE))
             .thresholds(steps(GREEN)))
    return panel.unit(unit) if unit else panel


def build() -> dash.Dashboard:
    """The Alerts dashboard."""
    out = dashboard("alerts", "replimon: Alerts",
                    "Alert history of a run: what fired, time to detect, time firing, by group "
                    "and kind.")
    for panel in stats():
        out = out.with_panel(panel)
    return (out
            .with_panel(timeseries_panel(
                "Alerts over time by kind", [sql.series(OVER_TIME)],
                "Alerts fired per interval (by the event time of their evidence), per kind.",
                w=24, bars=True).decimals(0))
            .with_panel(bars(
                "Time to detect by kind", DETECT_BY_KIND,
                "Seconds from an alert's evidence (event time) to its detection, median and "
                "maximum per kind. A wedge's threshold is part of it (e.g. NODE_SILENT: 5 s).",
                "kind", unit="s"))
            .with_panel(bars(
                "Time firing by kind", FIRING_BY_KIND,
                "Wedges only (violations never resolve): seconds firing within the range, in "
                "total and the longest occurrence.", "kind", unit="s"))
            .with_panel(bars(
                "Alerts by group", BY_GROUP, "The 20 groups with the most alert occurrences in "
                "the range, by severity.", "group", stacked=True)
                        .decimals(0).data_links([group_link()])
                        .override_by_name("critical", colour(RED))
                        .override_by_name("warning", colour(ORANGE))
                        .override_by_name("info", colour(BLUE)))
            .with_panel(table_panel(
                "By group and kind", BY_GROUP_KIND, "Per group and kind: occurrences, how many "
                "are still firing, time firing, median time to detect, and median time from the "
                "event to its row in PostgreSQL (meaningful for the live run only: a replay "
                "stores old events).", w=12, h=9, links=[group_link()], coloured=("severity",)))
            .with_panel(table_panel(
                "Alert history", HISTORY, "Every alert occurrence overlapping the range, newest "
                "first (at most 1000). Click a row for its group.", h=12,
                links=[group_link()], coloured=("severity", "status"))))
