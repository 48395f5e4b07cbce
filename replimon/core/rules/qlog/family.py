"""The quorum-log family's rules behind the one interface the group monitor drives
(``FamilyRules``; docs/families.md sections 3 and 5.1).

Events, in each replica's seq order: ``qlog.decree`` (its watermark passed a decree),
``qlog.passed`` (a round it proposed succeeded), ``qlog.recover`` (a Recover request it serves)
and ``qlog.heartbeat`` (every second). What the family supplies to the shared rules
(docs/families.md 3.5): the members expected to publish and the quorum set are M(L), the
membership of the highest legislature installed, its majority counted with ``suspects``; the
executed frontier of a replica is ``watermark - 1`` (a ``qlog.decree`` of k says k), the decided
frontier the highest executed by any replica (each executes its log contiguously); NO_PROGRESS,
EXECUTOR_LAG and EXECUTION_REGRESSION run on them. The safety rules are in ``safety.py`` and
``quorum.py``, the wedges in ``wedges.py``.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, ClassVar

from replimon.core.rules.admission import execution_regression
from replimon.core.rules.base import Context, Handler, NodeState, Src
from replimon.core.rules.liveness import Liveness
from replimon.core.rules.qlog.nodes import Leg, QlogNode, majority, members_of
from replimon.core.rules.qlog.quorum import HeldQuorum
from replimon.core.rules.qlog.safety import QlogSafety
from replimon.core.rules.qlog.wedges import QlogWedges

QLOG = "qlog"
_NODE_FIELDS = tuple(f.name for f in fields(QlogNode))


class QlogRules:
    """The quorum-log family's rules of one group (module docstring)."""

    name: ClassVar[str] = QLOG
    types: ClassVar[frozenset[str]] = frozenset(
        ("qlog.decree", "qlog.passed", "qlog.recover", "qlog.heartbeat"))
    suspicions: ClassVar[bool] = True

    __slots__ = ("ctx", "live", "nodes", "safety", "held", "wedges", "decided", "passed_max")

    def __init__(self, ctx: Context, live: Liveness) -> None:
        self.ctx = ctx
        self.live = live
        self.nodes: dict[str, QlogNode] = {}
        self.safety = QlogSafety(ctx)
        self.held = HeldQuorum(ctx)
        self.wedges = QlogWedges(ctx, live)
        self.decided = -1  # the highest decree number executed by any replica
        self.passed_max = -1  # the highest decree number passed (the live view's frontier)

    @property
    def trusted(self) -> bool:
        return True  # every rule judges what it saw; none needs the group's whole history

    def handlers(self) -> tuple[dict[str, Handler], Handler]:
        return ({"qlog.decree": self._on_decree, "qlog.passed": self._on_passed,
                 "qlog.recover": self._on_recover, "qlog.heartbeat": self._on_heartbeat}, _ignore)

    # -- events ------------------------------------------------------------------------------------
    def _node(self, node: str, ev: dict[str, Any]) -> QlogNode:
        qn = self.nodes.get(node)
        if qn is None:
            qn = self.nodes[node] = QlogNode()
        if ev["ts_ms"] > qn.ts:
            qn.ts = ev["ts_ms"]
        return qn

    def _executed(self, ns: NodeState, node: str, ex: int, ev: dict[str, Any], src: Src) -> None:
        """The replica's executed frontier is ``ex`` (EXECUTION_REGRESSION within an incarnation;
        after a restart the replica replays from its snapshot, a new incarnation)."""
        inc = ev["incarnation"]
        if ns.exec_inc >= 0 and ex < ns.exec_inc and inc == ns.inc:
            execution_regression(self.ctx, ns, node, {**ev, "executed": ex}, src)
        first_report = ns.exec_inc < 0
        if inc == ns.inc:
            ns.exec_inc = ex
        if ex > ns.executed or (first_report and inc == ns.inc):
            if ex > ns.executed:
                ts = ev["ts_ms"]
                if ex > self.decided:
                    self.decided = ex
                if self.live.progressed(ts):
                    self.live.resume(f"{node} executed up to {ex}.", ts, ev, src)
            ns.executed = ex

    def _joined(self, before: Leg | None) -> None:
        """A newer legislature is installed: a replica that joins it (back) is expected to
        publish from the install on, not judged silent since its last event as an old member."""
        cur = self.safety.current
        if cur is None or cur is before:
            return
        old = () if before is None else before.members
        for n in cur.members:
            ns = self.ctx.nodes.get(n)
            if n not in old and ns is not None and 0 <= ns.last_ts < cur.ts:
                ns.last_ts = cur.ts

    def _on_decree(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        qn = self._node(node, ev)
        before = self.safety.current
        self.safety.decree(qn, node, ev, src)
        self._joined(before)
        if ev["kind"] == "reconf" and ev["outcome"] == "executed":
            new = list(members_of(ev["members"]))
            for other in self.nodes.values():
                for entry in other.recovers:
                    if entry[0] == new and entry[1] < ev["new_leg"]:
                        entry[3] = True
            self.wedges.installed(ev["new_leg"], new, ev["ts_ms"], [self.ctx.ref(ev, src)])
        qn.watermark = ev["num"] + 1
        self._executed(ns, node, ev["num"], ev, src)
        qn.report = self.ctx.ref(ev, src)

    def _on_passed(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        qn = self._node(node, ev)
        safety = self.safety
        safety.passed_value(ev, src)
        if ev["num"] > self.passed_max:
            self.passed_max = ev["num"]
        if ev["kind"] == "reconf" and not ev["recovery"] and self.wedges.episodes:
            self.wedges.regained(ev["acked"], ev["ts_ms"], self.ctx.ref(ev, src))
        if ev["recovery"]:
            safety.recovery_passed(qn, node, ev, src)
        elif not safety.recovery_open(qn, ev["acked"]):
            self.held.passed(ev, self.ctx.ref(ev, src), safety.legs)

    def _on_recover(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        qn = self._node(node, ev)
        self.safety.recover(qn, node, ev, src)
        if ev["phase"] == "started":
            self.wedges.started(node, ev["leg"], list(members_of(ev["new"])), list(members_of(ev["old"])),
                                ev["ts_ms"], self.ctx.ref(ev, src))
        qn.report = self.ctx.ref(ev, src)

    def _on_heartbeat(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        qn = self._node(node, ev)
        safety = self.safety
        ns.suspects = tuple(ev["suspects"])
        ns.status = ev["status"]
        leg = ev["leg"]
        safety.legislature(qn, node, leg, ev, src)
        new, before = leg not in safety.legs, safety.current
        safety.install(leg, ev["members"], ev, src, executed=False)
        self._joined(before)
        if new and leg in safety.legs:
            self.wedges.installed(leg, list(members_of(ev["members"])), ev["ts_ms"],
                                  [self.ctx.ref(ev, src)])
        qn.watermark = ev["watermark"]
        qn.leader = ev.get("leader", "")
        qn.status = ev["status"]
        qn.hb = True
        if qn.leader == node and node in ev["members"]:
            self.wedges.self_leader(ev["ts_ms"])
        self._executed(ns, node, ev["watermark"] - 1, ev, src)
        qn.report = self.ctx.ref(ev, src)

    # -- what the group monitor asks ---------------------------------------------------------------
    def members(self) -> tuple[str, ...] | None:
        """M(L), in its order (None: no legislature known yet)."""
        cur = self.safety.current
        return None if cur is None else tuple(cur.members)

    def quorum_set(self) -> tuple[tuple[str, ...], int] | None:
        cur = self.safety.current
        return None if cur is None else (tuple(cur.members), majority(len(cur.members)))

    def deadline(self) -> int | None:
        return self.wedges.deadline(self.safety.current, self.nodes)

    def settle(self, *, final: bool = False) -> None:
        """The quorum verdicts held for their legislature's membership (``quorum.py``)."""
        self.held.settle(self.safety.legs, final=final)

    def evaluate(self) -> None:
        cur = self.safety.current
        self.wedges.evaluate(cur, self.nodes)
        if cur is None:
            return
        members = tuple(cur.members)
        self.live.executor_lag(members, self.decided)
        self.live.no_progress(self._work_pending(members), self.decided)
        nodes = self.ctx.nodes
        execs = [ns.executed for m in members if (ns := nodes.get(m)) is not None and ns.executed >= 0]
        if execs:
            self.safety.prune(min(execs))

    def _work_pending(self, members: tuple[str, ...]) -> str | None:
        """What NO_PROGRESS waits on: decrees executed by some replica that an awake member has
        not executed (a silent member has NODE_SILENT instead)."""
        nodes, open_ = self.ctx.nodes, self.ctx.open
        known = [nodes[m].executed for m in members
                 if ("silent:" + m) not in open_ and nodes[m].executed >= 0]
        if known and self.decided > min(known):
            return f"executed {self.decided} > executed {min(known)}"
        return None

    def flush(self) -> None:
        self.settle(final=True)

    # -- reading the state -----------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """The legislature, its members with the leader marked, the decree frontier, the open
        recoveries, and each replica (docs/families.md 5.2)."""
        cur = self.safety.current
        nodes = self.ctx.nodes
        members = [] if cur is None else cur.members
        leaders = {n for n in members if (qn := self.nodes.get(n)) is not None and qn.leader == n}
        config = None if cur is None else {
            "legislature": cur.num,
            "members": [{"id": n, "leader": n in leaders} for n in members],
            "passed": self.passed_max, "executed": self.decided,
            "recovering": sorted([e[0], e[1], e[2]] for e in self.wedges.episodes.values())}
        execs = sorted((ns.executed for m in members if (ns := nodes.get(m)) is not None
                        and ns.executed >= 0), reverse=True)
        need = majority(len(members))
        return {"family": QLOG, "config": config,
                "config_version": None if cur is None else cur.num,
                # the frontier a majority of M(L) has executed (the time series, docs/postgres.md)
                "executed_majority": execs[need - 1] if members and len(execs) >= need else None,
                "nodes": {
            node: {"member": node in members, "incarnation": ns.inc if ns else None,
                   "status": qn.status or None, "last_ts_ms": ns.last_ts if ns else None,
                   "suspects": list(ns.suspects) if ns else [],
                   "silent": ("silent:" + node) in self.ctx.open,
                   "executed": ns.executed if ns else None,
                   "legislature": qn.leg, "watermark": qn.watermark, "leader": qn.leader or None}
            for node, qn in sorted(self.nodes.items()) for ns in (nodes.get(node),)}}

    def dump(self, shared: dict[str, Any]) -> dict[str, Any]:
        s = self.safety
        return {**shared,
                "qlog_nodes": {n: {k: getattr(qn, k) for k in _NODE_FIELDS} for n, qn in self.nodes.items()},
                "legs": [[g.num, list(g.members), g.ts, g.first, g.executed] for g in s.legs.values()],
                "decrees": [[k, *v] for k, v in s.decrees.items()],
                "passed": [[leg, k, *v] for (leg, k), v in s.passed.items()],
                "held": [list(e) for e in self.held.pending],
                "wedges": self.wedges.dump(),
                "decided": self.decided, "passed_max": self.passed_max}

    def load(self, d: dict[str, Any]) -> None:
        s = self.safety
        self.nodes = {n: QlogNode(**v) for n, v in d["qlog_nodes"].items()}
        s.legs = {g[0]: Leg(g[0], list(g[1]), g[2], g[3], g[4]) for g in d["legs"]}
        s.decrees = {e[0]: list(e[1:]) for e in d["decrees"]}
        s.passed = {(e[0], e[1]): list(e[2:]) for e in d["passed"]}
        self.held.pending = [list(e) for e in d["held"]]
        self.wedges.load(d["wedges"])
        self.decided, self.passed_max = d["decided"], d["passed_max"]


def _ignore(ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
    """Events of another family never reach a group's rules (the fleet sends them to the dead
    letters); this is the fallback the handler table needs."""
