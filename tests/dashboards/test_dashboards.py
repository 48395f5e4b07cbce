"""The Grafana dashboards (docs/dashboards.md, "Generating and testing").

No Grafana server can run here, so each property Grafana would show is checked on its own:

* golden: the JSON checked in under ``dashboards/json/`` is what the code generates
  (``REPLIMON_GENERATE_GOLDEN_FILES=1`` rewrites it, as Spark's SPARK_GENERATE_GOLDEN_FILES);
* schema: every dashboard validates against Grafana's dashboard JSON schema and every panel's
  options against its panel plugin's schema (vendored in ``dashboards/schema/``);
* wiring: one datasource (common.py's) everywhere, every variable a query or link uses is defined
  on its dashboard, the grid holds together;
* SQL: every panel target, annotation and variable query, found by walking the JSON (a new panel
  is covered without touching this file), expanded with Grafana's macros and run against the
  PostgreSQL the end-to-end run filled: it runs, returns the columns its panel type needs, and
  returns rows wherever the run had data. The data-quality table holds rows only for the batches
  the data-quality sink validated (docs/quality.md), so the queries on it are checked for their
  columns only;
* the same queries give the same answer when another run's rows (with different values) share
  the tables, and the health and time-firing numbers match a reference computed in Python.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import jsonschema
import psycopg
import pytest

from replimon.core.alerts import WEDGES, Alert
from replimon.dashboards import generate, sql
from replimon.dashboards.boards.families import FAMILY_PANELS
from replimon.dashboards.boards.pipeline import BINS, LATEST
from replimon.dashboards.common import DATASOURCE, HERE
from replimon.dashboards.macros import TimeRange, expand, interval_seconds
from tests.support.outputs import store_alerts

SCHEMA_DIR = HERE / "schema"
DQ_TABLE = "dq_results"  # rows only for validated batches: its queries are checked for columns only
LIVE_ONLY = "m.live"  # alert latency: live batches only, none in a replay (the end-to-end run is one)

# PostgreSQL type OIDs Grafana's PostgreSQL plugin turns into numbers, text, times and booleans.
NUMERIC = {20, 21, 23, 700, 701, 1700}
TEXT = {18, 19, 25, 1042, 1043}
TIME = {1082, 1114, 1184}
BOOL = {16}


def dashboards() -> dict[str, dict[str, Any]]:
    """Every generated dashboard as JSON data, by name."""
    return {name: json.loads(generate.render(generate.build(name))) for name in generate.NAMES}


DASHBOARDS = dashboards()


@dataclass(frozen=True)
class Query:
    """One SQL query of a dashboard: a panel target, an annotation or a variable."""

    dashboard: str
    where: str  # panel title, annotation or variable name
    kind: str  # the panel type, "annotation" or "variable"
    fmt: str  # table | time_series
    sql: str
    panel: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.dashboard}:{self.kind}:{self.where}"


def queries(name: str, dash: dict[str, Any]) -> Iterator[Query]:
    for panel in dash.get("panels", []):
        for t in panel.get("targets", []):
            yield Query(name, f"{panel['title']}/{t['refId']}", panel["type"], t["format"], t["rawSql"], panel)
    for a in dash.get("annotations", {}).get("list", []):
        yield Query(name, a["name"], "annotation", a["target"]["format"], a["target"]["rawSql"], {})
    for v in dash.get("templating", {}).get("list", []):
        if v["type"] == "query":
            yield Query(name, v["name"], "variable", "table", v["query"], {})


QUERIES = [q for name, d in DASHBOARDS.items() for q in queries(name, d)]


def family_queries(family: str, *fleet_titles: str) -> list[Query]:
    """The queries of ``family``'s own panels: its Group detail row, and the Fleet tables named."""
    return [q for q in QUERIES if q.kind != "variable" and (
        (q.dashboard == "group" and q.where.rsplit("/", 1)[0] in FAMILY_PANELS[family])
        or (q.dashboard == "fleet" and q.where.rsplit("/", 1)[0] in fleet_titles))]


# The quorum-log panels also run against a quorum-log run of their own (test_quorum_log_panels_...),
# which checks their values; the end-to-end run carries all three fleets, but every recovery of it
# has completed by its end, so its "Open recoveries now" is rightly empty (the own run holds one).
QLOG_QUERIES = family_queries("qlog", "Quorum logs now")
# The chain panels likewise against a chain run of their own (test_chain_panels_...), which holds a
# view still wedged at its end; the end-to-end run's chain fleet runs them too.
CHAIN_QUERIES = family_queries("chain", "Chains now")
E2E_QUERIES = [q for q in QUERIES if q.where != "Open recoveries now/A"]


def find_panel(name: str, title: str) -> dict[str, Any]:
    return next(p for p in DASHBOARDS[name]["panels"] if p["title"] == title)


# -- golden files ----------------------------------------------------------------------------------
def test_checked_in_json_is_what_the_code_generates() -> None:
    if os.environ.get("REPLIMON_GENERATE_GOLDEN_FILES") == "1":
        generate.generate()
    files = generate.dashboard_files()
    dashboards = sorted(rel for rel in files if rel.startswith("json/"))
    assert dashboards == [f"json/{n}.json" for n in sorted(generate.NAMES)]
    differ = [rel for rel, text in files.items()
              if not (HERE / rel).exists() or (HERE / rel).read_text(encoding="utf-8") != text]
    assert not differ, (f"{differ} differ from the generator: run `replimon dashboards generate` "
                        "(or REPLIMON_GENERATE_GOLDEN_FILES=1 pytest tests/dashboards/test_dashboards.py)")
    assert generate.generate(check=True) == []


def test_generate_writes_checks_and_removes_stale_files(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    monkeypatch.setattr(generate, "HERE", tmp_path)
    monkeypatch.setattr(generate, "JSON_DIR", tmp_path / "json")
    expected = sorted(str(tmp_path / rel) for rel in generate.dashboard_files())
    assert sorted(generate.generate(check=True)) == expected  # nothing there yet
    assert not (tmp_path / "json").exists()  # ... and check wrote nothing
    assert sorted(generate.generate()) == expected
    assert generate.generate(check=True) == [] and generate.generate() == []
    fleet = tmp_path / "json" / "fleet.json"
    fleet.write_text(fleet.read_text().replace("Fleet", "Fleat"))
    stale = tmp_path / "json" / "old.json"
    stale.write_text("{}\n")
    assert generate.generate(check=True) == [str(fleet), str(stale)]
    assert generate.generate() == [str(fleet), str(stale)]
    assert not stale.exists() and generate.generate(check=True) == []


def test_json_is_stable_and_pretty() -> None:
    for rel, text in generate.dashboard_files().items():
        if not rel.endswith(".json"):
            continue  # the provisioning YAML: tests/dashboards/test_alert_rules.py
        assert text.endswith("}\n") and "\n  \"" in text, rel
        assert text == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert generate.dashboard_files() == generate.dashboard_files()


# -- schema ----------------------------------------------------------------------------------------
# Where the vendored schema (the SDK's own, v10.1.x; dashboards/schema/README.md) is narrower than
# what Grafana accepts, the definition Grafana's sources give is used instead:
# * the annotation target is any query object, and a threshold's base value is null (-Infinity):
#   both so in later releases of the same schema (grafana-foundation-sdk main b3d52a7cbaff);
# * a field matcher's options are `_` (any) in Grafana's CUE kind (byName takes a string), which
#   the generated JSON schema renders as an object.
WIDENED = {
    ("AnnotationQuery", "target"): {"type": "object", "additionalProperties": {}},
    ("Threshold", "value"): {"anyOf": [{"type": "number"}, {"type": "null"}]},
    ("MatcherConfig", "options"): {},
}


def schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / f"{name}.jsonschema.json").read_text(encoding="utf-8"))


