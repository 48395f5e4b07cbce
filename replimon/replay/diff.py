"""``replimon diff RUN_A RUN_B``: what two stored runs disagree on (docs/report.md).

A replay is deterministic (docs/rules.md "Alert records": the same history gives the same alert
ids, live or replay), so two runs over the same events must agree on every alert and every group's final
state. `diff_runs` reads both runs from PostgreSQL and reports:

- alerts only in A, only in B, and alerts under the same ``alert_id`` whose compared fields
  differ. An alert is one ``alert_id`` with its rows (``firing``, and ``resolved`` for a wedge
  that cleared); per row it compares ``group``, ``kind``, ``severity``, ``category``,
  ``instance``, ``node``, ``event_ts`` and ``evidence``, and per alert the set of statuses.
- group states that differ: ``group_state.snapshot`` (``GroupMonitor.snapshot()``) compared
  field by field, plus groups only in one run.

What is deliberately *not* compared, because it legitimately differs between two correct runs
of the same events:

- ``detected_ts`` and ``message`` of an alert: a timer-driven alert (GROUP_SILENT, NODE_SILENT,
  the wedges) is detected when the watermark passes its deadline, and the watermark moves per
  micro-batch, so a run cut into other micro-batches detects it at another time, and the message
  says how long the condition had lasted then ("no event ... for 17 s");
- ``batch_id``, ``inserted_at`` and ``updated_at``: which micro-batch, and when, wrote the row;
- ``snapshot.counts``: the monitor's bookkeeping of events seen, duplicates and held events. A
  replay that starts from a ``monitor.state`` checkpoint carries the counts of that checkpoint,
  and events held for reordering depend on how the input was cut into micro-batches;
- the time series (group_timeseries, node_timeseries): a point per group per micro-batch, at the
  group clock when the batch ended, so other batch boundaries give other points.

With ``window=(t1, t2)`` only alert rows with ``event_ts`` in ``[t1, t2)`` are compared, and group
states are not: a replay of a window ends at ``t2`` while the other run (typically the live one)
went on past it, so their latest states are not states of the same moment.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from replimon.replay import evidence_line, iso
from replimon.store.reads import alerts, group_snapshots
from replimon.store.runs import require_run
from replimon.store.values import ms_from_ts

ALERT_FIELDS = ("group", "kind", "severity", "category", "instance", "node", "event_ts_ms",
                "evidence")
IGNORED_SNAPSHOT_KEYS = frozenset({"counts"})
MAX_LINES_PER_SECTION = 100  # .lines() stays readable for two very different runs; to_dict has all

Alert = dict[str, Any]  # alert_id, statuses, rows: {status: {field: value}}


@dataclass
class AlertChange:
    """One alert id present in both runs whose compared fields differ."""

    alert_id: str
    group: str
    kind: str
    differences: list[dict[str, Any]]  # {"field", "a", "b"} (status: lists of statuses)

    def to_dict(self) -> dict[str, Any]:
        return {"alert_id": self.alert_id, "group": self.group, "kind": self.kind,
                "differences": self.differences}


@dataclass
class GroupChange:
    """One group present in both runs whose compared state differs."""

    group: str
    differences: list[dict[str, Any]]  # {"path", "a", "b"}; a side without the key has no a/b

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "differences": self.differences}


@dataclass
class RunDiff:
    """The difference between run A and run B; ``same`` when there is none."""

    run_a: str
    run_b: str
    window: tuple[int, int] | None  # epoch ms [t1, t2), or None: whole runs
    only_a: list[Alert] = field(default_factory=list)
    only_b: list[Alert] = field(default_factory=list)
    changed: list[AlertChange] = field(default_factory=list)
    states_compared: bool = True
    groups_only_a: list[str] = field(default_factory=list)
    groups_only_b: list[str] = field(default_factory=list)
    groups_changed: list[GroupChange] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)

    @property
    def same(self) -> bool:
        return not (self.only_a or self.only_b or self.changed or self.groups_only_a
                    or self.groups_only_b or self.groups_changed)

    def to_dict(self) -> dict[str, Any]:
        """Everything, JSON-able (``replimon diff --json``); times as epoch ms."""
        return {
            "run_a": self.run_a, "run_b": self.run_b, "same": self.same,
            "window": None if self.window is None else {"from_ms": self.window[0],
                                                         "to_ms": self.window[1]},
            "counts": self.counts,
            "alerts_only_a": [_alert_out(a) for a in self.only_a],
            "alerts_only_b": [_alert_out(a) for a in self.only_b],
            "alerts_changed": [c.to_dict() for c in self.changed],
            "states_compared": self.states_compared,
            "ignored": {"alert": ["detected_ts", "message", "batch_id", "inserted_at"],
                        "group_state": ["batch_id", "updated_at",
                                        *(f"snapshot.{k}" for k in sorted(IGNORED_SNAPSHOT_KEYS))]},
            "groups_only_a": self.groups_only_a, "groups_only_b": self.groups_only_b,
            "groups_changed": [g.to_dict() for g in self.groups_changed],
        }

    def lines(self) -> list[str]:
        """The difference for a person: counts first, then each section (capped at
        `MAX_LINES_PER_SECTION` entries; ``to_dict`` has them all)."""
        c = self.counts
        scope = ("" if self.window is None else
                 f" (alerts with event time in [{iso(self.window[0])}, {iso(self.window[1])}))")
        out = [f"run A {self.run_a!r} vs run B {self.run_b!r}{scope}",
               f"alerts: {c['a']['alerts']} in A, {c['b']['alerts']} in B, "
               f"{c['identical_alerts']} identical; {len(self.only_a)} only in A, "
               f"{len(self.only_b)} only in B, {len(self.changed)} different"]
        out += _section("alerts only in A", [_alert_line(a) for a in self.only_a])
        out += _section("alerts only in B", [_alert_line(a) for a in self.only_b])
        out += _section("alerts in both that differ", [
            f"{ch.alert_id} {ch.group} {ch.kind}: " + "; ".join(_change_text(d) for d in ch.differences)
            for ch in self.changed])
        if self.states_compared:
            ignored = ", ".join(sorted(IGNORED_SNAPSHOT_KEYS))
            out.append(f"group states: {c['a']['groups']} in A, {c['b']['groups']} in B, "
                       f"{c['identical_groups']} identical (group_state.snapshot without {ignored})")
            out += _section("groups only in A", self.groups_only_a)
            out += _section("groups only in B", self.groups_only_b)
            out += _section("groups whose state differs", [
                f"{g.group}: " + "; ".join(_path_text(d) for d in g.differences[:8])
                + (f"; ... {len(g.differences) - 8} more" if len(g.differences) > 8 else "")
                for g in self.groups_changed])
        else:
            out.append("group states: not compared (a window's replay ends at its end; the other "
                       "run's latest state is from another moment)")
        out.append("same: the runs agree" if self.same else "different: the runs disagree")
        return out


# -- reading ---------------------------------------------------------------------------------------
def _ms(t: int | datetime) -> int:
    if isinstance(t, datetime):
        ms = ms_from_ts(t)
        assert ms is not None
        return ms
    return int(t)


def _read_alerts(conn: psycopg.Connection[Any], run_id: str,
                 window: tuple[int, int] | None) -> dict[str, Alert]:
    """A run's alerts by alert id, each with its rows by status (the compared fields only)."""
    out: dict[str, Alert] = {}
    for row in alerts(conn, run_id, window=window):
        a = out.setdefault(row["alert_id"], {"alert_id": row["alert_id"], "group": row["group"],
                                             "kind": row["kind"], "rows": {}})
        a["rows"][row["status"]] = {name: row[name] for name in ALERT_FIELDS}
    return out


