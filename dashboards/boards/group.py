"""Group detail: one group of a run (``$group``) over time (docs/dashboards.md, "Group detail").

How far the group decided and executed against its effective horizon, how much of the event
horizon's window it uses, its configuration map as a timeline, each node's heartbeat freshness,
its alerts with their evidence, and annotations for installed and refused configurations and for
alerts on every time panel.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import statetimeline
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as model

from replimon.dashboards import sql
from replimon.dashboards.boards.families import chain_panels, chain_text, gen_panels, qlog_panels
from replimon.dashboards.build import (
    DS,
    GREEN,
    ORANGE,
    RED,
    alerts_link,
    dashboard,
    family_variable,
    group_variable,
    level_mappings,
    stat_panel,
    steps,
    table_panel,
    timeseries_panel,
)
from replimon.dashboards.sql import GROUP, RUN, indent

WHERE = f"run_id = {RUN} AND group_id = {GROUP}"  # latest-state tables of the group
SERIES = f"{WHERE} AND $__timeFilter(ts)"  # its time series over the range

FRONTIERS = f"""SELECT ts AS "time", decided AS "decided (group)",
       executed_majority AS "executed by a majority", effective_horizon AS "effective horizon"
FROM group_timeseries
WHERE {SERIES}
ORDER BY 1"""

NODE_FRONTIERS = f"""SELECT ts AS "time", node_id AS metric, executed, decided
FROM node_timeseries
WHERE {SERIES}
ORDER BY 1, 2"""

WINDOW = f"""SELECT ts AS "time", window_use AS "window use", event_horizon AS "event horizon"
FROM group_timeseries
WHERE {SERIES}
ORDER BY 1"""

HEARTBEATS = f"""SELECT ts AS "time", node_id AS metric, heartbeat_age_ms AS "heartbeat age"
FROM node_timeseries
WHERE {SERIES} AND member
ORDER BY 1, 2"""

CONFIG_MAP = f"""SELECT ts AS "time", active_config AS "active", coalesce(pending_configs, 'none') AS "pending"
FROM group_timeseries
WHERE {SERIES}
ORDER BY 1"""

_MEMBERS = ("(SELECT string_agg(m->>'id' || ' (protocol ' || (m->>'protocol') || ')', ', ')\n"
            "        FROM jsonb_array_elements({0}) m)")

# Every family's configuration (docs/families.md 5.2): XCom's active and pending ones from its
# columns, any other family's from group_state.config (a generation's members are ids, a
# legislature's {id, leader} objects: shown as ids, the leader marked; a chain's view is its
# ordered chain, head marked); ``configuration`` is the JSON as stored.
CONFIGS = f"""SELECT family, 'active' AS role, active_start AS version,
       active_event_horizon AS "event horizon",
       (snapshot->'active'->>'decided_at')::bigint AS "decided at",
       {_MEMBERS.format('members')} AS members,
       (config->'active')::text AS configuration
FROM group_state
WHERE {WHERE} AND family = 'xcom' AND active_start IS NOT NULL
UNION ALL
SELECT family, 'pending', (p->>'start')::bigint, (p->>'event_horizon')::integer,
       (p->>'decided_at')::bigint,
       {_MEMBERS.format("p->'members'")},
       p::text