def dashboard_validator() -> jsonschema.Draft7Validator:
    s = schema("dashboard")
    for (definition, prop), replacement in WIDENED.items():
        assert prop in s["definitions"][definition]["properties"], (definition, prop)
        s["definitions"][definition]["properties"][prop] = replacement
    return jsonschema.Draft7Validator(s)


def definition_validator(s: dict[str, Any], definition: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator({**s, "$ref": f"#/definitions/{definition}"})


def test_vendored_schemas_are_the_files_the_readme_names() -> None:
    readme = (SCHEMA_DIR / "README.md").read_text(encoding="utf-8")
    listed = dict((m[2], m[1]) for m in re.finditer(r"`([0-9a-f]{64})`\s+`([\w.]+\.json)`", readme))
    present = {p.name for p in SCHEMA_DIR.glob("*.json")}
    assert present and set(listed) == present
    for name, digest in listed.items():
        assert hashlib.sha256((SCHEMA_DIR / name).read_bytes()).hexdigest() == digest, name


@pytest.mark.parametrize("name", generate.NAMES)
def test_dashboard_validates_against_grafanas_schema(name: str) -> None:
    dash = DASHBOARDS[name]
    validator = dashboard_validator()
    errors = [f"{list(e.absolute_path)}: {e.message[:300]}" for e in validator.iter_errors(dash)]
    assert not errors, errors
    broken = copy.deepcopy(dash)
    del broken["panels"][0]["type"]
    assert not validator.is_valid(broken)  # the schema does reject a broken dashboard


@pytest.mark.parametrize("name", generate.NAMES)
def test_panel_options_validate_against_their_plugins_schema(name: str) -> None:
    errors = []
    for panel in DASHBOARDS[name]["panels"]:
        plugin = schema(panel["type"].replace("-", ""))  # every panel type used is vendored
        checks = [("options", panel["options"], "Options")]
        if "FieldConfig" in plugin["definitions"]:
            checks.append(("custom", panel["fieldConfig"]["defaults"].get("custom", {}), "FieldConfig"))
        for what, data, definition in checks:
            errors += [f"{panel['title']} {what} {list(e.absolute_path)}: {e.message[:200]}"
                       for e in definition_validator(plugin, definition).iter_errors(data)]
    assert not errors, errors
    stat = schema("stat")
    assert not definition_validator(stat, "Options").is_valid({"graphMode": "sparkles"})


# -- wiring ----------------------------------------------------------------------------------------
def datasources(node: Any) -> Iterator[Any]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource":
                yield value
            yield from datasources(value)
    elif isinstance(node, list):
        for item in node:
            yield from datasources(item)


@pytest.mark.parametrize("name", generate.NAMES)
def test_only_the_common_datasource(name: str) -> None:
    dash = DASHBOARDS[name]
    found = list(datasources(dash))
    assert found and all(ds == DATASOURCE for ds in found), {json.dumps(d) for d in found}
    for panel in dash["panels"]:
        assert panel.get("datasource") == DATASOURCE and panel["targets"], panel["title"]
        assert all(t.get("datasource") == DATASOURCE for t in panel["targets"]), panel["title"]


VARIABLE = re.compile(r"\$\{(\w+)(?:[:.][^}]*)?\}|\[\[(\w+)\]\]|\$(\w+)")


def used_variables(text: str) -> set[str]:
    names = {m.group(1) or m.group(2) or m.group(3) for m in VARIABLE.finditer(text)}
    return {n for n in names if not n.startswith("__")}  # $__timeFilter, ${__data...}: Grafana's


def links(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("url"), str):
            yield node["url"]
        for value in node.values():
            yield from links(value)
    elif isinstance(node, list):
        for item in node:
            yield from links(item)


@pytest.mark.parametrize("name", generate.NAMES)
def test_every_variable_used_is_defined(name: str) -> None:
    dash = DASHBOARDS[name]
    order = [v["name"] for v in dash["templating"]["list"]]
    assert order[0] == "run" and order.count("run") == 1
    for q in (q for q in QUERIES if q.dashboard == name):
        used = used_variables(q.sql)
        assert "run" in used or q.where == "run", f"{q.id} does not filter on $run"
        before = order[:order.index(q.where)] if q.kind == "variable" else order
        assert used <= set(before), f"{q.id} uses {used - set(before)}"
    for url in links(dash):
        assert used_variables(url) <= set(order), url


def test_group_links_point_at_group_detail_with_its_variables() -> None:
    group = DASHBOARDS["group"]
    names = {v["name"] for v in group["templating"]["list"]}
    urls = [u for d in DASHBOARDS.values() for u in links(d) if u.startswith(f"/d/{group['uid']}")]
    assert urls
    for url in urls:
        assert {m[1] for m in re.finditer(r"var-(\w+)=", url)} == names, url
        assert "var-family=$__all" in url  # the clicked group is listed whatever its family
    fleet = {u for u in links(DASHBOARDS["fleet"])}
    assert any("var-group=${__data.fields.group}" in u for u in fleet)


@pytest.mark.parametrize("name", generate.NAMES)
def test_layout(name: str) -> None:
    panels = DASHBOARDS[name]["panels"]
    assert [p["id"] for p in panels] == list(range(1, len(panels) + 1))
    titles = [p["title"] for p in panels]
    assert len(set(titles)) == len(titles), "panel titles name the queries in these tests"
    cells: dict[tuple[int, int], str] = {}
    for p in panels:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = p["title"]


def test_formats_fit_the_panel_types() -> None:
    for q in QUERIES:
        want = "time_series" if q.kind == "timeseries" else "table"
        assert q.fmt == want, q.id


# -- SQL against the end-to-end run ----------------------------------------------------------------
@dataclass(frozen=True)
class Setting:
    """What the queries are expanded with: the run, a group, every family ("All"), a time range
    per dashboard. A family's own panels (group.FAMILY_PANELS) get a group of that family."""

    dsn: str
    run: str
    group: str
    ranges: dict[str, TimeRange]
    families: tuple[str, ...] = ("chain", "gen", "qlog", "xcom")
    family_groups: tuple[tuple[str, str], ...] = ()  # family -> the group its panels are run for
    live: bool = False  # the run's batches ran live (else a replay: no alert latency)

    def group_for(self, q: Query) -> str:
        title = q.where.rsplit("/", 1)[0]
        return next((dict(self.family_groups).get(f, self.group) for f, titles in FAMILY_PANELS.items()
                     if q.dashboard == "group" and title in titles), self.group)

    def expand(self, q: Query, time_range: TimeRange | None = None,
               families: tuple[str, ...] | None = None, group: str | None = None) -> str:
        return expand(q.sql, time_range or self.ranges[q.dashboard],
                      {"run": self.run, "group": group or self.group_for(q),
                       "family": list(families or self.families)})


def _range(start: datetime, end: datetime) -> TimeRange:
    return TimeRange(start, end, interval="1m")


@pytest.fixture(scope="module")
def setting(e2e: Any) -> Setting:
    """Time ranges from the data: event time for the replicas' dashboards (alerts, snapshots),
    processing time for Pipeline health (batches, broker timestamps). The group: the first
    faulted group that raised a wedge (so its alerts span time) and has installed and refused
    configurations (so every annotation has something to show)."""
    run = e2e.run_id
    with psycopg.connect(e2e.settings.postgres.dsn) as conn:
        ev = conn.execute(
            "SELECT least(min(a.event_ts), (SELECT min(ts) FROM group_timeseries WHERE run_id = %s)),"
            " greatest(max(a.detected_ts), (SELECT max(ts) FROM group_timeseries WHERE run_id = %s))"
            " FROM alerts a WHERE a.run_id = %s", (run, run, run)).fetchone()
        proc = conn.execute(
            "SELECT least(min(m.ts), (SELECT min(kafka_ts) FROM dead_letters WHERE run_id = %s)),"
            " greatest(max(m.ts), (SELECT max(kafka_ts) FROM dead_letters WHERE run_id = %s))"
            " FROM pipeline_metrics m WHERE m.run_id = %s", (run, run, run)).fetchone()
    assert ev and proc and None not in (*ev, *proc)
    kinds: dict[str, set[str]] = {}
    for a in e2e.pg_alerts:
        kinds.setdefault(a["group"], set()).add(a["kind"])
    info = {"CONFIG_INSTALLED", "RECONFIG_REFUSED"}
    group = min((g for g in e2e.manifest if info <= kinds.get(g, set()) and kinds[g] & WEDGES),
                key=lambda g: (len(g), g))
    ranges = {name: _range(*(proc if name == "pipeline" else ev)) for name in generate.NAMES}
    # The generations panels' group: the first generations group whose generation changed.
    gen = min((g for g, s in e2e.group_states.items() if s.get("family") == "gen"
               and s["config"] and s["config"]["num"] > 1), key=lambda g: (len(g), g))
    # The quorum-log panels' group: the first quorum-log group with a legislature.
    qlog = min((g for g, s in e2e.group_states.items() if s.get("family") == "qlog" and s["config"]),
               key=lambda g: (len(g), g))
    # The chain panels' group: the first chain group with a view.
    chain = min((g for g, s in e2e.group_states.items() if s.get("family") == "chain" and s["config"]),
                key=lambda g: (len(g), g))
    return Setting(e2e.settings.postgres.dsn, run, group, ranges,
                   family_groups=(("gen", gen), ("qlog", qlog), ("chain", chain)))


def run_query(conn: psycopg.Connection[Any], sql: str) -> tuple[list[tuple[str, int]], list[tuple[Any, ...]]]:
    cur = conn.execute(sql)
    assert cur.description is not None
    return [(d.name, d.type_code) for d in cur.description], cur.fetchall()


def column_problems(q: Query, cols: list[tuple[str, int]]) -> list[str]:
    """What is wrong with ``cols`` for the query's panel type (empty: nothing)."""
    names = [c[0] for c in cols]
    types = dict(cols)
    numeric = [n for n, t in cols if t in NUMERIC]
    out = [f"{n}: type {t} is not a number, text, time or boolean"
           for n, t in cols if t not in NUMERIC | TEXT | TIME | BOOL]
    if q.kind == "timeseries":
        if names[0] != "time" or types["time"] not in TIME | NUMERIC:
            out.append("first column must be a time column named time")
        text = [n for n in names[1:] if types[n] not in NUMERIC]
        if text not in ([], ["metric"]) or not numeric or numeric == ["time"]:
            out.append(f"after time: numeric values (and an optional metric column), got {cols}")
    elif q.kind in ("stat", "bargauge", "piechart", "gauge"):
        if not numeric:
            out.append("needs a numeric column")
    elif q.kind == "barchart":
        x = q.panel["options"].get("xField")
        if x not in names or types[x] not in TEXT or not numeric:
            out.append(f"needs its x field {x!r} as text and numeric columns")
    elif q.kind == "state-timeline":
        if names[0] != "time" or types["time"] not in TIME or len(names) < 2:
            out.append("needs a time column first and a value column")
    elif q.kind == "annotation":
        if types.get("time") not in TIME | NUMERIC or types.get("text") not in TEXT:
            out.append("needs time and text columns")
        if "timeend" in types and types["timeend"] not in TIME | NUMERIC:
            out.append("timeend must be a time")
    elif q.kind in ("table", "variable"):
        if not names:
            out.append("needs a column")
    else:
        out.append(f"no column rule for panel type {q.kind}: add one here")
    return out


# The tables every panel reads, keyed by run, and the indexed time column a range filters on.
RUN_TABLES = {"alerts": None, "group_state": None, "node_state": None, "group_timeseries": "ts",
              "node_timeseries": "ts", "dead_letters": "kafka_ts", "pipeline_metrics": "ts",
              "dq_results": "ts"}


def plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from plan_nodes(child)


def index_problems(q: Query, plan: dict[str, Any]) -> list[str]:
    """Scans of run-keyed tables whose index condition lacks the run (or, for a time series,
    its time column), in a plan made with sequential scans disabled: the tables of a short
    test run are small enough for the planner to scan them whole, which says nothing about the
    indexes a query can use on a large database."""
    out = []
    for node in plan_nodes(plan):
        table = node.get("Relation Name")
        if table not in RUN_TABLES:
            continue
        cond = " ".join(n.get("Index Cond", "") for n in plan_nodes(node))
        if "run_id" not in cond and not (q.kind == "variable" and q.where == "run"):
            out.append(f"{node['Node Type']} on {table} without the run: {cond!r}")
        time = RUN_TABLES[table]
        # a batch's row looked up by its key (run, batch: the alert latency's join) is no scan
        keyed = table == "pipeline_metrics" and re.search(r"\bbatch_id\b", cond)
        if time and not keyed and not re.search(rf"\b{time}\b", cond):
            out.append(f"{node['Node Type']} on {table} without a range on {time}: {cond!r}")
    return out


def check_query(q: Query, setting: Setting) -> None:
    """It runs, returns what its panel needs, with rows, and reads the tables through their
    indexes: run first, then the time range (the run variable lists runs: the whole index)."""
    sql = setting.expand(q)
    with psycopg.connect(setting.dsn, autocommit=True) as conn:
        cols, rows = run_query(conn, sql)
        conn.execute("SET enable_seqscan = off")
        plan = conn.execute(f"EXPLAIN (FORMAT JSON) {sql}").fetchone()
    assert not column_problems(q, cols), (column_problems(q, cols), sql)
    assert plan and not index_problems(q, plan[0][0]["Plan"]), (index_problems(q, plan[0][0]["Plan"]), sql)
    if LIVE_ONLY in q.sql and not setting.live:  # a replay has no alert latency (test_alert_latency_...)
        assert all(v is None for r in rows for v in r), f"alert latency of a replay:\n{sql}"
    elif DQ_TABLE not in q.sql:  # the data-quality table has rows only for validated batches
        assert rows, f"no rows where the run has data:\n{sql}"
    if q.kind == "variable":
        want = {"group": setting.group, "family": "gen", "run": setting.run}[q.where]
        assert want in {r[0] for r in rows}


@pytest.mark.parametrize("q", E2E_QUERIES, ids=[q.id for q in E2E_QUERIES])
@pytest.mark.broker
@pytest.mark.postgres
@pytest.mark.timeout(900)
def test_query_runs_against_the_e2e_run(q: Query, setting: Setting) -> None:
    check_query(q, setting)


def query(dashboard: str, where: str) -> Query:
    return next(q for q in QUERIES if q.dashboard == dashboard and q.where == where)


@pytest.mark.broker
@pytest.mark.postgres
@pytest.mark.timeout(900)
def test_the_family_variable_filters_groups_and_family_panels(e2e: Any, setting: Setting) -> None:
    """docs/dashboards.md, "Families": the family variable lists the run's families, keeps the
    group lists to the chosen ones, and a family's panels have rows only when it is chosen; the
    generations panels show every generations group's stored configuration."""
    family = {g: s.get("family", "xcom") for g, s in e2e.group_states.items()}
    gen_state = e2e.group_states[dict(setting.family_groups)["gen"]]
    with psycopg.connect(setting.dsn, autocommit=True) as conn:
        def rows(q: Query, *families: str, group: str | None = None) -> list[dict[str, Any]]:
            cols, found = run_query(conn, setting.expand(q, families=families or None, group=group))
            return [dict(zip([c[0] for c in cols], r, strict=True)) for r in found]

        assert {r["family"] for r in rows(query("group", "family"))} == {"chain", "gen", "qlog", "xcom"}
        for chosen in ("chain", "gen", "qlog", "xcom"):
            want = {g for g, f in family.items() if f == chosen}
            assert {r["group"] for r in rows(query("fleet", "Group list/A"), chosen)} == want
            assert {r["group_id"] for r in rows(query("group", "group"), chosen)} == want
        assert {r["group"] for r in rows(query("fleet", "Group list/A"))} == set(family)
        generations = {r["group"]: r for r in rows(query("fleet", "Generations now/A"))}
        assert set(generations) == {g for g, f in family.items() if f == "gen"}
        for g, r in generations.items():
            config = e2e.group_states[g]["config"]
            assert (r["generation"], r["members"], r["configured"], r["open election"]) == (
                config["num"], len(config["members"]), len(config["configured"]), config["election"])
            assert r["quorum"] == ("minority" if config["minority"] else "majority")
        assert rows(query("fleet", "Generations now/A"), "xcom") == []
        for title in FAMILY_PANELS["gen"]:
            q = next(q for q in QUERIES if q.dashboard == "group" and q.where.startswith(title + "/"))
            assert rows(q), title
            assert rows(q, "xcom") == [], title  # not the chosen family: nothing
        steps = [r["generation"] for r in rows(query("group", "Generation over time/A"))]
        assert steps == sorted(steps) and steps[-1] == gen_state["config"]["num"] and len(set(steps)) > 1
        nodes = {r["node"]: r for r in rows(query("group", "Generation nodes now/A"))}
        assert {n: (r["gen"], r["node_status"], r["last online in"], r["last vote"])
                for n, r in nodes.items()} == {
            n: (x["gen"], x["node_status"], x["last_online_in"], x["last_vote"])
            for n, x in gen_state["nodes"].items()}
        # Configurations now renders every family's configuration as stored.
        configs = rows(query("group", "Configurations now/A"), group=gen_state["group"])
        assert [(r["family"], r["role"], r["version"]) for r in configs] == [
            ("gen", "generation", gen_state["config"]["num"])]
        assert json.loads(configs[0]["configuration"]) == gen_state["config"]
        xcom_state = e2e.group_states[setting.group]
        configs = rows(query("group", "Configurations now/A"))
        assert [(r["family"], r["role"], r["version"]) for r in configs][0] == (
            "xcom", "active", xcom_state["active"]["start"])
        assert json.loads(configs[0]["configuration"]) == xcom_state["config"]["active"]


DECOY = "decoy-other-run"
COPIED = ("alerts", "group_state", "node_state", "group_timeseries", "node_timeseries",
          "dead_letters", "pipeline_metrics", "dq_results")


def copy_run(conn: psycopg.Connection[Any], run: str) -> None:
    """Every row of ``run`` again under run id DECOY, numbers shifted and booleans flipped, times
    and text unchanged: a query that leaks across runs changes its answer."""
    for table in COPIED:
        cols = conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns"
            " WHERE table_name = %s AND table_schema = current_schema() ORDER BY ordinal_position",
            (table,)).fetchall()
        exprs = []
        for name, kind in cols:
            quoted = f'"{name}"'
            if name == "run_id":
                exprs.append("%(decoy)s")
            elif kind in ("bigint", "integer", "smallint", "double precision", "numeric"):
                exprs.append(f"{quoted} + 1000")
            elif kind == "boolean":
                exprs.append(f"NOT {quoted}")
            else:
                exprs.append(quoted)
        names = ", ".join(f'"{n}"' for n, _ in cols)
        conn.execute(f"INSERT INTO {table} ({names}) SELECT {', '.join(exprs)} FROM {table}"
                     " WHERE run_id = %(run)s", {"decoy": DECOY, "run": run})


