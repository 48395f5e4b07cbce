"""``replimon dashboards push`` against a fake Grafana (docs/alerting.md, "`replimon dashboards push`").

No Grafana can run here. `FakeGrafana` is an in-memory stand-in on 127.0.0.1 that implements only
the endpoints push uses, with the status codes and body shapes of Grafana's HTTP API documentation
(data_source, folder, dashboard and alerting_provisioning pages): 200 with the object for a read,
404 for a missing object, 200/201/202 with the documented bodies for writes, 400 ValidationError
``{"msg": ...}`` for a rule missing a required field, 401 for a wrong token, 403 for a role that
may not write. It validates the bodies push sends against the documented required fields, so a
malformed request fails here as it would there.

What push must do: create everything on a fresh Grafana, write nothing on a second push, update
exactly what changed, say why it failed in one line, write nothing in a dry run, and call only
grafana-client methods and keywords that exist (a grafana-client upgrade that renames one fails
``test_grafana_client_methods_and_keywords_exist``).
"""

from __future__ import annotations

import copy
import inspect
import itertools
import json
import os
import re
import shutil
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from grafana_client import GrafanaApi

from replimon.cli import main
from replimon.config import load_settings
from replimon.dashboards import alert_rules, common, push
from replimon.dashboards.push import PushError

ADMIN, EDITOR = "admin-token", "editor-token"
RULE_FIELDS = ("title", "condition", "data", "folderUID", "ruleGroup", "noDataState", "execErrState", "for", "orgID")


