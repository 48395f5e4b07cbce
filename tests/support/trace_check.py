"""A batch reference checker of simulator traces (test helper, not the product's monitor).

It reads a whole trace (arrival order) and names which alert conditions (docs/rules.md, "The
alerts") the history contains, in the simplest way that is obviously right with hindsight: it is
how the tests prove that a clean simulator run is clean and that each catalogued fault leaves the
evidence of its own alert kind and of no other. The product's monitor (``replimon.core``) must
agree with it; it is not fast.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from replimon.core.configmap import Command, Config, ConfigMap, Rules

VIOLATIONS = {
    "EH_OUT_OF_DOMAIN", "EH_CHANGE_WITH_OLD_MEMBER", "OLD_MEMBER_JOIN_CUSTOM_EH", "CONFIG_MISMATCH",
    "CONFIG_DISAGREEMENT", "BEYOND_HORIZON", "CAN_LEAVE_UNSAFE", "DIVERGENT_DECISION",
    "EXECUTION_REGRESSION", "CACHE_INVARIANT",
}


@dataclass
class _Group:
    cmap: ConfigMap
    decided: int = -1
    digests: dict[int, tuple[str, str]] = field(default_factory=dict)  # instance -> (kind, digest)
    executed: dict[str, int] = field(default_factory=dict)  # node -> latest executed
    exec_inc: dict[tuple[str, int], int] = field(default_factory=dict)
    seq: dict[tuple[str, int], int] = field(default_factory=dict)
    reports: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    installed_at: dict[int, int] = field(default_factory=dict)  # config start -> first report ts
    can_leave_checked: set[int] = field(default_factory=set)
    cache: dict[str, int] = field(default_factory=dict)
    suspects: dict[str, tuple[str, ...]] = field(default_factory=dict)
    seen_boot: bool = False
    last_ts: int | None = None
    node_last: dict[str, int] = field(default_factory=dict)
    last_progress_ts: int | None = None
    last_exec_advance_ts: int | None = None
    lag_since: dict[str, int] = field(default_factory=dict)
    horizon_since: int | None = None  # decisions at the horizon since, with no execution since
    quiet_end: int = 0  # end of the last group-wide 5 s silence
    quorum: tuple[str, int] | None = None  # (state, since): a state must hold 1 s (skew)


def _cmd(cfg: dict[str, Any]) -> Command:
    nodes = tuple((n["id"], n.get("protocol")) for n in cfg.get("nodes", []))
    return Command(cfg["op"], nodes, cfg.get("event_horizon"))


def check(events: Iterable[dict[str, Any]], rules: Rules = Rules()) -> dict[str, set[str]]:  # noqa: B008
    """Alert kinds each group's history contains: {group: {KIND, ...}}."""
    found: dict[str, set[str]] = defaultdict(set)
    groups: dict[str, _Group] = {}
    for ev in events:
        name = ev["group"]
        g = groups.get(name)
        if g is None:
            g = groups[name] = _Group(ConfigMap(rules))
        kinds = found[name]
        ts, node = ev["ts_ms"], ev["node"]
        _liveness(g, ev, kinds)
        # ---- data
        key = (node, ev["incarnation"])
        prev = g.seq.get(key)
        if prev is None and ev["seq"] != 0:
            kinds.add("INCOMPLETE_HISTORY" if not g.seen_boot else "EVENTS_LOST")
        elif prev is not None and ev["seq"] > prev + 1:
            kinds.add("EVENTS_LOST")
        g.seq[key] = max(ev["seq"], prev if prev is not None else -1)
        t = ev["type"]
        if t == "decision":
            _decision(g, ev, kinds, rules)
        elif t in ("execution", "heartbeat"):
            last = g.exec_inc.get(key)
            if last is not None and ev["executed"] < last:
                kinds.add("EXECUTION_REGRESSION")
            g.exec_inc[key] = ev["executed"]
            if ev["executed"] > g.executed.get(node, -1):
                g.last_exec_advance_ts = ts
                g.last_progress_ts = ts
            g.executed[node] = ev["executed"]
            if t == "heartbeat":
                _heartbeat(g, ev, kinds)
        elif t == "config":
            _config(g, ev, kinds, rules)
    return dict(found)


def _liveness(g: _Group, ev: dict[str, Any], kinds: set[str]) -> None:
    ts, node = ev["ts_ms"], ev["node"]
    if g.last_ts is not None and ts - g.last_ts > 15_000:
        kinds.add("GROUP_SILENT")
    if g.last_ts is not None and ts - g.last_ts > 5_000:
        g.quiet_end = ts
    if g.seen_boot and g.cmap.configs:
        members = g.cmap.active(g.decided).member_ids
        for m in members:
            last = g.node_last.get(m)
            # silent while the rest of the group kept publishing (else it is GROUP_SILENT)
            if last is not None and ts - last > 5_000 and last >= g.quiet_end and m != node:
                kinds.add("NODE_SILENT")
        stalled = g.last_progress_ts is not None and ts - g.last_progress_ts > 30_000
        if stalled and g.decided > min((g.executed.get(m, 0) for m in members), default=g.decided):
            kinds.add("NO_PROGRESS")
        top = max((g.executed.get(m, 0) for m in members), default=0)
        if g.decided < g.cmap.effective_horizon(top):
            g.horizon_since = None
        elif g.horizon_since is None or (g.last_exec_advance_ts or 0) > g.horizon_since:
            g.horizon_since = ts
        elif ts - g.horizon_since > 10_000:
            kinds.add("HORIZON_WEDGE")
        for m in members:
            e = g.executed.get(m)
            if e is None:
                continue
            if g.decided - e > 1000:
                since = g.lag_since.setdefault(m, ts)
                if ts - since > 10_000:
                    kinds.add("EXECUTOR_LAG")
            else:
                g.lag_since.pop(m, None)
        for cfg in g.cmap.pending(g.decided):
            first = g.installed_at.get(cfg.start)
            if first is not None and ts - first > 60_000:
                kinds.add("PENDING_CONFIG_STUCK")
    g.last_ts = max(ts, g.last_ts or ts)
    g.node_last[node] = ts