@pytest.mark.broker
@pytest.mark.postgres
@pytest.mark.timeout(900)
def test_queries_ignore_other_runs(setting: Setting) -> None:
    """The whole comparison happens in one transaction that is rolled back: no other test sees
    the decoy run."""
    def answers(conn: psycopg.Connection[Any]) -> dict[str, list[str]]:
        return {q.id: sorted(map(repr, run_query(conn, setting.expand(q))[1]))
                for q in QUERIES if q.where != "run" or q.kind != "variable"}

    with psycopg.connect(setting.dsn) as conn:
        try:
            before = answers(conn)
            copy_run(conn, setting.run)
            assert conn.execute("SELECT count(*) FROM alerts WHERE run_id = %s", (DECOY,)).fetchone() != (0,)
            after = answers(conn)
            runs = [q for q in QUERIES if q.kind == "variable" and q.where == "run"]
            assert all(DECOY in {r[0] for r in run_query(conn, setting.expand(q))[1]} for q in runs)
        finally:
            conn.rollback()
    changed = [k for k in before if before[k] != after[k]]
    assert not changed, changed


# -- definitions against a reference in Python -----------------------------------------------------
def ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


def reference_levels(alerts: list[dict[str, Any]], groups: set[str], start: int, end: int) -> dict[str, str]:
    """docs/dashboards.md, "Health": the worst severity of the alerts open at ``end``."""
    resolved = {a["alert_id"]: a for a in alerts if a["status"] == "resolved"}
    worst = dict.fromkeys(groups, 0)
    for f in alerts:
        if f["status"] != "firing" or f["severity"] not in ("critical", "warning"):
            continue
        if f["event_ts_ms"] > end or f["detected_ts_ms"] > end:
            continue
        if f["category"] == "wedge":
            r = resolved.get(f["alert_id"])
            is_open = r is None or r["event_ts_ms"] > end
        else:
            is_open = f["event_ts_ms"] >= start or f["detected_ts_ms"] >= start
        if is_open:
            worst[f["group"]] = max(worst[f["group"]], 2 if f["severity"] == "critical" else 1)
    return {g: ("ok", "warning", "critical")[level] for g, level in worst.items()}


