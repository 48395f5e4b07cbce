"""GEN_ONLINE_UNRECOVERED (b), the generations rule that waits for more input (docs/families.md
2.4 and 2.6; docs/rules.md, "GEN_ONLINE_UNRECOVERED").

A node r that goes ONLINE in m on a ParallelSafe record from s relies on s having been ONLINE in
m: s logs PS<m> only when it gets online in m, and the record is only in s's own WAL
(``MtmHandleParallelSafe``; seed, induction: online "until ParallelSafe<n>"; TLA GetOnline). s
logged it before r applied it, so s's ONLINE report has ``ts <= r.ts + skew``, but it may arrive
after r's. The verdict therefore waits for s's own history: it is given only if the monitor holds
s's events with no gap from a state in which s was not yet ONLINE in m (at r's report) through an
event stamped after ``r.ts + skew``, with no ONLINE in m among them. A gap in s's history, a
history that starts later, or the end of input before that event gives no verdict: a rule that
could fire on a correct group is worse than a missing one.
"""

from __future__ import annotations

from typing import Any

from replimon.core.rules.base import Context, Src
from replimon.core.rules.gen.nodes import GenNode


class HeldOnline:
    """The ParallelSafe transitions waiting for their source's history: ``[r, m, s, r_ts,
    s_epoch, evidence]``."""

    __slots__ = ("ctx", "pending")

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.pending: list[list[Any]] = []

    def register(self, node: str, m: int, ev: dict[str, Any], src: Src, nodes: dict[str, GenNode]) -> None:
        """``node`` went ONLINE in ``m`` by ``ev`` (cause ``online``): hold the check of its source."""
        s = ev.get("source")
        if ev.get("via") != "parallel_safe" or s is None or s == node:
            return
        gs = nodes.get(s)
        if gs is None or gs.report is None or gs.max_loi >= m:
            return  # no history of s to judge from, or s was already ONLINE in m (or later)
        self.pending.append([node, m, s, ev["ts_ms"], gs.epoch, self.ctx.ref(ev, src)])

    def settle(self, nodes: dict[str, GenNode], *, final: bool = False) -> None:
        if not self.pending:
            return
        ctx = self.ctx
        skew = ctx.limits.skew_ms
        keep = []
        for entry in self.pending:
            node, m, s, r_ts, epoch, evidence = entry
            gs = nodes[s]
            if gs.max_loi >= m or gs.epoch != epoch:
                continue  # s was ONLINE in m after all, or its history has a gap: no verdict
            if gs.ts <= r_ts + skew:
                if not final:
                    keep.append(entry)
                continue
            ctx.violation(
                "GEN_ONLINE_UNRECOVERED", (node, m),
                f"{node} got ONLINE in generation {m} on a ParallelSafe record from {s}, but {s} "
                f"was never ONLINE in generation {m} (its reports run without a gap until "
                f"{gs.ts}, past {node}'s {r_ts} plus the skew): ParallelSafe<{m}> is logged only "
                f"by a node that gets online in {m}.",
                r_ts, instance=m, node=node,
                evidence=[evidence] + ([gs.report] if gs.report is not None else []))
        self.pending = keep