class FakeGrafana:
    """In-memory Grafana state and its HTTP handlers (module docstring). ``writes`` lists every
    request that was not a GET."""

    def __init__(self) -> None:
        self.tokens = {ADMIN: "Admin", EDITOR: "Editor"}
        self.datasources: dict[str, dict[str, Any]] = {}
        self.folders: dict[str, dict[str, Any]] = {}
        self.dashboards: dict[str, dict[str, Any]] = {}
        self.rules: dict[str, dict[str, Any]] = {}
        self.groups: dict[tuple[str, str], int] = {}  # (folder uid, group) -> interval (s)
        self.contact_points: dict[str, dict[str, Any]] = {}
        # a fresh Grafana's tree: everything to the default email contact point
        self.policy: dict[str, Any] = {"receiver": "grafana-default-email", "group_by": ["grafana_folder", "alertname"]}
        self.default_interval = 60  # [unified_alerting] default_rule_evaluation_interval = 1m
        self.ids = itertools.count(1)
        self.writes: list[tuple[str, str]] = []
        self.url = ""

    # -- routing -------------------------------------------------------------------------------
    def routes(self) -> list[tuple[str, str, Callable[..., tuple[int, Any]]]]:
        return [
            ("GET", r"/api/datasources/uid/([^/]+)", self.get_datasource),
            ("POST", r"/api/datasources", self.post_datasource),
            ("PUT", r"/api/datasources/uid/([^/]+)", self.put_datasource),
            ("GET", r"/api/folders/([^/]+)", self.get_folder),
            ("POST", r"/api/folders", self.post_folder),
            ("PUT", r"/api/folders/([^/]+)", self.put_folder),
            ("GET", r"/api/dashboards/uid/([^/]+)", self.get_dashboard),
            ("POST", r"/api/dashboards/db", self.post_dashboard),
            ("GET", r"/api/v1/provisioning/alert-rules/([^/]+)", self.get_rule),
            ("POST", r"/api/v1/provisioning/alert-rules", self.post_rule),
            ("PUT", r"/api/v1/provisioning/alert-rules/([^/]+)", self.put_rule),
            ("GET", r"/api/v1/provisioning/folder/([^/]+)/rule-groups/([^/]+)", self.get_group),
            ("PUT", r"/api/v1/provisioning/folder/([^/]+)/rule-groups/([^/]+)", self.put_group),
            ("GET", r"/api/v1/provisioning/contact-points", self.get_contact_points),
            ("POST", r"/api/v1/provisioning/contact-points", self.post_contact_point),
            ("PUT", r"/api/v1/provisioning/contact-points/([^/]+)", self.put_contact_point),
            ("GET", r"/api/v1/provisioning/policies", self.get_policy),
            ("PUT", r"/api/v1/provisioning/policies", self.put_policy),
        ]

    def handle(self, method: str, target: str, headers: dict[str, str], body: Any) -> tuple[int, Any]:
        auth = headers.get("authorization", "")
        role = self.tokens.get(auth.removeprefix("Bearer ")) if auth.startswith("Bearer ") else None
        if role is None:
            return 401, {"message": "invalid API key"}
        parts = urlsplit(target)
        for verb, pattern, fn in self.routes():
            m = re.fullmatch(pattern, parts.path)
            if verb == method and m:
                if method != "GET":
                    if role != "Admin" and (parts.path.startswith("/api/datasources")
                                            or parts.path.startswith("/api/v1/provisioning")):
                        return 403, {"accessErrorId": "ACE0000000000", "message":
                                     "You'll need additional permissions to perform this action."}
                    self.writes.append((method, parts.path))
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                return fn(*m.groups(), body=body, query=query, headers=headers)
        return 404, {"message": "Not found"}

    # -- datasources (developers/http_api/data_source) -----------------------------------------
    def _ds_view(self, ds: dict[str, Any]) -> dict[str, Any]:
        view = {k: v for k, v in ds.items() if k != "secureJsonData"}
        view["secureJsonFields"] = {k: True for k in ds.get("secureJsonData", {})}
        return view

    def get_datasource(self, uid: str, **_: Any) -> tuple[int, Any]:
        if uid not in self.datasources:
            return 404, {"message": "Data source not found"}
        return 200, self._ds_view(self.datasources[uid])

    def post_datasource(self, *, body: dict[str, Any], **_: Any) -> tuple[int, Any]:
        if not body.get("name") or not body.get("type") or not body.get("access"):
            return 400, {"message": "bad request data"}
        if any(d["name"] == body["name"] for d in self.datasources.values()):
            return 409, {"message": "data source with the same name already exists"}
        ds = {"id": next(self.ids), "orgId": 1, "typeLogoUrl": "", "database": "", "basicAuth": False,
              "basicAuthUser": "", "withCredentials": False, "isDefault": False, "jsonData": {},
              "version": 1, "readOnly": False, **body}
        self.datasources[ds["uid"]] = ds
        return 200, {"datasource": self._ds_view(ds), "id": ds["id"], "message": "Datasource added", "name": ds["name"]}

    def put_datasource(self, uid: str, *, body: dict[str, Any], **_: Any) -> tuple[int, Any]:
        if uid not in self.datasources:
            return 404, {"message": "Data source not found"}
        old = self.datasources[uid]
        secure = {**old.get("secureJsonData", {}), **body.get("secureJsonData", {})}
        ds = {**old, **body, "uid": uid, "secureJsonData": secure, "version": old["version"] + 1}
        self.datasources[uid] = ds
        return 200, {"datasource": self._ds_view(ds), "id": ds["id"], "message": "Datasource updated", "name": ds["name"]}

    # -- folders (developers/http_api/folder) --------------------------------------------------
    def get_folder(self, uid: str, **_: Any) -> tuple[int, Any]:
        if uid not in self.folders:
            return 404, {"message": "folder not found", "status": "not-found"}
        return 200, self.folders[uid]

    def post_folder(self, *, body: dict[str, Any], **_: Any) -> tuple[int, Any]:
        if not body.get("title"):
            return 400, {"message": "folder title cannot be empty"}
        uid = body.get("uid") or f"f{next(self.ids)}"
        if uid in self.folders:
            return 409, {"message": "a folder with the same uid already exists"}
        self.folders[uid] = {"id": next(self.ids), "uid": uid, "title": body["title"],
                             "url": f"/dashboards/f/{uid}/", "hasAcl": False, "canSave": True,
                             "canEdit": True, "canAdmin": True, "version": 1}
        return 200, self.folders[uid]

    def put_folder(self, uid: str, *, body: dict[str, Any], **_: Any) -> tuple[int, Any]:
        if uid not in self.folders:
            return 404, {"message": "folder not found"}
        folder = self.folders[uid]
        if not body.get("overwrite") and body.get("version") != folder["version"]:
            return 412, {"message": "the folder has been changed by someone else", "status": "version-mismatch"}
        folder.update(title=body.get("title", folder["title"]), version=folder["version"] + 1)
        return 200, folder

    # -- dashboards (developers/http_api/dashboard) --------------------------------------------
    def get_dashboard(self, uid: str, **_: Any) -> tuple[int, Any]:
        if uid not in self.dashboards:
            return 404, {"message": "Dashboard not found"}
        return 200, copy.deepcopy(self.dashboards[uid])

    def post_dashboard(self, *, body: dict[str, Any], **_: Any) -> tuple[int, Any]:
        board = dict(body.get("dashboard") or {})
        if not board.get("title"):
            return 400, {"message": "Dashboard title cannot be empty", "status": "empty-name"}
        folder_uid = body.get("folderUid", "")
        if folder_uid and folder_uid not in self.folders:
            return 400, {"message": "folder not found", "status": "not-found"}
        uid = board.get("uid") or f"d{next(self.ids)}"
        old = self.dashboards.get(uid)
        if old and not body.get("overwrite") and board.get("version") != old["dashboard"]["version"]:
            return 412, {"message": "The dashboard has been changed by someone else", "status": "version-mismatch"}
        version = old["dashboard"]["version"] + 1 if old else 1
        ident = old["dashboard"]["id"] if old else next(self.ids)
        board.update(id=ident, uid=uid, version=version)
        slug = re.sub(r"[^a-z0-9]+", "-", board["title"].lower()).strip("-")
        self.dashboards[uid] = {"dashboard": board, "meta": {
            "type": "db", "slug": slug, "url": f"/d/{uid}/{slug}", "version": version, "provisioned": False,
            "folderUid": folder_uid, "folderTitle": self.folders[folder_uid]["title"] if folder_uid else "General"}}
        return 200, {"id": ident, "uid": uid, "url": f"/d/{uid}/{slug}", "status": "success", "version": version, "slug": slug}

    # -- alert rules (developers/http_api/alerting_provisioning) -------------------------------
    def _validate_rule(self, body: dict[str, Any]) -> str | None:
        missing = [f for f in RULE_FIELDS if f not in body]
        if missing:
            return f"invalid alert rule: missing {missing}"
        if body["folderUID"] not in self.folders:
            return "invalid alert rule: folder does not exist"
        if body["condition"] not in {q.get("refId") for q in body["data"]}:
            return "invalid alert rule: condition refers to no query"
        return None

    def _store_rule(self, body: dict[str, Any], headers: dict[str, str], ident: int) -> dict[str, Any]:
        provenance = "" if headers.get("x-disable-provenance") == "true" else "api"
        rule = {**copy.deepcopy(body), "id": ident, "updated": "2026-01-01T00:00:00Z", "provenance": provenance}
        for q in rule["data"]:  # Grafana fills these in the stored models
            q["model"].setdefault("intervalMs", 1000)
            q["model"].setdefault("maxDataPoints", 43200)
        self.rules[rule["uid"]] = rule
        self.groups.setdefault((rule["folderUID"], rule["ruleGroup"]), self.default_interval)
        return rule

    def get_rule(self, uid: str, **_: Any) -> tuple[int, Any]:
        return (200, self.rules[uid]) if uid in self.rules else (404, None)

    def post_rule(self, *, body: dict[str, Any], headers: dict[str, str], **_: Any) -> tuple[int, Any]:
        if err := self._validate_rule(body):
            return 400, {"msg": err}
        if body.get("uid") in self.rules:
            return 409, {"msg": "a rule with this uid already exists"}
        return 201, self._store_rule(body, headers, next(self.ids))

    def put_rule(self, uid: str, *, body: dict[str, Any], headers: dict[str, str], **_: Any) -> tuple[int, Any]:
        if uid not in self.rules:
            return 404, None
        if err := self._validate_rule(body):
            return 400, {"msg": err}
        return 200, self._store_rule({**body, "uid": uid}, headers, self.rules[uid]["id"])

    def get_group(self, folder: str, group: str, **_: Any) -> tuple[int, Any]:
        if (folder, group) not in self.groups:
            return 404, None
        rules = [r for r in self.rules.values() if (r["folderUID"], r["ruleGroup"]) == (folder, group)]
        return 200, {"title": group, "folderUid": folder, "interval": self.groups[folder, group], "rules": rules}

    def put_group(self, folder: str, group: str, *, body: dict[str, Any], **_: Any) -> tuple[int, Any]:
        if not isinstance(body.get("interval"), int) or body["interval"] <= 0:
            return 400, {"msg": "invalid interval"}
        self.groups[folder, group] = body["interval"]
        return self.get_group(folder, group)

    # -- contact points and policies -----------------------------------------------------------
    def get_contact_points(self, *, query: dict[str, str], **_: Any) -> tuple[int, Any]:
        points = [p for p in self.contact_points.values() if "name" not in query or p["name"] == query["name"]]
        return 200, points

    def post_contact_point(self, *, body: dict[str, Any], **_: Any) -> tuple[int, Any]:
        if not body.get("type") or not isinstance(body.get("settings"), dict):
            return 400, {"msg": "contact point needs a type and settings"}
        self.contact_points[body["uid"]] = {**body, "provenance": "api"}
        return 202, self.contact_points[body["uid"]]

    def put_contact_point(self, uid: str, *, body: dict[str, Any], **_: Any) -> tuple[int, Any]:
        if uid not in self.contact_points:
            return 404, {"msg": "contact point not found"}
        self.contact_points[uid] = {**body, "uid": uid, "provenance": "api"}
        return 202, {"message": "contactpoint updated"}

    def get_policy(self, **_: Any) -> tuple[int, Any]:
        return 200, copy.deepcopy(self.policy)

    def put_policy(self, *, body: dict[str, Any], **_: Any) -> tuple[int, Any]:
        names = {p["name"] for p in self.contact_points.values()} | {"grafana-default-email"}

        def receivers(node: dict[str, Any]) -> set[str]:
            return {node.get("receiver", "")} - {""} | {r for c in node.get("routes") or [] for r in receivers(c)}

        if not body.get("receiver") or not receivers(body) <= names:
            return 400, {"msg": f"unknown receiver in {sorted(receivers(body) - names)}"}
        self.policy = copy.deepcopy(body)
        return 202, {"message": "policies updated"}