@pytest.mark.broker
@pytest.mark.postgres
@pytest.mark.timeout(900)
def test_health_matches_its_definition(e2e: Any, setting: Setting) -> None:
    """The Fleet's group list and its health pie agree with the definition, over the whole run
    and at the middle of the longest wedge (so an open wedge counts)."""
    full = setting.ranges["fleet"]
    resolved = {a["alert_id"]: a for a in e2e.pg_alerts if a["status"] == "resolved"}
    longest = max((a for a in e2e.pg_alerts if a["alert_id"] in resolved and a["status"] == "firing"),
                  key=lambda a: resolved[a["alert_id"]]["event_ts_ms"] - a["detected_ts_ms"])
    mid = (longest["detected_ts_ms"] + resolved[longest["alert_id"]]["event_ts_ms"]) // 2
    table = next(q for q in QUERIES if q.dashboard == "fleet" and q.where == "Group list/A")
    pie = next(q for q in QUERIES if q.dashboard == "fleet" and q.where == "Groups by health/A")
    groups = set(e2e.group_states)
    with psycopg.connect(setting.dsn, autocommit=True) as conn:
        for end in (full.end, datetime.fromtimestamp(mid / 1000, UTC)):
            tr = _range(full.start, end)
            cols, rows = run_query(conn, setting.expand(table, tr))
            got = {r[0]: r[[c[0] for c in cols].index("health")] for r in rows}
            want = reference_levels(e2e.pg_alerts, groups, ms(full.start), ms(end))
            assert got == want
            assert {"ok", "critical"} <= set(want.values())
            pie_cols, pie_rows = run_query(conn, setting.expand(pie, tr))
            counts = dict(zip([c[0] for c in pie_cols], pie_rows[0], strict=True))
            assert counts == {h: list(want.values()).count(h) for h in ("critical", "warning", "ok")}
        assert longest["group"] in got and got[longest["group"]] != "ok"  # open at the middle


