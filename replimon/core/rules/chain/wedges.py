"""The chain family's wedges (docs/families.md 4.5; docs/rules.md, the chain family).

As for the other families, a wedge opens once under a condition key when it has held for its
threshold and resolves when it stops holding; it is measured from the event time it began (never
before the end of the group's last silence, ``quiet_end``) against the time the group has seen
less the skew: the group clock at an event, the outside clock at a timer, so each fires with no
input at all (its deadline joins the group's ``next_timer``). An install whose time lies inside
the bound and arrives up to the skew late still prevents them.

* CHAIN_WEDGE_NOT_REPLACED (critical): a replica wedged epoch e at time w and no replica
  installed (or reported) an epoch above e by ``now - skew - w >= chain_wedge_ms``. Key
  ("wedge", e). Resolves on any install of an epoch above e.
* CHAIN_LEASE_EXPIRED (warning): a member of C(E) whose latest renewal r (its ``chain.heartbeat``)
  is older than its own ``ttl_ms``: ``now - skew - r > ttl_ms``. The TTL is the event's, never an
  assumed one. Key (node, r). Resolves on a renewal, or a view without it.
* CHAIN_VIEW_STALE (critical): that lease expired at x = r + ttl_ms and no view without the node
  is installed by ``now - skew - x >= chain_view_stale_ms``: the chain cannot commit. Key
  (node, x). Resolves like the lease.
"""

from __future__ import annotations

from typing import Any

from replimon.core.rules.base import Context
from replimon.core.rules.chain.nodes import ChainNode, View

WEDGE, LEASE, STALE = "chain_wedge:", "chain_lease:", "chain_stale:"


class ChainWedges:
    """The three wedges of one group; what they remember is in ``dump``/``load``."""

    __slots__ = ("ctx", "wedges")

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.wedges: dict[int, list[Any]] = {}  # epoch -> [earliest wedge time, node, evidence]

    def wedged(self, epoch: int, top: int, ts: int, node: str, evidence: dict[str, Any]) -> None:
        """``node`` wedged ``epoch`` at ``ts``; ``top`` is the highest epoch known installed (a
        wedge of an epoch already replaced needs nothing more)."""
        if epoch < top:
            return
        known = self.wedges.get(epoch)
        if known is None:
            self.wedges[epoch] = [ts, node, evidence]
        elif ts < known[0] and (WEDGE + str(epoch)) not in self.ctx.open:
            known[:] = [ts, node, evidence]

    def installed(self, epoch: int, node: str, ts: int) -> None:
        """An epoch was installed (or reported): the wedges of lower epochs are replaced."""
        for e in [e for e in self.wedges if e < epoch]:
            del self.wedges[e]
            self.ctx.resolve(WEDGE + str(e), f"{node} installed epoch {epoch}, which replaces the "
                             f"wedged epoch {e}.", ts)

    def renewed(self, node: str, ts: int) -> None:
        """``node`` renewed its lease at ``ts``."""
        for cond in (LEASE + node, STALE + node):
            self.ctx.resolve(cond, f"{node} renewed its lease.", ts)

    # -- evaluation ------------------------------------------------------------------------------
    def evaluate(self, cur: View | None, nodes: dict[str, ChainNode]) -> None:
        ctx = self.ctx
        lim = ctx.limits
        now = max(ctx.clock, ctx.ext) - lim.skew_ms
        for e, (w, node, evidence) in self.wedges.items():
            # Seed "Wedging": after a wedge an external view manager must choose the next view and
            # give it to the new members; the paper's §4.7 as the seed reports it: the sequencer
            # then reconfigures the wedged shard. A wedged epoch that no view replaces stops
            # the chain. (The code has no wedging; views.rs only writes the views it is given.)
            cond = WEDGE + str(e)
            if cond not in ctx.open and now - max(w, ctx.quiet_end) >= lim.chain_wedge_ms:
                ctx.fire(cond, "CHAIN_WEDGE_NOT_REPLACED", ("wedge", e),
                         f"{node} wedged epoch {e} over {lim.chain_wedge_ms // 1000} s ago and no "
                         "view with a higher epoch was installed: the chain accepts no writes.",
                         w, instance=e, node=node, evidence=[evidence])
        members = [] if cur is None else cur.chain
        for cond in [c for c in ctx.open if c.startswith((LEASE, STALE))]:
            if cond.partition(":")[2] not in members:
                ctx.resolve(cond, f"epoch {cur.epoch if cur else '?'} is a view without "
                            f"{cond.partition(':')[2]}.", ctx.clock)
        for m in members:
            cn = nodes.get(m)
            if cn is None or cn.renewed < 0:
                continue  # never reported a lease: NODE_SILENT's business
            since = max(cn.renewed, ctx.quiet_end)
            # Evidence and message name the renewal, not the latest report nor how long ago it
            # was: they do not depend on when the evaluation ran (live batches, replay, check).
            ev = [cn.lease] if cn.lease is not None else []
            # etcd.rs: each member holds a slot created ``create_in_order`` with ``TTL`` (2 s) and
            # renewed every ``TTL / 2`` (``maybe_sleep``, ``maybe_send_hb``); seed "View changes":
            # replicas stay members by renewing a lease. The TTL judged is the event's.
            if now - since > cn.ttl and (LEASE + m) not in ctx.open:
                ctx.fire(LEASE + m, "CHAIN_LEASE_EXPIRED", (m, cn.renewed),
                         f"{m}, a member of epoch {cur.epoch if cur else '?'}, did not renew its "
                         f"{cn.ttl} ms lease within {cn.ttl} ms (plus the {lim.skew_ms} ms skew "
                         "allowance) of its last renewal.",
                         cn.renewed, node=m, evidence=ev)
            # Seed "View changes": the configuration manager sends a changed topology to the
            # head; etcd.rs: a slot whose TTL ran out comes as a ``WatchEvent::Dead`` and leaves
            # the member list (``update_view``) from which the next view is assembled
            # (``current_view``). A chain needs every member to commit, so a dead member left in
            # the view stops it.
            if now - (since + cn.ttl) >= lim.chain_view_stale_ms and (STALE + m) not in ctx.open:
                ctx.fire(STALE + m, "CHAIN_VIEW_STALE", (m, cn.renewed + cn.ttl),
                         f"{m}'s lease expired over {lim.chain_view_stale_ms // 1000} s ago and no "
                         f"view without it was installed after epoch {cur.epoch if cur else '?'}: "
                         "the chain cannot commit.", cn.renewed + cn.ttl, node=m, evidence=ev)

    def deadline(self, cur: View | None, nodes: dict[str, ChainNode]) -> int | None:
        ctx = self.ctx
        lim = ctx.limits
        times = [max(w, ctx.quiet_end) + lim.chain_wedge_ms
                 for e, (w, _n, _ev) in self.wedges.items() if (WEDGE + str(e)) not in ctx.open]
        for m in [] if cur is None else cur.chain:
            cn = nodes.get(m)
            if cn is None or cn.renewed < 0:
                continue
            since = max(cn.renewed, ctx.quiet_end)
            if (LEASE + m) not in ctx.open:
                times.append(since + cn.ttl + 1)
            if (STALE + m) not in ctx.open:
                times.append(since + cn.ttl + lim.chain_view_stale_ms)
        return min(times) + lim.skew_ms if times else None

    # -- saved state --------------------------------------------------------------------------------
    def dump(self) -> list[Any]:
        return [[e, *v] for e, v in self.wedges.items()]

    def load(self, d: list[Any]) -> None:
        self.wedges = {e[0]: list(e[1:]) for e in d}
