"""XCom's rules behind the one object the group monitor drives (``XComRules``).

The group monitor keeps what every protocol family shares (admission, the clock, alert emission,
NODE_SILENT, GROUP_SILENT, QUORUM_*, and the frontier rules of ``rules/liveness.py``). This
object owns XCom's frontiers (the contiguous decided frontier, decisions seen past a gap, executed
frontiers' advances), its map and report rules (``ConfigRules``), its decision rules
(``DecisionRules``) and HORIZON_WEDGE, and answers the monitor's questions:

* ``handlers()``: who takes an admitted event of each type (``execution``, ``decision``,
  ``heartbeat``; any other is a ``config`` report), in each node's own order;
* ``members()`` / ``quorum_set()``: the active configuration's members (and majority), None
  until the map is known;
* ``settle(final)``: verdicts held back for more input (decisions past a gap, can_leave checks,
  first reports awaiting a second opinion), due once the watermark passed them (every one at the
  end of input: ``flush``);
* ``evaluate()``: the family's part of an evaluation, in this order: EXECUTOR_LAG (shared, fed the
  frontiers), HORIZON_WEDGE, NO_PROGRESS (shared, fed what work is pending),
  PENDING_CONFIG_STUCK, then pruning what no node can need any more;
* ``snapshot()``: the family's part of the group's snapshot; ``trusted`` and ``decided``.

The order of every step is the order the rules ran in before they were split into components, so
the alerts and their order are unchanged for the same history.
"""

from __future__ import annotations

from typing import Any, ClassVar

from replimon.core.configmap import Config, ConfigMap
from replimon.core.rules.admission import execution_regression
from replimon.core.rules.base import Context, Handler, NodeState, Src
from replimon.core.rules.family import XCOM
from replimon.core.rules.liveness import Liveness
from replimon.core.rules.xcom import state
from replimon.core.rules.xcom.config import ConfigRules
from replimon.core.rules.xcom.decisions import DecisionRules


