"""The SQL side of the dashboards: raw-SQL targets and annotation queries for Grafana's PostgreSQL
datasource (the foundation SDK has no builder for that plugin), and the SQL fragments several
panels share, so one definition ("open at the end of the range", "health") is written once.

Conventions every panel's SQL follows (docs/dashboards.md, "Definitions"; tests/dashboards/test_dashboards.py
runs each one against the PostgreSQL an end-to-end run filled):

* every table is filtered on ``run_id = ${run:sqlstring}`` first: each table's key and indexes
  start with run_id, and one database holds the live run and any number of replays;
* time-series tables are filtered with ``$__timeFilter`` on the indexed time column (``ts``,
  ``event_ts``, ``kafka_ts``), so a range reads one index range per run;
* the latest-state tables (group_state, node_state) have one row per group or node and no time
  column to filter: they are read by run only, and show the state as of the job's last batch;
* joins between tables repeat ``run_id`` in the join condition (never a group id alone);
* jsonb and bytea columns are cast to text: Grafana's PostgreSQL plugin shows text, numbers,
  booleans and times.
"""

from __future__ import annotations

import textwrap
from typing import Literal

from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.models import dashboard as model

from replimon.dashboards.common import DATASOURCE

Format = Literal["table", "time_series"]

RUN = "${run:sqlstring}"  # the run variable as a quoted SQL literal (Grafana escapes quotes)
GROUP = "${group:sqlstring}"
FAMILY = "${family:sqlstring}"  # the chosen families, quoted and comma-separated: IN (...)


def clean(sql: str) -> str:
    """``sql`` dedented and stripped: the text shown in Grafana's code editor."""
    return textwrap.dedent(sql).strip()


class SqlQuery(cogvariants.Dataquery):
    """One raw-SQL target of the PostgreSQL datasource, as Grafana's query editor saves it in
    code mode (``rawQuery`` true, ``editorMode`` code)."""

    def __init__(self, raw_sql: str, fmt: Format = "table", ref_id: str = "A") -> None:
        self.raw_sql, self.format, self.ref_id = clean(raw_sql), fmt, ref_id

    def to_json(self) -> dict[str, object]:
        return {"datasource": dict(DATASOURCE), "editorMode": "code", "format": self.format,
                "rawQuery": True, "rawSql": self.raw_sql, "refId": self.ref_id}


class Sql(cogbuilder.Builder[cogvariants.Dataquery]):
    """Builder of a `SqlQuery`, for ``Panel.with_target``."""

    def __init__(self, raw_sql: str, fmt: Format = "table", ref_id: str = "A") -> None:
        self._internal = SqlQuery(raw_sql, fmt, ref_id)

    def build(self) -> cogvariants.Dataquery:
        return self._internal


def series(raw_sql: str, ref_id: str = "A") -> Sql:
    """A time-series target: first column ``time``, then numbers (and an optional text column
    ``metric`` naming the series)."""
    return Sql(raw_sql, "time_series", ref_id)


def table(raw_sql: str, ref_id: str = "A") -> Sql:
    """A table target (stat, bar gauge, pie and bar charts, state timeline and tables)."""
    return Sql(raw_sql, "table", ref_id)


class SqlAnnotationTarget(model.AnnotationTarget):
    """The target of an annotation query on the PostgreSQL datasource: a raw SQL query returning
    ``time`` (and ``timeend`` for a region), ``text`` and ``tags``. The SDK's `AnnotationTarget`
    only models the built-in Grafana annotations; Grafana's own dashboard schema declares the
    target as any query object from later releases on (dashboards/schema/README.md)."""

    def __init__(self, raw_sql: str) -> None:
        super().__init__()
        self.raw_sql = clean(raw_sql)

    def to_json(self) -> dict[str, object]:
        return {"editorMode": "code", "format": "table", "rawQuery": True, "rawSql": self.raw_sql,
                "refId": "Anno"}


class SqlAnnotation(cogbuilder.Builder[model.AnnotationTarget]):
    """Builder of a `SqlAnnotationTarget`, for ``AnnotationQuery.target``."""

    def __init__(self, raw_sql: str) -> None:
        self._internal = SqlAnnotationTarget(raw_sql)

    def build(self) -> model.AnnotationTarget:
        return self._internal


# -- shared fragments ------------------------------------------------------------------------------
# An alert that is an event (a violation, a data alert) is in the range when its evidence's event
# time is, or when it was detected in the range: a node whose clock runs behind stamps its events
# in the past, but the monitor detects them now (docs/dashboards.md, "Health").
SINCE = "({0}.event_ts >= $__timeFrom() OR {0}.detected_ts >= $__timeFrom())"
IN_RANGE = "({0}.event_ts BETWEEN $__timeFrom() AND $__timeTo() OR {0}.detected_ts BETWEEN $__timeFrom() AND $__timeTo())"


