"""The chain family's rules behind the one interface the group monitor drives (``FamilyRules``;
docs/families.md sections 4 and 5.1).

Events, in each replica's seq order: ``chain.view`` (it installed or refused a view change),
``chain.wedge`` (it wedged its view), ``chain.append`` (a run of appends its store handled) and
``chain.heartbeat`` (after each lease renewal). What the family supplies to the shared rules
(docs/families.md 4.5): the members expected to publish are C(E), the chain of the highest epoch
known; no quorum set (a chain needs every member: the wedges of ``wedges.py`` take QUORUM_*'s
place); the decided frontier is the head of C(E)'s log position, each member's executed frontier
its own position; NO_PROGRESS, EXECUTOR_LAG and EXECUTION_REGRESSION (on ``pos``) run on them.
The safety rules are in ``safety.py``, the wedges in ``wedges.py``.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, ClassVar

from replimon.core.rules.admission import execution_regression
from replimon.core.rules.base import Context, Handler, NodeState, Src
from replimon.core.rules.chain.nodes import ChainNode, View
from replimon.core.rules.chain.safety import ChainSafety
from replimon.core.rules.chain.wedges import ChainWedges
from replimon.core.rules.liveness import NODE_FORGET_MS, Liveness

CHAIN = "chain"
_NODE_FIELDS = tuple(f.name for f in fields(ChainNode))
_VIEW_FIELDS = tuple(f.name for f in fields(View))


class ChainRules:
    """The chain family's rules of one group (module docstring)."""

    name: ClassVar[str] = CHAIN
    types: ClassVar[frozenset[str]] = frozenset(
        ("chain.view", "chain.wedge", "chain.append", "chain.heartbeat"))
    suspicions: ClassVar[bool] = False

    __slots__ = ("ctx", "live", "nodes", "safety", "wedges")

    def __init__(self, ctx: Context, live: Liveness) -> None:
        self.ctx = ctx
        self.live = live
        self.nodes: dict[str, ChainNode] = {}
        self.safety = ChainSafety(ctx)
        self.wedges = ChainWedges(ctx)

    @property
    def trusted(self) -> bool:
        return True  # every rule judges what it saw; none needs the group's whole history

    @property
    def decided(self) -> int:
        """The head of C(E)'s log position (-1: not known)."""
        cur = self.safety.current
        ns = None if cur is None else self.ctx.nodes.get(cur.chain[0])
        return -1 if ns is None else ns.executed

    def handlers(self) -> tuple[dict[str, Handler], Handler]:
        return ({"chain.view": self._on_view, "chain.wedge": self._on_wedge,
                 "chain.append": self._on_append, "chain.heartbeat": self._on_heartbeat}, _ignore)

    # -- events ------------------------------------------------------------------------------------
    def _node(self, node: str, ev: dict[str, Any]) -> tuple[ChainNode, bool | None]:
        """The replica's record, and whether ``ev`` continues its tracked state: True in order,
        False when there is nothing to compare with (its first report, a new incarnation, a gap
        in its seq: the tracked state is forgotten), None for a late report of its previous
        incarnation (set facts only)."""
        cn = self.nodes.get(node)
        if cn is None:
            cn = self.nodes[node] = ChainNode()
        if ev["ts_ms"] > cn.ts:
            cn.ts = ev["ts_ms"]
        inc, seq = ev["incarnation"], ev["seq"]
        if inc < cn.inc:
            return cn, None
        follows = inc == cn.inc and seq == cn.seq + 1
        cn.inc, cn.seq = inc, seq
        if not follows:
            cn.epoch = cn.pos = cn.wedged = -1
            cn.chain = []
        return cn, follows

    def _position(self, ns: NodeState, node: str, pos: int, ev: dict[str, Any], src: Src, *,
                  judged: bool) -> None:
        """The replica's executed frontier is its log position ``pos`` (``judged``:
        EXECUTION_REGRESSION within an incarnation, for heartbeats; an append or install sets it
        and its own CAS rule judges it)."""
        inc = ev["incarnation"]
        if inc != ns.inc:
            return
        if judged and ns.exec_inc >= 0 and pos < ns.exec_inc:
            execution_regression(self.ctx, ns, node, {**ev, "executed": pos}, src)
        ns.exec_inc = pos
        cur = self.safety.current
        # progress is a member's (a stale head writing in its old epoch moves no frontier of C(E))
        if (pos > ns.executed and cur is not None and node in cur.chain
                and self.live.progressed(ev["ts_ms"])):
            self.live.resume(f"{node} is at position {pos}.", ev["ts_ms"], ev, src)
        ns.executed = pos

    def _joined(self, before: View | None) -> None:
        """A replica that joins the chain is expected to publish from the view on, not judged
        silent since an event it sent before it was a member; one never heard from is expected
        from the view's earliest report on (so its NODE_SILENT key does not depend on which
        report of the view arrived first). The first view the monitor knows makes nobody join:
        its members were members before the history the monitor holds."""
        cur = self.safety.current
        if cur is None:
            return
        nodes = self.ctx.nodes
        joining = before is not None and cur is not before
        for n in cur.chain:
            ns = nodes.get(n)
            if ns is None:
                nodes[n] = NodeState(last_ts=cur.ts)
            elif ns.last_ev is None or (joining and before is not None and n not in before.chain
                                        and 0 <= ns.last_ts < cur.ts):
                ns.last_ts = cur.ts

    def _on_view(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        cn, follows = self._node(node, ev)
        here = self.ctx.ref(ev, src)
        if ev["outcome"] != "installed":
            cn.report = here
            return  # a refused change changes nothing (seed ``viewChanged``: Err(WrongEpoch))
        safety, epoch = self.safety, ev["epoch"]
        if follows is not None:
            safety.view_cas(cn, node, ev, here)
            if follows:
                safety.regression(cn, node, epoch, ev, here)
                safety.add_at_tail(cn, node, ev, here)
            cn.epoch, cn.pos, cn.chain = epoch, ev["pos"], list(ev["chain"])
            if 0 <= cn.wedged < epoch:
                cn.wedged = -1
            self._position(ns, node, ev["pos"], ev, src, judged=False)
        before = safety.current
        known = safety.view(epoch, ev["chain"], ev, here)
        if known is not None:
            safety.installed(known, ev, here)
        self._joined(before)
        self.wedges.installed(epoch, node, ev["ts_ms"])
        cn.report = here

    def _on_wedge(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        cn, follows = self._node(node, ev)
        here = self.ctx.ref(ev, src)
        if follows is not None:
            cn.wedged = ev["epoch"]
        cur = self.safety.current
        self.wedges.wedged(ev["epoch"], -1 if cur is None else cur.epoch, ev["ts_ms"], node, here)
        cn.report = here

    def _on_append(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        cn, follows = self._node(node, ev)
        here = self.ctx.ref(ev, src)
        if ev["outcome"] == "accepted":
            safety = self.safety
            if ev["origin"] == "client":
                safety.client_write(node, ev["epoch"], ev, here)
            if "digest" in ev:
                safety.digest(ev, here)
            if follows is not None:
                safety.append(cn, node, ev, here)
                last = ev["pos"] + ev["count"] - 1
                cn.epoch, cn.pos = max(cn.epoch, ev["epoch"]), last
                self._position(ns, node, last, ev, src, judged=False)
        cn.report = here

    def _on_heartbeat(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        cn, follows = self._node(node, ev)
        here = self.ctx.ref(ev, src)
        epoch = ev["epoch"]
        ns.status = ev["status"]
        if follows is not None:
            regressed = follows and 0 <= epoch < cn.epoch
            if regressed:
                self.safety.regression(cn, node, epoch, ev, here)
            # The heartbeat states the replica's view and log head: the tracked state is
            # re-synchronised from it (docs/families.md 4.3), except for an epoch below the one
            # its own CASes took it to: that report is the violation, and the appends that go on
            # from the higher epoch are judged against it, so one lying heartbeat is one alert.
            if not regressed:
                cn.epoch, cn.chain = epoch, list(ev["chain"])
            cn.pos = ev["pos"]
            if 0 <= cn.wedged < epoch:
                cn.wedged = -1
            cn.flagged, cn.stable = ev["wedged"], ev.get("stable", -1)
            self._position(ns, node, ev["pos"], ev, src, judged=True)
        if ev["ts_ms"] > cn.renewed:
            cn.renewed, cn.ttl, cn.lease = ev["ts_ms"], ev["ttl_ms"], here
            self.wedges.renewed(node, ev["ts_ms"])
        before = self.safety.current
        self.safety.view(epoch, ev["chain"], ev, here)
        self._joined(before)
        self.wedges.installed(epoch, node, ev["ts_ms"])
        cn.report = here

    # -- what the group monitor asks ---------------------------------------------------------------
    def members(self) -> tuple[str, ...] | None:
        """C(E), head..tail (empty until a view above the bootstrap epoch 0 is known: the wedges
        are still evaluated)."""
        cur = self.safety.current
        return () if cur is None else tuple(cur.chain)

    def quorum_set(self) -> tuple[tuple[str, ...], int] | None:
        return None  # not applicable: a chain needs every member (docs/families.md 4.5)

    def deadline(self) -> int | None:
        return self.wedges.deadline(self.safety.current, self.nodes)

    def settle(self, *, final: bool = False) -> None:
        """Nothing is held back: the set facts are judged whichever side arrives first."""

    def evaluate(self) -> None:
        cur = self.safety.current
        self.wedges.evaluate(cur, self.nodes)
        if cur is None:
            return
        members = tuple(cur.chain)
        decided = self.decided
        self.live.executor_lag(members, decided)
        self.live.no_progress(self._work_pending(members, decided), decided)
        self._forget(members)

    def _work_pending(self, members: tuple[str, ...], decided: int) -> str | None:
        """What NO_PROGRESS waits on: entries at the head that an awake member does not hold."""
        nodes, open_ = self.ctx.nodes, self.ctx.open
        known = [nodes[m].executed for m in members if ("silent:" + m) not in open_ and nodes[m].executed >= 0]
        if known and decided > min(known):
            return f"the head {members[0]} is at position {decided}, a member at {min(known)}"
        return None

    def _forget(self, members: tuple[str, ...]) -> None:
        """Bounded state: a replica out of C(E) not heard for ``NODE_FORGET_MS`` is forgotten."""
        clock = self.ctx.clock
        for node in [n for n, cn in self.nodes.items()
                     if n not in members and 0 <= cn.ts < clock - NODE_FORGET_MS]:
            del self.nodes[node]
        self.live.forget(set(members))

    def flush(self) -> None:
        """End of input: nothing is held back."""

    # -- reading the state -----------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """The epoch, its chain head..tail, whether it is wedged, the last view change, and each
        replica (docs/families.md 5.2)."""
        cur = self.safety.current
        ctx, nodes = self.ctx, self.ctx.nodes
        chain = [] if cur is None else cur.chain
        open_wedges = sorted(self.wedges.wedges)
        config = None if cur is None else {
            "epoch": cur.epoch, "chain": list(chain), "head": chain[0], "tail": chain[-1],
            "wedged": bool(open_wedges and open_wedges[-1] >= cur.epoch)
            or any(cn.wedged == cur.epoch for n in chain if (cn := self.nodes.get(n)) is not None),
            "wedged_epoch": open_wedges[-1] if open_wedges else None,
            "view_changed_ts_ms": cur.ts}
        poss = sorted((ns.executed for m in chain if (ns := nodes.get(m)) is not None
                       and ns.executed >= 0), reverse=True)
        need = len(chain) // 2 + 1
        return {"family": CHAIN, "config": config,
                "config_version": None if cur is None else cur.epoch,
                # the position a majority of C(E) holds (the time series, docs/postgres.md)
                "executed_majority": poss[need - 1] if chain and len(poss) >= need else None,
                "nodes": {
            node: {"member": node in chain, "incarnation": ns.inc if ns else None,
                   "status": ns.status or None if ns else None,
                   "last_ts_ms": ns.last_ts if ns else None,
                   "suspects": [], "silent": ("silent:" + node) in ctx.open,
                   "executed": ns.executed if ns else None,
                   "epoch": cn.epoch if cn.epoch >= 0 else None,
                   "pos": cn.pos if cn.pos >= 0 else None,
                   "stable": cn.stable if cn.stable >= 0 else None,
                   "wedged": cn.flagged or cn.wedged >= 0,
                   "wedged_epoch": cn.wedged if cn.wedged >= 0 else None,
                   "lease_remaining_ms": cn.renewed + cn.ttl - ctx.clock if cn.renewed >= 0 else None}
            for node, cn in sorted(self.nodes.items()) for ns in (nodes.get(node),)}}

    def dump(self, shared: dict[str, Any]) -> dict[str, Any]:
        s = self.safety
        return {**shared,
                "chain_nodes": {n: {k: getattr(cn, k) for k in _NODE_FIELDS} for n, cn in self.nodes.items()},
                "views": [[getattr(v, k) for k in _VIEW_FIELDS] for v in s.views.values()],
                "writers": [[e, dict(w)] for e, w in s.writers.items()],
                "digests": [[e, p, *v] for (e, p), v in s.digests.items()],
                "wedges": self.wedges.dump()}

    def load(self, d: dict[str, Any]) -> None:
        s = self.safety
        self.nodes = {n: ChainNode(**{"lease": None, **v, "chain": list(v["chain"])})
                      for n, v in d["chain_nodes"].items()}
        s.views = {v[0]: View(*v) for v in d["views"]}
        s.writers = {e: dict(w) for e, w in d["writers"]}
        s.digests = {(e[0], e[1]): list(e[2:]) for e in d["digests"]}
        self.wedges.load(d["wedges"])


def _ignore(ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
    """Events of another family never reach a group's rules (the fleet sends them to the dead
    letters); this is the fallback the handler table needs."""
