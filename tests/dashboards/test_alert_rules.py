"""Provisioning files and Grafana-managed alert rules (docs/alerting.md).

No Grafana can run here, so the rules are checked the way Grafana would use them:

* the checked-in YAML is what ``dashboards/alert_rules.py`` generates (golden files; regenerate with
  ``REPLIMON_GENERATE_GOLDEN_FILES=1``), parses, and references the datasource and folder of
  ``dashboards/common.py``;
* there is a rule for every critical violation and every wedge of the catalogue, and a kind added
  to the catalogue gets one;
* each rule's SQL, with Grafana's macros expanded (``replimon.dashboards.macros``) and the e2e
  run's id in place of ``'live'``, runs against the PostgreSQL the end-to-end run filled, returns
  the ``group_id`` label and a numeric ``value``, and is positive for exactly the groups the
  stored alerts say: violations raised within the evaluated range, wedges open at its end.
"""

from __future__ import annotations

import os
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
import yaml

from replimon.core import alerts
from replimon.dashboards import alert_rules, common
from replimon.dashboards.macros import TimeRange, expand
from tests.support.e2e import E2E

PROVISIONING = {rel: common.HERE / rel for rel in alert_rules.rules_files()}


def load(rel: str) -> Any:
    return yaml.safe_load(PROVISIONING[rel].read_text(encoding="utf-8"))


def shipped_rules() -> list[dict[str, Any]]:
    """The rules of the checked-in rules file (what Grafana provisions)."""
    (group,) = load("provisioning/alerting/rules.yaml")["groups"]
    rules: list[dict[str, Any]] = group["rules"]
    return rules


def expected_kinds() -> set[str]:
    return {k for k, (severity, category) in alerts.KINDS.items()
            if (category == alerts.VIOLATION and severity == alerts.CRITICAL) or category == alerts.WEDGE}


# ----------------------------------------------------------------------------- the files
def test_checked_in_files_are_what_the_code_generates() -> None:
    from replimon.dashboards import generate

    if os.environ.get("REPLIMON_GENERATE_GOLDEN_FILES") == "1":
        generate.generate()
    assert set(alert_rules.rules_files()) <= set(generate.dashboard_files())  # `dashboards generate` writes them
    differ = [p for p in generate.generate(check=True) if "/provisioning/" in p]
    assert not differ, f"regenerate with REPLIMON_GENERATE_GOLDEN_FILES=1 (or replimon dashboards generate): {differ}"
    assert alert_rules.rules_files() == alert_rules.rules_files()  # deterministic


def test_a_rule_for_every_critical_violation_and_every_wedge() -> None:
    rules = shipped_rules()
    kinds = [r["labels"]["kind"] for r in rules]
    assert sorted(kinds) == sorted(expected_kinds())  # each exactly once
    assert len({r["uid"] for r in rules}) == len(rules) and len({r["title"] for r in rules}) == len(rules)
    for r in rules:
        severity, category = alerts.KINDS[r["labels"]["kind"]]
        assert r["labels"] == {"severity": severity, "category": category, "kind": r["labels"]["kind"],
                               "app": "replimon"}
        assert len(r["uid"]) <= 40 and r["uid"].replace("-", "").isalnum()  # Grafana's uid rules
        refs = [q["refId"] for q in r["data"]]
        assert r["condition"] in refs
        (sql_query,) = [q for q in r["data"] if q["datasourceUid"] != "__expr__"]
        assert sql_query["datasourceUid"] == common.DATASOURCE_UID
        assert sql_query["model"]["datasource"] == common.DATASOURCE
        assert sql_query["model"]["format"] == "table" and sql_query["model"]["rawQuery"] is True
        for q in r["data"]:  # expressions only refer to queries that exist
            assert q["model"].get("expression", refs[0]) in refs
        assert r["noDataState"] == "OK" and r["execErrState"] == "Error"
        assert {"summary", "description", "runbook"} <= set(r["annotations"])
        assert r["for"] == ("0s" if severity == alerts.CRITICAL else alert_rules.WARNING_FOR)


