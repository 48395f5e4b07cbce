"""The quorum-log family's safety rules that need no clock (docs/families.md 3.4; violations,
never resolve).

Judged per replica, in its own seq order (duty 1: halon's replica loop is single-threaded, so a
replica's seq order is the order of its state changes): QLOG_OBSOLETE_DECREE_EXECUTED,
QLOG_RECOVER_UNSAFE, QLOG_RECOVER_UNSYNCED, QLOG_LEGISLATURE_REGRESSION. Set facts, judged
whichever side arrives first: QLOG_DIVERGENT_DECREE in its three forms. QLOG_RECONFIGURED (info)
marks the first execution of each Reconf for the timeline. The two quorum rules of passed decrees
need a legislature's membership from other replicas and wait for it (``quorum.py``).

"RFC" is halon's RFC 014 (docs/sources.md); the code cited is halon's
``replicated-log/src/Control/Distributed/Log/Internal.hs`` ("Internal.hs") and
``consensus-paxos``' BasicPaxos, as docs/families.md section 0 lists them.
"""

from __future__ import annotations

from typing import Any

from replimon.core.rules.base import Context, Src
from replimon.core.rules.qlog.nodes import (
    RECONFS_KEPT,
    RECOVERS_KEPT,
    Leg,
    QlogNode,
    describe,
    members_of,
    value_of,
)

LEGS_KEPT = 64  # legislatures remembered (docs/families.md 3.3)
DECREES_KEPT = 4096  # executed and passed values remembered at most, whatever the floor


