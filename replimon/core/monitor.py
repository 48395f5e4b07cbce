"""The monitor of one group (``GroupMonitor``) and of a fleet (``Monitor``): pure, no I/O, no clock.

Shape (bytewax's ``StatefulLogic``): ``on_event(event) -> alerts``, ``on_timer(now) -> alerts``,
``next_timer() -> when``; ``to_state()``/``from_state()`` turn the whole state into plain JSON
values and back, which is what Spark's state store keeps. Events are contract-v1 dicts that have
passed ``replimon.contract.parse_event`` (the monitor trusts their shape, not their content).

Event time drives everything: the group's own clock for rules that compare its nodes, the outside
clock given to ``on_timer`` for GROUP_SILENT (the only rule that must fire with no input at all).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from replimon.core.alerts import Alert
from replimon.core.configmap import Command, Config, Outcome
from replimon.core.limits import Limits
from replimon.core.rules.base import CanLeaveCheck, CommandRecord, NodeState, Src
from replimon.core.rules.config import ConfigRules
from replimon.core.rules.data import DataRules
from replimon.core.rules.decisions import DecisionRules
from replimon.core.rules.liveness import LivenessRules

STATE_VERSION = 1


class GroupMonitor(DataRules, ConfigRules, DecisionRules, LivenessRules):
    """All rules of SPEC section 5 for one group."""

    # -- entry points ----------------------------------------------------------------------------
    def on_event(self, ev: dict[str, Any], src: Src = None, now: int | None = None) -> list[Alert]:
        """Take one event (arrival order); return the alerts it raises or resolves.

        ``src`` (topic/partition/offset, or file/line) goes into evidence; ``now`` is the detection
        time to stamp (default: event time).
        """
        out: list[Alert] = []
        self._out, self._now = out, now
        ts = ev["ts_ms"]
        self.counts["events"] += 1
        if ts > self.clock:
            if self.clock >= 0 and ts - self.clock > self.limits.node_silent_ms:
                self.quiet_end = ts
            self.clock = ts
        self._admit(ev["node"], ev, src)
        if self.clock >= self.next_eval:
            self._evaluate()
        return out

    def on_timer(self, now: int) -> list[Alert]:
        """The outside clock reached ``now`` (event-time scale): fire what is due."""
        out: list[Alert] = []
        self._out, self._now = out, None
        if now > self.ext:
            self.ext = now
        if self.clock >= 0:
            self._evaluate()  # settles what needs no more input (e.g. a fully answered can_leave)
            if self.cmap.configs:
                self._node_silence(max(now, self.clock), self.cmap.active(self.decided + 1).member_ids)
        lim = self.limits
        if (self.clock >= 0 and "group_silent" not in self.open
                and now - lim.skew_ms - self.clock >= lim.group_silent_ms):
            self.fire(
                "group_silent", "GROUP_SILENT", ("last", self.clock),
                f"No event at all from group {self.group} for {(now - self.clock) // 1000} s.",
                self.clock)
        return out

    def next_timer(self) -> int | None:
        """When ``on_timer`` next has something to do (outside clock), or None."""
        if self.clock < 0:
            return None
        node = self._silence_deadline()
        if "group_silent" in self.open:
            return node
        group = self.clock + self.limits.group_silent_ms + self.limits.skew_ms
        return group if node is None else min(group, node)

    def flush(self) -> list[Alert]:
        """End of input: nothing held back can be completed any more; process it."""
        out: list[Alert] = []
        self._out, self._now = out, None
        if self.holding:
            self._expire_held(flush=True)
        if self.ahead:
            self._merge_ahead(expire=True, final=True)
        if self.checks:
            self._settle_can_leave(final=True)
        if self.held_reports:
            self._settle_held_reports(final=True)
        return out

    # -- per event ------------------------------------------------------------------------------
    def _process(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        ts = ev["ts_ms"]
        newer = ts > ns.last_ts
        if newer:
            ns.last_ts = ts
        ns.last_ev, ns.last_src = ev, src
        if "group_silent" in self.open:
            self.resolve("group_silent", f"the group published again ({node}).", ts, [self.ref(ev, src)])
        # Only an event newer than the one the silence began after ends it: an older one (arrived
        # late, or from a node whose silence began at a group clock running ahead of it) would
        # resolve the alert and fire it again under the same id at once.
        if newer and "silent:" + node in self.open:
            self.resolve("silent:" + node, f"{node} published again.", ts, [self.ref(ev, src)])
        t = ev["type"]
        if t == "execution":
            self._on_executed(ns, node, ev, src)
        elif t == "decision":
            self._on_decision(ns, node, ev, src)
        elif t == "heartbeat":
            self._on_executed(ns, node, ev, src)
            self._on_heartbeat(ns, node, ev, src)
        else:
            self._on_report(ns, node, ev, src)

    def _on_executed(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        ex = ev["executed"]
        if ns.exec_inc >= 0 and ex < ns.exec_inc and ev["incarnation"] == ns.inc:
            self._regression(ns, node, ev, src)
        first_report = ns.exec_inc < 0
        if ev["incarnation"] == ns.inc:
            ns.exec_inc = ex
        if ex > ns.executed or (first_report and ev["incarnation"] == ns.inc):
            if ex > ns.executed:
                ts = ev["ts_ms"]
                if ts > self.progress_ts:
                    self.progress_ts = ts
                if not self.member_set or node in self.member_set:  # HORIZON_WEDGE counts members
                    if ts > self.exec_adv_ts:
                        self.exec_adv_ts = ts
                    if "horizon" in self.open:
                        self.resolve("horizon", f"{node} executed up to {ex}.", ts, [self.ref(ev, src)])
                if "progress" in self.open:
                    self.resolve("progress", f"{node} executed up to {ex}.", ts, [self.ref(ev, src)])
            ns.executed = ex
        if self.checks:
            self._can_leave_executed(node, ex, ev["ts_ms"])

    def _on_decision(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        first = ev["instance"]
        last = first + ev.get("count", 1) - 1
        kind = ev["kind"]
        if kind == "config":
            cfg = ev["config"]
            if cfg["op"] == "boot":
                self._on_boot(first, cfg, ev, src)
            else:
                self._on_command(first, cfg, ev, src)
        self._divergence(first, last, kind, ev, src, node)
        base = ev.get("window_base")
        if base is not None and self.trusted and base <= self.decided:
            self._beyond_horizon(node, first, last, base, ev, src)
        if last > self.decided:
            if first <= self.decided + 1 or self.decided < 0:
                self._advance(node, last, ev, src)
                if self.ahead:
                    self._merge_ahead()
            else:
                known = self.ahead.get(first)
                if known is None or known[0] < last:
                    self.ahead[first] = (last, node, ev, src)
        if last > ns.decided:
            ns.decided = last
        if self.checks:
            self._can_leave_learned(ns, node, last)

    def _advance(self, node: str, last: int, ev: dict[str, Any], src: Src) -> None:
        """The contiguous decided frontier moves to ``last`` (every decision up to it seen)."""
        if self.trusted and len(self.cmap.configs) > 1:
            self._open_can_leave(last, ev, src)
        self.decided = last
        ts = ev["ts_ms"]
        self.decided_ts = ts
        if ts > self.progress_ts:
            self.progress_ts = ts
        if "progress" in self.open:
            self.resolve("progress", f"instance {last} was decided.", ts, [self.ref(ev, src)])

    def _merge_ahead(self, *, expire: bool = False, final: bool = False) -> None:
        """Join decisions seen ahead of a gap once the gap is filled (or, with ``expire``, once
        the watermark says the missing ones are not coming: every node lost them)."""
        while self.ahead:
            first = min(self.ahead)
            last, node, ev, src = self.ahead[first]
            if first > self.decided + 1 and not (final or (expire and ev["ts_ms"] <= self.watermark)):
                return
            del self.ahead[first]
            if last > self.decided:
                self._advance(node, last, ev, src)

    def _on_heartbeat(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        if ev["decided"] > ns.decided:
            ns.decided = ev["decided"]
        ns.protocol = ev["protocol"]
        ns.status = ev["status"]
        sus = ev.get("suspects")
        ns.suspects = tuple(sus) if sus else ()
        cache = ev.get("cache_size")
        if cache is not None and cache != ns.cache:
            ns.cache = cache
            if self.cmap.configs and node in self.cmap.latest().member_ids:
                self._check_cache(self.cmap.latest(), ev, src)
        view = ev.get("view")
        if view is not None and ev["status"] != "OFFLINE":
            self._check_view(node, ev, view, src)

    # -- reading the state ----------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Where the group stands (SPEC section 1): for the state topic, tables and live views."""
        out: dict[str, Any] = {
            "group": self.group, "history": self.history, "trusted": self.trusted,
            "clock_ms": self.clock, "decided": self.decided,
            "open_alerts": sorted(a.kind + (f":{a.node}" if a.node else "") for a in self.open.values()),
            "counts": dict(self.counts),
            "active": None, "pending": [], "nodes": {},
        }
        if not self.cmap.configs:
            return out
        active = self.cmap.active(self.decided + 1)
        out["active"] = _config_dict(active)
        out["pending"] = [_config_dict(c) for c in self.cmap.pending(self.decided + 1)]
        execs = sorted((self.nodes[m].executed for m in active.member_ids
                        if m in self.nodes and self.nodes[m].executed >= 0), reverse=True)
        if len(execs) >= active.majority:
            e_maj = execs[active.majority - 1]
            out["effective_horizon"] = self.cmap.effective_horizon(e_maj)
            out["executed_majority"] = e_maj
            out["window_use"] = max(0, self.decided - e_maj)
            out["window_fraction"] = (round(max(0, self.decided - e_maj) / active.event_horizon, 4)
                                      if active.event_horizon > 0 else None)
        for node, ns in sorted(self.nodes.items()):
            out["nodes"][node] = {
                "member": node in active.member_ids, "executed": ns.executed, "decided": ns.decided,
                "incarnation": ns.inc, "protocol": ns.protocol, "status": ns.status,
                "last_ts_ms": ns.last_ts, "suspects": list(ns.suspects),
                "effective_horizon": self.cmap.effective_horizon(ns.executed) if ns.executed >= 0 else None,
                "silent": ("silent:" + node) in self.open,
            }
        return out

    # -- state as plain values ------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """The whole state as JSON-able values (Spark keeps it; ``from_state`` restores it)."""
        return {
            "v": STATE_VERSION, "group": self.group,
            "configs": [_cfg_out(c) for c in self.cmap.configs],
            "nodes": {n: _node_out(ns) for n, ns in self.nodes.items()},
            "history": self.history, "trusted": self.trusted, "boot_instance": self.boot_instance,
            "records": [_rec_out(r) for r in self.records.values()], "cmd_floor": self.cmd_floor,
            "pending_since": [[k, v] for k, v in self.pending_since.items()],
            "decided": self.decided, "decided_ts": self.decided_ts, "progress_ts": self.progress_ts,
            "exec_adv_ts": self.exec_adv_ts, "clock": self.clock, "ext": self.ext,
            "quiet_end": self.quiet_end,
            "singles": [[k, list(v[0]), v[1], v[2]] for k, v in self.singles.items()],
            "runs": [[k, v[0], v[1]] for k, v in self.runs.items()],
            "ahead": [[k, *v] for k, v in self.ahead.items()],
            "special": [[k, *v] for k, v in self.special.items()],
            "checks": [_check_out(c) for c in self.checks],
            "open": [[k, a.to_dict()] for k, a in self.open.items()],
            "fired": list(self.fired),
            "reach_ts": self.reach_ts, "lag_since": self.lag_since, "quorum": list(self.quorum),
            "next_eval": self.next_eval, "counts": self.counts, "member_set": sorted(self.member_set),
            "episodes": self.episodes,
        }

    @classmethod
    def from_state(cls, d: dict[str, Any], limits: Limits | None = None) -> GroupMonitor:
        if d.get("v") != STATE_VERSION:
            raise ValueError(f"monitor state version {d.get('v')!r} is not {STATE_VERSION}")
        m = cls(d["group"], limits)
        m.cmap.configs = [Config(c[0], c[1], tuple((x, p) for x, p in c[2]), c[3]) for c in d["configs"]]
        m.nodes = {n: _node_in(x) for n, x in d["nodes"].items()}
        m.history, m.trusted, m.boot_instance = d["history"], d["trusted"], d["boot_instance"]
        m.records = {r["instance"]: _rec_in(r) for r in d["records"]}
        m.cmd_floor = d["cmd_floor"]
        m.pending_since = {k: v for k, v in d["pending_since"]}
        for key in ("decided", "decided_ts", "progress_ts", "exec_adv_ts", "clock", "ext",
                    "quiet_end", "reach_ts", "next_eval"):
            setattr(m, key, d[key])
        m.singles = {k: (tuple(v), ev, src) for k, v, ev, src in d["singles"]}
        m.runs = {k: (last, kind) for k, last, kind in d["runs"]}
        m.ahead = {k: (last, node, ev, src) for k, last, node, ev, src in d["ahead"]}
        m.special = {k: (kind, ev, src) for k, kind, ev, src in d["special"]}
        m.checks = [_check_in(c) for c in d["checks"]]
        m.open = {k: Alert.from_dict(a) for k, a in d["open"]}
        m.fired = dict.fromkeys(d["fired"])
        m.lag_since = dict(d["lag_since"])
        m.quorum = (d["quorum"][0], d["quorum"][1])
        m.counts = dict(d["counts"])
        m.holding = {n for n, ns in m.nodes.items() if ns.held}
        m.held_reports = {c for c, r in m.records.items() if r.held is not None}
        m.member_set = set(d["member_set"])
        m.episodes = dict(d["episodes"])
        return m


