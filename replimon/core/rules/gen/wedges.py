"""The generations family's wedges (docs/families.md 2.5; docs/rules.md, "Generations: wedges").

A wedge is a condition that lasts: it opens once under a condition key when it has held for its
threshold and resolves when it stops holding. Each is measured from the event time it began (never
before the end of the group's last silence, ``quiet_end``) against the time the group has seen,
less the skew: the group clock at an event, the outside clock at a timer, so that a wedge fires
with no input at all (the group's deadline joins ``next_timer``).

* GEN_NO_ONLINE (critical): no configured node that is not silent says, in its latest heartbeat,
  that it is online, for ``gen_no_online_ms``. In mtm a node is online only in a generation whose
  members are a quorum of connected nodes (``MtmGetCurrentStatusInGen``), so this is the family's
  loss of a *connected* quorum, beside QUORUM_AT_RISK / QUORUM_LOST, which count the silent nodes
  (an isolated group passes through short windows without an online node during every campaign;
  the threshold waits them out). A group whose configured nodes are all silent has GROUP_SILENT /
  NODE_SILENT instead.
* GEN_RECOVERY_STUCK (critical): a configured node's latest ``gen.state`` is RECOVERY in m for
  ``gen_recovery_stuck_ms``: commits in m need every member's PREPARE ack, so the group's writes
  wait for it (seed: "others already wait for us"). Key (node, m).
* GEN_VOTE_STUCK (warning): the quorum-th highest ``last_vote.num`` among configured nodes is above
  every ``gen.num`` reported, for ``gen_vote_stuck_ms``: a majority promised a generation nobody
  switched to (TLA ElectNewGen without LearnNewGen). A refused candidate's repeated self-votes do
  not count: refusers keep their own ``last_vote`` (``HandleGenVoteRequest``). Key ("vote", num).
"""

from __future__ import annotations

from typing import Any

from replimon.core.rules.base import Context
from replimon.core.rules.gen.nodes import Gen, GenNode
from replimon.core.rules.liveness import Liveness

NO_ONLINE, VOTE, RECOVERY = "gen_no_online", "gen_vote", "gen_recovery:"


def _majority(n: int) -> int:
    return n // 2 + 1