@pytest.fixture
def grafana() -> Iterator[FakeGrafana]:
    """A `FakeGrafana` served on a free loopback port for one test."""
    fake = FakeGrafana()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, payload = fake.handle(self.command, self.path, headers, body)
            data = b"" if payload is None else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = _serve

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def boards(tmp_path: Path) -> Path:
    """A copy of the generated dashboards (``dashboards/json``), free to change."""
    out = tmp_path / "json"
    out.mkdir()
    for path in sorted(common.JSON_DIR.glob("*.json")):
        shutil.copy(path, out / path.name)
    uids = {json.loads(p.read_text())["uid"] for p in out.glob("*.json")}
    assert uids == set(common.DASHBOARD_UIDS.values()), "dashboards/json must hold the four dashboards"
    return out


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Default settings (no config file, no REPLIMON_* variables): an empty ``postgres.dsn``."""
    for key in [k for k in os.environ if k.upper().startswith("REPLIMON_")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    return load_settings()


def actions(report: push.PushReport) -> dict[tuple[str, str], str]:
    return {(c.kind, c.name): c.action for c in report.changes}


def every_object() -> set[tuple[str, str]]:
    return ({("datasource", common.DATASOURCE_UID), ("folder", common.FOLDER_UID),
             ("contact point", alert_rules.CONTACT_UID), ("rule group", alert_rules.RULE_GROUP),
             ("notification policy", "app=replimon")}
            | {("dashboard", uid) for uid in common.DASHBOARD_UIDS.values()}
            | {("alert rule", spec.uid) for spec in alert_rules.rule_specs()})


# ----------------------------------------------------------------------------- tests
def test_first_push_creates_everything(grafana: FakeGrafana, boards: Path, settings: Any) -> None:
    report = push.push(grafana.url, ADMIN, settings, dashboards_dir=boards)
    got = actions(report)
    assert set(got) == every_object()
    # the group existed once its rules did, with Grafana's default interval, which is ours
    assert {k: v for k, v in got.items() if v != push.CREATED} == {("rule group", alert_rules.RULE_GROUP): push.UNCHANGED}
    assert report.lines()[-1].startswith(f"pushed to {grafana.url}: {len(got) - 1} created, 0 updated, 1 unchanged")

    ds = grafana.datasources[common.DATASOURCE_UID]
    pg = common.COMPOSE_PG  # the DSN is empty: docker-compose's PostgreSQL, as in the files
    assert (ds["name"], ds["type"], ds["url"], ds["user"]) == (common.DATASOURCE_NAME, common.DATASOURCE_TYPE, pg["host"], pg["user"])
    assert ds["jsonData"]["database"] == pg["database"] and ds["secureJsonData"] == {"password": pg["password"]}
    assert grafana.folders[common.FOLDER_UID]["title"] == common.FOLDER_TITLE
    for path in boards.glob("*.json"):
        board = json.loads(path.read_text())
        stored = grafana.dashboards[board["uid"]]
        assert stored["meta"]["folderUid"] == common.FOLDER_UID
        assert {k: v for k, v in stored["dashboard"].items() if k not in ("id", "version")} == \
            {k: v for k, v in board.items() if k not in ("id", "version")}
    assert set(grafana.rules) == {s.uid for s in alert_rules.rule_specs()}
    for spec in alert_rules.rule_specs():
        rule = grafana.rules[spec.uid]
        assert (rule["folderUID"], rule["ruleGroup"], rule["labels"]["kind"]) == (common.FOLDER_UID, alert_rules.RULE_GROUP, spec.kind)
        assert rule["data"][0]["model"]["rawSql"] == spec.sql
    assert grafana.contact_points[alert_rules.CONTACT_UID]["settings"]["url"] == alert_rules.PLACEHOLDER_URL
    # our branch first; the organisation's root (receiver, grouping) kept
    assert grafana.policy["receiver"] == "grafana-default-email"
    assert grafana.policy["routes"][0] == alert_rules.policy_route()


def test_second_push_changes_nothing(grafana: FakeGrafana, boards: Path, settings: Any) -> None:
    push.push(grafana.url, ADMIN, settings, dashboards_dir=boards)
    writes = list(grafana.writes)
    report = push.push(grafana.url, ADMIN, settings, dashboards_dir=boards)
    assert set(actions(report).values()) == {push.UNCHANGED}
    assert grafana.writes == writes  # not one write
    assert report.lines()[-1].endswith(f"0 created, 0 updated, {len(every_object())} unchanged")


def test_a_changed_dashboard_file_is_updated(grafana: FakeGrafana, boards: Path, settings: Any) -> None:
    push.push(grafana.url, ADMIN, settings, dashboards_dir=boards)
    path = sorted(boards.glob("*.json"))[0]
    board = json.loads(path.read_text())
    board["title"] += " (changed)"
    path.write_text(json.dumps(board))
    before = grafana.dashboards[board["uid"]]["dashboard"]["version"]
    writes = len(grafana.writes)
    got = actions(push.push(grafana.url, ADMIN, settings, dashboards_dir=boards))
    assert {k for k, v in got.items() if v != push.UNCHANGED} == {("dashboard", board["uid"])}
    assert got[("dashboard", board["uid"])] == push.UPDATED
    assert grafana.writes[writes:] == [("POST", "/api/dashboards/db")]
    stored = grafana.dashboards[board["uid"]]["dashboard"]
    assert stored["title"] == board["title"] and stored["version"] == before + 1


def drift(grafana: FakeGrafana) -> None:
    """Change every object behind push's back (someone edited Grafana)."""
    grafana.datasources[common.DATASOURCE_UID]["url"] = "elsewhere:5432"
    grafana.folders[common.FOLDER_UID]["title"] = "renamed"
    grafana.dashboards[common.DASHBOARD_UIDS["fleet"]]["meta"]["folderUid"] = ""
    grafana.contact_points[alert_rules.CONTACT_UID]["settings"]["url"] = "http://other.invalid/"
    grafana.rules[alert_rules.rule_specs()[0].uid]["for"] = "5m"
    grafana.groups[common.FOLDER_UID, alert_rules.RULE_GROUP] = 10
    grafana.policy["routes"][0]["group_by"] = ["alertname"]