@pytest.mark.broker
@pytest.mark.postgres
@pytest.mark.timeout(900)
def test_time_firing_matches_its_definition(e2e: Any, setting: Setting) -> None:
    """Alerts' "Time firing": each wedge from detection to resolution, clipped to the range."""
    tr = setting.ranges["alerts"]
    # a range that cuts wedges at both ends
    start, end = tr.start + timedelta(seconds=12), tr.end - timedelta(seconds=30)
    resolved = {a["alert_id"]: a for a in e2e.pg_alerts if a["status"] == "resolved"}
    want = 0
    for f in e2e.pg_alerts:
        if f["status"] != "firing" or f["category"] != "wedge":
            continue
        r = resolved.get(f["alert_id"])
        stop = min(r["event_ts_ms"] if r else ms(end), ms(end))
        if f["event_ts_ms"] <= ms(end) and f["detected_ts_ms"] <= ms(end) and (r is None or r["event_ts_ms"] >= ms(start)):
            want += max(0, stop - max(f["detected_ts_ms"], ms(start)))
    q = next(q for q in QUERIES if q.dashboard == "alerts" and q.where == "Time firing/A")
    with psycopg.connect(setting.dsn, autocommit=True) as conn:
        _, rows = run_query(conn, setting.expand(q, _range(start, end)))
    assert want > 0 and float(rows[0][0]) == pytest.approx(want / 1000)


# -- a family's panels against a run of that family -----------------------------------------------
@dataclass(frozen=True)
class FamilyRun:
    setting: Setting
    states: dict[str, dict[str, Any]]  # each group's last snapshot


def family_rows(conn: Any, setting: Setting, dashboard: str, where: str,
                group: str | None = None) -> list[dict[str, Any]]:
    """The rows of panel query ``where`` of ``dashboard`` on ``setting`` (its group or ``group``)."""
    cols, found = run_query(conn, setting.expand(query(dashboard, where), group=group))
    return [dict(zip([c[0] for c in cols], r, strict=True)) for r in found]


def family_run(dsn: str, family: str, sim: Any, duration_ms: int, injections: tuple[str, ...],
               kinds: set[str]) -> tuple[Setting, dict[str, dict[str, Any]]]:
    """A 3-group fleet of ``family``'s simulator ``sim`` (seed 4) with ``injections``, through the
    monitor (snapshots every 10 s of event time and at the end; ``kinds`` among its alerts) and the
    job's PostgreSQL writer into real PostgreSQL as run ``<family>-panels``: the setting (group
    ``<first group>``) and each group's last snapshot."""
    from replimon.store.schema import migrate
    from replimon.streaming.sinks.postgres import PostgresSink
    from tests.support.outputs import outputs_of

    events: list[dict[str, Any]] = []
    sim.Simulator(sim.SimOptions(groups=3, duration_ms=duration_ms, seed=4),
                  [sim.parse_injection(i) for i in injections], events.append).run()
    alerts, snaps = outputs_of(events)
    states = {s["group"]: s for s in snaps}  # each group's last snapshot
    assert {a["kind"] for a in alerts} >= kinds
    migrate(dsn)
    run = f"{family}-panels"
    with PostgresSink(dsn, run_id=run) as sink:
        sink.write_batch(0, alerts=alerts, snapshots=snaps, dead_letters=[], metrics=None)
    start = datetime.fromtimestamp(events[0]["ts_ms"] / 1000, UTC)
    end = datetime.fromtimestamp(events[-1]["ts_ms"] / 1000 + 60, UTC)
    first = min(states, key=lambda g: (len(g), g))
    return (Setting(dsn, run, first, {name: _range(start, end) for name in generate.NAMES},
                    family_groups=((family, first),)), states)


# -- the quorum-log panels against a quorum-log run ------------------------------------------------
@pytest.fixture(scope="module")
def qlog_run(postgres: Any) -> FamilyRun:
    """A 90 s quorum-log fleet through the job's PostgreSQL writer (real PostgreSQL): ql1 with a
    recover request that stays open (QLOG_RECOVER_STUCK), ql2 whose leader's proposer wedges
    (QLOG_NO_LEADER, resolved), ql3 clean; snapshots every 10 s of event time and at the end."""
    from replimon.producers import simulator_qlog

    setting, states = family_run(postgres.dsn, "qlog", simulator_qlog, 90_000,
                                 ("qlog_recover_stuck:ql1@20s", "qlog_no_leader:ql2@20s"),
                                 {"QLOG_RECOVER_STUCK", "QLOG_NO_LEADER", "QLOG_RECONFIGURED"})
    return FamilyRun(setting, states)


@pytest.mark.parametrize("q", QLOG_QUERIES, ids=[q.id for q in QLOG_QUERIES])
@pytest.mark.postgres
def test_quorum_log_panels_run_against_quorum_log_rows(q: Query, qlog_run: FamilyRun) -> None:
    """Each quorum-log panel as test_query_runs_against_the_e2e_run checks the others; and none
    shows a row when the family variable leaves qlog out."""
    check_query(q, qlog_run.setting)
    with psycopg.connect(qlog_run.setting.dsn, autocommit=True) as conn:
        assert run_query(conn, qlog_run.setting.expand(q, families=("chain", "gen", "xcom")))[1] == []