def open_alerts(where: str = "") -> str:
    """Alerts open at the end of the dashboard's range (the definition of "firing"):

    * a wedge is open from its firing row (detected by the end of the range) until its resolved
      row; it counts if it was not resolved by the end of the range, however long ago it fired;
    * a violation or a data alert never resolves (docs/rules.md, "Alert records"): it counts if
      it happened in the range, by its event time or by when it was detected (``SINCE``);
    * info alerts (config installed or refused, incomplete history) are events, never problems:
      their rows have the status ``event`` (docs/postgres.md, "Tables"), never ``firing``.

    Reads the firing rows through the partial index ``alerts_firing`` (run, severity, event
    time) and their resolutions through the primary key (a join, not NOT EXISTS inside the CASE,
    which PostgreSQL would hash over every run). ``where`` adds conditions on ``f``.
    """
    extra = f"\n  AND {where}" if where else ""
    return f"""SELECT f.*
FROM alerts f
LEFT JOIN alerts r ON r.run_id = f.run_id AND r.alert_id = f.alert_id AND r.status = 'resolved'
                  AND r.event_ts <= $__timeTo()
WHERE f.run_id = {RUN} AND f.status = 'firing' AND f.severity IN ('critical', 'warning')
  AND f.event_ts <= $__timeTo() AND f.detected_ts <= $__timeTo(){extra}
  AND CASE WHEN f.category = 'wedge' THEN r.alert_id IS NULL
      ELSE {SINCE.format('f')} END"""


def health_levels(where: str = "") -> str:
    """One row per group of the run: ``group_id``, ``level`` (2 critical, 1 warning, 0 ok: the
    worst severity among its open alerts), ``firing`` (how many) and ``kinds`` (which).
    ``where`` adds conditions on the group (``g``)."""
    extra = f" AND {where}" if where else ""
    return f"""SELECT g.group_id,
       coalesce(max(CASE o.severity WHEN 'critical' THEN 2 WHEN 'warning' THEN 1 END), 0) AS level,
       count(o.alert_id) AS firing,
       coalesce(string_agg(DISTINCT o.kind, ', '), '') AS kinds
FROM group_state g
LEFT JOIN ({indent(open_alerts(), 11).lstrip()}) o ON o.group_id = g.group_id
WHERE g.run_id = {RUN}{extra}
GROUP BY g.group_id"""


HEALTH_TEXT = "CASE {0} WHEN 2 THEN 'critical' WHEN 1 THEN 'warning' ELSE 'ok' END"


def indent(sql: str, n: int) -> str:
    """``sql`` with every line indented by ``n`` spaces (to nest a fragment readably)."""
    return textwrap.indent(sql, " " * n)


# The status a list shows for an alert occurrence (`alert_spans` row ``s``) at the end of the
# range: an info alert is an ``event``, a wedge resolved by then ``resolved``, anything else
# ``firing`` (a violation or data alert that happened in the range, a wedge still open).
STATUS = """CASE WHEN s.status = 'event' THEN 'event'
            WHEN s.resolved_ts IS NOT NULL AND s.resolved_ts <= $__timeTo() THEN 'resolved'
            ELSE 'firing' END"""


def alert_spans(where: str = "") -> str:
    """One row per alert occurrence that overlaps the range, with its first row's columns
    (``f``: the ``firing`` row, or an info alert's ``event`` row), ``resolved_ts`` (the resolution's event time, NULL while open) and ``firing_s``:
    for a wedge, the seconds it was firing within the range (from its detection, or the start of
    the range, to its resolution, or the end of the range); NULL for the other categories, which
    are events and never resolve. Overlap: a wedge detected by the end of the range and not
    resolved before its start; any other alert that happened (event time) or was detected in the
    range. ``where`` adds
    conditions on ``f``."""
    extra = f"\n  AND {where}" if where else ""
    return f"""SELECT f.*, r.event_ts AS resolved_ts,
       CASE WHEN f.category = 'wedge' THEN greatest(0, extract(epoch FROM
           least(coalesce(r.event_ts, $__timeTo()), $__timeTo()) - greatest(f.detected_ts, $__timeFrom())))
       END AS firing_s
FROM alerts f
LEFT JOIN alerts r ON r.run_id = f.run_id AND r.alert_id = f.alert_id AND r.status = 'resolved'
WHERE f.run_id = {RUN} AND f.status IN ('firing', 'event') AND f.event_ts <= $__timeTo(){extra}
  AND CASE WHEN f.category = 'wedge'
      THEN f.detected_ts <= $__timeTo() AND (r.event_ts IS NULL OR r.event_ts >= $__timeFrom())
      ELSE {SINCE.format('f')} END"""