# -- (de)serialisation helpers ---------------------------------------------------------------------
def _config_dict(c: Config) -> dict[str, Any]:
    return {"start": c.start, "event_horizon": c.event_horizon, "decided_at": c.decided_at,
            "members": [{"id": m, "protocol": p} for m, p in c.members]}


def _cfg_out(c: Config | None) -> list[Any] | None:
    if c is None:
        return None
    return [c.start, c.event_horizon, [[m, p] for m, p in c.members], c.decided_at]


def _cfg_in(x: list[Any] | None) -> Config | None:
    if x is None:
        return None
    return Config(x[0], x[1], tuple((m, p) for m, p in x[2]), x[3])


_NODE_FIELDS = tuple(f.name for f in fields(NodeState))


def _node_out(ns: NodeState) -> dict[str, Any]:
    # A shallow copy: the values are serialised at once (``dataclasses.asdict`` deep-copied every
    # stored event, most of ``to_state``'s time).
    d = {name: getattr(ns, name) for name in _NODE_FIELDS}
    d["suspects"] = list(ns.suspects)
    d["held"] = [[i, s, ev, src] for i, s, ev, src in ns.held]
    return d


def _node_in(d: dict[str, Any]) -> NodeState:
    d = dict(d)
    d["suspects"] = tuple(d["suspects"])
    d["held"] = [(i, s, ev, src) for i, s, ev, src in d["held"]]
    return NodeState(**d)


