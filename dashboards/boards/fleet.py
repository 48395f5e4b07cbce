"""Fleet: every group of a run at a glance (docs/dashboards.md, "Fleet").

What is wrong and where: groups by health, what is firing by kind and severity, which groups are
reconfiguring, which are closest to their event horizon, which nodes went silent, and where
each generations, quorum-log and chain group stands. The ``$family`` variable keeps the groups of the chosen protocol
families. Every group cell links to Group detail.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import barchart, bargauge, piechart
from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models import piechart as pm

from replimon.dashboards import sql
from replimon.dashboards.boards.families import chain_text
from replimon.dashboards.build import (
    DS,
    GREEN,
    ORANGE,
    RED,
    alerts_link,
    colour,
    dashboard,
    family_variable,
    group_link,
    stat_panel,
    steps,
    table_panel,
)
from replimon.dashboards.sql import FAMILY, RUN, indent

HEALTH = f"""SELECT count(*) FILTER (WHERE h.level = 2) AS critical,
       count(*) FILTER (WHERE h.level = 1) AS warning,
       count(*) FILTER (WHERE h.level = 0) AS ok
FROM (
{indent(sql.health_levels(), 4)}
) h"""

FIRING_BY_KIND = f"""SELECT o.kind,
       count(*) FILTER (WHERE o.severity = 'critical') AS critical,
       count(*) FILTER (WHERE o.severity = 'warning') AS warning
FROM (
{indent(sql.open_alerts(), 4)}
) o
GROUP BY o.kind
ORDER BY critical DESC, warning DESC, o.kind"""

WORST_WINDOW = f"""SELECT t.group_id AS "group", max(t.window_fraction) AS "window use"
FROM group_timeseries t
WHERE t.run_id = {RUN} AND $__timeFilter(t.ts) AND t.window_fraction IS NOT NULL
GROUP BY t.group_id
ORDER BY 2 DESC, 1
LIMIT 10"""

GROUPS = f"""SELECT g.group_id AS "group",
       g.family,
       {sql.HEALTH_TEXT.format('h.level')} AS health,
       h.firing AS "firing alerts",
       h.kinds AS "firing kinds",
       g.history,
       g.decided,
       g.window_fraction AS "window use",
       jsonb_array_length(g.members) AS members,
       jsonb_array_length(g.pending) AS "pending configs",
       g.clock_ts AS "last event"
FROM group_state g
JOIN (
{indent(sql.health_levels(), 4)}
) h ON h.group_id = g.group_id
WHERE g.run_id = {RUN} AND g.family IN ({FAMILY})
ORDER BY h.level DESC, h.firing DESC, g.group_id"""

def family_groups(family: str, columns: str, order: str) -> str:
    """One row per group of ``family`` (rows only when the family variable includes it): its
    name and health, then ``columns`` (of group_state ``g``), then its last event; ``order``
    before the health and the name."""
    return f"""SELECT g.group_id AS "group",
       {sql.HEALTH_TEXT.format('h.level')} AS health,
{indent(columns, 7)},
       g.clock_ts AS "last event"
FROM group_state g
JOIN (
{indent(sql.health_levels(f"g.family = '{family}'"), 4)}
) h ON h.group_id = g.group_id
WHERE g.run_id = {RUN} AND g.family = '{family}' AND '{family}' IN ({FAMILY})
ORDER BY {order}h.level DESC, g.group_id"""


# Generations groups (docs/families.md 5.2): the current generation of each, from
# group_state.config.
GENERATIONS = family_groups("gen", '''(g.config->>'num')::bigint AS generation,
jsonb_array_length(g.config->'members') AS members,
jsonb_array_length(g.config->'configured') AS configured,
CASE WHEN (g.config->>'minority')::boolean THEN 'minority' ELSE 'majority' END AS quorum,
(g.config->>'election')::bigint AS "open election"''', "(g.config->>'minority')::boolean DESC NULLS FIRST, ")

# Quorum-log groups (docs/families.md 5.2): the legislature in force, its leader and the decree
# frontier of each, from group_state.config.
QUORUM_LOGS = family_groups("qlog", '''(g.config->>'legislature')::bigint AS legislature,
jsonb_array_length(g.config->'members') AS members,
(SELECT string_agg(m->>'id', ', ') FROM jsonb_array_elements(g.config->'members') m
 WHERE (m->>'leader')::boolean) AS leader,
(g.config->>'passed')::bigint AS passed,
(g.config->>'executed')::bigint AS executed,
g.executed_majority AS "executed by a majority",
jsonb_array_length(g.config->'recovering') AS "open recoveries"''', "")

# Chain groups (docs/families.md 5.2): the epoch in force, its chain head..tail, whether it is
# wedged and the position a majority of the chain holds, from group_state.config; wedged first.
CHAINS = family_groups("chain", f'''(g.config->>'epoch')::bigint AS epoch,
{chain_text("g.config->'chain'")} AS chain,
jsonb_array_length(g.config->'chain') AS replicas,
CASE WHEN (g.config->>'wedged')::boolean THEN 'wedged' ELSE '' END AS wedged,
(g.config->>'wedged_epoch')::bigint AS "wedged epoch",
g.executed_majority AS "pos held by a majority"''', "(g.config->>'wedged')::boolean DESC NULLS FIRST, ")

FIRING = f"""SELECT o.group_id AS "group", o.severity, o.kind, o.category,
       o.event_ts AS "since", o.detected_ts AS detected, o.node, o.instance, o.message
