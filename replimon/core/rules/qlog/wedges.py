"""The quorum-log family's wedges (docs/families.md 3.5; docs/rules.md, the quorum-log family).

As for the other families, a wedge opens once under a condition key when it has held for its
threshold and resolves when it stops holding; it is measured from the event time it began (never
before the end of the group's last silence, ``quiet_end``) against the time the group has seen
less the skew: the group clock at an event, the outside clock at a timer, so a wedge fires with no
input at all (its deadline joins the group's ``next_timer``).

* QLOG_NO_LEADER (critical): no awake member of M(L) names itself ``leader`` in its latest
  heartbeat, and none has for ``qlog_no_leader_ms``, counted from the latest such heartbeat, the
  install of L and ``quiet_end``. Only members that are not silent and have sent a heartbeat count:
  a group whose members are all silent has NODE_SILENT / GROUP_SILENT instead. Resolves when a
  member names itself leader. Key ("episode", n).
* QLOG_RECOVER_STUCK (warning): a recover episode (replica, new set), opened by ``started``, has
  not seen a Reconf to the new set executed for ``qlog_recover_stuck_ms``; ``failed`` attempts do
  not close it (the client retries: ``recover`` "Completes only if all replicas are online").
  Resolves when a legislature with the new set is installed, or one with a set that is neither
  the old nor the new (another reconfiguration replaced the recovery). A legislature with the old
  set does not end it: every lease request and renewal in halon is a Reconf to the next
  legislature with the same members (``proposeLeaseRequest``), so "another legislature installed"
  would close every episode within a lease period and the wedge could never fire. But a Reconf
  passed (not by the recover path) with the acks of a majority of the old membership after the
  episode opened ends it too: the old members came back, the group has its quorum again, and the
  recovery is abandoned (``recover`` is for a group without quorum: RFC, "The group has no
  quorum"). Key ("recover", replica, leg, new).
"""

from __future__ import annotations

from typing import Any

from replimon.core.rules.base import Context
from replimon.core.rules.liveness import Liveness
from replimon.core.rules.qlog.nodes import Leg, QlogNode

NO_LEADER, STUCK = "qlog_no_leader", "qlog_recover:"