def test_what_drifted_is_updated_and_nothing_else(grafana: FakeGrafana, boards: Path, settings: Any) -> None:
    push.push(grafana.url, ADMIN, settings, dashboards_dir=boards)
    grafana.policy["routes"].append({"receiver": "grafana-default-email", "object_matchers": [["team", "=", "db"]]})
    drift(grafana)
    got = actions(push.push(grafana.url, ADMIN, settings, dashboards_dir=boards))
    assert {k for k, v in got.items() if v == push.UPDATED} == {
        ("datasource", common.DATASOURCE_UID), ("folder", common.FOLDER_UID),
        ("dashboard", common.DASHBOARD_UIDS["fleet"]), ("contact point", alert_rules.CONTACT_UID),
        ("alert rule", alert_rules.rule_specs()[0].uid), ("rule group", alert_rules.RULE_GROUP),
        ("notification policy", "app=replimon")}
    assert grafana.datasources[common.DATASOURCE_UID]["url"] == common.COMPOSE_PG["host"]
    assert grafana.groups[common.FOLDER_UID, alert_rules.RULE_GROUP] == alert_rules.INTERVAL_S
    assert grafana.policy["routes"] == [alert_rules.policy_route(),  # ours replaced, the other kept
                                        {"receiver": "grafana-default-email", "object_matchers": [["team", "=", "db"]]}]
    assert set(actions(push.push(grafana.url, ADMIN, settings, dashboards_dir=boards)).values()) == {push.UNCHANGED}