FROM group_state, jsonb_array_elements(pending) p
WHERE {WHERE} AND family = 'xcom'
UNION ALL
SELECT family, CASE family WHEN 'gen' THEN 'generation' WHEN 'qlog' THEN 'legislature'
                          WHEN 'chain' THEN 'view' ELSE 'current' END,
       CASE family WHEN 'qlog' THEN (config->>'legislature')::bigint
                   WHEN 'chain' THEN (config->>'epoch')::bigint ELSE (config->>'num')::bigint END,
       NULL, NULL,
       CASE family WHEN 'chain' THEN {chain_text("config->'chain'")}
       ELSE (SELECT string_agg(CASE jsonb_typeof(m)
                                 WHEN 'object' THEN (m->>'id') || CASE WHEN (m->>'leader')::boolean
                                                                       THEN ' (leader)' ELSE '' END
                                 ELSE m #>> '{{}}' END, ', ')
             FROM jsonb_array_elements(config->'members') m) END,
       config::text
FROM group_state
WHERE {WHERE} AND family <> 'xcom' AND config IS NOT NULL
ORDER BY 3"""

NODES = f"""SELECT n.node_id AS node, n.member, n.status, n.executed, n.decided, n.incarnation,
       n.protocol, n.last_ts AS "last event",
       extract(epoch FROM g.clock_ts - n.last_ts) AS "behind group clock (s)",
       n.silent,
       array_to_string(ARRAY(SELECT jsonb_array_elements_text(n.suspects)), ', ') AS suspects
FROM node_state n
JOIN group_state g ON g.run_id = n.run_id AND g.group_id = n.group_id
WHERE n.run_id = {RUN} AND n.group_id = {GROUP}
ORDER BY n.member DESC, n.node_id"""

ALERTS = f"""SELECT s.event_ts AS "event time", s.detected_ts AS detected, s.resolved_ts AS resolved,
       s.severity, s.kind,
       {sql.STATUS} AS status,
       s.node, s.instance, s.message, s.evidence::text AS evidence, s.alert_id AS "alert id"
FROM (
{indent(sql.alert_spans(f"f.group_id = {GROUP} AND f.category <> 'info'"), 4)}
) s
ORDER BY s.event_ts DESC"""


def config_annotation(kind: str) -> str:
    """Annotation query: the group's alerts of info ``kind`` in the range, as points."""
    return f"""SELECT a.event_ts AS "time", a.message AS text, a.kind AS tags
FROM alerts a
WHERE a.run_id = {RUN} AND a.group_id = {GROUP} AND $__timeFilter(a.event_ts)
  AND a.status = 'event' AND a.kind = '{kind}'
ORDER BY 1"""


ALERT_ANNOTATION = f"""SELECT s.event_ts AS "time",
       CASE WHEN s.category = 'wedge' THEN least(coalesce(s.resolved_ts, $__timeTo()), $__timeTo())
            ELSE s.event_ts END AS timeend,
       s.kind || ' (' || s.severity || '): ' || s.message AS text,
       s.severity || ',' || s.kind AS tags
FROM (
{indent(sql.alert_spans(f"f.group_id = {GROUP} AND f.category <> 'info'"), 4)}
) s
ORDER BY 1"""


def annotation(name: str, query: str, colour: str) -> dash.AnnotationQuery:
    """An annotation query on the datasource, shown on every time panel."""
    return (dash.AnnotationQuery().name(name).datasource(DS).enable(True).hide(False)
            .icon_color(colour).target(sql.SqlAnnotation(query)))


def stats() -> list[cogbuilder.Builder[model.Panel]]:
    """The top line: where the group stands."""
    return [
        stat_panel("Health", f"""SELECT h.level AS health
FROM (
{indent(sql.health_levels(f"g.group_id = {GROUP}"), 4)}
) h""", "Worst open alert at the end of the range: critical, warning, or ok.",
                   thresholds=steps(GREEN, (1, ORANGE), (2, RED)), mappings=level_mappings()),
        stat_panel("Firing now", f"""SELECT count(*) AS firing
FROM (
{indent(sql.open_alerts(f"f.group_id = {GROUP}"), 4)}
) o""", "Critical and warning alerts of the group open at the end of the range.",
                   thresholds=steps(GREEN, (1, RED))),
        stat_panel("Decided", f"SELECT decided FROM group_state WHERE {WHERE}",
                   "Contiguous decided frontier (latest state)."),
        stat_panel("Window use now", f'SELECT window_fraction AS "window use" FROM group_state WHERE {WHERE}',
                   "(decided - executed by a majority) / event horizon (latest state); 100%: "
                   "decisions reached the effective horizon.",
                   unit="percentunit", thresholds=steps(GREEN, (0.8, ORANGE), (1, RED))),
        stat_panel("Members", f"SELECT jsonb_array_length(members) AS members FROM group_state WHERE {WHERE}",
                   "Members of the active configuration (latest state)."),
        stat_panel("Pending configs", f"SELECT jsonb_array_length(pending) AS pending FROM group_state WHERE {WHERE}",
                   "Decided configurations that have not started yet (latest state).",
                   thresholds=steps(GREEN, (1, ORANGE))),
    ]


def build() -> dash.Dashboard:
    """The Group detail dashboard."""
    config_map = (statetimeline.Panel().title("Configuration map").datasource(DS)
                  .description("The active configuration and the pending ones at each snapshot: "
                               "start instance, event horizon (eh) and members.")
                  .with_target(sql.table(CONFIG_MAP)).span(24).height(6)
                  .show_value(cm.VisibilityMode.AUTO).merge_values(True).row_height(0.9)
                  .align_value(cm.TimelineValueAlignment.LEFT).line_width(1).fill_opacity(70)
                  .legend(cb.VizLegendOptions().display_mode(cm.LegendDisplayMode.HIDDEN)
                          .placement(cm.LegendPlacement.BOTTOM).show_legend(False).calcs([]))
                  .tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.SINGLE).sort(cm.SortOrder.NONE))
                  .thresholds(steps(GREEN))
                  .color_scheme(dash.FieldColor().mode(model.FieldColorModeId.PALETTE_CLASSIC)))
    heartbeats = (timeseries_panel("Heartbeat freshness", [sql.series(HEARTBEATS)],
                                   "Per member: group clock minus the node's latest event time at "
                                   "each snapshot. The line is NODE_SILENT's default threshold (5 s).",
                                   unit="ms")
                  .thresholds(steps(GREEN, (5000, ORANGE)))
                  .thresholds_style(cb.GraphThresholdsStyleConfig().mode(cm.GraphTresholdsStyleMode.LINE)))
    out = (dashboard("group", "replimon: Group detail",
                     "One group of a run over time: frontiers against the effective horizon, window "
                     "use, configuration map, heartbeats, alerts with evidence.")
           .with_variable(family_variable())
           .with_variable(group_variable())
           .annotation(annotation("Configs installed", config_annotation("CONFIG_INSTALLED"), "blue"))
           .annotation(annotation("Reconfigurations refused", config_annotation("RECONFIG_REFUSED"), "purple"))
           .annotation(annotation("Alerts", ALERT_ANNOTATION, "red")))
    for panel in stats():
        out = out.with_panel(panel)
    for panel in [*gen_panels(), *qlog_panels(), *chain_panels()]:
        out = out.with_panel(panel)
    return (out
            .with_panel(timeseries_panel(
                "Frontiers against the effective horizon",
                [sql.series(FRONTIERS, "A"), sql.series(NODE_FRONTIERS, "B")],
                "The group's decided frontier, the frontier a majority executed and the effective "
                "horizon it allows; per node its executed and decided frontiers. Decisions at the "
                "horizon with executions stuck is a HORIZON_WEDGE.", w=24, h=9))
            .with_panel(timeseries_panel(
                "Window use", [sql.series(WINDOW)],
                "Instances decided but not yet executed by a majority, against the active "
                "configuration's event horizon.", unit="none"))
            .with_panel(heartbeats)
            .with_panel(config_map)
            .with_panel(table_panel(
                "Configurations now", CONFIGS, "The group's configuration, whatever its family "
                "(latest state). XCom: the active configuration and the pending ones, version = "
                "start instance, event horizon, the instance that decided it, members with their "
                "protocol. Generations: the current generation, version = its number, its "
                "members. Quorum-log: the legislature in force, version = its number, its "
                "members in order with the leader marked. Chain: the view in force, version = its "
                "epoch, its chain head > .. > tail with the head marked. The configuration column is the "
                "configuration as stored.",
                w=12, coloured=()))
            .with_panel(table_panel(
                "Nodes now", NODES, "Every node the group has seen (latest state); members first.",
                w=12))
            .with_panel(table_panel(
                "Alerts", ALERTS, "The group's alerts that overlap the range (config events are "
                "annotations), newest first, with their evidence: the events and Kafka offsets "
                "that prove them.", h=10, coloured=("severity", "status"))
                        .links([alerts_link()])))