def test_a_kind_added_to_the_catalogue_gets_its_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(alerts.KINDS, "NEW_WEDGE", (alerts.WARNING, alerts.WEDGE))
    monkeypatch.setitem(alerts.KINDS, "NEW_VIOLATION", (alerts.CRITICAL, alerts.VIOLATION))
    monkeypatch.setitem(alerts.KINDS, "NEW_WARNING_VIOLATION", (alerts.WARNING, alerts.VIOLATION))
    (group,) = yaml.safe_load(alert_rules.rules_files()["provisioning/alerting/rules.yaml"])["groups"]
    kinds = {r["labels"]["kind"]: r for r in group["rules"]}
    assert set(kinds) == expected_kinds()
    assert {"NEW_WEDGE", "NEW_VIOLATION"} <= set(kinds) and "NEW_WARNING_VIOLATION" not in kinds
    assert "'NEW_WEDGE'" in kinds["NEW_WEDGE"]["data"][0]["model"]["rawSql"]


def test_datasource_and_dashboard_provider_files() -> None:
    assert set(PROVISIONING) == {
        "provisioning/datasources/replimon.yaml", "provisioning/dashboards/replimon.yaml",
        "provisioning/alerting/rules.yaml", "provisioning/alerting/contact-points.yaml",
        "provisioning/alerting/policies.yaml"}
    for path in PROVISIONING.values():
        assert yaml.safe_load(path.read_text(encoding="utf-8"))["apiVersion"] == 1
    (ds,) = load("provisioning/datasources/replimon.yaml")["datasources"]
    pg = common.COMPOSE_PG
    assert (ds["uid"], ds["type"], ds["name"]) == (common.DATASOURCE_UID, common.DATASOURCE_TYPE, common.DATASOURCE_NAME)
    assert (ds["url"], ds["user"], ds["secureJsonData"]["password"]) == (pg["host"], pg["user"], pg["password"])
    assert ds["jsonData"] == {"database": pg["database"], "sslmode": "disable", "postgresVersion": 1600,
                              "timescaledb": False}
    (provider,) = load("provisioning/dashboards/replimon.yaml")["providers"]
    assert (provider["folder"], provider["folderUid"]) == (common.FOLDER_TITLE, common.FOLDER_UID)
    assert provider["options"]["path"] == common.CONTAINER_DASHBOARDS
    assert provider["allowUiUpdates"] is False and 0 < provider["updateIntervalSeconds"] <= 60
    (group,) = load("provisioning/alerting/rules.yaml")["groups"]
    assert (group["folder"], group["name"], group["interval"]) == (common.FOLDER_TITLE, alert_rules.RULE_GROUP, "60s")


def test_contact_point_and_policy_route_every_rule() -> None:
    (cp,) = load("provisioning/alerting/contact-points.yaml")["contactPoints"]
    (receiver,) = cp["receivers"]
    assert receiver["type"] == "webhook" and receiver["settings"]["url"].startswith("http://example.invalid/")
    (root,) = load("provisioning/alerting/policies.yaml")["policies"]

    def routes(node: dict[str, Any]) -> list[dict[str, Any]]:
        return [node] + [r for child in node.get("routes", []) for r in routes(child)]

    assert {r.get("receiver", root["receiver"]) for r in routes(root)} == {cp["name"]}

    def route_of(labels: dict[str, str]) -> dict[str, Any]:
        """The deepest route that matches (Alertmanager's first-match walk, no ``continue``)."""
        node = root
        while True:
            nxt = next((c for c in node.get("routes", [])
                        if all(labels.get(k) == v for k, op, v in c["object_matchers"] if op == "=")), None)
            if nxt is None:
                return node
            node = nxt

    for rule in shipped_rules():
        route = route_of(rule["labels"])
        assert route["object_matchers"] == [["severity", "=", rule["labels"]["severity"]]], rule["uid"]
    critical = route_of({"app": "replimon", "severity": "critical"})
    assert critical["group_wait"] == "10s" and critical["repeat_interval"] == "1h"


def test_docs_table_lists_every_rule() -> None:
    """docs/alerting.md's rules table: one row per rule, with its severity, category, for, uid."""
    text = (common.HERE.parent / "docs" / "alerting.md").read_text(encoding="utf-8")
    rows = {cells[0].strip("`"): [c.strip("`") for c in cells]
            for line in text.splitlines() if line.startswith("| `")
            for cells in [[c.strip() for c in line.strip("|").split("|")]] if len(cells) == 6}
    want = {s.kind: [s.kind, s.severity, s.category, s.for_, s.uid] for s in alert_rules.rule_specs()}
    assert {k: [v[0], v[1], v[2], v[4], v[5]] for k, v in rows.items()} == want


# ----------------------------------------------------------------------------- the SQL
def at(ms: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)