def test_postgres_address_and_credentials(grafana: FakeGrafana, boards: Path, settings: Any) -> None:
    dsn_settings = settings.model_copy(update={"postgres": settings.postgres.model_copy(
        update={"dsn": "postgresql://mon:pw@127.0.0.1:5544/monitoring?sslmode=require"})})
    push.push(grafana.url, ADMIN, dsn_settings, postgres_url="db.internal:6432", dashboards_dir=boards)
    ds = grafana.datasources[common.DATASOURCE_UID]
    assert (ds["url"], ds["user"], ds["secureJsonData"]["password"]) == ("db.internal:6432", "mon", "pw")
    assert (ds["jsonData"]["database"], ds["jsonData"]["sslmode"]) == ("monitoring", "require")
    got = push.datasource_for(dsn_settings, None)
    assert got["url"] == "127.0.0.1:5544"
    with pytest.raises(PushError, match="--postgres-url"):
        push.datasource_for(settings.model_copy(update={"postgres": settings.postgres.model_copy(
            update={"dsn": "dbname=x user=y host=/var/run/postgresql"})}), None)


def test_a_refused_token_is_one_line_naming_the_token(grafana: FakeGrafana, boards: Path, settings: Any) -> None:
    with pytest.raises(PushError) as info:
        push.push(grafana.url, "wrong", settings, dashboards_dir=boards)
    message = str(info.value)
    assert "token" in message and "401" in message and grafana.url in message and "\n" not in message
    assert grafana.writes == []


