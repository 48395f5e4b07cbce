"""What the four Grafana dashboards share (docs/dashboards.md): the template variables, the links
between dashboards, thresholds, value mappings and the panel shapes they use most (stat, table,
time series), built with the grafana-foundation-sdk.

Each dashboard lives in its own module under ``boards/`` (``fleet``, ``group``, ``alerts``,
``pipeline``) with a ``build()`` returning the SDK's dashboard builder; ``generate.py`` turns them
into the JSON checked in under ``dashboards/json/``.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import stat, table, timeseries
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as model

from replimon.dashboards import sql
from replimon.dashboards.common import (
    DASHBOARD_UIDS,
    DATASOURCE_TYPE,
    DATASOURCE_UID,
)

TAG = "replimon"  # every dashboard carries it; the dashboards' link menu lists them by it
DS = model.DataSourceRef(type_val=DATASOURCE_TYPE, uid=DATASOURCE_UID)

# Severity colours used everywhere (Grafana's named palette).
GREEN, ORANGE, RED, BLUE = "green", "orange", "red", "blue"


# -- variables -------------------------------------------------------------------------------------
def run_variable() -> dash.QueryVariable:
    """``$run``: which run to show ('live' for the live job, a replay's id otherwise). Every
    panel filters on it; the choices are the runs that have group state."""
    return (dash.QueryVariable("run").label("Run")
            .description("'live' for the live job, a replay's run id otherwise")
            .datasource(DS)
            .query("SELECT DISTINCT run_id FROM group_state ORDER BY 1")
            .current(model.VariableOption(selected=True, text="live", value="live"))
            .refresh(model.VariableRefresh.ON_DASHBOARD_LOAD)
            .sort(model.VariableSort.DISABLED))


def family_variable() -> dash.QueryVariable:
    """``$family``: the protocol families to show ('xcom', 'gen', 'qlog', 'chain'; "All" by default), from the
    run's groups (group_state.family). The group lists keep the groups of the chosen families, and
    each family's panels show rows only when their family is chosen (docs/dashboards.md,
    "Families"). Used in SQL as ``IN (${family:sqlstring})`` (sql.FAMILY)."""
    return (dash.QueryVariable("family").label("Family")
            .description("protocol family: xcom (MySQL XCom), gen (Postgres multimaster generations),"
                         " qlog (quorum-log reconfiguration), chain (chain replication)")
            .datasource(DS)
            .query("SELECT DISTINCT family FROM group_state WHERE run_id = ${run:sqlstring} ORDER BY 1")
            .include_all(True).multi(True)
            .current(model.VariableOption(selected=True, text="All", value="$__all"))
            .refresh(model.VariableRefresh.ON_DASHBOARD_LOAD)
            .sort(model.VariableSort.DISABLED))


def group_variable() -> dash.QueryVariable:
    """``$group``: one group of the chosen run and families (Group detail)."""
    return (dash.QueryVariable("group").label("Group")
            .description("a replicated group of the chosen run and families")
            .datasource(DS)
            .query("SELECT group_id FROM group_state WHERE run_id = ${run:sqlstring}"
                   " AND family IN (${family:sqlstring}) ORDER BY 1")
            .refresh(model.VariableRefresh.ON_DASHBOARD_LOAD)
            .sort(model.VariableSort.DISABLED))


# -- links -----------------------------------------------------------------------------------------
def dashboards_menu() -> dash.DashboardLink:
    """The link menu at the top of every dashboard: the other replimon dashboards, keeping the
    time range and the variables (so ``$run`` follows)."""
    return (dash.DashboardLink("replimon").type(model.DashboardLinkType.DASHBOARDS).tags([TAG])
            .as_dropdown(True).include_vars(True).keep_time(True))


def group_link(field: str = "group") -> dash.DashboardLink:
    """A data link to Group detail for the group in column ``field`` of the clicked row, with the
    same run and time range, and every family chosen there."""
    # Every family: the clicked group is in Group detail's list whatever its family.
    url = (f"/d/{DASHBOARD_UIDS['group']}?var-run=${{run}}&var-family=$__all"
           f"&var-group=${{__data.fields.{field}}}&${{__url_time_range}}")
    return dash.DashboardLink(f"Group detail: ${{__data.fields.{field}}}").url(url)


def alerts_link() -> dash.DashboardLink:
    """A panel link to the Alerts dashboard (same run and range)."""
    return (dash.DashboardLink("Alerts").url(
        f"/d/{DASHBOARD_UIDS['alerts']}?var-run=${{run}}&${{__url_time_range}}"))


# -- thresholds and mappings -----------------------------------------------------------------------
def steps(base: str, *more: tuple[float, str]) -> dash.ThresholdsConfig:
    """Absolute thresholds: ``base`` colour, then (value, colour) steps."""
    out = [model.Threshold(value=None, color=base)]
    out += [model.Threshold(value=v, color=c) for v, c in more]
    return dash.ThresholdsConfig().mode(model.ThresholdsMode.ABSOLUTE).steps(out)


def level_mappings() -> list[model.ValueMapping]:
    """Health level (0 ok, 1 warning, 2 critical; sql.health_levels) shown as its name."""
    return [model.ValueMap(options={
        "0": model.ValueMappingResult(text="ok", color=GREEN, index=0),
        "1": model.ValueMappingResult(text="warning", color=ORANGE, index=1),
        "2": model.ValueMappingResult(text="critical", color=RED, index=2),
    })]


def severity_mappings() -> list[model.ValueMapping]:
    """Colours for the text values health and severity columns take."""
    return [model.ValueMap(options={
        "ok": model.ValueMappingResult(color=GREEN, index=0),
        "info": model.ValueMappingResult(color=BLUE, index=1),
        "warning": model.ValueMappingResult(color=ORANGE, index=2),
        "critical": model.ValueMappingResult(color=RED, index=3),
        "firing": model.ValueMappingResult(color=RED, index=4),
        "resolved": model.ValueMappingResult(color=GREEN, index=5),
        "event": model.ValueMappingResult(color=BLUE, index=6),
    })]


def colour(name: str) -> list[model.DynamicConfigValue]:
    """Override properties giving a field a fixed colour."""
    return [model.DynamicConfigValue(id_val="color", value={"mode": "fixed", "fixedColor": name})]


def cell_colour() -> list[model.DynamicConfigValue]:
    """Override properties colouring a table cell's text by its value mapping."""
    return [model.DynamicConfigValue(id_val="custom.cellOptions", value={"type": "color-text"})]


