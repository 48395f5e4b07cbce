"""XCom's decision rules: DIVERGENT_DECISION, BEYOND_HORIZON, CAN_LEAVE_UNSAFE (worklog 3.6.3).

Conditions, keys and the argument that a correct XCom never trips them: docs/rules.md, one
section per kind.

* DIVERGENT_DECISION: two decision events give one instance different values (kind, digest or
  config command). Singles (count 1) are compared value for value; kinds are compared whatever
  the runs' boundaries (an app run against noop/config decisions inside it, and the other way).
  Values are kept only while some live member has not executed past them.
* BEYOND_HORIZON: the proposer's own decision event carries ``window_base``, its last executed
  instance when it reserved the run; the run may not end past the effective horizon computed from
  the commands the proposer had executed (``too_far``, worklog 3.6.3, the worklog's bound; MySQL is
  stricter by one, so a correct XCom never trips it).
* CAN_LEAVE_UNSAFE: when can_leave(c) = start(c) + eh(c) is first decided, a majority of c's
  members must have executed start(c) - 1. If a later configuration d has already started at
  can_leave(c), d's majority decided it (XCom decides an instance in the configuration of that
  instance), so d's members and majority are counted: a joiner of d has start(d) - 1 >=
  start(c) - 1 by state transfer, and the literal "c's members" would flag a correct XCom there
  (docs/rules.md, "CAN_LEAVE_UNSAFE"). A member counts if it reported that much before it
  reported learning can_leave(c) itself (its own order is exact); a member that has not learned it
  yet counts if it reports it within the skew of the decision's time. The verdict waits until
  every member has answered or the watermark passed the decision time plus the skew.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replimon.core.configmap import ConfigMap
from replimon.core.rules.base import Context, NodeState, Src
from replimon.core.rules.xcom.records import config_value

MAX_SPECIAL_RUN = 10_000  # instances of one noop/config run tracked one by one (bounded)


@dataclass(slots=True)
class CanLeaveCheck:
    """can_leave(c) was decided: did a majority of c's members execute start(c) - 1 first?"""

    start: int
    can_leave: int
    members: tuple[str, ...]
    majority: int
    decided_ts: int
    decision: dict[str, Any]
    satisfied: set[str] = field(default_factory=set)
    closed: set[str] = field(default_factory=set)  # learned can_leave; their answer is final