def test_an_editor_token_is_told_the_role_it_needs(grafana: FakeGrafana, boards: Path, settings: Any) -> None:
    with pytest.raises(PushError) as info:
        push.push(grafana.url, EDITOR, settings, dashboards_dir=boards)
    message = str(info.value)
    assert "403" in message and "Admin" in message and "datasource" in message and "\n" not in message


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_grafana_is_one_line_naming_the_url(boards: Path, settings: Any) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(PushError) as info:
        push.push(url, ADMIN, settings, dashboards_dir=boards)
    message = str(info.value)
    assert message.startswith(f"cannot reach Grafana at {url}") and "\n" not in message


@pytest.mark.parametrize("url", ["localhost:3000", "ftp://grafana", "http://host:port"])
def test_a_malformed_url_is_refused_before_any_request(url: str, boards: Path, settings: Any) -> None:
    with pytest.raises(PushError, match="not a Grafana URL"):
        push.push(url, ADMIN, settings, dashboards_dir=boards)


def test_dry_run_writes_nothing(grafana: FakeGrafana, boards: Path, settings: Any) -> None:
    report = push.push(grafana.url, ADMIN, settings, dry_run=True, dashboards_dir=boards)
    assert grafana.writes == []
    assert set(actions(report)) == every_object() and set(actions(report).values()) == {push.CREATED}
    assert all(line.endswith(": would be created") for line in report.lines()[:-1])
    assert report.lines()[-1].startswith(f"dry run against {grafana.url}: {len(every_object())} would be created")
    push.push(grafana.url, ADMIN, settings, dashboards_dir=boards)
    drift(grafana)
    writes = list(grafana.writes)
    report = push.push(grafana.url, ADMIN, settings, dry_run=True, dashboards_dir=boards)
    assert grafana.writes == writes
    assert sum(a == push.UPDATED for a in actions(report).values()) == 7