# -- panels the dashboards use most ----------------------------------------------------------------
def stat_panel(title: str, query: str, description: str, *, unit: str | None = None,
               thresholds: dash.ThresholdsConfig | None = None,
               mappings: list[model.ValueMapping] | None = None,
               w: int = 4, h: int = 4) -> stat.Panel:
    """A stat of one number (the last row's value of each numeric column), coloured by
    ``thresholds`` (default: all green)."""
    panel = (stat.Panel().title(title).description(description).datasource(DS)
             .with_target(sql.table(query)).span(w).height(h)
             .thresholds(thresholds or steps(GREEN))
             .color_mode(cm.BigValueColorMode.VALUE).graph_mode(cm.BigValueGraphMode.NONE)
             .text_mode(cm.BigValueTextMode.AUTO).justify_mode(cm.BigValueJustifyMode.AUTO)
             .orientation(cm.VizOrientation.AUTO)
             .reduce_options(cb.ReduceDataOptions().values(False).calcs(["lastNotNull"]).fields("")))
    if unit:
        panel = panel.unit(unit)
    if mappings:
        panel = panel.mappings(mappings)
    return panel


def table_panel(title: str, query: str, description: str, *, w: int = 24, h: int = 8,
                links: list[cogbuilder.Builder[model.DashboardLink]] | None = None,
                coloured: tuple[str, ...] = ()) -> table.Panel:
    """A table; ``links`` become data links on every cell (e.g. `group_link`), the text columns
    named in ``coloured`` are coloured by `severity_mappings`."""
    panel = (table.Panel().title(title).description(description).datasource(DS)
             .with_target(sql.table(query)).span(w).height(h)
             .cell_height(cm.TableCellHeight.SM).show_header(True)
             .thresholds(steps(GREEN)).mappings(severity_mappings()))
    if links:
        panel = panel.data_links(links)
    for name in coloured:
        panel = panel.override_by_name(name, cell_colour())
    return panel


def timeseries_panel(title: str, targets: list[cogbuilder.Builder[cogvariants.Dataquery]],
                     description: str, *, unit: str | None = None, w: int = 12, h: int = 8,
                     bars: bool = False) -> timeseries.Panel:
    """A time series of one or more time_series targets; ``bars`` for counts per interval."""
    panel = (timeseries.Panel().title(title).description(description).datasource(DS)
             .targets(targets).span(w).height(h)
             .legend(cb.VizLegendOptions().display_mode(cm.LegendDisplayMode.LIST)
                     .placement(cm.LegendPlacement.BOTTOM).show_legend(True).calcs([]))
             .tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI)
                      .sort(cm.SortOrder.DESCENDING))
             .thresholds(steps(GREEN)).color_scheme(dash.FieldColor().mode(model.FieldColorModeId.PALETTE_CLASSIC))
             .span_nulls(True).show_points(cm.VisibilityMode.AUTO))
    if bars:
        panel = (panel.draw_style(cm.GraphDrawStyle.BARS).fill_opacity(80)
                 .stacking(cb.StackingConfig().mode(cm.StackingMode.NORMAL).group("A")))
    else:
        panel = panel.draw_style(cm.GraphDrawStyle.LINE).line_width(1).fill_opacity(10)
    if unit:
        panel = panel.unit(unit)
    return panel


# -- the dashboard ---------------------------------------------------------------------------------
def dashboard(name: str, title: str, description: str) -> dash.Dashboard:
    """The skeleton every dashboard shares: its uid from common.DASHBOARD_UIDS, the tag, the
    ``$run`` variable, the link menu, UTC (event times are UTC), the last 6 hours refreshed every
    30 s."""
    return (dash.Dashboard(title).uid(DASHBOARD_UIDS[name]).description(description)
            .tags([TAG]).timezone("utc").time("now-6h", "now").refresh("30s")
            .editable().tooltip(model.DashboardCursorSync.CROSSHAIR)
            .with_variable(run_variable()).link(dashboards_menu()))