FROM (
{indent(sql.open_alerts(), 4)}
) o
ORDER BY (o.severity = 'critical') DESC, o.event_ts DESC"""

PENDING = f"""SELECT t.group_id AS "group",
       min(t.ts) AS "first seen pending",
       max(t.ts) AS "last seen pending",
       max(t.pending) AS "most pending",
       (array_agg(t.pending_configs ORDER BY t.ts DESC))[1] AS "last pending configs",
       jsonb_array_length(g.pending) AS "pending now",
       g.decided AS "decided now"
FROM group_timeseries t
JOIN group_state g ON g.run_id = t.run_id AND g.group_id = t.group_id
WHERE t.run_id = {RUN} AND $__timeFilter(t.ts) AND t.pending > 0
GROUP BY t.group_id, g.pending, g.decided
ORDER BY "pending now" DESC, "first seen pending\""""

SILENT = f"""SELECT s.group_id AS "group", coalesce(s.node, '(whole group)') AS node, s.kind,
       {sql.STATUS} AS status,
       s.event_ts AS "last heard",
       s.resolved_ts AS "heard again",
       extract(epoch FROM least(coalesce(s.resolved_ts, $__timeTo()), $__timeTo()) - s.event_ts)
           AS "silent for (s)"
FROM (
{indent(sql.alert_spans("f.kind IN ('NODE_SILENT', 'GROUP_SILENT')"), 4)}
) s
ORDER BY 4, s.event_ts DESC"""


def stats() -> list[cogbuilder.Builder[model.Panel]]:
    """The top line: six numbers."""
    return [
        stat_panel("Groups", f"""SELECT count(*) AS groups,
       count(*) FILTER (WHERE family = 'xcom') AS xcom,
       count(*) FILTER (WHERE family = 'gen') AS gen,
       count(*) FILTER (WHERE family = 'qlog') AS qlog,
       count(*) FILTER (WHERE family = 'chain') AS chain
FROM group_state
WHERE run_id = {RUN}""", "Groups of this run (latest state): all of them, and how many of each "
                   "protocol family (xcom: MySQL XCom, gen: Postgres multimaster generations, "
                   "qlog: quorum-log reconfiguration, chain: chain replication)."),
        stat_panel("Critical groups", f"""SELECT count(*) FILTER (WHERE h.level = 2) AS critical
FROM (
{indent(sql.health_levels(), 4)}
) h""", "Groups with a critical alert open at the end of the range.",
                   thresholds=steps(GREEN, (1, RED))),
        stat_panel("Firing now", f"""SELECT count(*) AS firing
FROM (
{indent(sql.open_alerts(), 4)}
) o""", "Critical and warning alerts open at the end of the range (wedges not yet resolved, "
            "violations and data alerts that happened in the range).",
                   thresholds=steps(GREEN, (1, RED))),
        stat_panel("Pending reconfigurations", f"""SELECT count(*) AS groups
FROM group_state
WHERE run_id = {RUN} AND jsonb_array_length(pending) > 0""",
                   "Groups with a decided configuration that has not started yet (latest state).",
                   thresholds=steps(GREEN, (1, ORANGE))),
        stat_panel("Silent now", f"""SELECT count(*) AS silent
FROM (
{indent(sql.open_alerts("f.kind IN ('NODE_SILENT', 'GROUP_SILENT')"), 4)}
) o""", "NODE_SILENT and GROUP_SILENT alerts open at the end of the range.",
                   thresholds=steps(GREEN, (1, ORANGE))),
        stat_panel("Worst window use", f"""SELECT max(window_fraction) AS "window use"
FROM group_timeseries
WHERE run_id = {RUN} AND $__timeFilter(ts)""",
                   "Highest (decided - executed by a majority) / event horizon of any group in the "
                   "range; 100% means decisions reached the effective horizon.",
                   unit="percentunit", thresholds=steps(GREEN, (0.8, ORANGE), (1, RED))),
    ]