class DecisionRules:
    """The values decided per instance and the open can_leave checks of one group.

    Queries the other XCom rules use: ``checks`` (truthy while a can_leave verdict is open).
    """

    __slots__ = ("ctx", "cmap", "singles", "runs", "special", "checks")

    def __init__(self, ctx: Context, cmap: ConfigMap) -> None:
        self.ctx = ctx
        self.cmap = cmap
        self.singles: dict[int, tuple[Any, ...]] = {}  # instance -> (value, event, src)
        self.runs: dict[int, tuple[int, str]] = {}  # app runs: first -> (last, kind)
        self.special: dict[int, tuple[Any, ...]] = {}  # noop/config instance -> (kind, event, src)
        self.checks: list[CanLeaveCheck] = []

    # -- DIVERGENT_DECISION ----------------------------------------------------------------------
    def divergence(self, first: int, last: int, kind: str, ev: dict[str, Any], src: Src, node: str) -> None:
        # Values: singles are compared value for value (kind, digest, config). Kinds: "app" is the
        # common case, so instances decided as noop/config are kept apart (``special``) and an
        # app decision is compared with them; a noop/config decision is compared with the app
        # runs and singles it falls in. Cheap for the common case, complete for kinds.
        ref = self.ctx.ref
        if first == last:
            cfg = ev.get("config")
            value = (kind, ev.get("digest"), config_value(cfg) if cfg is not None else None)
            known = self.singles.get(first)
            if known is None:
                self.singles[first] = (value, ev, src)
            elif known[0] != value and not (
                # the digest is optional: compare it only when both events carry one
                known[0][0] == value[0] and known[0][2] == value[2] and (known[0][1] is None or value[1] is None)
            ):
                other = known[1]["node"]
                self._divergent(first, f"{known[0][0]} {known[0][1] or ''}".strip() + f" (from {other})",
                                ref(known[1], known[2]), ev, src, node)
                return
        if kind == "app":
            if first != last and first not in self.runs:
                self.runs[first] = (last, kind)
            if self.special:
                span = range(first, last + 1) if last - first < len(self.special) else sorted(self.special)
                for i in span:
                    sp = self.special.get(i)
                    if sp is not None and first <= i <= last:
                        self._divergent(i, f"{sp[0]} (from {sp[1]['node']})", ref(sp[1], sp[2]), ev, src, node)
                        return
            return
        for i in range(first, min(last, first + MAX_SPECIAL_RUN) + 1):
            sp = self.special.get(i)
            if sp is None:
                self.special[i] = (kind, ev, src)
            elif sp[0] != kind:
                self._divergent(i, f"{sp[0]} (from {sp[1]['node']})", ref(sp[1], sp[2]), ev, src, node)
                return
            s = self.singles.get(i) if first != last else None
            if s is not None and s[0][0] != kind:
                self._divergent(i, f"{s[0][0]} (from {s[1]['node']})", ref(s[1], s[2]), ev, src, node)
                return
        for a, (b, _) in self.runs.items():
            if a <= last and first <= b:
                i = max(a, first)
                self._divergent(i, f"an app run {a}..{b}", None, ev, src, node)
                return

    def _divergent(self, instance: int, other: str, other_ref: dict[str, Any] | None,
                   ev: dict[str, Any], src: Src, node: str) -> None:
        mine = f"{ev['kind']} {ev.get('digest') or ''}".strip()
        self.ctx.violation(
            "DIVERGENT_DECISION", ("instance", instance),
            f"Instance {instance} was decided twice with different values: {mine} (from {node}) "
            f"and {other}.",
            ev["ts_ms"], instance=instance, node=node,
            evidence=[r for r in (other_ref, self.ctx.ref(ev, src)) if r])

    # -- BEYOND_HORIZON --------------------------------------------------------------------------
    def beyond_horizon(self, node: str, first: int, last: int, base: int, ev: dict[str, Any], src: Src) -> None:
        bound = self.cmap.horizon_as_of(base)
        if bound is None or last <= bound:
            return
        self.ctx.violation(
            "BEYOND_HORIZON", ("instance", node, first),
            f"Proposer {node} reserved instances {first}..{last} with its last executed instance "
            f"at {base}; its effective horizon was {bound}.",
            ev["ts_ms"], instance=last, node=node, evidence=[self.ctx.ref(ev, src)])

    # -- CAN_LEAVE_UNSAFE ------------------------------------------------------------------------
    def open_can_leave(self, decided: int, last: int, ev: dict[str, Any], src: Src) -> None:
        """The decided frontier moves from ``decided`` up to ``last``: open a check for every
        can_leave in between."""
        nodes = self.ctx.nodes
        for cfg in self.cmap.configs[1:]:
            cl = cfg.start + cfg.event_horizon
            if not decided < cl <= last:
                continue
            # The configuration whose majority decides can_leave(c): c itself, unless a later one
            # already started by then (its members, e.g. a joiner, then make the majority).
            deciders = self.cmap.active(cl)
            chk = CanLeaveCheck(cfg.start, cl, deciders.member_ids, deciders.majority,
                                self.ctx.heard(ev["ts_ms"]), self.ctx.ref(ev, src))
            for m in deciders.member_ids:
                ns = nodes.get(m)
                if ns is not None and ns.executed >= cfg.start - 1:
                    chk.satisfied.add(m)
            self.checks.append(chk)

    def can_leave_learned(self, ns: NodeState, node: str, last: int) -> None:
        """``node`` reported learning decisions up to ``last``: its answer becomes final."""
        if ns.exec_inc < 0:
            return  # nothing reported yet in this incarnation: leave it to the skew window
        for chk in self.checks:
            if last >= chk.can_leave and node in chk.members:
                chk.closed.add(node)

    def can_leave_executed(self, node: str, executed: int, ts: int) -> None:
        limit = self.ctx.limits.skew_ms
        for chk in self.checks:
            if (executed >= chk.start - 1 and node in chk.members and node not in chk.closed
                    and ts <= chk.decided_ts + limit):
                chk.satisfied.add(node)

    def settle_can_leave(self, *, final: bool = False) -> None:
        """Give the verdict of every check that can have one (``final``: end of input, all can)."""
        ctx = self.ctx
        wm, skew = ctx.watermark, ctx.limits.skew_ms
        keep = []
        for chk in self.checks:
            answered = all(m in chk.satisfied or m in chk.closed for m in chk.members)
            if not answered and wm <= chk.decided_ts + skew and not final:
                keep.append(chk)
                continue
            if len(chk.satisfied) < chk.majority:
                behind = [m for m in chk.members if m not in chk.satisfied]
                evidence = [chk.decision]
                for m in behind:
                    ns = ctx.nodes.get(m)
                    if ns is not None and ns.last_ev is not None:
                        evidence.append(ctx.ref(ns.last_ev, ns.last_src))
                ctx.violation(
                    "CAN_LEAVE_UNSAFE", ("can_leave", chk.start),
                    f"can_leave = {chk.can_leave} of the configuration starting at {chk.start} was "
                    f"decided while only {len(chk.satisfied)} of {len(chk.members)} members "
                    f"(majority {chk.majority}) had executed {chk.start - 1}; behind: "
                    f"{', '.join(behind)}.",
                    chk.decided_ts, instance=chk.can_leave, node=chk.decision["node"], evidence=evidence)
        self.checks = keep

    def prune(self, floor: int) -> None:
        """Forget decided values every live member has executed past."""
        for d in (self.singles, self.runs, self.special):
            while d:
                k = next(iter(d))
                if k > floor:
                    break
                del d[k]
