"""``replimon dashboards push``: make a running Grafana match the provisioning files, over its HTTP
API with grafana-client (docs/alerting.md, "`replimon dashboards push`").

What it provisions, in this order (each object is read first, then created, updated or left
alone):

1. the PostgreSQL datasource (by uid): its address from ``--postgres-url`` or ``postgres.dsn``,
   user, password and database from ``postgres.dsn`` (docker-compose's when the DSN is empty);
2. the folder (by uid);
3. the dashboards of ``dashboards/json/*.json`` into that folder (overwritten by uid, skipped
   when the stored copy has the same content);
4. the contact point (by uid), the alert rules (provisioning API, by uid) and their rule group's
   evaluation interval;
5. the replimon branch of the notification policy tree (the route matching ``app=replimon``),
   merged into the organisation's tree: other routes and the root are kept.

Idempotent: "unchanged" means every field push sets already has that value in Grafana (fields
Grafana adds are ignored), and an unchanged object is not written, so a second push writes
nothing. Secrets are write-only in Grafana: a changed datasource password alone is not seen.

Errors the user must fix raise `PushError` with one line: Grafana unreachable (names the URL), the
token refused (401/403; names the role needed), anything else unexpected (names what was being
done and Grafana's answer). ``dry_run`` only reads and reports what would change.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import niquests
import psycopg
from grafana_client import GrafanaApi
from grafana_client.client import GrafanaClientError, GrafanaException, GrafanaUnauthorizedError
from psycopg.conninfo import conninfo_to_dict

from replimon.dashboards import alert_rules, common

CREATED, UPDATED, UNCHANGED = "created", "updated", "unchanged"
WOULD = {CREATED: "would be created", UPDATED: "would be updated", UNCHANGED: UNCHANGED}
TIMEOUT_S = 10.0
ROLE = ("a service account token with the Admin role (datasources and alerting provisioning "
        "need Admin; Editor can only write the folder and dashboards)")
MESSAGE = "replimon dashboards push"


class PushError(Exception):
    """Something the user must fix; the message is one line."""


@dataclass
class Change:
    kind: str  # datasource, folder, dashboard, contact point, alert rule, rule group, notification policy
    name: str
    action: str  # CREATED, UPDATED or UNCHANGED


@dataclass
class PushReport:
    """What push did (or, dry run, would do) to each object."""

    url: str
    dry_run: bool
    changes: list[Change] = field(default_factory=list)

    def count(self, action: str) -> int:
        return sum(c.action == action for c in self.changes)

    def lines(self) -> list[str]:
        """One line per object (``dashboard replimon-fleet: unchanged``), then the totals."""
        word = WOULD if self.dry_run else {a: a for a in WOULD}
        out = [f"{c.kind} {c.name}: {word[c.action]}" for c in self.changes]
        totals = ", ".join(f"{self.count(a)} {word[a]}" for a in (CREATED, UPDATED, UNCHANGED))
        out.append(f"{'dry run against' if self.dry_run else 'pushed to'} {self.url}: {totals}")
        return out


def same(want: Any, have: Any) -> bool:
    """``have`` (what Grafana returned) carries every field of ``want`` (what push sends) with the
    same value. Fields only Grafana has are ignored; a field Grafana omits counts as its empty
    value (Go's omitempty), and lists must match element by element."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(
            same(v, have[k]) if k in have else not v for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(want) == len(have) and all(map(same, want, have))
    if isinstance(want, bool) or isinstance(have, bool):
        return want is have
    return bool(want == have)


# ----------------------------------------------------------------------------- what to push
def datasource_for(settings: Any, postgres_url: str | None) -> dict[str, Any]:
    """The datasource: address from ``postgres_url`` (``host:port`` or a postgresql:// URL, as
    Grafana reaches the server) or from ``postgres.dsn``; credentials and database from
    ``postgres.dsn``, or docker-compose's (`common.COMPOSE_PG`) when that is empty."""
    dsn = settings.postgres.dsn
    if dsn:
        try:
            params = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
        except psycopg.Error as exc:  # ProgrammingError: a malformed DSN
            raise PushError(f"postgres.dsn is not a libpq connection string: {exc}") from None
    else:
        pg = common.COMPOSE_PG
        host, _, port = pg["host"].partition(":")
        params = {"host": host, "port": port, "user": pg["user"], "password": pg["password"],
                  "dbname": pg["database"]}
    host, port = params.get("host", ""), params.get("port", "5432") or "5432"
    if postgres_url:
        text = postgres_url if "//" in postgres_url else f"//{postgres_url}"
        try:
            parts = urlsplit(text)
            host, port = parts.hostname or "", str(parts.port or 5432)
        except ValueError as exc:
            raise PushError(f"--postgres-url {postgres_url!r}: {exc}") from None
        if parts.path.strip("/"):
            params["dbname"] = parts.path.strip("/")
    if not host or host.startswith("/") or "," in host:
        raise PushError("no single TCP host for the datasource (postgres.dsn has none); give "
                        "--postgres-url host:port as Grafana reaches PostgreSQL")
    if not params.get("user"):
        raise PushError("postgres.dsn names no user for the datasource")
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"  # an IPv6 literal
    return alert_rules.datasource(address, params["user"], params.get("password", ""),
                               params.get("dbname") or params["user"], params.get("sslmode", "disable"))


def load_dashboards(directory: Path) -> list[dict[str, Any]]:
    """The generated dashboards (``json/*.json``), by file name."""
    files = sorted(directory.glob("*.json"))
    if not files:
        raise PushError(f"no dashboards in {directory}: run `replimon dashboards generate` first")
    out = []
    for path in files:
        try:
            board = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise PushError(f"{path}: not JSON ({exc})") from None
        if not isinstance(board, dict) or not board.get("uid"):
            raise PushError(f"{path}: a dashboard needs a uid")
        out.append(board)
    return out


# ----------------------------------------------------------------------------- talking to Grafana
def connect(url: str, token: str) -> GrafanaApi:
    """A client for ``url`` with bearer-token auth (nothing is sent yet)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError as exc:
        raise PushError(f"not a Grafana URL: {url!r} ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PushError(f"not a Grafana URL: {url!r} (expected http(s)://host[:port][/path])")
    if not token:
        raise PushError(f"no token: give --token or GRAFANA_TOKEN, {ROLE}")
    # grafana-client appends "api" to the path as it is: a sub-path needs its trailing slash
    path = parts.path if parts.path.endswith("/") or not parts.path else parts.path + "/"
    return GrafanaApi.from_url(url=parts._replace(path=path).geturl(), credential=token,
                               timeout=TIMEOUT_S)


def _reason(exc: BaseException) -> str:
    """The root cause of a connection error, on one line (``[Errno 111] Connection refused``,
    ``Name or service not known: grafana.example``): urllib3 wraps it several times over."""
    root, seen = exc, set()
    while (nxt := root.__cause__ or root.__context__) is not None and id(nxt) not in seen:
        seen.add(id(root))
        root = nxt
    text = re.sub(r"<[^>]* object at 0x[0-9a-f]+>:\s*", "", str(root) or type(root).__name__)
    return " ".join(text.split())[:200]


class Pusher:
    """Reads and writes one Grafana; records what it did in ``report``."""

    def __init__(self, api: GrafanaApi, url: str, dry_run: bool) -> None:
        self.api = api
        self.url = url
        self.dry_run = dry_run
        self.report = PushReport(url, dry_run)

    def call(self, what: str, fn: Callable[..., Any], *, missing_ok: bool = False,
             expect: type = dict, **kwargs: Any) -> Any:
        """``fn(**kwargs)`` with every failure turned into a one-line `PushError`; ``None`` for a
        404 when ``missing_ok``."""
        try:
            out = fn(**kwargs)
        except GrafanaUnauthorizedError:
            raise PushError(f"Grafana at {self.url} refused the token (401 Unauthorized) while "
                            f"{what}: check --token / GRAFANA_TOKEN, {ROLE}") from None
        except GrafanaClientError as exc:
            if exc.status_code == 404 and missing_ok:
                return None
            if exc.status_code == 403:
                raise PushError(f"Grafana at {self.url} refused the token (403 Forbidden: "
                                f"{_message(exc)}) while {what}: push needs {ROLE}") from None
            raise PushError(f"unexpected response from Grafana at {self.url} while {what}: "
                            f"{exc.status_code} {_message(exc)}") from None
        except GrafanaException as exc:  # 5xx, timeouts, HTTP errors grafana-client wraps
            status = f"{exc.status_code} " if exc.status_code else ""
            raise PushError(f"unexpected response from Grafana at {self.url} while {what}: "
                            f"{status}{_message(exc)}") from None
        except ValueError:  # a 2xx body that is not JSON (niquests' JSONDecodeError is one)
            raise PushError(f"unexpected response from {self.url} while {what}: not JSON "
                            "(is it Grafana's URL?)") from None
        except niquests.exceptions.RequestException as exc:  # connection refused, DNS, TLS
            raise PushError(f"cannot reach Grafana at {self.url}: {_reason(exc)}") from None
        if out is not None and not isinstance(out, expect):
            raise PushError(f"unexpected response from {self.url} while {what}: "
                            f"{type(out).__name__} where JSON {expect.__name__} was expected (is it Grafana's URL?)")
        return out

    def note(self, kind: str, name: str, action: str) -> bool:
        """Record ``action``; whether to write (not in a dry run, not when unchanged)."""
        self.report.changes.append(Change(kind, name, action))
        return action != UNCHANGED and not self.dry_run

    def upsert(self, kind: str, uid: str, action: str, create: tuple[Any, dict[str, Any]],
               update: tuple[Any, dict[str, Any]]) -> None:
        """Record ``action`` and, unless unchanged or a dry run, call ``create`` or ``update``
        (each a grafana-client method and its keyword arguments)."""
        if self.note(kind, uid, action):
            fn, kw = create if action == CREATED else update
            self.call(f"{'creating' if action == CREATED else 'updating'} {kind} {uid}", fn, **kw)

    # -- the objects ---------------------------------------------------------------------------
    def datasource(self, want: dict[str, Any]) -> None:
        api, uid = self.api.datasource, want["uid"]
        have = self.call(f"reading datasource {uid}", api.get_datasource_by_uid, missing_ok=True,
                         datasource_uid=uid)
        public = {k: v for k, v in want.items() if k != "secureJsonData"}
        secrets_set = have is not None and all(  # Grafana only says which secrets are set
            (have.get("secureJsonFields") or {}).get(k)
            for k, v in want.get("secureJsonData", {}).items() if v)
        action = CREATED if have is None else UNCHANGED if same(public, have) and secrets_set else UPDATED
        self.upsert("datasource", uid, action, (api.create_datasource, {"datasource": want}),
                    (api.update_datasource_by_uid, {"datasource_uid": uid, "datasource": want}))

    def folder(self) -> None:
        api, uid, title = self.api.folder, common.FOLDER_UID, common.FOLDER_TITLE
        have = self.call(f"reading folder {uid}", api.get_folder, missing_ok=True, uid=uid)
        action = CREATED if have is None else UNCHANGED if have.get("title") == title else UPDATED
        self.upsert("folder", uid, action, (api.create_folder, {"title": title, "uid": uid}),
                    (api.update_folder, {"uid": uid, "title": title, "overwrite": True}))

    def dashboard(self, board: dict[str, Any]) -> None:
        api, uid = self.api.dashboard, board["uid"]
        have = self.call(f"reading dashboard {uid}", api.get_dashboard, missing_ok=True, dashboard_uid=uid)
        content = {k: v for k, v in board.items() if k not in ("id", "version")}
        if have is None:
            action = CREATED
        else:
            stored = {k: v for k, v in (have.get("dashboard") or {}).items() if k not in ("id", "version")}
            in_folder = (have.get("meta") or {}).get("folderUid") == common.FOLDER_UID
            action = UNCHANGED if stored == content and in_folder else UPDATED
        if self.note("dashboard", uid, action):
            self.call(f"writing dashboard {uid}", api.update_dashboard, dashboard={
                "dashboard": {**content, "id": None}, "folderUid": common.FOLDER_UID,
                "overwrite": True, "message": MESSAGE})

    def contact_point(self, want: dict[str, Any]) -> None:
        api, uid = self.api.alertingprovisioning, want["uid"]
        points = self.call(f"reading contact points named {want['name']}", api.get_contactpoints,
                           expect=list, name=want["name"])
        have = next((p for p in points or [] if isinstance(p, dict) and p.get("uid") == uid), None)
        action = CREATED if have is None else UNCHANGED if same(want, have) else UPDATED
        self.upsert("contact point", uid, action, (api.create_contactpoint, {"contactpoint": want}),
                    (api.update_contactpoint, {"contactpoint_uid": uid, "contactpoint": want}))

    def rule(self, want: dict[str, Any]) -> None:
        api, uid = self.api.alertingprovisioning, want["uid"]
        have = self.call(f"reading alert rule {uid}", api.get_alertrule, missing_ok=True, alertrule_uid=uid)
        action = CREATED if have is None else UNCHANGED if same(want, have) else UPDATED
        self.upsert("alert rule", uid, action, (api.create_alertrule, {"alertrule": want}),
                    (api.update_alertrule, {"alertrule_uid": uid, "alertrule": want}))

    def rule_group(self) -> None:
        """The group's evaluation interval (creating a rule creates its group with Grafana's
        default interval)."""
        api, name = self.api.alertingprovisioning, alert_rules.RULE_GROUP
        have = self.call(f"reading rule group {name}", api.get_rule_group, missing_ok=True,
                         folder_uid=common.FOLDER_UID, group_uid=name)
        if have is None and not self.dry_run:
            raise PushError(f"unexpected response from Grafana at {self.url}: rule group {name} "
                            "missing after its rules were written")
        action = CREATED if have is None else UNCHANGED if have.get("interval") == alert_rules.INTERVAL_S else UPDATED
        if self.note("rule group", name, action):
            assert have is not None
            self.call(f"updating rule group {name}", api.update_rule_group, folder_uid=common.FOLDER_UID,
                      group_uid=name, alertrule_group={**have, "interval": alert_rules.INTERVAL_S})

    def policy(self, want: dict[str, Any]) -> None:
        """Our route first in the root's routes (replacing the one with our matchers), the rest
        of the organisation's tree as it was; not locked against edits in the UI (the tree is
        shared with everything else the organisation routes)."""
        api = self.api.alertingprovisioning
        tree = self.call("reading the notification policy tree", api.get_notification_policy_tree)
        routes = list((tree or {}).get("routes") or [])
        mine = next((i for i, r in enumerate(routes)
                     if isinstance(r, dict) and r.get("object_matchers") == want["object_matchers"]), None)
        action = CREATED if mine is None else UNCHANGED if same(want, routes[mine]) else UPDATED
        if self.note("notification policy", "app=replimon", action):
            rest = [r for i, r in enumerate(routes) if i != mine]
            body = {k: v for k, v in (tree or {}).items() if k != "provenance"}
            self.call("writing the notification policy tree", api.set_notification_policy_tree,
                      notification_policy_tree={**body, "routes": [want, *rest]}, disable_provenance=True)


def _message(exc: GrafanaException) -> str:
    body = exc.response
    if isinstance(body, dict):
        text = body.get("message") or body.get("msg") or json.dumps(body)
    else:
        text = str(body or exc.message)
    return " ".join(str(text).split())[:300]


def push(url: str, token: str, settings: Any, *, postgres_url: str | None = None,
         dry_run: bool = False, dashboards_dir: Path | None = None) -> PushReport:
    """Make Grafana at ``url`` match the provisioning files (module docstring); what changed.
    ``dashboards_dir`` defaults to the generated ``dashboards/json``."""
    want_ds = datasource_for(settings, postgres_url)
    boards = load_dashboards(dashboards_dir or common.JSON_DIR)
    pusher = Pusher(connect(url, token), url, dry_run)
    pusher.datasource(want_ds)
    pusher.folder()
    for board in boards:
        pusher.dashboard(board)
    pusher.contact_point(alert_rules.contact_point())
    for spec in alert_rules.rule_specs():
        pusher.rule(alert_rules.api_rule(spec))
    pusher.rule_group()
    pusher.policy(alert_rules.policy_route())
    return pusher.report