def _decision(g: _Group, ev: dict[str, Any], kinds: set[str], rules: Rules) -> None:
    first, count = ev["instance"], ev.get("count", 1)
    last = first + count - 1
    if ev["kind"] == "config" and ev["config"]["op"] == "boot":
        g.seen_boot = True
        if not g.cmap.configs:
            g.cmap.apply(first, _cmd(ev["config"]))
    if count == 1:
        value = (ev["kind"], ev.get("digest", ""))
        known = g.digests.setdefault(first, value)
        if known != value:
            kinds.add("DIVERGENT_DECISION")
    if "window_base" in ev and g.cmap.configs:
        base = ev["window_base"]
        if last > g.cmap.as_of(base).effective_horizon(base):
            kinds.add("BEYOND_HORIZON")
    if last > g.decided:
        if g.cmap.configs:
            for cfg in g.cmap.configs[1:]:
                if g.decided < cfg.can_leave <= last and cfg.start not in g.can_leave_checked:
                    g.can_leave_checked.add(cfg.start)
                    done = sum(1 for m in cfg.member_ids if g.executed.get(m, -1) >= cfg.start - 1)
                    if done < cfg.majority:
                        kinds.add("CAN_LEAVE_UNSAFE")
        g.decided = last
        g.last_progress_ts = ev["ts_ms"]
    if ev["kind"] == "config" and ev["config"]["op"] != "boot" and first not in g.reports and g.cmap.configs:
        outcome = g.cmap.decide(first, _cmd(ev["config"]))
        g.reports[first] = ("ref", outcome)


def _config(g: _Group, ev: dict[str, Any], kinds: set[str], rules: Rules) -> None:
    c = ev["instance"]
    reported = (ev["outcome"], ev.get("start"), ev.get("event_horizon"), tuple(
        (m["id"], m["protocol"]) for m in ev.get("members", [])), ev.get("reason"))
    entry = g.reports.get(c)
    if entry is None or entry[0] == "boot" or c == 0:
        return
    if entry[0] == "seen":
        if entry[1] != reported:
            kinds.add("CONFIG_DISAGREEMENT")
        return
    outcome = entry[1]
    g.reports[c] = ("seen", reported)
    if ev["outcome"] == "installed":
        cfg = Config(ev["start"], ev["event_horizon"], reported[3], c)
        if outcome.config is None:
            kinds.add({
                "EVENT_HORIZON_INVALID": "EH_OUT_OF_DOMAIN",
                "EVENT_HORIZON_UNCHANGEABLE": "EH_CHANGE_WITH_OLD_MEMBER",
                "OLD_MEMBER_CUSTOM_EH": "OLD_MEMBER_JOIN_CUSTOM_EH",
            }.get(outcome.reason, "CONFIG_MISMATCH"))
        elif (outcome.config.start, outcome.config.event_horizon, outcome.config.members) != (
            cfg.start, cfg.event_horizon, cfg.members
        ):
            kinds.add("CONFIG_MISMATCH")
        g.cmap.install(cfg)  # follow what the group really runs
        g.installed_at.setdefault(cfg.start, ev["ts_ms"])
        cache = min(g.cache.values(), default=None)
        if cache is not None and not cache > cfg.event_horizon * len(cfg.members):
            kinds.add("CACHE_INVARIANT")
    elif outcome.config is not None:
        kinds.add("CONFIG_MISMATCH")


def _heartbeat(g: _Group, ev: dict[str, Any], kinds: set[str]) -> None:
    node = ev["node"]
    if "cache_size" in ev:
        g.cache[node] = ev["cache_size"]
    view = ev.get("view")
    if view is not None and g.cmap.configs and ev["status"] != "OFFLINE":
        e = ev["executed"]
        expect = g.cmap.as_of(e).active(e + 1)
        got = (view["start"], view["event_horizon"], tuple((m["id"], m["protocol"]) for m in view["members"]))
        if g.cmap.configs[0].start <= e + 1 and got != (expect.start, expect.event_horizon, expect.members):
            kinds.add("CONFIG_DISAGREEMENT")
    g.suspects[node] = tuple(ev.get("suspects", ()))
    if g.cmap.configs:
        active = g.cmap.active(g.decided + 1)
        votes: dict[str, int] = defaultdict(int)
        for reporter in active.member_ids:
            for s in g.suspects.get(reporter, ()):
                votes[s] += 1
        live = sum(1 for m in active.member_ids if votes[m] < active.majority)
        state = "ok"
        if live < active.majority:
            state = "QUORUM_LOST"
        elif live == active.majority and len(active.members) > 2:
            state = "QUORUM_AT_RISK"
        if g.quorum is None or g.quorum[0] != state:
            g.quorum = (state, ev["ts_ms"])
    if g.quorum is not None and g.quorum[0] != "ok" and ev["ts_ms"] - g.quorum[1] >= 1_000:
        kinds.add(g.quorum[0])