def run_rule(e2e: E2E, rule: dict[str, Any], start: datetime, end: datetime) -> dict[str, Any]:
    """The rule's query as Grafana would send it for the range [start, end], on the e2e run:
    group_id -> value. Checks the columns Grafana's multi-dimensional alerting needs."""
    sql = rule["data"][0]["model"]["rawSql"]
    assert sql.count(f"'{alert_rules.RUN}'") == 1, "the run must be one replaceable literal"
    sql = expand(sql.replace(f"'{alert_rules.RUN}'", f"'{e2e.run_id}'"), TimeRange(start, end, interval="1m"), {})
    with psycopg.connect(e2e.settings.postgres.dsn) as conn, conn.cursor() as cur:
        cur.execute(sql)
        assert cur.description is not None
        names = [(c.name, c.type_code) for c in cur.description]
        rows = cur.fetchall()
    text_oid, numeric_oids = 25, {20, 21, 23, 700, 701, 1700}  # text; int2/4/8, float4/8, numeric
    assert names[0] == ("group_id", text_oid) and names[1][0] == "value" and names[1][1] in numeric_oids, names
    assert len(names) == 2, names
    out = {g: v for g, v in rows}
    assert len(out) == len(rows) and all(v > 0 for v in out.values()), rows
    return out


def rules_of(category: str) -> list[dict[str, Any]]:
    return [r for r in shipped_rules() if r["labels"]["category"] == category]


@pytest.mark.broker
@pytest.mark.postgres
@pytest.mark.timeout(900)
@pytest.mark.parametrize("rule", rules_of(alerts.VIOLATION), ids=lambda r: r["labels"]["kind"])
def test_violation_rule_fires_for_the_groups_that_raised_it_in_range(e2e: E2E, rule: dict[str, Any]) -> None:
    kind = rule["labels"]["kind"]
    raised = [a for a in e2e.pg_alerts if a["kind"] == kind and a["status"] == "firing"]
    assert raised, f"the e2e run raised no {kind}: the check would be empty"
    assert {a["group"] for a in raised} >= {g for g, m in e2e.manifest.items() if m["alert"] == kind}
    times = [a["event_ts_ms"] for a in e2e.pg_alerts]
    first, last = min(times), max(times)
    mid = sorted(a["event_ts_ms"] for a in raised)[len(raised) // 2]  # splits the kind's own alerts
    windows = [(first, last), (first, mid - 1), (mid, last), (first - 3_600_000, first - 1),
               (mid, mid)]
    for lo, hi in windows:
        want = Counter(a["group"] for a in raised if lo <= a["event_ts_ms"] <= hi)
        got = run_rule(e2e, rule, at(lo), at(hi))
        assert got == dict(want), (kind, at(lo), at(hi), got, want)


@pytest.mark.broker
@pytest.mark.postgres
@pytest.mark.timeout(900)
@pytest.mark.parametrize("rule", rules_of(alerts.WEDGE), ids=lambda r: r["labels"]["kind"])
def test_wedge_rule_fires_while_the_wedge_is_open(e2e: E2E, rule: dict[str, Any]) -> None:
    kind = rule["labels"]["kind"]
    firing = {a["alert_id"]: a for a in e2e.pg_alerts if a["kind"] == kind and a["status"] == "firing"}
    resolved = {a["alert_id"]: a["event_ts_ms"] for a in e2e.pg_alerts
                if a["kind"] == kind and a["status"] == "resolved"}
    assert firing, f"the e2e run raised no {kind}: the check would be empty"
    assert {a["group"] for a in firing.values()} >= {g for g, m in e2e.manifest.items() if m["alert"] == kind}

    def open_at(t: int) -> dict[str, int]:
        return dict(Counter(a["group"] for aid, a in firing.items()
                            if a["event_ts_ms"] <= t and not (aid in resolved and resolved[aid] <= t)))

    # every edge of every occurrence: just before and at its firing, just before and at its end
    times = {max(a["event_ts_ms"] for a in e2e.pg_alerts)}
    for aid, a in firing.items():
        times |= {a["event_ts_ms"] - 1, a["event_ts_ms"]}
        if aid in resolved:
            times |= {resolved[aid] - 1, resolved[aid]}
    seen: set[str] = set()
    for t in sorted(times):
        got = run_rule(e2e, rule, at(t) - timedelta(seconds=alert_rules.WEDGE_RANGE_S), at(t))
        assert got == open_at(t), (kind, at(t), got, open_at(t))
        seen |= set(got)
    assert seen == {a["group"] for a in firing.values()}  # each group's wedge was seen open