class QlogWedges:
    """The two wedges of one group; what they remember is in ``dump``/``load``."""

    __slots__ = ("ctx", "live", "leader_ts", "episodes")

    def __init__(self, ctx: Context, live: Liveness) -> None:
        self.ctx = ctx
        self.live = live
        self.leader_ts = -1  # latest event time a member of M(L) named itself leader
        # open recover episodes by condition key: [node, leg, new, started ts, old, evidence]
        self.episodes: dict[str, list[Any]] = {}

    def self_leader(self, ts: int) -> None:
        if ts > self.leader_ts:
            self.leader_ts = ts

    def started(self, node: str, leg: int, new: list[str], old: list[str], ts: int,
                evidence: dict[str, Any]) -> None:
        """``node`` took a Recover request from ``old`` to ``new`` (``started``); a retry keeps
        the start."""
        cond = f"{STUCK}{node}:{leg}:{','.join(new)}"
        if cond not in self.episodes:
            self.episodes[cond] = [node, leg, new, ts, old, evidence]

    def installed(self, num: int, members: list[str], ts: int,
                  evidence: list[dict[str, Any]] | None = None) -> None:
        """Legislature ``num`` was installed with ``members`` (sorted; from the executed Reconf or
        a heartbeat's report): close the episodes it completes or replaces (module docstring)."""
        for cond, (node, _leg, new, _start, old, _ev) in list(self.episodes.items()):
            if num > _leg and members != old:
                del self.episodes[cond]
                if cond in self.ctx.open:
                    how = ("the Reconf to it was executed" if members == new
                           else f"legislature {num} was installed")
                    self.ctx.resolve(cond, f"{node}'s recovery to {', '.join(new)} ended: {how}.",
                                     ts, evidence)

    def regained(self, acked: list[str], ts: int, evidence: dict[str, Any]) -> None:
        """A Reconf passed at ``ts`` with ``acked`` (not by the recover path): the episodes
        opened before it whose old membership it was a majority of are over (module docstring)."""
        for cond, (node, _leg, new, start, old, _ev) in list(self.episodes.items()):
            backed = [n for n in old if n in acked]
            if start <= ts and len(backed) >= len(old) // 2 + 1:
                del self.episodes[cond]
                self.ctx.resolve(cond, f"{node}'s recovery to {', '.join(new)} was abandoned: "
                                 f"{', '.join(sorted(backed))} of the old membership passed a "
                                 "Reconf, so the group has its quorum again.", ts, [evidence])

    # -- evaluation ------------------------------------------------------------------------------
    def evaluate(self, cur: Leg | None, nodes: dict[str, QlogNode]) -> None:
        ctx = self.ctx
        lim = ctx.limits
        now = max(ctx.clock, ctx.ext) - lim.skew_ms
        if cur is not None:
            self._no_leader(cur, nodes, now, lim.qlog_no_leader_ms)
        for cond, (node, leg, new, start, _then, evidence) in self.episodes.items():
            since = max(start, ctx.quiet_end)
            if now - since >= lim.qlog_recover_stuck_ms and cond not in ctx.open:
                ctx.fire(cond, "QLOG_RECOVER_STUCK", ("recover", node, leg, tuple(new)),
                         f"{node}'s recovery of legislature {leg} to {', '.join(new)} started "
                         f"over {lim.qlog_recover_stuck_ms // 1000} s ago and no Reconf to it was "
                         "executed: recovery completes only when every new replica is online.",
                         start, instance=leg, node=node, evidence=[evidence])

    def deadline(self, cur: Leg | None, nodes: dict[str, QlogNode]) -> int | None:
        ctx = self.ctx
        lim = ctx.limits
        times: list[int] = []
        if cur is not None and NO_LEADER not in ctx.open and self._leaderless(cur, nodes):
            times.append(self._since(cur) + lim.qlog_no_leader_ms)
        for cond, entry in self.episodes.items():
            if cond not in ctx.open:
                times.append(max(entry[3], ctx.quiet_end) + lim.qlog_recover_stuck_ms)
        return min(times) + lim.skew_ms if times else None

    def _awake(self, cur: Leg, nodes: dict[str, QlogNode]) -> list[str]:
        open_ = self.ctx.open
        return [n for n in cur.members
                if (qn := nodes.get(n)) is not None and qn.hb and ("silent:" + n) not in open_]

    def _leaderless(self, cur: Leg, nodes: dict[str, QlogNode]) -> bool:
        awake = self._awake(cur, nodes)
        return bool(awake) and not any(nodes[n].leader == n for n in awake)

    def _since(self, cur: Leg) -> int:
        return max(self.leader_ts, cur.ts, self.ctx.quiet_end)

    def _no_leader(self, cur: Leg, nodes: dict[str, QlogNode], now: int, limit: int) -> None:
        # RFC "Description" (the group passes decrees through its leader); Internal.hs
        # ``getLeader`` (the lease holder) and the lease timer: a member without a leader asks for
        # the lease (``proposeLeaseRequest``), so a group whose members stay leaderless cannot
        # pass anything. Liveness: some member of M(L) holds the lease.
        ctx = self.ctx
        if not self._leaderless(cur, nodes):
            if NO_LEADER in ctx.open:
                leaders = sorted(n for n in self._awake(cur, nodes) if nodes[n].leader == n)
                why = (f"{', '.join(leaders)} holds the lease." if leaders
                       else "every member that reports is silent (NODE_SILENT).")
                ctx.resolve(NO_LEADER, why, ctx.clock)
            return
        since = self._since(cur)
        if now - since >= limit and NO_LEADER not in ctx.open:
            awake = self._awake(cur, nodes)
            believed = ", ".join(f"{n}: {nodes[n].leader or 'none'}" for n in awake)
            ctx.fire(NO_LEADER, "QLOG_NO_LEADER", ("episode", self.live.episode(NO_LEADER)),
                     f"No member of legislature {cur.num} ({', '.join(cur.members)}) has held the "
                     f"lease for over {limit // 1000} s (leaders believed in: {believed}): the "
                     "group passes no decrees.",
                     since, instance=cur.num,
                     evidence=[r for n in awake if (r := nodes[n].report) is not None][:9])

    # -- saved state --------------------------------------------------------------------------------
    def dump(self) -> list[Any]:
        return [self.leader_ts, [[k, *v] for k, v in self.episodes.items()]]

    def load(self, d: list[Any]) -> None:
        self.leader_ts = d[0]
        self.episodes = {e[0]: list(e[1:]) for e in d[1]}