@pytest.mark.postgres
def test_quorum_log_panels_show_the_stored_state(qlog_run: FamilyRun) -> None:
    """docs/dashboards.md, "Families": the legislature, its members with the leader marked, the
    decree frontier and the open recoveries as the snapshots say; the legislature over time steps
    up; Fleet counts the quorum-log groups and lists each."""
    setting, states = qlog_run.setting, qlog_run.states
    ql1 = states["ql1"]
    config = ql1["config"]
    with psycopg.connect(setting.dsn, autocommit=True) as conn:
        rows = partial(family_rows, conn, setting)

        assert rows("group", "Legislature/A") == [{"legislature": config["legislature"]}]
        assert rows("group", "Legislature members / leaders/A") == [
            {"members": len(config["members"]), "leaders": sum(m["leader"] for m in config["members"])}]
        assert rows("group", "Decree frontier/A") == [
            {"passed": config["passed"], "executed": config["executed"],
             "executed by a majority": ql1["executed_majority"]}]
        assert config["recovering"] and rows("group", "Open recoveries/A") == [
            {"recoveries": len(config["recovering"])}]
        assert [(r["node"], r["from legislature"], r["new members"]) for r in rows("group", "Open recoveries now/A")] == [
            (node, leg, ", ".join(new)) for node, leg, new in config["recovering"]]
        replicas = rows("group", "Quorum-log replicas now/A")
        members = [m["id"] for m in config["members"]]
        assert [r["node"] for r in replicas][:len(members)] == members  # in the legislature's order
        assert {r["node"] for r in replicas} == set(ql1["nodes"])
        for r in replicas:
            n = ql1["nodes"][r["node"]]
            assert r["position"] == (members.index(r["node"]) + 1 if r["node"] in members else None)
            assert r["leader"] == ("leader" if {"id": r["node"], "leader": True} in config["members"] else "")
            assert (r["legislature"], r["watermark"], r["executed"], r["believes leader"]) == (
                n["legislature"], n["watermark"], n["executed"], n["leader"])
        steps = [r["legislature"] for r in rows("group", "Legislature over time/A")]
        assert steps == sorted(steps) and steps[-1] == config["legislature"] and len(set(steps)) > 1
        configs = rows("group", "Configurations now/A")
        assert [(r["family"], r["role"], r["version"]) for r in configs] == [("qlog", "legislature", config["legislature"])]
        assert configs[0]["members"] == ", ".join(m["id"] + (" (leader)" if m["leader"] else "") for m in config["members"])
        assert json.loads(configs[0]["configuration"]) == config
        # ql2's wedge resolved: a leader again.
        assert any(m["leader"] for m in states["ql2"]["config"]["members"])

        fleet = {r["group"]: r for r in rows("fleet", "Quorum logs now/A")}
        assert set(fleet) == set(states)
        for g, r in fleet.items():
            c = states[g]["config"]
            assert (r["legislature"], r["members"], r["passed"], r["executed"], r["open recoveries"]) == (
                c["legislature"], len(c["members"]), c["passed"], c["executed"], len(c["recovering"]))
            assert r["leader"] == (", ".join(m["id"] for m in c["members"] if m["leader"]) or None)
        # The stuck recovery's group lost its old quorum (QUORUM_LOST and QLOG_NO_LEADER, critical
        # wedges, open with QLOG_RECOVER_STUCK until the recovery completes: simulator_qlog.IMPLIED).
        assert fleet["ql1"]["health"] == "critical"
        assert rows("fleet", "Groups/A") == [{"groups": 3, "xcom": 0, "gen": 0, "qlog": 3, "chain": 0}]


# -- alert latency and batch cost (docs/dashboards.md, "Alert latency", "Batch cost") -------------
COPIES = 4  # each problem alert of the end-to-end run this many times in the live run: > LATEST violations
LIVE_BATCHES = 6


@dataclass(frozen=True)
class LiveRun:
    setting: Setting
    alerts: list[dict[str, Any]]  # the payloads written, with the batch that wrote each