class QlogSafety:
    """The group's legislatures, executed and passed values, and the rules over them."""

    __slots__ = ("ctx", "legs", "decrees", "passed")

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.legs: dict[int, Leg] = {}
        self.decrees: dict[int, list[Any]] = {}  # number -> [value, node, evidence] first executed
        self.passed: dict[tuple[int, int], list[Any]] = {}  # (leg, number) -> [value, evidence]

    @property
    def current(self) -> Leg | None:
        """L, the highest legislature installed (executed by a replica, or reported by one)."""
        return self.legs[max(self.legs)] if self.legs else None

    # -- the membership map ----------------------------------------------------------------------
    def install(self, num: int, members: list[str], ev: dict[str, Any], src: Src, *,
                executed: bool) -> None:
        """Legislature ``num`` has ``members``: an executed Reconf opening it (``executed``) or a
        replica's heartbeat. QLOG_RECONFIGURED on the first execution, QLOG_DIVERGENT_DECREE (c)
        when two installs disagree on the member set."""
        ctx = self.ctx
        here = ctx.ref(ev, src)
        known = self.legs.get(num)
        if known is None:
            if self.legs and num < min(self.legs) and len(self.legs) >= LEGS_KEPT:
                return  # older than anything remembered: nothing left to compare it with
            known = self.legs[num] = Leg(num, list(members), ev["ts_ms"], here)
            if len(self.legs) > LEGS_KEPT:
                del self.legs[min(self.legs)]
        elif members_of(known.members) != members_of(members):
            # RFC "Constraints" (the replicated state, membership included, is the same in all
            # replicas) and situation (2); Internal.hs: a legislature is opened by one executed
            # Reconf (the execute branch runs a Reconf only when it opens a newer legislature
            # than the replica's, so no replica installs two for one legislature, and agreement
            # gives every replica the same one). A passed but skipped Reconf installs nothing.
            # Sets, not lists: a same-set Reconf only moves the preferred leader.
            ctx.violation(
                "QLOG_DIVERGENT_DECREE", ("leg", num),
                f"Legislature {num} is installed by {ev['node']} with members "
                f"{', '.join(sorted(members))}, but was installed before with "
                f"{', '.join(sorted(known.members))}: one legislature has one membership.",
                ev["ts_ms"], instance=num, node=ev["node"], evidence=[known.first, here])
        if executed and not known.executed:
            known.executed = True
            # The timeline: the first execution of the Reconf opening ``num`` (Internal.hs
            # "Reconfiguring"), when it changes the ordered member list (who is in, who leads).
            # Halon renews a leader's lease by a Reconf to the same list every few seconds
            # (``proposeLeaseRequest``): marking those would bury the timeline.
            before = self._before(num)
            if before is None or before.members != known.members:
                ctx.violation(
                    "QLOG_RECONFIGURED", ("leg", num),
                    f"Legislature {num} installed by {ev['node']}: members "
                    f"{', '.join(known.members)} (preferred leader {known.members[0]})"
                    + ("." if before is None else f"; legislature {before.num} had "
                       f"{', '.join(before.members)}."),
                    ev["ts_ms"], instance=num, node=ev["node"], evidence=[here])

    def _before(self, num: int) -> Leg | None:
        """The highest legislature below ``num`` this monitor knows (None: none)."""
        lower = [n for n in self.legs if n < num]
        return self.legs[max(lower)] if lower else None

    # -- per replica --------------------------------------------------------------------------------
    def legislature(self, qn: QlogNode, node: str, leg: int, ev: dict[str, Any], src: Src) -> None:
        """QLOG_LEGISLATURE_REGRESSION: ``node`` reports legislature ``leg``, lower than it did
        before (any incarnation)."""
        # Internal.hs, replica start: the membership is persisted and "We adopt the membership
        # list with the highest legislature"; a replica's legislature only grows in the execute
        # branch ("Reconfiguring"). Once per replica and incarnation: a replica that started from
        # a stale membership repeats it in every heartbeat (docs/rules.md, the family's section).
        if 0 <= leg < qn.max_leg:
            self.ctx.violation(
                "QLOG_LEGISLATURE_REGRESSION", (node, ev["incarnation"]),
                f"{node} reports legislature {leg}, lower than the {qn.max_leg} it reported "
                "before: the membership is persisted and a replica adopts the highest "
                "legislature it knows.",
                ev["ts_ms"], instance=leg, node=node,
                evidence=[e for e in (qn.report, self.ctx.ref(ev, src)) if e is not None])
        qn.leg = leg
        if leg > qn.max_leg:
            qn.max_leg = leg

    def decree(self, qn: QlogNode, node: str, ev: dict[str, Any], src: Src) -> None:
        """A replica's watermark passed decree ``num`` (``qlog.decree``)."""
        ctx = self.ctx
        k, here = ev["num"], ctx.ref(ev, src)
        value = value_of(ev)
        self._executed_value(k, value, node, ev, here)
        if ev["outcome"] != "executed":
            return
        last = qn.reconf_below(k)
        obsolete = last is not None and self._obsolete(node, k, last, ev, here)
        if ev["kind"] == "reconf":
            new_leg = ev["new_leg"]
            if not obsolete:
                # (An obsolete Reconf's lower legislature is that alert's, not a regression.)
                qn.reconfs = [e for e in qn.reconfs if e[0] != k]
                qn.reconfs.append([k, new_leg])
                qn.reconfs.sort()
                del qn.reconfs[:-RECONFS_KEPT]
                self.legislature(qn, node, new_leg, ev, src)
            self.install(new_leg, ev["members"], ev, src, executed=True)

    def _executed_value(self, k: int, value: list[Any], node: str, ev: dict[str, Any],
                        here: dict[str, Any]) -> None:
        # QLOG_DIVERGENT_DECREE (a). RFC "Constraints" (every replica ends with the same state)
        # and situation (2) (D and E pass a Reconf at a number already passed on A,
        # B, C); Internal.hs executes a decree only at the watermark's number from the stored
        # log, so two replicas that execute number k execute its one chosen value. A skipped
        # Reconf is still the value stored at k, and is compared too.
        known = self.decrees.get(k)
        if known is None:
            self.decrees[k] = [value, node, here]
            if len(self.decrees) > DECREES_KEPT:
                del self.decrees[min(self.decrees)]
            return
        if known[0] != value:
            self.ctx.violation(
                "QLOG_DIVERGENT_DECREE", ("decree", k),
                f"Decree {k} is {describe(value)} on {node} but {describe(known[0])} on "
                f"{known[1]}: replicas executed different values at one number.",
                ev["ts_ms"], instance=k, node=node, evidence=[known[2], here])

    def _obsolete(self, node: str, k: int, last: list[int], ev: dict[str, Any],
                  here: dict[str, Any]) -> bool:
        # QLOG_OBSOLETE_DECREE_EXECUTED. RFC situation (1) ("computing the intersection with an
        # obsolete membership"); Internal.hs Note [Teleportation] (a decree is reachable only in
        # a legislature at or above the one the last Reconf opened; "Skipping decree" drops the
        # others: ``di < max w w{decreeLegislatureId = ...}``) and the execute branch ("Only
        # execute a reconfiguration if we are on an earlier configuration"). A teleported decree
        # (no ``leg``: maxBound) is always reachable.
        at, opened = last
        leg = ev.get("leg")
        why = None
        if leg is not None and leg < opened:
            why = (f"it was passed in legislature {leg}, below the legislature {opened} that the "
                   f"Reconf {node} executed at {at} opened: the decree is unreachable")
        elif ev["kind"] == "reconf" and ev["new_leg"] <= opened:
            why = (f"it is a Reconf to legislature {ev['new_leg']}, not above the legislature "
                   f"{opened} that the Reconf {node} executed at {at} opened")
        if why is not None:
            self.ctx.violation(
                "QLOG_OBSOLETE_DECREE_EXECUTED", (node, k),
                f"{node} executed decree {k} though {why}.",
                ev["ts_ms"], instance=k, node=node, evidence=[here])
        return why is not None

    def passed_value(self, ev: dict[str, Any], src: Src) -> None:
        """QLOG_DIVERGENT_DECREE (b): two successful rounds for one decree id disagree."""
        # BasicPaxos agreement: once a value is chosen for (leg, num) every later round chooses
        # it (``chooseValue``; the Promela model's ``checkAgreement``); RFC "Constraints".
        key = (ev["leg"], ev["num"])
        value, here = value_of(ev), self.ctx.ref(ev, src)
        known = self.passed.get(key)
        if known is None:
            self.passed[key] = [value, here]
            if len(self.passed) > DECREES_KEPT:
                del self.passed[min(self.passed, key=lambda lk: (lk[1], lk[0]))]
            return
        if known[0] != value:
            self.ctx.violation(
                "QLOG_DIVERGENT_DECREE", ("passed", key[0], key[1]),
                f"Decree ({key[0]}, {key[1]}) passed as {describe(value)} by {ev['node']} but as "
                f"{describe(known[0])} by {known[1]['node']}: one decree id has one value.",
                ev["ts_ms"], instance=key[1], node=ev["node"], evidence=[known[1], here])

    # -- recover ------------------------------------------------------------------------------------
    def recover(self, qn: QlogNode, node: str, ev: dict[str, Any], src: Src) -> None:
        """A ``qlog.recover`` of the replica serving a Recover request."""
        self.legislature(qn, node, ev["leg"], ev, src)
        new = list(members_of(ev["new"]))
        entry = qn.recover(new)
        if entry is None:
            entry = [new, ev["leg"], False, False]
            qn.recovers.append(entry)
            del qn.recovers[:-RECOVERS_KEPT]
        if ev["phase"] != "synced":
            return
        entry[1] = ev["leg"]
        entry[2] = entry[2] or set(ev["synced_with"]) >= set(new)
        entry[3] = False  # a new sync: the Reconf it leads to is still to come
        # QLOG_RECOVER_UNSAFE. RFC "The group has no quorum": the new membership must keep half
        # or more of the old replicas, a replica relocated from an old one's state counting as
        # that one; the ``recover`` doc of Internal.hs states the same condition. go/Recover does
        # not check it, so the monitor does, once the acceptors are synced.
        old = set(ev["old"])
        moved = {r["from"]: r["node"] for r in ev.get("relocated", ())}
        old_star = {moved.get(n, n) for n in old}
        kept = old_star & set(new)
        if 2 * len(kept) < len(old):
            self.ctx.violation(
                "QLOG_RECOVER_UNSAFE", ("recover", node, ev["leg"], tuple(new)),
                f"{node} synced a recovery of legislature {ev['leg']} from {', '.join(sorted(old))} "
                f"to {', '.join(new)}, which keeps {len(kept)} of the {len(old)} old replicas "
                f"({', '.join(sorted(kept)) or 'none'}, relocated ones counted as their source): "
                "at least half must take part, or passed decrees can be lost.",
                ev["ts_ms"], instance=ev["leg"], node=node, evidence=[self.ctx.ref(ev, src)])

    def recovery_passed(self, qn: QlogNode, node: str, ev: dict[str, Any], src: Src) -> None:
        """QLOG_RECOVER_UNSYNCED: a round of the recover path (``recovery`` true) by ``node``."""
        # RFC "The group has no quorum": only once every acceptor of the new membership is online
        # and their accepted decrees have been scanned and spread to a quorum may the new
        # membership be submitted; the ``prl_sync`` doc needs every acceptor online for the scan;
        # Internal.hs go/Recover proposes (``proposeLeaseRequest``) only after "recovery
        # synchronized acceptors". The new membership is the Reconf's member set, or the
        # acceptors when Paxos chose an earlier value (``chooseValue``) in the round.
        sets = [list(members_of(ev["acceptors"]))]
        if ev["kind"] == "reconf":
            sets.insert(0, list(members_of(ev["members"])))
        synced = next((e for s in sets if (e := qn.recover(s)) is not None and e[2]), None)
        acked = set(ev["acked"])
        why = None
        if synced is None:
            why = (f"no earlier recovery on {node} synced every acceptor of "
                   f"{', '.join(sets[0])}")
        elif 2 * len(acked & set(synced[0])) <= len(synced[0]):
            why = (f"it was acked by {', '.join(sorted(acked)) or 'none'}, not a majority of "
                   f"{', '.join(synced[0])}")
        if why is not None:
            self.ctx.violation(
                "QLOG_RECOVER_UNSYNCED", ("decree", ev["leg"], ev["num"]),
                f"{node} passed recovery decree ({ev['leg']}, {ev['num']}) though {why}.",
                ev["ts_ms"], instance=ev["num"], node=node, evidence=[self.ctx.ref(ev, src)])

    @staticmethod
    def recovery_open(qn: QlogNode, acked: list[str]) -> bool:
        """The proposer has a synced recovery whose Reconf has not executed yet and ``acked`` is a
        majority of its new membership (the exemption of the quorum rules, ``quorum.py``)."""
        got = set(acked)
        return any(e[2] and not e[3] and 2 * len(got & set(e[0])) > len(e[0]) for e in qn.recovers)

    # -- bounded state ------------------------------------------------------------------------------
    def prune(self, floor: int) -> None:
        """Forget values at numbers below ``floor`` (the lowest watermark of the members)."""
        if floor <= 0:
            return
        if self.decrees and min(self.decrees) < floor:
            for k in [k for k in self.decrees if k < floor]:
                del self.decrees[k]
        if self.passed:
            for key in [key for key in self.passed if key[1] < floor]:
                del self.passed[key]