class Spy:
    """A grafana-client sub-API that records each method call (name, args, kwargs)."""

    def __init__(self, name: str, target: Any, log: list[tuple[str, str, tuple[Any, ...], dict[str, Any]]]) -> None:
        self._name, self._target, self._log = name, target, log

    def __getattr__(self, attr: str) -> Any:
        real = getattr(self._target, attr)

        def record(*args: Any, **kwargs: Any) -> Any:
            self._log.append((self._name, attr, args, kwargs))
            return real(*args, **kwargs)
        return record


def test_grafana_client_methods_and_keywords_exist(grafana: FakeGrafana, boards: Path, settings: Any,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[tuple[str, str, tuple[Any, ...], dict[str, Any]]] = []
    connect = push.connect

    def spying(url: str, token: str) -> Any:
        api = connect(url, token)
        for name in ("datasource", "folder", "dashboard", "alertingprovisioning"):
            setattr(api, name, Spy(name, getattr(api, name), log))
        return api

    monkeypatch.setattr(push, "connect", spying)
    push.push(grafana.url, ADMIN, settings, dashboards_dir=boards)  # creates
    drift(grafana)
    push.push(grafana.url, ADMIN, settings, dashboards_dir=boards)  # updates
    push.push(grafana.url, ADMIN, settings, dry_run=True, dashboards_dir=boards)  # reads
    reference = GrafanaApi.from_url("http://127.0.0.1:1", credential="x")
    for sub, method, args, kwargs in log:
        assert not args, f"{sub}.{method} is called with positional arguments: use keywords"
        fn = getattr(type(getattr(reference, sub)), method, None)
        assert fn is not None, f"grafana-client has no {sub}.{method}"
        inspect.signature(fn).bind(None, **kwargs)  # TypeError when a keyword was renamed
    # every call site ran (a new one must join the scenarios above)
    assert {(s, m) for s, m, _, _ in log} == {
        ("datasource", "get_datasource_by_uid"), ("datasource", "create_datasource"),
        ("datasource", "update_datasource_by_uid"), ("folder", "get_folder"), ("folder", "create_folder"),
        ("folder", "update_folder"), ("dashboard", "get_dashboard"), ("dashboard", "update_dashboard"),
        ("alertingprovisioning", "get_contactpoints"), ("alertingprovisioning", "create_contactpoint"),
        ("alertingprovisioning", "update_contactpoint"), ("alertingprovisioning", "get_alertrule"),
        ("alertingprovisioning", "create_alertrule"), ("alertingprovisioning", "update_alertrule"),
        ("alertingprovisioning", "get_rule_group"), ("alertingprovisioning", "update_rule_group"),
        ("alertingprovisioning", "get_notification_policy_tree"),
        ("alertingprovisioning", "set_notification_policy_tree")}


def test_cli_push(grafana: FakeGrafana, boards: Path, settings: Any, monkeypatch: pytest.MonkeyPatch,
                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(common, "JSON_DIR", boards)
    assert main(["dashboards", "push", "--url", grafana.url, "--token", ADMIN]) == 0
    out = capsys.readouterr().out.splitlines()
    assert f"dashboard {common.DASHBOARD_UIDS['fleet']}: created" in out and out[-1].startswith("pushed to")
    assert main(["dashboards", "push", "--url", grafana.url, "--token", ADMIN, "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith(f"{len(every_object())} unchanged")
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["dashboards", "push", "--url", url, "--token", ADMIN]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("replimon: dashboards push: cannot reach Grafana at " + url)