class GenWedges:
    """The three wedges of one group; what they remember is in ``dump``/``load``."""

    __slots__ = ("ctx", "live", "start", "online_ts", "vote")

    def __init__(self, ctx: Context, live: Liveness) -> None:
        self.ctx = ctx
        self.live = live
        self.start = -1  # event time of the family's first event
        self.online_ts = -1  # latest event time at which a node said it was online
        self.vote: list[int] | None = None  # [num, since] of a promised number nobody switched to

    def seen(self, ts: int, online: bool) -> None:
        """An event at ``ts``; ``online``: it says its node is online."""
        if self.start < 0:
            self.start = ts
        if online and ts > self.online_ts:
            self.online_ts = ts

    # -- evaluation ----------------------------------------------------------------------------
    def evaluate(self, cur: Gen | None, nodes: dict[str, GenNode], max_gen: int) -> None:
        """Open what has held for its threshold, resolve what no longer holds."""
        if cur is None:
            return
        ctx = self.ctx
        lim = ctx.limits
        now = max(ctx.clock, ctx.ext) - lim.skew_ms
        open_ = ctx.open
        awake = [n for n in cur.configured if n in nodes and ("silent:" + n) not in open_]
        self._no_online(awake, nodes, now, lim.gen_no_online_ms)
        for node in cur.configured:
            self._recovery(node, nodes.get(node), node in awake, now, lim.gen_recovery_stuck_ms)
        for cond in [c for c in open_ if c.startswith(RECOVERY) and c[len(RECOVERY):] not in cur.configured]:
            ctx.resolve(cond, f"{cond[len(RECOVERY):]} is no longer configured.", ctx.clock)
        self._vote(cur, nodes, max_gen, now, lim.gen_vote_stuck_ms)

    def deadline(self, cur: Gen | None, nodes: dict[str, GenNode], max_gen: int) -> int | None:
        """The outside-clock time at which a wedge that holds now would open, or None."""
        if cur is None:
            return None
        ctx = self.ctx
        lim = ctx.limits
        open_ = ctx.open
        times: list[int] = []
        awake = [n for n in cur.configured if n in nodes and ("silent:" + n) not in open_]
        if NO_ONLINE not in open_ and self._none_online(awake, nodes):
            times.append(self._since(self.online_ts, self.start) + lim.gen_no_online_ms)
        for node in awake:
            gn = nodes[node]
            if gn.status == "RECOVERY" and (RECOVERY + node) not in open_:
                times.append(self._since(gn.since) + lim.gen_recovery_stuck_ms)
        if self.vote is not None and VOTE not in open_:
            times.append(self._since(self.vote[1]) + lim.gen_vote_stuck_ms)
        return min(times) + lim.skew_ms if times else None

    # -- each wedge ------------------------------------------------------------------------------
    def _since(self, *ts: int) -> int:
        return max(*ts, self.ctx.quiet_end) if ts else self.ctx.quiet_end

    @staticmethod
    def _none_online(awake: list[str], nodes: dict[str, GenNode]) -> bool:
        reported = [nodes[n].node_status for n in awake if nodes[n].node_status]
        return bool(reported) and "online" not in reported

    def _no_online(self, awake: list[str], nodes: dict[str, GenNode], now: int, limit: int) -> None:
        # Seed "Liveness." (a quorum of connected nodes gets online in some generation); TLA+: a
        # liveness property, none of GetOnline's steps taken for the threshold.
        ctx = self.ctx
        if not self._none_online(awake, nodes):
            if NO_ONLINE in ctx.open:
                online = sorted(n for n in awake if nodes[n].node_status == "online")
                why = (f"{', '.join(online)} online." if online
                       else "every configured node that reports is silent (NODE_SILENT).")
                ctx.resolve(NO_ONLINE, why, ctx.clock)
            return
        since = self._since(self.online_ts, self.start)
        if now - since >= limit and NO_ONLINE not in ctx.open:
            status = ", ".join(f"{n} {nodes[n].node_status}" for n in awake if nodes[n].node_status)
            ctx.fire(NO_ONLINE, "GEN_NO_ONLINE", ("episode", self.live.episode(NO_ONLINE)),
                     f"No configured node has been online for over {limit // 1000} s "
                     f"(latest heartbeats: {status}): the group takes no writes.",
                     since, evidence=[r for n in awake if (r := nodes[n].report) is not None][:9])

    def _recovery(self, node: str, gn: GenNode | None, awake: bool, now: int, limit: int) -> None:
        # Seed "Generation switching procedure" ("others already wait for us") and "Liveness.";
        # TLA+ PullRecovery steps that never reach GetOnline.
        ctx = self.ctx
        cond = RECOVERY + node
        if gn is None or gn.status != "RECOVERY" or not awake:
            if cond in ctx.open and gn is not None:
                why = ("it is silent (NODE_SILENT)." if not awake
                       else f"it is {gn.status or 'unknown'} in generation {gn.gen}.")
                ctx.resolve(cond, f"{node} left recovery: {why}", ctx.clock)
            return
        since = self._since(gn.since)
        if now - since >= limit and cond not in ctx.open:
            ctx.fire(cond, "GEN_RECOVERY_STUCK", (node, gn.gen),
                     f"{node} has been recovering in generation {gn.gen} for over {limit // 1000} s: "
                     "commits in the generation need its PREPARE acks, so the group's writes wait.",
                     since, instance=gn.gen, node=node,
                     evidence=[gn.report] if gn.report is not None else [])

    def _vote(self, cur: Gen, nodes: dict[str, GenNode], max_gen: int, now: int, limit: int) -> None:
        # Seed "The voting procedure" and "Liveness."; TLA+ ElectNewGen (a majority voted) with
        # no LearnNewGen of that number.
        ctx = self.ctx
        voters = [gn for n in cur.configured if (gn := nodes.get(n)) is not None and gn.vote is not None]
        votes = sorted((gn.vote[0] for gn in voters), reverse=True)  # type: ignore[index]
        q = _majority(len(cur.configured))
        promised = votes[q - 1] if len(votes) >= q else -1
        if promised <= max_gen:
            if self.vote is not None:
                ctx.resolve(VOTE, f"a node switched to generation {max_gen}.", ctx.clock)
                self.vote = None
            return
        if self.vote is None or self.vote[0] != promised:
            if self.vote is not None:
                ctx.resolve(VOTE, f"a majority now promises generation {promised}.", ctx.clock)
            # Since the quorum-th of those promises was made (event time: the same whatever the
            # arrival order or the evaluation that notices it).
            cast = sorted(gn.vote_ts for gn in voters if gn.vote[0] >= promised)  # type: ignore[index]
            self.vote = [promised, cast[q - 1]]
        since = self._since(self.vote[1])
        if now - since >= limit and VOTE not in ctx.open:
            ctx.fire(VOTE, "GEN_VOTE_STUCK", ("vote", promised),
                     f"A majority of the configured nodes promised generation {promised} "
                     f"over {limit // 1000} s ago, and no node switched to it (highest "
                     f"generation reported: {max_gen}).", since, instance=promised)

    # -- saved state --------------------------------------------------------------------------------
    def dump(self) -> list[Any]:
        return [self.start, self.online_ts, self.vote]

    def load(self, d: list[Any]) -> None:
        self.start, self.online_ts, self.vote = d[0], d[1], d[2]