def _read_states(conn: psycopg.Connection[Any], run_id: str) -> dict[str, dict[str, Any]]:
    return {g: {k: v for k, v in snap.items() if k not in IGNORED_SNAPSHOT_KEYS}
            for g, snap in group_snapshots(conn, run_id).items()}


# -- comparing -------------------------------------------------------------------------------------
def _evidence_key(e: Any) -> str:
    return json.dumps(e, sort_keys=True, separators=(",", ":"))


def _compare_alert(a: Alert, b: Alert) -> list[dict[str, Any]]:
    diffs: list[dict[str, Any]] = []
    sa, sb = sorted(a["rows"]), sorted(b["rows"])
    if sa != sb:
        diffs.append({"field": "status", "a": sa, "b": sb})
    for status in sorted(set(sa) & set(sb)):
        ra, rb = a["rows"][status], b["rows"][status]
        for name in ALERT_FIELDS:
            if ra[name] != rb[name]:
                diffs.append({"field": f"{name} ({status})", "a": ra[name], "b": rb[name]})
    return diffs


_ABSENT = object()


def _json_diff(a: Any, b: Any, path: str = "") -> Iterable[dict[str, Any]]:
    """The leaves where two JSON values differ, as {"path", "a", "b"} (a missing side omitted)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            yield from _json_diff(a.get(key, _ABSENT), b.get(key, _ABSENT),
                                  f"{path}.{key}" if path else str(key))
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _json_diff(x, y, f"{path}[{i}]")
    elif a is _ABSENT or b is _ABSENT or a != b:
        d: dict[str, Any] = {"path": path}
        if a is not _ABSENT:
            d["a"] = a
        if b is not _ABSENT:
            d["b"] = b
        yield d


def diff_runs(dsn: str, run_a: str, run_b: str, *,
              window: tuple[int | datetime, int | datetime] | None = None) -> RunDiff:
    """Compare two runs (run ids, or ``live``) stored in PostgreSQL at ``dsn``.

    ``window``: (t1, t2) as epoch ms or aware datetimes; only alerts with ``event_ts`` in
    ``[t1, t2)`` are compared and group states are not (module docstring). An unknown run id
    raises ``ValueError("no run 'x' in PostgreSQL (known: ...)")``.
    """
    win = None if window is None else (_ms(window[0]), _ms(window[1]))
    if win is not None and win[0] >= win[1]:
        raise ValueError(f"empty window: from {iso(win[0])} is not before to {iso(win[1])}")
    with psycopg.connect(dsn) as conn:
        for run in (run_a, run_b):
            require_run(conn, run)
        alerts_a, alerts_b = _read_alerts(conn, run_a, win), _read_alerts(conn, run_b, win)
        states_a = states_b = None
        if win is None:
            states_a, states_b = _read_states(conn, run_a), _read_states(conn, run_b)
    out = RunDiff(run_a, run_b, win, states_compared=win is None)
    out.only_a = [alerts_a[k] for k in alerts_a if k not in alerts_b]
    out.only_b = [alerts_b[k] for k in alerts_b if k not in alerts_a]
    identical = 0
    for key, a in alerts_a.items():
        if key in alerts_b:
            if diffs := _compare_alert(a, alerts_b[key]):
                out.changed.append(AlertChange(key, a["group"], a["kind"], diffs))
            else:
                identical += 1
    out.counts = {"a": {"alerts": len(alerts_a), "alert_rows": sum(len(a["rows"]) for a in alerts_a.values())},
                  "b": {"alerts": len(alerts_b), "alert_rows": sum(len(b["rows"]) for b in alerts_b.values())},
                  "identical_alerts": identical}
    if states_a is not None and states_b is not None:
        out.groups_only_a = sorted(set(states_a) - set(states_b))
        out.groups_only_b = sorted(set(states_b) - set(states_a))
        same_groups = 0
        for group in sorted(set(states_a) & set(states_b)):
            if diffs := list(_json_diff(states_a[group], states_b[group])):
                out.groups_changed.append(GroupChange(group, diffs))
            else:
                same_groups += 1
        out.counts["a"]["groups"], out.counts["b"]["groups"] = len(states_a), len(states_b)
        out.counts["identical_groups"] = same_groups
    return out


# -- text ------------------------------------------------------------------------------------------
def _alert_out(a: Alert) -> dict[str, Any]:
    return {"alert_id": a["alert_id"], "group": a["group"], "kind": a["kind"],
            "statuses": sorted(a["rows"]), "rows": a["rows"]}


def _alert_line(a: Alert) -> str:
    first = a["rows"].get("firing") or next(iter(a["rows"].values()))
    where = " ".join(f"{k} {first[k]}" for k in ("instance", "node") if first[k] is not None)
    return (f"{a['alert_id']} {a['group']} {a['kind']} {'+'.join(sorted(a['rows']))} at "
            f"{iso(first['event_ts_ms'])}{' ' + where if where else ''}, "
            f"{len(first['evidence'] or [])} evidence events")


def _short(v: Any, limit: int = 120) -> str:
    text = v if isinstance(v, str) else json.dumps(v, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _evidence_text(only: list[dict[str, Any]], other: list[dict[str, Any]]) -> str:
    """Evidence events as one line each; as JSON where the line alone would not show the
    difference (the other side has an event with the same line)."""
    lines = {evidence_line(e) for e in other}
    return ", ".join(_short(e, 200) if evidence_line(e) in lines else evidence_line(e)
                     for e in only[:3]) + (f", ... {len(only) - 3} more" if len(only) > 3 else "")


def _change_text(d: dict[str, Any]) -> str:
    name = d["field"]
    if name.startswith("evidence"):
        ea, eb = list(d["a"] or []), list(d["b"] or [])
        ka, kb = {_evidence_key(e) for e in ea}, {_evidence_key(e) for e in eb}
        only_a = [e for e in ea if _evidence_key(e) not in kb]
        only_b = [e for e in eb if _evidence_key(e) not in ka]
        parts = [f"{name}: {len(ea)} events in A, {len(eb)} in B"]
        if only_a:
            parts.append("only in A: " + _evidence_text(only_a, only_b))
        if only_b:
            parts.append("only in B: " + _evidence_text(only_b, only_a))
        if not only_a and not only_b:
            parts.append("same events in another order")
        return "; ".join(parts)
    if name.startswith("event_ts_ms"):
        return f"{name.replace('_ms', '')}: {iso(d['a'])} in A, {iso(d['b'])} in B"
    return f"{name}: {_short(d['a'])} in A, {_short(d['b'])} in B"


def _path_text(d: dict[str, Any]) -> str:
    a = _short(d["a"], 60) if "a" in d else "(absent)"
    b = _short(d["b"], 60) if "b" in d else "(absent)"
    return f"{d['path']}: {a} in A, {b} in B"


def _section(title: str, items: list[str]) -> list[str]:
    if not items:
        return []
    out = [f"{title} ({len(items)}):"]
    out += [f"  {line}" for line in items[:MAX_LINES_PER_SECTION]]
    if len(items) > MAX_LINES_PER_SECTION:
        out.append(f"  ... {len(items) - MAX_LINES_PER_SECTION} more (--json lists them all)")
    return out