@pytest.fixture(scope="module")
def live_run(e2e: Any) -> LiveRun:
    """The end-to-end run's alerts (every kind, info and data included, resolutions too) through
    the job's writer as a live job would write them: each copied ``COPIES`` times under its own id,
    restamped so the latest detection is 2 s ago, in ``LIVE_BATCHES`` batches by detection time
    (0.3 s apart), each with the listener's progress after it."""
    from replimon.streaming.sinks.postgres import PostgresBatchSink, PostgresSink
    from replimon.streaming.writer import BatchWriter
    from tests.support import batch_frame

    run = f"live-panels-{uuid.uuid4().hex[:8]}"
    shift = int(time.time() * 1000) - 2000 - max(a["detected_ts_ms"] for a in e2e.pg_alerts)
    alerts = sorted(({**a, "alert_id": f"{a['alert_id']}~{k}", "event_ts_ms": a["event_ts_ms"] + shift,
                      "detected_ts_ms": a["detected_ts_ms"] + shift}
                     for a in e2e.pg_alerts for k in range(COPIES)),
                    key=lambda a: (a["detected_ts_ms"], a["alert_id"], a["status"]))
    written = []
    with PostgresSink(e2e.settings.postgres.dsn, run_id=run) as pg:
        sink = PostgresBatchSink(pg, live=True)
        writer = BatchWriter([sink], guard=sink)
        per = -(-len(alerts) // LIVE_BATCHES)
        for batch in range(LIVE_BATCHES):
            part = alerts[batch * per:(batch + 1) * per]
            writer(batch_frame(alerts=part), batch)
            pg.write_metrics(batch, duration_ms=400 + 10 * len(part), input_rows=100 * len(part),
                             trigger_ms=1000)
            written += [{**a, "batch": batch} for a in part]
            time.sleep(0.3)
    with psycopg.connect(e2e.settings.postgres.dsn) as conn:
        lo, hi = conn.execute("SELECT min(ts), max(ts) FROM pipeline_metrics WHERE run_id = %s",
                              (run,)).fetchone()
    setting = Setting(e2e.settings.postgres.dsn, run, "g1", {"pipeline": TimeRange(lo, hi, interval="1s")},
                      live=True)
    return LiveRun(setting, written)


def percentile_cont(p: float, xs: list[float]) -> float:
    """PostgreSQL's percentile_cont: linear interpolation between the closest ranks."""
    xs = sorted(xs)
    pos = p * (len(xs) - 1)
    lo = int(pos)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (pos - lo)


def reference_latency(run: LiveRun) -> tuple[dict[tuple[float, str], tuple[float, float]], dict[str, float]]:
    """docs/dashboards.md, "Alert latency", from what the run wrote: each problem alert's firing
    row, from its evidence (a wedge: its detection) to its batch's ``written_at``; p50/p99 per
    (interval of the batch's ts, category), and the p99 of each category's latest ``LATEST``."""
    with psycopg.connect(run.setting.dsn) as conn:
        batches = {b: (ts, at) for b, ts, at in conn.execute(
            "SELECT batch_id, ts, written_at FROM pipeline_metrics WHERE run_id = %s",
            (run.setting.run,))}
    step = interval_seconds(run.setting.ranges["pipeline"].interval)
    latencies: dict[tuple[float, str], list[float]] = {}
    latest: dict[str, list[tuple[Any, int, str, float]]] = {}
    for a in run.alerts:
        if a["status"] != "firing" or a["category"] not in ("violation", "wedge"):
            continue  # an info alert's row is an event, a data alert is not counted, nor a resolution
        ts, at = batches[a["batch"]]
        since = a["detected_ts_ms"] if a["category"] == "wedge" else a["event_ts_ms"]
        value = at.timestamp() - since / 1000
        bucket = (ts.timestamp() // step) * step
        latencies.setdefault((bucket, a["category"]), []).append(value)
        latest.setdefault(a["category"], []).append((ts, a["batch"], a["alert_id"], value))
    series = {k: (percentile_cont(0.5, v), percentile_cont(0.99, v)) for k, v in latencies.items()}
    p99 = {c: percentile_cont(0.99, [x[3] for x in sorted(v, key=lambda x: (-x[0].timestamp(), -x[1], x[2]))[:LATEST]])
           for c, v in latest.items()}
    return series, p99


def rows_of(setting: Setting, dashboard: str, where: str, time_range: TimeRange | None = None) -> list[dict[str, Any]]:
    q = query(dashboard, where)
    with psycopg.connect(setting.dsn, autocommit=True) as conn:
        cols, found = run_query(conn, setting.expand(q, time_range))
    return [dict(zip([c[0] for c in cols], r, strict=True)) for r in found]


@pytest.mark.parametrize("q", [q for q in QUERIES if LIVE_ONLY in q.sql], ids=lambda q: q.id)
@pytest.mark.broker
@pytest.mark.postgres
@pytest.mark.timeout(900)
def test_alert_latency_panels_run_against_a_live_run(q: Query, live_run: LiveRun) -> None:
    """Each alert-latency panel as test_query_runs_against_the_e2e_run checks the others (columns,
    rows, indexes), on live batches."""
    check_query(q, live_run.setting)


@pytest.mark.broker
@pytest.mark.postgres
@pytest.mark.timeout(900)
def test_alert_latency_matches_its_definition(e2e: Any, setting: Setting, live_run: LiveRun) -> None:
    """Pipeline health's *Alert latency* and *Latest p99 alert latency* equal the definition
    computed from what the live run wrote (its violations more than LATEST, so the latest p99
    leaves the oldest out); the end-to-end run, a replay, shows none though it has problem
    alerts on batches that recorded their write."""
    series, p99 = reference_latency(live_run)
    got = {(r["time"], r["metric"]): (r["p50"], r["p99"])
           for r in rows_of(live_run.setting, "pipeline", "Alert latency/A")}
    assert set(got) == set(series) and {c for _, c in got} == {"violation", "wedge"}
    assert len({t for t, _ in got}) > 1  # several intervals
    for key, (p50, p99_) in series.items():
        assert got[key] == (pytest.approx(p50, abs=1e-3), pytest.approx(p99_, abs=1e-3)), key
    assert all(0 < v < 600 for pair in got.values() for v in pair)  # restamped to seconds ago
    violations = sum(1 for a in live_run.alerts if a["category"] == "violation" and a["status"] == "firing")
    assert violations > LATEST
    [stat] = rows_of(live_run.setting, "pipeline", "Latest p99 alert latency/A")
    assert stat == {"violations": pytest.approx(p99["violation"], abs=1e-3),
                    "wedges": pytest.approx(p99["wedge"], abs=1e-3)}
    # The replay: the job recorded its batches as not live, with their write; no latency shown.
    with psycopg.connect(setting.dsn) as conn:
        modes = conn.execute("SELECT DISTINCT live, written_at IS NOT NULL FROM pipeline_metrics"
                             " WHERE run_id = %s", (setting.run,)).fetchall()
    assert modes == [(False, True)]
    assert any(a["category"] in ("violation", "wedge") for a in e2e.pg_alerts)
    assert rows_of(setting, "pipeline", "Alert latency/A") == []
    assert rows_of(setting, "pipeline", "Latest p99 alert latency/A") == [{"violations": None, "wedges": None}]


def least_squares(points: list[tuple[float, float]]) -> tuple[float, float, float]:
    """(intercept, slope, r²) of y against x."""
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    syy = sum((y - my) ** 2 for _, y in points)
    slope = sxy / sxx
    return my - slope * mx, slope, sxy * sxy / (sxx * syy)


@pytest.mark.broker
@pytest.mark.postgres
@pytest.mark.timeout(900)
def test_batch_cost_fit_matches_the_batches(setting: Setting) -> None:
    """Pipeline health's batch-cost stats and *Batch duration against rows* equal a least-squares
    fit computed here over the end-to-end run's batches (with and without input), on the whole
    range and on one that leaves its first batch out."""
    with psycopg.connect(setting.dsn) as conn:
        batches = conn.execute("SELECT ts, input_rows, duration_ms FROM pipeline_metrics WHERE run_id = %s"
                               " AND input_rows IS NOT NULL AND duration_ms IS NOT NULL ORDER BY ts",
                               (setting.run,)).fetchall()
    full = setting.ranges["pipeline"]
    assert len(batches) >= 3 and len({b[1] for b in batches}) >= 2 and any(b[1] == 0 for b in batches)
    for tr in (full, TimeRange(batches[1][0], full.end, interval=full.interval)):
        points = [(float(r), float(d)) for ts, r, d in batches if tr.start <= ts <= tr.end]
        fixed, slope, r2 = least_squares(points)
        assert rows_of(setting, "pipeline", "Fixed cost per batch/A", tr) == [
            {"fixed per batch": pytest.approx(fixed)}]
        assert rows_of(setting, "pipeline", "Cost per event/A", tr) == [{"per event": pytest.approx(slope * 1000)}]
        assert rows_of(setting, "pipeline", "Cost fit/A", tr) == [{"batches": len(points), "R²": pytest.approx(r2)}]
        bins = rows_of(setting, "pipeline", "Batch duration against rows/A", tr)
        lo, hi = min(x for x, _ in points), max(x for x, _ in points)
        want: dict[int, list[tuple[float, float]]] = {}
        for x, y in points:  # width_bucket(x, lo, hi + 1, BINS)
            want.setdefault(int((x - lo) * BINS / (hi + 1 - lo)), []).append((x, y))
        assert len(bins) == len(want) > 1
        for got, (_, members) in zip(bins, sorted(want.items()), strict=True):
            xs = sorted(int(x) for x, _ in members)
            label = f"{xs[0]:,}" + (f"-{xs[-1]:,}" if xs[-1] > xs[0] else "") + f" rows ({len(members)})"
            assert got == {"rows": label,
                           "average duration": pytest.approx(sum(y for _, y in members) / len(members)),
                           "fit": pytest.approx(sum(fixed + slope * x for x, _ in members) / len(members))}


# -- the chain panels against a chain run ---------------------------------------------------------
@pytest.fixture(scope="module")
def chain_run(postgres: Any) -> FamilyRun:
    """A 60 s chain fleet through the job's PostgreSQL writer (real PostgreSQL): ch1 whose U
    wrongly wedges at 45 s with the view manager stalled 20 s (still wedged at the end,
    CHAIN_WEDGE_NOT_REPLACED open), ch2 whose tail's heartbeater is blocked 5 s at 20 s
    (CHAIN_LEASE_EXPIRED, resolved), ch3 re-viewed at 20 s (the same chain under a higher epoch,
    legal: nothing raised); snapshots every 10 s of event time and at the end."""
    from replimon.producers import simulator_chain

    setting, states = family_run(postgres.dsn, "chain", simulator_chain, 60_000,
                                 ("chain_wedge_not_replaced:ch1@45s", "chain_lease_expired:ch2@20s",
                                  "chain_view_conflict_near_miss:ch3@20s"),
                                 {"CHAIN_WEDGE_NOT_REPLACED", "CHAIN_LEASE_EXPIRED", "CHAIN_VIEW_INSTALLED"})
    return FamilyRun(setting, states)


@pytest.mark.parametrize("q", CHAIN_QUERIES, ids=[q.id for q in CHAIN_QUERIES])
@pytest.mark.postgres
def test_chain_panels_run_against_chain_rows(q: Query, chain_run: FamilyRun) -> None:
    """Each chain panel as test_query_runs_against_the_e2e_run checks the others; and none shows
    a row when the family variable leaves chain out."""
    check_query(q, chain_run.setting)
    with psycopg.connect(chain_run.setting.dsn, autocommit=True) as conn:
        assert run_query(conn, chain_run.setting.expand(q, families=("gen", "qlog", "xcom")))[1] == []


def _chain_text(chain: list[str]) -> str:
    return " > ".join(n + (" (head)" if i == 0 else "") for i, n in enumerate(chain))


@pytest.mark.postgres
def test_chain_panels_show_the_stored_state(chain_run: FamilyRun) -> None:
    """docs/dashboards.md, "Families": the epoch, the chain head..tail with the head marked, the
    wedged flag and epoch, each member's lease and each replica's view as the snapshots say; the
    epoch over time steps up; Configurations now renders the view; Fleet counts the chain groups
    and lists each."""
    setting, states = chain_run.setting, chain_run.states
    ch1 = states["ch1"]
    config = ch1["config"]
    chain = config["chain"]
    with psycopg.connect(setting.dsn, autocommit=True) as conn:
        rows = partial(family_rows, conn, setting)

        assert config["wedged"] and config["wedged_epoch"] is not None  # the run ends wedged
        assert rows("group", "Epoch/A") == [{"epoch": config["epoch"]}]
        assert rows("group", "Chain length/A") == [{"replicas": len(chain)}]
        assert rows("group", "Wedged/A") == [{"wedged": 1}]
        assert rows("group", "Wedged epoch/A") == [{"wedged epoch": config["wedged_epoch"]}]
        assert rows("group", "Chain now/A") == [
            {"chain": _chain_text(chain), "head": chain[0], "tail": chain[-1]}]
        assert [(r["member"], r["position"], r["lease remaining (ms)"]) for r in rows("group", "Leases now/A")] == [
            (m, i + 1, ch1["nodes"][m]["lease_remaining_ms"]) for i, m in enumerate(chain)]
        replicas = rows("group", "Chain replicas now/A")
        assert [r["node"] for r in replicas][:len(chain)] == chain  # in chain order
        assert {r["node"] for r in replicas} == set(ch1["nodes"])
        for r in replicas:
            n = ch1["nodes"][r["node"]]
            assert r["position"] == (chain.index(r["node"]) + 1 if r["node"] in chain else None)
            assert r["role"] == {chain[0]: "head", chain[-1]: "tail"}.get(r["node"], "")
            assert (r["in chain"], r["epoch"], r["pos"], r["stable"], r["wedged"], r["wedged epoch"],
                    r["lease remaining (ms)"]) == (
                n["member"], n["epoch"], n["pos"], n["stable"], n["wedged"], n["wedged_epoch"],
                n["lease_remaining_ms"])
        assert any(r["wedged"] for r in replicas)
        steps = [r["epoch"] for r in rows("group", "Epoch over time/A")]
        assert steps == sorted(steps) and steps[-1] == config["epoch"]
        steps = [r["epoch"] for r in rows("group", "Epoch over time/A", group="ch3")]  # re-viewed
        assert steps == sorted(steps) and steps[-1] == states["ch3"]["config"]["epoch"] and len(set(steps)) > 1
        configs = rows("group", "Configurations now/A")
        assert [(r["family"], r["role"], r["version"]) for r in configs] == [("chain", "view", config["epoch"])]
        assert configs[0]["members"] == _chain_text(chain)
        assert json.loads(configs[0]["configuration"]) == config
        # ch3 is not wedged.
        assert rows("group", "Wedged/A", group="ch3") == [{"wedged": 0}]
        assert rows("group", "Wedged epoch/A", group="ch3") == [{"wedged epoch": -1}]

        fleet = [r["group"] for r in rows("fleet", "Chains now/A")]
        assert set(fleet) == set(states) and fleet[0] == "ch1"  # wedged first
        for r in rows("fleet", "Chains now/A"):
            c = states[r["group"]]["config"]
            assert (r["epoch"], r["chain"], r["replicas"], r["wedged"], r["wedged epoch"],
                    r["pos held by a majority"]) == (
                c["epoch"], _chain_text(c["chain"]), len(c["chain"]), "wedged" if c["wedged"] else "",
                c["wedged_epoch"], states[r["group"]]["executed_majority"])
        assert rows("fleet", "Groups/A") == [{"groups": 3, "xcom": 0, "gen": 0, "qlog": 0, "chain": 3}]


@pytest.mark.postgres
def test_an_alert_of_a_node_whose_clock_runs_behind_is_in_the_range_it_was_detected_in(empty_database: str) -> None:
    """A violation whose evidence is stamped an hour back by a slow clock, detected now, is open
    "now" on the Fleet and listed in the Alerts dashboard's range of the last minutes; an alert
    of an hour ago detected an hour ago is not (docs/dashboards.md, "Open alert")."""
    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    hour = 3_600_000
    alerts = [Alert(alert_id=f"a{i}", group=g, kind="BEYOND_HORIZON", status="firing",
                    event_ts_ms=ms(now) - hour, detected_ts_ms=detected, message="m", node="n1").to_dict()
              for i, (g, detected) in enumerate((("g1", ms(now) - 5_000), ("g2", ms(now) - hour + 2_000)))]
    store_alerts(empty_database, "skewed", alerts)
    tr = _range(now - timedelta(minutes=15), now)
    values = {"run": "skewed", "group": "g1", "family": ["xcom"]}
    with psycopg.connect(empty_database, autocommit=True) as conn:
        open_now = run_query(conn, expand(f"SELECT group_id FROM ({sql.open_alerts()}) o", tr, values))[1]
        assert open_now == [("g1",)]
        history = next(q for q in QUERIES if q.dashboard == "alerts" and q.where == "Alert history/A")
        cols, rows = run_query(conn, expand(history.sql, tr, values))
        assert [r[[c[0] for c in cols].index("group")] for r in rows] == ["g1"]
        over = next(q for q in QUERIES if q.dashboard == "alerts" and q.where.startswith("Alerts over time"))
        assert sum(r[-1] for r in run_query(conn, expand(over.sql, tr, values))[1]) == 1
