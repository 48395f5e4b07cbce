"""QLOG_RECONF_WITHOUT_OLD_QUORUM and QLOG_DECREE_WITHOUT_QUORUM: a decree passed without a
majority of its own legislature (docs/families.md 3.4 and 3.6; docs/rules.md, the quorum-log
family).

A ``qlog.passed`` for decree (l, k) names the acceptors whose phase-2 acks its proposer counted
(``acked``). The decree is safe only if those include a majority of M(l), the membership of
legislature l (``expectQuorum`` of halon's ``Quorum.hs``: ``n div 2 + 1``). M(l) is learned from
other replicas (an executed Reconf opening l, or a heartbeat), whose reports may arrive after the
proposer's by up to the skew: when M(l) is not known yet, the verdict waits until the watermark
passes the event's time plus the skew, and is skipped if M(l) is still unknown then (a history
that starts after l was installed). A rule that could fire on a correct group is worse than a
missing one.

Not judged here: rounds of the recover path (``recovery`` true: QLOG_RECOVER_UNSYNCED judges
them), and rounds of a proposer that synced a recovery whose Reconf has not executed yet, when
``acked`` is a majority of that recovery's new membership: halon's go/Recover hands the proposer
the new acceptors (``updateAcceptors ρs'``) before the Reconf is executed, and every round it
makes until then (lease requests included, not only the recovery's own) uses them.
"""

from __future__ import annotations

from typing import Any

from replimon.core.rules.base import Context
from replimon.core.rules.qlog.nodes import Leg, majority

HELD_KEPT = 1024  # verdicts waiting for their legislature, at most


class HeldQuorum:
    """The passed decrees waiting for their legislature's membership:
    ``[ts, leg, num, kind, acked, node, evidence]``."""

    __slots__ = ("ctx", "pending")

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.pending: list[list[Any]] = []

    def passed(self, ev: dict[str, Any], evidence: dict[str, Any], legs: dict[int, Leg]) -> None:
        """Judge a non-recovery ``qlog.passed`` now if M(l) is known, else hold it."""
        entry = [ev["ts_ms"], ev["leg"], ev["num"], ev["kind"], sorted(ev["acked"]), ev["node"],
                 evidence]
        leg = legs.get(ev["leg"])
        if leg is not None:
            self._judge(entry, leg)
            return
        self.pending.append(entry)
        del self.pending[:-HELD_KEPT]

    def settle(self, legs: dict[int, Leg], *, final: bool = False) -> None:
        if not self.pending:
            return
        due = self.ctx.watermark - self.ctx.limits.skew_ms
        keep = []
        for entry in self.pending:
            leg = legs.get(entry[1])
            if leg is not None:
                self._judge(entry, leg)
            elif not final and entry[0] > due:
                keep.append(entry)
            # else: M(l) never became known: no verdict
        self.pending = keep

    def _judge(self, entry: list[Any], leg: Leg) -> None:
        ts, leg_id, k, kind, acked, node, evidence = entry
        members = set(leg.members)
        hits = sorted(members.intersection(acked))
        need = majority(len(members))
        if len(hits) >= need:
            return
        if kind == "reconf":
            # RFC "The group has quorum": a reconfiguration passes with the old membership, not
            # the intersection of the old and new acceptors, which removes situation (2); RFC
            # "Consensus and replicated-log API changes": ``reconfigure`` succeeds only with a
            # quorum, as Internal.hs ``reconfigure`` documents.
            kind_name, what = "QLOG_RECONF_WITHOUT_OLD_QUORUM", "Reconf"
        else:
            # RFC situation (2): any decree passed with the delayed replicas alone as its quorum
            # makes the copies diverge; BasicPaxos ``propose`` waits for
            # ``expectQuorum`` acks of the legislature's acceptors.
            kind_name, what = "QLOG_DECREE_WITHOUT_QUORUM", "values decree"
        self.ctx.violation(
            kind_name, ("decree", leg_id, k),
            f"{node} passed {what} ({leg_id}, {k}) acked by {', '.join(acked) or 'none'}: "
            f"{len(hits)} of legislature {leg_id}'s {len(members)} members "
            f"({', '.join(sorted(members))}), not the majority of {need}.",
            ts, instance=k, node=node, evidence=[evidence, leg.first])