def build() -> dash.Dashboard:
    """The Fleet dashboard."""
    health = (piechart.Panel().title("Groups by health").datasource(DS)
              .description("Each group's worst open alert at the end of the range: critical, "
                           "warning, or ok when nothing is open.")
              .with_target(sql.table(HEALTH)).span(6).height(9)
              .pie_type(pm.PieChartType.DONUT).display_labels([pm.PieChartLabels.VALUE])
              .reduce_options(cb.ReduceDataOptions().values(False).calcs(["lastNotNull"]).fields(""))
              .legend(piechart.PieChartLegendOptions().display_mode(cm.LegendDisplayMode.LIST)
                      .placement(cm.LegendPlacement.RIGHT).show_legend(True)
                      .values([pm.PieChartLegendValues.VALUE]))
              .tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.SINGLE).sort(cm.SortOrder.NONE))
              .override_by_name("critical", colour(RED)).override_by_name("warning", colour(ORANGE))
              .override_by_name("ok", colour(GREEN)))
    by_kind = (barchart.Panel().title("Firing alerts by kind and severity").datasource(DS)
               .description("Alerts open at the end of the range, per kind.")
               .with_target(sql.table(FIRING_BY_KIND)).span(9).height(9)
               .x_field("kind").orientation(cm.VizOrientation.HORIZONTAL)
               .stacking(cm.StackingMode.NORMAL).show_value(cm.VisibilityMode.AUTO)
               .legend(cb.VizLegendOptions().display_mode(cm.LegendDisplayMode.LIST)
                       .placement(cm.LegendPlacement.BOTTOM).show_legend(True).calcs([]))
               .tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.NONE))
               .decimals(0).override_by_name("critical", colour(RED))
               .override_by_name("warning", colour(ORANGE)).links([alerts_link()]))
    window = (bargauge.Panel().title("Groups closest to their horizon").datasource(DS)
              .description("The ten groups that came closest to their effective horizon in the "
                           "range: highest (decided - executed by a majority) / event horizon.")
              .with_target(sql.table(WORST_WINDOW)).span(9).height(9)
              .display_mode(cm.BarGaugeDisplayMode.GRADIENT).orientation(cm.VizOrientation.HORIZONTAL)
              .value_mode(cm.BarGaugeValueMode.COLOR).show_unfilled(True)
              .reduce_options(cb.ReduceDataOptions().values(True).calcs(["lastNotNull"]).fields(""))
              .unit("percentunit").min(0).max(1)
              .thresholds(steps(GREEN, (0.8, ORANGE), (1, RED))).data_links([group_link()]))
    out = dashboard("fleet", "replimon: Fleet",
                    "Every group of a run: health, firing alerts, reconfigurations, window use, "
                    "silent nodes. Click a group for its detail.")
    out = out.with_variable(family_variable())
    for panel in stats():
        out = out.with_panel(panel)
    return (out.with_panel(health).with_panel(by_kind).with_panel(window)
            .with_panel(table_panel(
                "Group list", GROUPS, "Every group: health at the end of the range (from its open "
                "alerts) and its latest state. Click a row for Group detail.", h=10,
                links=[group_link()], coloured=("health",)))
            .with_panel(table_panel(
                "Firing alerts", FIRING, "Critical and warning alerts open at the end of the "
                "range, critical first.", links=[group_link()], coloured=("severity",)))
            .with_panel(table_panel(
                "Groups with pending reconfigurations", PENDING, "Groups that had a decided "
                "configuration waiting to start at some snapshot in the range, and how many wait "
                "now.", w=12, links=[group_link()]))
            .with_panel(table_panel(
                "Silent nodes and groups", SILENT, "NODE_SILENT and GROUP_SILENT occurrences in "
                "the range: when the node (or group) was last heard, when again, for how long "
                "(seconds).", w=12, links=[group_link()], coloured=("status",)))
            .with_panel(table_panel(
                "Generations now", GENERATIONS, "Each generations group (family gen, shown when "
                "the family variable includes it): its current generation, the members of that "
                "generation against the nodes configured (a minority generation cannot commit), "
                "the open election (a generation a majority voted for that the nodes have not "
                "switched to yet; empty: none). Minority groups first.", h=8,
                links=[group_link()], coloured=("health",)))
            .with_panel(table_panel(
                "Quorum logs now", QUORUM_LOGS, "Each quorum-log group (family qlog, shown when the "
                "family variable includes it): the legislature in force, its members, the "
                "member(s) naming themselves leader (empty: none, QLOG_NO_LEADER if it lasts), "
                "the decree frontier (highest passed, highest contiguous executed, executed by a "
                "majority of the legislature) and the open recover requests.", h=8,
                links=[group_link()], coloured=("health",)))
            .with_panel(table_panel(
                "Chains now", CHAINS, "Each chain group (family chain, shown when the family "
                "variable includes it): the epoch of the view in force, its chain head > .. > tail "
                "with the head marked, how many replicas it holds, whether the view is wedged and "
                "the highest open wedge's epoch (CHAIN_WEDGE_NOT_REPLACED if it lasts), the log "
                "position a majority of the chain holds. Wedged groups first.", h=8,
                links=[group_link()], coloured=("health",))))
