"""Wedges and liveness (SPEC section 5), judged on the group's event-time clock.

``_evaluate`` runs when the group's clock has moved at least ``EVAL_STEP_MS`` since the last run
(and at every ``on_timer``), so the per-event path stays cheap. Every condition is measured from
an event time and compared with the watermark (``clock - skew``), so events of other nodes that
are still on their way cannot make it fire early. After a group-wide silence longer than
``node_silent`` the timers restart at its end (``quiet_end``): the monitor could not see the group,
which is GROUP_SILENT's business, not every member's.

* NODE_SILENT: a member of the active configuration sent nothing for ``node_silent`` while the
  rest of the group published past it by more than the skew; judged on the group's clock and on
  the outside clock (``on_timer``), so it fires with no input at all; resolves when the member
  sends again or leaves the configuration.
* QUORUM_AT_RISK / QUORUM_LOST: a member is live unless a majority of the active configuration's
  members suspect it (their latest heartbeats' ``suspects``); the state must hold for the skew,
  since one moment's suspicions arrive one heartbeat at a time. AT_RISK needs >= 3 members.
* EXECUTOR_LAG: a member's executed frontier lags the group's decided one by more than the limit
  for ``executor_lag``.
* HORIZON_WEDGE: decisions reached the group's effective horizon (MySQL's bound from the
  executed frontier a majority of the active members have reached, so the group can go no
  further) and no node's executed frontier advanced for ``horizon_wedge``; resolves on an advance.
* NO_PROGRESS: work is pending (something decided but not executed by a member, or a pending
  configuration) and neither frontier moved for ``no_progress``.
* PENDING_CONFIG_STUCK: a configuration has been pending (start beyond the decided frontier) for
  ``pending_config_stuck`` since its command was decided.
* GROUP_SILENT: nothing from the group for ``group_silent`` by the outside clock (``on_timer``).
"""

from __future__ import annotations

from collections import Counter

from replimon.core.rules.base import GroupState, NodeState

EVAL_STEP_MS = 250
NODE_FORGET_MS = 300_000  # a node in no configuration, silent this long, is forgotten


