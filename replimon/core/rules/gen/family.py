"""The generations family's rules behind the one interface the group monitor drives
(``FamilyRules``; docs/families.md sections 2 and 5.1).

Events, in each node's seq order: ``gen.state`` (a completed transition of the node's persisted
generation state), ``gen.heartbeat`` (every second: the same numbers, ``node_status`` and
``suspects``) and ``gen.xact`` (sampled transactions). What the family supplies to the shared
rules (docs/families.md 2.5): the members expected to publish are the ``configured`` set of the
highest generation reported, and so is the quorum set, counted by silence only (the heartbeats'
suspicions are not sound here: ``quorum_set``); there is no decided frontier (NO_PROGRESS and
EXECUTOR_LAG are not supplied). The wedges are in ``wedges.py``.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, ClassVar

from replimon.core.rules.base import Context, Handler, NodeState, Src
from replimon.core.rules.gen.held import HeldOnline
from replimon.core.rules.gen.nodes import Gen, GenNode, members_of
from replimon.core.rules.gen.safety import GenSafety, majority, migrate_xacts
from replimon.core.rules.gen.wedges import GenWedges
from replimon.core.rules.liveness import Liveness

GEN = "gen"
_NODE_FIELDS = tuple(f.name for f in fields(GenNode))


class GenRules:
    """The generations family's rules of one group (module docstring)."""

    name: ClassVar[str] = GEN
    types: ClassVar[frozenset[str]] = frozenset(("gen.state", "gen.heartbeat", "gen.xact"))
    suspicions: ClassVar[bool] = False

    __slots__ = ("ctx", "live", "nodes", "safety", "wedges", "held")

    def __init__(self, ctx: Context, live: Liveness) -> None:
        self.ctx = ctx
        self.live = live
        self.nodes: dict[str, GenNode] = {}
        self.safety = GenSafety(ctx)
        self.wedges = GenWedges(ctx, live)
        self.held = HeldOnline(ctx)

    @property
    def trusted(self) -> bool:
        return True  # every rule judges what it saw; none needs the group's whole history

    @property
    def decided(self) -> int:
        return -1  # mtm has no decided frontier

    def handlers(self) -> tuple[dict[str, Handler], Handler]:
        return ({"gen.state": self._on_state, "gen.heartbeat": self._on_heartbeat,
                 "gen.xact": self._on_xact}, _ignore)

    # -- events ------------------------------------------------------------------------------------
    def _node(self, node: str, ev: dict[str, Any]) -> GenNode:
        """The node's record, with ``contiguous`` cleared when this event does not follow its
        last one in the same incarnation."""
        gn = self.nodes.get(node)
        if gn is None:
            gn = self.nodes[node] = GenNode()
        inc, seq = ev["incarnation"], ev["seq"]
        if inc != gn.last_inc or seq != gn.last_seq + 1:
            gn.contiguous = False
            gn.epoch += 1
        if ev["ts_ms"] > gn.ts:
            gn.ts = ev["ts_ms"]
        gn.last_inc, gn.last_seq = inc, seq
        return gn

    def _on_state(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        gn = self._node(node, ev)
        safety = self.safety
        g, lv, loi, status = ev["gen"], ev["last_vote"], ev["last_online_in"], ev["status"]
        m = g["num"]
        members, configured = members_of(g["members"]), members_of(g["configured"])
        if ev["cause"] == "vote":
            safety.vote_granted(gn, node, ev, src)
        safety.regression(gn, node, {"gen.num": m, "last_vote.num": lv["num"],
                                     "last_online_in": loi}, ev, src)
        why = _inconsistent(m, lv["num"], loi)
        if not ev["donors"]:
            why.append("no donors")
        if (status == "ONLINE") != (loi == m):
            why.append(f"status {status} with last_online_in {loi} in generation {m}")
        if status == "RECOVERY" and (node not in members or lv["num"] != m):
            why.append("RECOVERY while " + ("not a member" if node not in members
                                            else f"last_vote {lv['num']} is not the generation"))
        safety.inconsistent(node, why, ev, src)
        safety.register(m, members, configured, ev, src)
        if (ev["cause"] in ("switch", "online") and gn.contiguous and gn.report is not None
                and gn.loi < loi):
            gen = safety.gens.get(loi)
            if gen is not None:
                safety.went_online(gn, node, loi, gen.members, gen.configured, ev, src)
                if ev["cause"] == "online":
                    self.held.register(node, loi, ev, src, self.nodes)
        if (m, status) != (gn.gen, gn.status):
            gn.since = ev["ts_ms"]
        gn.gen, gn.status, gn.loi = m, status, loi
        self.wedges.seen(ev["ts_ms"], status == "ONLINE")
        vote = [lv["num"], list(members_of(lv["members"])), list(members_of(lv["configured"]))]
        if vote != gn.vote:
            gn.vote, gn.vote_ts = vote, ev["ts_ms"]
        gn.report, gn.contiguous = self.ctx.ref(ev, src), True

    def _on_heartbeat(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        gn = self._node(node, ev)
        ns.suspects = tuple(ev["suspects"])
        gen, lv, loi = ev["gen_num"], ev["last_vote_num"], ev["last_online_in"]
        self.safety.regression(gn, node, {"gen.num": gen, "last_vote.num": lv,
                                          "last_online_in": loi}, ev, src)
        self.safety.inconsistent(node, _inconsistent(gen, lv, loi), ev, src)
        gn.node_status = ev["node_status"]
        self.wedges.seen(ev["ts_ms"], gn.node_status == "online")
        gn.gen, gn.loi = gen, loi
        gn.report, gn.contiguous = self.ctx.ref(ev, src), True

    def _on_xact(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        self._node(node, ev)
        self.safety.xact(node, ev, src)

    # -- what the group monitor asks ---------------------------------------------------------------
    def _current(self) -> Gen | None:
        gens = self.safety.gens
        return gens[max(gens)] if gens else None

    def members(self) -> tuple[str, ...] | None:
        """The configured nodes of the highest generation reported (None: none yet)."""
        cur = self._current()
        return None if cur is None else cur.configured

    def quorum_set(self) -> tuple[tuple[str, ...], int] | None:
        """The configured nodes of the highest generation reported and their majority (mtm's
        ``Quorum``: more than half of the configured nodes; one of two, since a two-node cluster
        may run with a referee and the monitor cannot see it). Counted by silence only
        (``suspicions`` is False): during a campaign every node may be isolated for a few seconds,
        legally (docs/families.md 2.7, the GEN_NO_ONLINE near miss), and isolated nodes keep
        publishing, while crashed ones fall silent."""
        cur = self._current()
        if cur is None:
            return None
        n = len(cur.configured)
        return cur.configured, 1 if n == 2 else majority(n)

    def deadline(self) -> int | None:
        gens = self.safety.gens
        return self.wedges.deadline(self._current(), self.nodes, max(gens) if gens else -1)

    def settle(self, *, final: bool = False) -> None:
        """GEN_ONLINE_UNRECOVERED (b), held for its source's history (``held.py``)."""
        self.held.settle(self.nodes, final=final)

    def evaluate(self) -> None:
        gens = self.safety.gens
        self.wedges.evaluate(self._current(), self.nodes, max(gens) if gens else -1)
        self.safety.prune(self.ctx.clock)

    def flush(self) -> None:
        self.settle(final=True)

    # -- reading the state -----------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """The current generation and each node (docs/families.md 5.2)."""
        cur = self._current()
        config = None if cur is None else {
            "num": cur.num, "members": list(cur.members), "configured": list(cur.configured),
            "minority": len(cur.members) < majority(len(cur.configured)),
            "election": self._election(cur.num)}
        configured = () if cur is None else cur.configured
        nodes = self.ctx.nodes
        # The fields every family's node has (member, incarnation, status, last event, suspects,
        # silent: the tables' columns, docs/postgres.md), then the generations' own.
        return {"family": GEN, "config": config, "config_version": None if cur is None else cur.num,
                "nodes": {
            node: {"member": node in configured, "incarnation": ns.inc if ns else None,
                   "status": gn.status or None, "last_ts_ms": ns.last_ts if ns else None,
                   "suspects": list(ns.suspects) if ns else [],
                   "silent": ("silent:" + node) in self.ctx.open,
                   "gen": gn.gen, "node_status": gn.node_status, "last_online_in": gn.loi,
                   "last_vote": gn.vote[0] if gn.vote else None}
            for node, gn in sorted(self.nodes.items()) for ns in (nodes.get(node),)}}

    def _election(self, current: int) -> int | None:
        """The open election: the highest generation above ``current`` that a majority of its
        configured nodes voted for (``last_vote``), which the nodes have not switched to yet
        (docs/families.md 5.2); None when there is none."""
        votes: dict[int, tuple[int, int]] = {}
        for gn in self.nodes.values():
            if gn.vote and gn.vote[0] > current:
                count, size = votes.get(gn.vote[0], (0, len(gn.vote[2])))
                votes[gn.vote[0]] = (count + 1, size)
        held = [num for num, (count, size) in votes.items() if size and count >= majority(size)]
        return max(held, default=None)

    def dump(self, shared: dict[str, Any]) -> dict[str, Any]:
        s = self.safety
        return {**shared,
                "gen_nodes": {n: {k: getattr(gn, k) for k in _NODE_FIELDS} for n, gn in self.nodes.items()},
                "gens": [[g.num, list(g.members), list(g.configured), g.first] for g in s.gens.values()],
                "xacts": dict(s.xacts),
                "committed": [[m, *v] for m, v in s.committed.items()],
                "switches": [list(e) for e in s.switches],
                "wedges": self.wedges.dump(),
                "held": [list(e) for e in self.held.pending]}

    def load(self, d: dict[str, Any]) -> None:
        s = self.safety
        self.nodes = {n: GenNode(**v) for n, v in d["gen_nodes"].items()}
        s.gens = {g[0]: Gen(g[0], tuple(g[1]), tuple(g[2]), g[3]) for g in d["gens"]}
        s.xacts = migrate_xacts(d["xacts"])
        s.committed = {c[0]: [c[1], c[2]] for c in d["committed"]}
        s.switches = [list(e) for e in d["switches"]]
        self.wedges.load(d["wedges"])
        self.held.pending = [list(e) for e in d["held"]]


def _inconsistent(gen: int, lv: int, loi: int) -> list[str]:
    """What one report's numbers contradict (TLA LastVoteGECurrentGen; last_online_in <= gen)."""
    why = []
    if lv < gen:
        why.append(f"last_vote {lv} below generation {gen}")
    if loi > gen:
        why.append(f"last_online_in {loi} above generation {gen}")
    return why


def _ignore(ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
    """Events of another family never reach a group's rules (the fleet sends them to the dead
    letters); this is the fallback the handler table needs."""
