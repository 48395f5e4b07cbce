"""The liveness rules every protocol family shares, judged on the group's event-time clock.

Every condition is measured from an event time and compared with the watermark (``clock - skew``),
so events of other nodes that are still on their way cannot make it fire early. After a group-wide
silence longer than ``node_silent`` the timers restart at its end (``quiet_end``): the monitor
could not see the group, which is GROUP_SILENT's business, not every member's. Conditions, keys
and messages are in docs/rules.md (one section per kind, and "Time").

What the family supplies: the members expected to publish and the quorum set (the group monitor
asks for them at each evaluation: NODE_SILENT, QUORUM_*), and its frontiers, with which the family
runs the frontier rules itself (``executor_lag``, ``no_progress``, ``progressed``), since only it
knows when a frontier moved and what "work pending" means for it.

* NODE_SILENT: a member sent nothing for ``node_silent`` while the rest of the group published
  past it by more than the skew; judged on the group's clock and on the outside clock
  (``on_timer``), so it fires with no input at all; resolves when the member sends again or
  leaves the members. A member is silent from when it was last *heard*, on the group's clock:
  its stamp, or, when the group's clock was more than the skew past that stamp as its event
  came in, that clock minus the skew (``note``). So one node's clock leading its group-mates
  (within ``clock_skew``, which ``clocks.py`` handles) or a member's lagging cannot make a member
  that keeps publishing look silent: its silence is measured on one clock. A member that really
  stops is silent as before (the group's clock, led or not, goes on without it). Histories where
  every event comes within the skew of the group's clock keep nothing and judge exactly as
  before.
* QUORUM_AT_RISK / QUORUM_LOST: a member is live unless a majority of the members suspect it
  (their latest heartbeats' ``suspects``, in families where suspicions are sound) or NODE_SILENT
  judges it silent (for AT_RISK: silent and missed by a live member too); the state must hold for
  the skew, since one moment's suspicions arrive one heartbeat at a time. AT_RISK needs >= 3
  members.
* EXECUTOR_LAG: a member's executed frontier lags the group's decided one by more than the limit
  for ``executor_lag``.
* NO_PROGRESS: work is pending and no frontier moved for ``no_progress``.
* GROUP_SILENT: nothing from the group for ``group_silent`` by the outside clock (``on_timer``).
"""

from __future__ import annotations

from typing import Any

from replimon.core.rules.base import Context, NodeState, Src

NODE_FORGET_MS = 300_000  # a node the family no longer expects, silent this long, is forgotten