class LivenessRules(GroupState):
    def _evaluate(self) -> None:
        self.next_eval = self.clock + EVAL_STEP_MS
        if self.holding:
            self._expire_held()  # type: ignore[attr-defined]
        if self.ahead:
            self._merge_ahead(expire=True)  # type: ignore[attr-defined]
        if self.checks:
            self._settle_can_leave()  # type: ignore[attr-defined]
        if self.held_reports:
            self._settle_held_reports()  # type: ignore[attr-defined]
        if not self.cmap.configs:
            return
        lim = self.limits
        wm = self.watermark
        active = self.cmap.active(self.decided + 1)
        members = active.member_ids
        if len(members) != len(self.member_set) or not self.member_set.issuperset(members):
            self.member_set = set(members)
        # -- NODE_SILENT
        self._node_silence(self.clock, members)
        for cond in [c for c in self.open if c.startswith("silent:")]:
            if cond[7:] not in members:
                self.resolve(cond, f"{cond[7:]} is no longer a member of the active configuration.", self.clock)
        # -- quorum
        self._quorum(members, active.majority)
        # -- EXECUTOR_LAG
        for m in members:
            ns = self.nodes[m]
            cond = "lag:" + m
            if ns.executed >= 0 and self.decided - ns.executed > lim.executor_lag_instances:
                since = max(self.lag_since.setdefault(m, self.clock), self.quiet_end)
                if wm - since >= lim.executor_lag_ms and cond not in self.open:
                    self.fire(
                        cond, "EXECUTOR_LAG", (m, self._episode(cond)),
                        f"Member {m} has executed up to {ns.executed}, {self.decided - ns.executed}"
                        f" instances behind the group's decided {self.decided}, for over "
                        f"{lim.executor_lag_ms // 1000} s.",
                        since, instance=ns.executed, node=m,
                        evidence=[self.ref(ns.last_ev, ns.last_src)] if ns.last_ev else [])
            else:
                self.lag_since.pop(m, None)
                if cond in self.open:
                    self.resolve(cond, f"{m} caught up (executed {ns.executed}, decided {self.decided}).", self.clock)
        for cond in [c for c in self.open if c.startswith("lag:") and c[4:] not in members]:
            self.lag_since.pop(cond[4:], None)
            self.resolve(cond, f"{cond[4:]} is no longer a member of the active configuration.", self.clock)
        # -- HORIZON_WEDGE
        execs = sorted((self.nodes[m].executed for m in members if self.nodes[m].executed >= 0), reverse=True)
        if len(execs) >= active.majority:
            e_maj = execs[active.majority - 1]
            bound = self.cmap.effective_horizon(e_maj, mysql=True)
            if self.decided >= bound:
                if self.reach_ts < 0:
                    self.reach_ts = self.clock
                since = max(self.reach_ts, self.exec_adv_ts, self.quiet_end)
                if wm - since >= lim.horizon_wedge_ms:
                    self.fire(
                        "horizon", "HORIZON_WEDGE", ("bound", bound),
                        f"Decisions reached the group's effective horizon {bound} (a majority has "
                        f"executed {e_maj}) and no executed frontier advanced for "
                        f"{(wm - since) // 1000} s.",
                        since, instance=bound)
            else:
                self.reach_ts = -1
                if "horizon" in self.open:
                    self.resolve("horizon", f"decided {self.decided} is below the effective horizon {bound}.", self.clock)
        # -- NO_PROGRESS
        known = [self.nodes[m].executed for m in members if self.nodes[m].executed >= 0]
        pending_cfg = self.cmap.configs[-1].start > self.decided
        work = (bool(known) and self.decided > min(known)) or pending_cfg
        since = max(self.progress_ts, self.quiet_end)
        if work and self.progress_ts >= 0 and wm - since >= lim.no_progress_ms:
            if "progress" not in self.open:
                # Keyed by ordinal, not by progress_ts: which node's report of an instance
                # advances the frontier (and so progress_ts) depends on arrival order within the
                # skew, and the same history must give the same id live or replayed (SPEC 5).
                what = "a pending configuration" if pending_cfg else f"decided {self.decided} > executed {min(known)}"
                self.fire(
                    "progress", "NO_PROGRESS", ("episode", self._episode("progress")),
                    f"Nothing was decided or executed for {(wm - since) // 1000} s with work pending "
                    f"({what}).", self.progress_ts, instance=self.decided)
        elif not work and "progress" in self.open:
            self.resolve("progress", "no work is pending any more.", self.clock)
        # -- PENDING_CONFIG_STUCK
        for cfg in self.cmap.configs:
            if cfg.start <= self.decided:
                continue
            cond = f"pending:{cfg.start}"
            since = max(self.pending_since.setdefault(cfg.start, self.clock), self.quiet_end)
            if wm - since >= lim.pending_config_stuck_ms:
                self.fire(
                    cond, "PENDING_CONFIG_STUCK", ("start", cfg.start),
                    f"The configuration starting at {cfg.start} (decided at {cfg.decided_at}) has "
                    f"been pending for {(wm - since) // 1000} s; the group has decided up to "
                    f"{self.decided}.", since, instance=cfg.start)
        for cond in [c for c in self.open if c.startswith("pending:")]:
            start = int(cond[8:])
            if start <= self.decided or all(x.start != start for x in self.cmap.configs):
                self.resolve(cond, f"the configuration starting at {start} has started (decided {self.decided}).", self.clock)
        self._prune(members)

    def _node_silence(self, now: int, members: tuple[str, ...]) -> None:
        """NODE_SILENT at time ``now`` (the group's clock, or the outside clock from on_timer).

        A member is silent once ``now - skew`` is ``node_silent`` past its last event (or the end
        of the last group-wide silence) AND the rest of the group published more than the skew
        after it: a member that went quiet together with everyone else is part of a group
        silence (GROUP_SILENT), not a silent node. With the outside clock this fires with no
        input arriving at all.
        """
        lim = self.limits
        for m in members:
            ns = self.nodes.get(m)
            if ns is None:
                ns = self.nodes[m] = NodeState(last_ts=self.clock)
            elif ns.last_ts < 0:
                ns.last_ts = self.clock
            cond = "silent:" + m
            if cond in self.open or self.clock - ns.last_ts <= lim.skew_ms:
                continue
            since = max(ns.last_ts, self.quiet_end)
            if now - lim.skew_ms - since >= lim.node_silent_ms:
                self.fire(
                    cond, "NODE_SILENT", (m, ns.last_ts),
                    f"Member {m} of group {self.group} has sent nothing for "
                    f"{(now - lim.skew_ms - ns.last_ts) // 1000} s while the rest of the group "
                    f"published until {self.clock - ns.last_ts} ms after it.",
                    ns.last_ts, node=m,
                    evidence=[self.ref(ns.last_ev, ns.last_src)] if ns.last_ev else [])

    def _silence_deadline(self) -> int | None:
        """Outside-clock time at which a member becomes NODE_SILENT if nothing arrives."""
        if not self.cmap.configs:
            return None
        lim = self.limits
        best = None
        for m in self.cmap.active(self.decided + 1).member_ids:
            ns = self.nodes.get(m)
            if ns is None or ns.last_ts < 0 or ("silent:" + m) in self.open:
                continue
            if self.clock - ns.last_ts <= lim.skew_ms:
                continue
            at = max(ns.last_ts, self.quiet_end) + lim.node_silent_ms + lim.skew_ms
            best = at if best is None else min(best, at)
        return best

    def _episode(self, cond: str) -> int:
        """The ordinal of this occurrence of ``cond``: an id made of history facts, not of when
        an evaluation happened to notice it (which depends on arrival order and batching)."""
        n = self.episodes.get(cond, 0) + 1
        self.episodes[cond] = n
        return n

    def _quorum(self, members: tuple[str, ...], majority: int) -> None:
        votes: Counter[str] = Counter()
        for m in members:
            votes.update(self.nodes[m].suspects)
        live = [m for m in members if votes[m] < majority]
        state = "ok"
        if len(live) < majority:
            state = "QUORUM_LOST"
        elif len(live) == majority and len(members) >= 3:
            state = "QUORUM_AT_RISK"
        cur, since = self.quorum
        if state != cur:
            if cur != "ok":
                self.resolve("quorum", f"quorum state is now {state.lower().replace('_', ' ')} "
                             f"({len(live)} of {len(members)} members live).", self.clock)
            self.quorum = (state, self.clock)
        elif state != "ok" and self.watermark >= since and "quorum" not in self.open:
            suspected = sorted(m for m in members if m not in live)
            evidence = [self.ref(ns.last_ev, ns.last_src) for m in members
                        if (ns := self.nodes[m]).last_ev is not None and ns.suspects]
            self.fire(
                "quorum", state, (state, self._episode("quorum")),
                f"{len(live)} of {len(members)} members of the active configuration are live "
                f"(majority {majority}); suspected by a majority: {', '.join(suspected) or 'none'}.",
                since, evidence=evidence[:9])

    def _prune(self, members: tuple[str, ...]) -> None:
        """Drop what no node can need any more (bounded state)."""
        # Live members only: a member that went silent (crashed, never removed) must not pin
        # every decision value in memory until it comes back.
        known = [self.nodes[m].executed for m in members
                 if self.nodes[m].executed >= 0 and ("silent:" + m) not in self.open]
        if len(known) < (len(members) // 2 + 1):
            return
        floor = min(known)
        self.cmd_floor = max(self.cmd_floor, floor)
        for d in (self.singles, self.runs, self.special):
            while d:
                k = next(iter(d))
                if k > floor:
                    break
                del d[k]
        while self.records:  # a command whose report waits for a second opinion stays
            k = next(iter(self.records))
            if k > floor or self.records[k].held is not None:
                break
            del self.records[k]
        self.cmap.prune(floor)
        starts = {c.start for c in self.cmap.configs}
        for s in [s for s in self.pending_since if s not in starts]:
            del self.pending_since[s]
        in_configs = {m for c in self.cmap.configs for m in c.member_ids}
        for node, ns in list(self.nodes.items()):
            if (node not in in_configs and not ns.held and self.clock - ns.last_ts > NODE_FORGET_MS
                    and ("silent:" + node) not in self.open):
                del self.nodes[node]