def _outcome_out(o: Outcome | None) -> list[Any] | None:
    return None if o is None else [o.instance, _cfg_out(o.config), o.reason]


def _outcome_in(x: list[Any] | None) -> Outcome | None:
    return None if x is None else Outcome(x[0], _cfg_in(x[1]), x[2])


def _key_out(k: tuple[Any, ...] | None) -> list[Any] | None:
    if k is None:
        return None
    return [k[0], k[1], k[2], None if k[3] is None else [list(m) for m in k[3]]]


def _key_in(x: list[Any] | None) -> tuple[Any, ...] | None:
    if x is None:
        return None
    return (x[0], x[1], x[2], None if x[3] is None else tuple((m, p) for m, p in x[3]))


def _rec_out(r: CommandRecord) -> dict[str, Any]:
    return {
        "instance": r.instance,
        "command": [r.command.op, [[n, p] for n, p in r.command.nodes], r.command.event_horizon],
        "decided_ts": r.decided_ts, "decision": r.decision,
        "expected": _outcome_out(r.expected), "alt": _outcome_out(r.alt),
        "first": _key_out(r.first), "first_ref": r.first_ref,
        "actual": _cfg_out(r.actual), "followed": r.followed, "replaced": _cfg_out(r.replaced),
        "held": None if r.held is None else [_key_out(r.held[0]), r.held[1], r.held[2], r.held[3]],
    }