class Liveness:
    """The shared wedges of one group, and the little state they keep between evaluations."""

    __slots__ = ("ctx", "progress_ts", "lag_since", "quorum", "episodes", "behind", "out")

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.progress_ts = -1  # last advance of any frontier (NO_PROGRESS)
        self.lag_since: dict[str, int] = {}  # member -> group clock its lag began (EXECUTOR_LAG)
        self.quorum = ("ok", -1)  # (state, group clock it began)
        self.episodes: dict[str, int] = {}  # occurrences so far of conditions keyed by ordinal
        # member -> (its last stamp, the group clock when that event came in), only while that
        # clock was more than the skew past the stamp (``note``; stored only when not empty).
        self.behind: dict[str, tuple[int, int]] = {}
        # members counted out of the quorum while its state is not ok (the resolution names those
        # back; stored only when not empty)
        self.out: list[str] = []

    def episode(self, cond: str) -> int:
        """The ordinal of this occurrence of ``cond``: an id made of history facts, not of when
        an evaluation happened to notice it (which depends on arrival order and batching)."""
        n = self.episodes.get(cond, 0) + 1
        self.episodes[cond] = n
        return n

    # -- NODE_SILENT and GROUP_SILENT ------------------------------------------------------------
    def note(self, node: str, last: int) -> None:
        """An event of ``node`` came in (its last stamp now ``last``; the group's clock already
        counts the event): remember the clock when it is more than the skew past that stamp (the
        node lags the group's clock, another node leads it, or the node's events are older than
        the time it became a member at), forget it otherwise. Every admitted event passes here:
        the common case is one subtraction and one test."""
        clock = self.ctx.clock
        if clock - last > self.ctx.limits.skew_ms:
            self.behind[node] = (last, clock)
        elif self.behind:
            self.behind.pop(node, None)

    def heard(self, node: str, newer: bool, ev: dict[str, Any], src: Src) -> None:
        """``node`` published ``ev``: the group is not silent, nor is the node if ``ev`` is newer
        than its last event."""
        ctx = self.ctx
        if "group_silent" in ctx.open:
            ctx.resolve("group_silent", f"the group published again ({node}).", ev["ts_ms"],
                        [ctx.ref(ev, src)])
        # Only an event newer than the one the silence began after ends it: an older one (arrived
        # late, or from a node whose silence began at a group clock running ahead of it) would
        # resolve the alert and fire it again under the same id at once.
        if newer and "silent:" + node in ctx.open:
            ctx.resolve("silent:" + node, f"{node} published again.", ev["ts_ms"], [ctx.ref(ev, src)])

    def node_silence(self, now: int, members: tuple[str, ...]) -> None:
        """NODE_SILENT at time ``now`` (the group's clock, or the outside clock from on_timer).

        A member is silent once ``now - skew`` is ``node_silent`` past its last event (or the end
        of the last group-wide silence) AND the rest of the group published more than the skew
        after it: a member that went quiet together with everyone else is part of a group
        silence (GROUP_SILENT), not a silent node. With the outside clock this fires with no
        input arriving at all.
        """
        ctx = self.ctx
        lim = ctx.limits
        for m in members:
            ns = ctx.nodes.get(m)
            if ns is None:
                ns = ctx.nodes[m] = NodeState(last_ts=ctx.clock)
            elif ns.last_ts < 0:
                ns.last_ts = ctx.clock
            if ctx.clock - ns.last_ts <= lim.skew_ms:  # the common case first (every evaluation)
                continue
            cond = "silent:" + m
            if cond in ctx.open or ns.held:
                continue  # (events held for earlier ones of its own: it publishes)
            last = self.last_heard(m, ns)
            if self.came_in(m, ns) >= ctx.clock - lim.skew_ms:
                continue  # heard with the rest of the group (its clock is behind theirs)
            since = max(last, ctx.quiet_end)
            if now - lim.skew_ms - since >= lim.node_silent_ms:
                ctx.fire(
                    cond, "NODE_SILENT", (m, ns.last_ts),
                    f"Member {m} of group {ctx.group} has sent nothing for "
                    f"{(now - lim.skew_ms - last) // 1000} s while the rest of the group "
                    f"published until {ctx.clock - last} ms after it.",
                    ns.last_ts, node=m,
                    evidence=[ctx.ref(ns.last_ev, ns.last_src)] if ns.last_ev else [])

    def last_heard(self, node: str, ns: NodeState) -> int:
        """When ``node`` was last heard, on the group's clock: its last stamp, or the clock its
        last event came in at minus the skew, when ``note`` kept that (module doc)."""
        kept = self.behind.get(node) if self.behind else None
        if kept is not None and kept[0] == ns.last_ts:
            return max(ns.last_ts, kept[1] - self.ctx.limits.skew_ms)
        return ns.last_ts

    def came_in(self, node: str, ns: NodeState) -> int:
        """The group's clock when ``node``'s last event came in, as ``note`` kept it, or its stamp:
        a member whose last event came in within the skew of the group's last went quiet with
        the rest of the group, whatever its own clock says."""
        kept = self.behind.get(node) if self.behind else None
        return kept[1] if kept is not None and kept[0] == ns.last_ts else ns.last_ts

    def departed(self, members: tuple[str, ...]) -> None:
        """Close NODE_SILENT of nodes that are no longer members."""
        ctx = self.ctx
        for cond in [c for c in ctx.open if c.startswith("silent:")]:
            if cond[7:] not in members:
                ctx.resolve(cond, f"{cond[7:]} is no longer a member of the active configuration.",
                            ctx.clock)

    def silence_deadline(self, members: tuple[str, ...]) -> int | None:
        """Outside-clock time at which a member becomes NODE_SILENT if nothing arrives."""
        ctx = self.ctx
        lim = ctx.limits
        best = None
        for m in members:
            ns = ctx.nodes.get(m)
            if ns is None or ns.last_ts < 0 or ("silent:" + m) in ctx.open or ns.held:
                continue
            if ctx.clock - ns.last_ts <= lim.skew_ms:
                continue
            last = self.last_heard(m, ns)
            if self.came_in(m, ns) >= ctx.clock - lim.skew_ms:
                continue
            at = max(last, ctx.quiet_end) + lim.node_silent_ms + lim.skew_ms
            best = at if best is None else min(best, at)
        return best

    def group_silence(self, now: int) -> None:
        """GROUP_SILENT at outside-clock time ``now``."""
        ctx = self.ctx
        lim = ctx.limits
        if (ctx.clock >= 0 and "group_silent" not in ctx.open
                and now - lim.skew_ms - ctx.clock >= lim.group_silent_ms):
            ctx.fire(
                "group_silent", "GROUP_SILENT", ("last", ctx.clock),
                f"No event at all from group {ctx.group} for {(now - ctx.clock) // 1000} s.",
                ctx.clock)

    # -- the saved state (``codec.py``) ------------------------------------------------------------
    def save(self, out: dict[str, Any]) -> dict[str, Any]:
        """``out`` (a saved state) with what ``note`` keeps, under ``behind``, when there is any:
        a history without it saves exactly the keys it always did."""
        if self.behind:
            out["behind"] = {n: list(v) for n, v in self.behind.items()}
        if self.out:
            out["quorum_out"] = list(self.out)
        return out

    def restore(self, d: dict[str, Any]) -> None:
        """What `save` wrote (nothing: nothing kept)."""
        self.behind = {n: (v[0], v[1]) for n, v in d.get("behind", {}).items()}
        self.out = list(d.get("quorum_out", ()))

    def forget(self, expected: set[str]) -> None:
        """Drop nodes the family no longer expects that have been silent for ``NODE_FORGET_MS``
        (bounded state); a node with held events or an open NODE_SILENT stays."""
        ctx = self.ctx
        for node, ns in list(ctx.nodes.items()):
            if (node not in expected and not ns.held and ctx.clock - ns.last_ts > NODE_FORGET_MS
                    and ("silent:" + node) not in ctx.open):
                del ctx.nodes[node]
                self.behind.pop(node, None)

    # -- QUORUM_AT_RISK / QUORUM_LOST -------------------------------------------------------------
    def check_quorum(self, members: tuple[str, ...], majority: int, suspicions: bool = True) -> None:
        """QUORUM_AT_RISK / QUORUM_LOST over ``members`` (``majority`` of them must be live).

        ``suspicions``: whether the family's heartbeats' ``suspects`` count (a member a majority
        suspects is not live); False where they are not sound (generations: a campaign isolates
        every node for a few seconds, legally). Silence counts in every family (SPEC section 8):
        a member NODE_SILENT judges silent is not live for QUORUM_LOST, since when a majority
        crashes nobody is left to suspect it; for QUORUM_AT_RISK a silent member counts only when
        a member that is live names it in ``suspects`` (its node is down or cut off, not only its
        publisher): one member's publisher outage is NODE_SILENT's alert alone (docs/rules.md,
        "QUORUM_AT_RISK / QUORUM_LOST")."""
        ctx = self.ctx
        nodes = ctx.nodes
        votes: dict[str, int] = {}  # suspicions of each node by members (every evaluation: no Counter)
        open_ = ctx.open
        if suspicions:
            for m in members:
                for s in nodes[m].suspects:
                    votes[s] = votes.get(s, 0) + 1
        trusted = [m for m in members if votes.get(m, 0) < majority] if votes else list(members)
        silent = [m for m in trusted if "silent:" + m in open_] if open_ else []
        live = [m for m in trusted if m not in silent] if silent else trusted
        state = "ok"
        if len(live) < majority:
            state = "QUORUM_LOST"
        else:
            named: set[str] = set()
            if silent:
                for m in live:
                    named.update(nodes[m].suspects)
            silent = [m for m in silent if m in named]  # silent, and a live member misses it too
            live = [m for m in trusted if m not in silent] if silent else trusted
            if len(members) >= 3 and len(live) == majority:
                state = "QUORUM_AT_RISK"
        out = [m for m in members if m not in live]
        cur, since = self.quorum
        if state != cur:
            if cur != "ok":
                back = [m for m in self.out if m in live]
                ctx.resolve("quorum", f"quorum state is now {state.lower().replace('_', ' ')} "
                            f"({len(live)} of {len(members)} members live).", ctx.clock,
                            self._last_events(back) or None)
            self.quorum = (state, ctx.clock)
            self.out = out if state != "ok" else []
        elif state != "ok" and ctx.watermark >= since and "quorum" not in ctx.open:
            self.out = out
            suspected = sorted(m for m in members if votes.get(m, 0) >= majority)
            evidence = [ctx.ref(ns.last_ev, ns.last_src) for m in members
                        if (ns := nodes[m]).last_ev is not None
                        and ((suspicions and ns.suspects) or m in silent)]
            quiet = f"; silent: {', '.join(sorted(silent))}" if silent else ""
            ctx.fire(
                "quorum", state, (state, self.episode("quorum")),
                f"{len(live)} of {len(members)} members of the active configuration "
                f"are live (majority {majority}); suspected by a majority: "
                f"{', '.join(suspected) or 'none'}{quiet}.",
                since, evidence=evidence[:9])

    def _last_events(self, nodes: list[str]) -> list[dict[str, Any]]:
        """Evidence: the last event of each of ``nodes`` (those the monitor holds one of)."""
        ctx = self.ctx
        return [ctx.ref(ns.last_ev, ns.last_src) for n in nodes
                if (ns := ctx.nodes.get(n)) is not None and ns.last_ev is not None]

    # -- frontier rules, run by the family with its frontiers ------------------------------------
    def progressed(self, ts: int) -> bool:
        """A frontier advanced at event time ``ts``: NO_PROGRESS restarts. True when a NO_PROGRESS
        alert is open: the caller then closes it with ``resume``, saying how (the message is only
        built when there is one, since this runs for most events)."""
        if ts > self.progress_ts:
            self.progress_ts = ts
        return "progress" in self.ctx.open

    def resume(self, why: str, ts: int, ev: dict[str, Any], src: Src) -> None:
        """Close the open NO_PROGRESS: ``ev`` moved a frontier (``why``)."""
        self.ctx.resolve("progress", why, ts, [self.ctx.ref(ev, src)])

    def executor_lag(self, members: tuple[str, ...], decided: int) -> None:
        """EXECUTOR_LAG of each member against the group's ``decided`` frontier."""
        ctx = self.ctx
        lim = ctx.limits
        wm = ctx.watermark
        for m in members:
            ns = ctx.nodes[m]
            cond = "lag:" + m
            if ns.executed >= 0 and decided - ns.executed > lim.executor_lag_instances:
                since = max(self.lag_since.setdefault(m, ctx.clock), ctx.quiet_end)
                if wm - since >= lim.executor_lag_ms and cond not in ctx.open:
                    ctx.fire(
                        cond, "EXECUTOR_LAG", (m, self.episode(cond)),
                        f"Member {m} has executed up to {ns.executed}, {decided - ns.executed}"
                        f" instances behind the group's decided {decided}, for over "
                        f"{lim.executor_lag_ms // 1000} s.",
                        since, instance=ns.executed, node=m,
                        evidence=[ctx.ref(ns.last_ev, ns.last_src)] if ns.last_ev else [])
            else:
                self.lag_since.pop(m, None)
                if cond in ctx.open:
                    ctx.resolve(cond, f"{m} caught up (executed {ns.executed}, decided {decided}).",
                                ctx.clock)
        for cond in [c for c in ctx.open if c.startswith("lag:") and c[4:] not in members]:
            self.lag_since.pop(cond[4:], None)
            ctx.resolve(cond, f"{cond[4:]} is no longer a member of the active configuration.", ctx.clock)

    def no_progress(self, work: str | None, decided: int) -> None:
        """NO_PROGRESS: ``work`` says what is pending (None: nothing), ``decided`` is the frontier."""
        ctx = self.ctx
        since = max(self.progress_ts, ctx.quiet_end)
        if work is not None and self.progress_ts >= 0 and ctx.watermark - since >= ctx.limits.no_progress_ms:
            if "progress" not in ctx.open:
                # Keyed by ordinal, not by progress_ts: which node's report of an instance
                # advances the frontier (and so progress_ts) depends on arrival order within the
                # skew, and the same history must give the same id live or replayed
                # (docs/rules.md, "NO_PROGRESS").
                ctx.fire(
                    "progress", "NO_PROGRESS", ("episode", self.episode("progress")),
                    f"Nothing was decided or executed for {(ctx.watermark - since) // 1000} s with "
                    f"work pending ({work}).", self.progress_ts, instance=decided)
        elif work is None and "progress" in ctx.open:
            ctx.resolve("progress", "no work is pending any more.", ctx.clock)