class XComRules:
    """XCom's rules of one group (docs/rules.md: the configuration map, config reports and views,
    DIVERGENT_DECISION, BEYOND_HORIZON, CAN_LEAVE_UNSAFE, CACHE_INVARIANT, HORIZON_WEDGE,
    PENDING_CONFIG_STUCK), fed admitted events in each node's order."""

    name: ClassVar[str] = XCOM
    types: ClassVar[frozenset[str]] = frozenset(("decision", "execution", "heartbeat", "config"))
    suspicions: ClassVar[bool] = True

    __slots__ = ("ctx", "live", "cmap", "config", "decisions", "decided", "decided_ts", "ahead",
                 "exec_adv_ts", "reach_ts", "member_set")

    def __init__(self, ctx: Context, live: Liveness) -> None:
        self.ctx = ctx
        self.live = live
        self.cmap = ConfigMap(ctx.limits.rules)
        self.config = ConfigRules(ctx, self.cmap)
        self.decisions = DecisionRules(ctx, self.cmap)
        self.decided = -1  # contiguous decided frontier: every decision up to it has been seen
        self.decided_ts = -1
        self.ahead: dict[int, tuple[int, str, dict[str, Any], Src]] = {}  # runs seen past a gap
        self.exec_adv_ts = -1  # last advance of a member's executed frontier (HORIZON_WEDGE)
        self.reach_ts = -1  # decisions at the horizon since (HORIZON_WEDGE)
        self.member_set: set[str] = set()  # members of the active configuration (last evaluation)

    @property
    def trusted(self) -> bool:
        """The map is known to match the group (docs/rules.md, "Bootstrapped histories")."""
        return self.config.trusted

    # -- events ----------------------------------------------------------------------------------
    def handlers(self) -> tuple[dict[str, Handler], Handler]:
        """Who takes an admitted event of each XCom type, and who takes any other type (the
        monitor looks the handler up by type for each event: one call fewer per event than a
        dispatching method)."""
        return ({"execution": self._on_executed, "decision": self._on_decision,
                 "heartbeat": self._on_heartbeat}, self.config.on_report)

    def _on_executed(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        ex = ev["executed"]
        inc = ev["incarnation"]
        if ns.exec_inc >= 0 and ex < ns.exec_inc and inc == ns.inc:
            execution_regression(self.ctx, ns, node, ev, src)
        first_report = ns.exec_inc < 0
        if inc == ns.inc:
            ns.exec_inc = ex
        if ex > ns.executed or (first_report and inc == ns.inc):
            if ex > ns.executed:
                ts = ev["ts_ms"]
                if not self.member_set or node in self.member_set:  # HORIZON_WEDGE counts members
                    if ts > self.exec_adv_ts:
                        self.exec_adv_ts = ts
                    if "horizon" in self.ctx.open:
                        self.ctx.resolve("horizon", f"{node} executed up to {ex}.", ts, [self.ctx.ref(ev, src)])
                if self.live.progressed(ts):
                    self.live.resume(f"{node} executed up to {ex}.", ts, ev, src)
            ns.executed = ex
        if self.decisions.checks:
            self.decisions.can_leave_executed(node, ex, ev["ts_ms"])

    def _on_decision(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        first = ev["instance"]
        last = first + ev.get("count", 1) - 1
        kind = ev["kind"]
        if kind == "config":
            cfg = ev["config"]
            if cfg["op"] == "boot":
                self.config.on_boot(first, cfg, ev, src)
            else:
                self.config.on_command(first, cfg, ev, src)
        self.decisions.divergence(first, last, kind, ev, src, node)
        base = ev.get("window_base")
        if base is not None and self.config.trusted and base <= self.decided:
            self.decisions.beyond_horizon(node, first, last, base, ev, src)
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
        if self.decisions.checks:
            self.decisions.can_leave_learned(ns, node, last)

    def _advance(self, node: str, last: int, ev: dict[str, Any], src: Src) -> None:
        """The contiguous decided frontier moves to ``last`` (every decision up to it seen)."""
        if self.config.trusted and len(self.cmap.configs) > 1:
            self.decisions.open_can_leave(self.decided, last, ev, src)
        self.decided = last
        ts = ev["ts_ms"]
        self.decided_ts = ts
        if self.live.progressed(ts):
            self.live.resume(f"instance {last} was decided.", ts, ev, src)

    def _merge_ahead(self, *, expire: bool = False, final: bool = False) -> None:
        """Join decisions seen ahead of a gap once the gap is filled (or, with ``expire``, once
        the watermark says the missing ones are not coming: every node lost them)."""
        while self.ahead:
            first = min(self.ahead)
            last, node, ev, src = self.ahead[first]
            if first > self.decided + 1 and not (final or (expire and ev["ts_ms"] <= self.ctx.watermark)):
                return
            del self.ahead[first]
            if last > self.decided:
                self._advance(node, last, ev, src)

    def _on_heartbeat(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        self._on_executed(ns, node, ev, src)  # a heartbeat reports the executed frontier too
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
                self.config.check_cache(self.cmap.latest(), ev, src)
        view = ev.get("view")
        if view is not None and ev["status"] != "OFFLINE":
            self.config.check_view(node, ev, view, src, self.decided)

    # -- what the group monitor asks ---------------------------------------------------------------
    def members(self) -> tuple[str, ...] | None:
        """The members expected to publish: the active configuration's (None: no map yet)."""
        if not self.cmap.configs:
            return None
        return self.cmap.active(self.decided + 1).member_ids

    def deadline(self) -> int | None:
        return None  # XCom's wedges are judged at evaluations driven by events and silence timers

    def quorum_set(self) -> tuple[tuple[str, ...], int] | None:
        """The members whose majority must be live, and that majority (None: no map yet)."""
        if not self.cmap.configs:
            return None
        active = self.cmap.active(self.decided + 1)
        return active.member_ids, active.majority

    def settle(self, *, final: bool = False) -> None:
        """Give the verdicts held back for more input that are due (``final``: all of them)."""
        if self.ahead:
            self._merge_ahead(expire=True, final=final)
        if self.decisions.checks:
            self.decisions.settle_can_leave(final=final)
        if self.config.held_reports:
            self.config.settle_held_reports(final=final)

    def flush(self) -> None:
        """End of input: nothing held back can be completed any more."""
        self.settle(final=True)

    def evaluate(self) -> None:
        """The family's part of an evaluation (after NODE_SILENT and the quorum)."""
        if not self.cmap.configs:
            return
        active = self.cmap.active(self.decided + 1)
        members = active.member_ids
        if len(members) != len(self.member_set) or not self.member_set.issuperset(members):
            self.member_set = set(members)
        self.live.executor_lag(members, self.decided)
        self._horizon_wedge(active, members)
        self.live.no_progress(self._work_pending(members), self.decided)
        self.config.pending_stuck(self.decided)
        self._prune(members)

    def _horizon_wedge(self, active: Config, members: tuple[str, ...]) -> None:
        """HORIZON_WEDGE: decisions reached the group's effective horizon (MySQL's bound from the
        executed frontier a majority of the active members have reached, so the group can go no
        further) and no member's executed frontier advanced for ``horizon_wedge``."""
        ctx = self.ctx
        nodes = ctx.nodes
        execs = sorted((nodes[m].executed for m in members if nodes[m].executed >= 0), reverse=True)
        if len(execs) < active.majority:
            return
        wm = ctx.watermark
        e_maj = execs[active.majority - 1]
        bound = self.cmap.effective_horizon(e_maj, mysql=True)
        if self.decided >= bound:
            if self.reach_ts < 0:
                self.reach_ts = ctx.clock
            since = max(self.reach_ts, self.exec_adv_ts, ctx.quiet_end)
            if wm - since >= ctx.limits.horizon_wedge_ms:
                ctx.fire(
                    "horizon", "HORIZON_WEDGE", ("bound", bound),
                    f"Decisions reached the group's effective horizon {bound} (a majority has "
                    f"executed {e_maj}) and no executed frontier advanced for "
                    f"{(wm - since) // 1000} s.",
                    since, instance=bound)
        else:
            self.reach_ts = -1
            if "horizon" in ctx.open:
                ctx.resolve("horizon", f"decided {self.decided} is below the effective horizon {bound}.",
                            ctx.clock)

    def _work_pending(self, members: tuple[str, ...]) -> str | None:
        """What NO_PROGRESS waits on: a pending configuration, or decisions a member has not
        executed (None: nothing)."""
        if self.cmap.configs[-1].start > self.decided:
            return "a pending configuration"
        nodes = self.ctx.nodes
        known = [nodes[m].executed for m in members if nodes[m].executed >= 0]
        if known and self.decided > min(known):
            return f"decided {self.decided} > executed {min(known)}"
        return None

    def _prune(self, members: tuple[str, ...]) -> None:
        """Drop what no node can need any more (bounded state)."""
        ctx = self.ctx
        # Live members only: a member that went silent (crashed, never removed) must not pin
        # every decision value in memory until it comes back.
        open_ = ctx.open
        known = [ctx.nodes[m].executed for m in members
                 if ctx.nodes[m].executed >= 0 and not (open_ and ("silent:" + m) in open_)]
        if len(known) < (len(members) // 2 + 1):
            return
        floor = min(known)
        self.decisions.prune(floor)
        self.config.prune(floor)
        self.live.forget({m for c in self.cmap.configs for m in c.member_ids})

    # -- reading the state -----------------------------------------------------------------------
    def dump(self, shared: dict[str, Any]) -> dict[str, Any]:
        """The whole saved state: ``shared`` (the codec's keys) with XCom's, in the order every
        earlier version wrote them (the state store keeps the JSON text as written). Containers are
        copies."""
        cfg, dec = self.config, self.decisions
        return {
            "v": shared["v"], "group": shared["group"],
            "configs": [state.cfg_out(c) for c in self.cmap.configs],
            "nodes": shared["nodes"], "history": shared["history"],
            "trusted": cfg.trusted, "boot_instance": cfg.boot_instance,
            "records": [state.rec_out(r) for r in cfg.records.values()], "cmd_floor": cfg.cmd_floor,
            "pending_since": [[k, v] for k, v in cfg.pending_since.items()],
            "decided": self.decided, "decided_ts": self.decided_ts, "progress_ts": shared["progress_ts"],
            "exec_adv_ts": self.exec_adv_ts, "clock": shared["clock"], "ext": shared["ext"],
            "quiet_end": shared["quiet_end"],
            "singles": [[k, list(v[0]), v[1], v[2]] for k, v in dec.singles.items()],
            "runs": [[k, v[0], v[1]] for k, v in dec.runs.items()],
            "ahead": [[k, *v] for k, v in self.ahead.items()],
            "special": [[k, *v] for k, v in dec.special.items()],
            "checks": [state.check_out(c) for c in dec.checks],
            "open": shared["open"], "fired": shared["fired"],
            "reach_ts": self.reach_ts, "lag_since": shared["lag_since"], "quorum": shared["quorum"],
            "next_eval": shared["next_eval"], "counts": shared["counts"],
            "member_set": sorted(self.member_set), "episodes": shared["episodes"],
        }


    def load(self, d: dict[str, Any]) -> None:
        """Restore ``dump``'s XCom keys of ``d`` into this fresh object."""
        cfg, dec = self.config, self.decisions
        self.cmap.configs = [Config(c[0], c[1], tuple((m, p) for m, p in c[2]), c[3]) for c in d["configs"]]
        cfg.trusted, cfg.boot_instance = d["trusted"], d["boot_instance"]
        cfg.records = {r["instance"]: state.rec_in(r) for r in d["records"]}
        cfg.cmd_floor = d["cmd_floor"]
        cfg.pending_since = {k: v for k, v in d["pending_since"]}
        cfg.held_reports = {c for c, r in cfg.records.items() if r.held is not None}
        self.decided, self.decided_ts, self.exec_adv_ts, self.reach_ts = (
            d["decided"], d["decided_ts"], d["exec_adv_ts"], d["reach_ts"])
        self.ahead = {k: (last, node, ev, src) for k, last, node, ev, src in d["ahead"]}
        self.member_set = set(d["member_set"])
        dec.singles = {k: (tuple(v), ev, src) for k, v, ev, src in d["singles"]}
        dec.runs = {k: (last, kind) for k, last, kind in d["runs"]}
        dec.special = {k: (kind, ev, src) for k, kind, ev, src in d["special"]}
        dec.checks = [state.check_in(c) for c in d["checks"]]

    def snapshot(self) -> dict[str, Any]:
        """The family's part of the group's snapshot: the active and pending configurations, the
        horizon figures, and each node (docs/rules.md, "Terms used below")."""
        if not self.cmap.configs:
            return {"family": XCOM, "config": None, "config_version": None,
                    "active": None, "pending": [], "nodes": {}}
        ctx, cmap = self.ctx, self.cmap
        active = cmap.active(self.decided + 1)
        out: dict[str, Any] = {
            "active": _config_dict(active),
            "pending": [_config_dict(c) for c in cmap.pending(self.decided + 1)],
            "nodes": {},
        }
        execs = sorted((ctx.nodes[m].executed for m in active.member_ids
                        if m in ctx.nodes and ctx.nodes[m].executed >= 0), reverse=True)
        if len(execs) >= active.majority:
            e_maj = execs[active.majority - 1]
            out["effective_horizon"] = cmap.effective_horizon(e_maj)
            out["executed_majority"] = e_maj
            out["window_use"] = max(0, self.decided - e_maj)
            out["window_fraction"] = (round(max(0, self.decided - e_maj) / active.event_horizon, 4)
                                      if active.event_horizon > 0 else None)
        # The family-neutral view of the configuration (docs/families.md 5.2): what the tables'
        # ``config`` column and the live view show, whatever the family; the version is the
        # active configuration's start, one step on a timeline per reconfiguration.
        out["family"], out["config_version"] = XCOM, active.start
        out["config"] = {k: out[k] for k in ("active", "pending", "effective_horizon", "window_use")
                         if k in out}
        for node, ns in sorted(ctx.nodes.items()):
            out["nodes"][node] = {
                "member": node in active.member_ids, "executed": ns.executed, "decided": ns.decided,
                "incarnation": ns.inc, "protocol": ns.protocol, "status": ns.status,
                "last_ts_ms": ns.last_ts, "suspects": list(ns.suspects),
                "effective_horizon": cmap.effective_horizon(ns.executed) if ns.executed >= 0 else None,
                "silent": ("silent:" + node) in ctx.open,
            }
        return out


def _config_dict(c: Config) -> dict[str, Any]:
    return {"start": c.start, "event_horizon": c.event_horizon, "decided_at": c.decided_at,
            "members": [{"id": m, "protocol": p} for m, p in c.members]}