def _rec_in(d: dict[str, Any]) -> CommandRecord:
    op, nodes, eh = d["command"]
    return CommandRecord(
        d["instance"], Command(op, tuple((n, p) for n, p in nodes), eh), d["decided_ts"],
        d["decision"], _outcome_in(d["expected"]), _outcome_in(d["alt"]), _key_in(d["first"]),
        d["first_ref"], _cfg_in(d["actual"]), d["followed"], _cfg_in(d["replaced"]),
        None if d["held"] is None else (_key_in(d["held"][0]), d["held"][1], d["held"][2], d["held"][3]))


def _check_out(c: CanLeaveCheck) -> dict[str, Any]:
    return {"start": c.start, "can_leave": c.can_leave, "members": list(c.members),
            "majority": c.majority, "decided_ts": c.decided_ts, "decision": c.decision,
            "satisfied": sorted(c.satisfied), "closed": sorted(c.closed)}


def _check_in(d: dict[str, Any]) -> CanLeaveCheck:
    return CanLeaveCheck(d["start"], d["can_leave"], tuple(d["members"]), d["majority"],
                         d["decided_ts"], d["decision"], set(d["satisfied"]), set(d["closed"]))


class Monitor:
    """Many groups, one outside clock: what ``replimon check`` and the benchmark run.

    The outside clock is the highest event time read so far; a group's GROUP_SILENT timer fires
    when it passes (timers due before the last event's time fire; nothing is invented after).
    """

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.groups: dict[str, GroupMonitor] = {}
        self.clock = -1
        self._timers: list[tuple[int, str]] = []
        self._scheduled: set[str] = set()

    def process(self, ev: dict[str, Any], src: Src = None) -> list[Alert]:
        out: list[Alert] = []
        ts = ev["ts_ms"]
        if ts > self.clock:
            self.clock = ts
            if self._timers and self._timers[0][0] <= ts:
                out.extend(self._fire_due())
        name = ev["group"]
        g = self.groups.get(name)
        if g is None:
            g = self.groups[name] = GroupMonitor(name, self.limits)
        out.extend(g.on_event(ev, src))
        if name not in self._scheduled:
            when = g.next_timer()
            if when is not None:
                heapq.heappush(self._timers, (when, name))
                self._scheduled.add(name)
        return out

    def _fire_due(self) -> list[Alert]:
        out: list[Alert] = []
        while self._timers and self._timers[0][0] <= self.clock:
            _, name = heapq.heappop(self._timers)
            self._scheduled.discard(name)
            g = self.groups[name]
            out.extend(g.on_timer(self.clock))
            when = g.next_timer()
            if when is not None:
                when = max(when, self.clock + 1)  # strictly later: a timer never re-fires at once
                heapq.heappush(self._timers, (when, name))
                self._scheduled.add(name)
        return out

    def run(self, events: Iterable[dict[str, Any]]) -> list[Alert]:
        out: list[Alert] = []
        for ev in events:
            out.extend(self.process(ev))
        out.extend(self.finish())
        return out

    def finish(self) -> list[Alert]:
        """End of input: complete what was held back (no time passes)."""
        out: list[Alert] = []
        for g in self.groups.values():
            out.extend(g.flush())
        return out
