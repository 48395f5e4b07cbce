"""The generations family's safety rules (docs/families.md 2.4; violations, never resolve).

Judged per node, in its own seq order (docs/families.md 2.6: duty 1 makes that order the order of
its state changes): GEN_REGRESSION, GEN_STATE_INCONSISTENT, GEN_VOTE_PROMISE_BROKEN,
GEN_ONLINE_INELIGIBLE, GEN_ONLINE_UNRECOVERED (a), GEN_BARRIER_BROKEN, GEN_COMMIT_UNPREPARED.
Set facts, judged whichever side arrives first: GEN_MEMBERS_CONFLICT, GEN_XACT_DIVERGENT,
GEN_DONOR_STALE. GEN_ELECTED (info) marks each generation's first report for the timeline.

A **transition into ONLINE in m** is a ``gen.state`` of cause ``switch`` or ``online`` whose
``last_online_in`` is m, where the node's previous state report, in the same incarnation with no
seq gap since, had ``last_online_in < m``. A ``load`` is never a transition: a change hidden by a
crash before publishing is not judged.
"""

from __future__ import annotations

import json
from typing import Any

from replimon.core.rules.base import Context, Src
from replimon.core.rules.gen.nodes import Gen, GenNode, Members, members_of

GENS_KEPT = 64  # generations remembered (docs/families.md 2.3)
# Traced outcomes: one per gid, the first commit or abort reported, for 10 minutes of group clock
# (docs/families.md 2.3), at most XACT_MAX gids (the oldest reported first are forgotten): about
# 100 bytes a gid in the saved state (docs/rules.md, the generations family; bench/gen_xacts.py).
XACT_KEEP_MS = 600_000
XACT_MAX = 4_096
_OUTCOME = {"committed": "c", "aborted": "a"}
_PHASE = {v: k for k, v in _OUTCOME.items()}


def majority(n: int) -> int:
    return n // 2 + 1


def referee(members: Members, configured: Members) -> bool:
    """A 2-node referee generation: one member of two configured (the referee replaces the
    intersection; ``multimaster.c``)."""
    return len(configured) == 2 and len(members) == 1


class GenSafety:
    """The group's generations, traced transactions and switches, and the rules over them."""

    __slots__ = ("ctx", "gens", "xacts", "committed", "switches")

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.gens: dict[int, Gen] = {}
        # gid -> {phase: [node, event_ts, evidence]} for committed / aborted (first of each)
        # gid -> "outcome xgen node ts incarnation seq [where]" (outcome c or a; where it was
        # read as compact JSON): the first outcome reported, one short string (``outcome_of``
        # rebuilds its evidence), oldest reported first
        self.xacts: dict[str, str] = {}
        self.committed: dict[int, list[Any]] = {}  # xgen -> [gid, evidence] of a commit in it
        # donor switches judged by GEN_DONOR_STALE when a commit arrives later:
        # [node, n, p (its last_online_in before), configured(n), evidence]
        self.switches: list[list[Any]] = []

    # -- the registry ------------------------------------------------------------------------------
    def register(self, num: int, members: Members, configured: Members | None,
                 ev: dict[str, Any], src: Src) -> None:
        """A report of generation ``num`` (a ``gen.state``'s gen, or a coordinator's
        ``xmembers``: ``configured`` None). GEN_ELECTED on the first, GEN_MEMBERS_CONFLICT when a
        later one differs."""
        # Seed "The voting procedure": a generation number is elected once, with one member set;
        # TLA+ ElectNewGen (a number wins one vote). GEN_ELECTED marks ElectNewGen's outcome on
        # the timeline.
        ctx = self.ctx
        known = self.gens.get(num)
        if known is None:
            if configured is None:
                return  # xmembers alone do not elect a generation; its gen.state will
            first = ctx.ref(ev, src)
            self.gens[num] = Gen(num, members, configured, first)
            minority = not referee(members, configured) and len(members) < majority(len(configured))
            ctx.violation(
                "GEN_ELECTED", ("gen", num),
                f"Generation {num} elected: members {', '.join(members) or 'none'} of configured "
                f"{', '.join(configured)}{' (a minority generation)' if minority else ''}.",
                ev["ts_ms"], instance=num, evidence=[first])
            if len(self.gens) > GENS_KEPT:
                del self.gens[min(self.gens)]
            return
        if known.members != members or (configured is not None and known.configured != configured):
            what = f"members {', '.join(members)}"
            if configured is not None:
                what += f" of {', '.join(configured)}"
            ctx.violation(
                "GEN_MEMBERS_CONFLICT", ("gen", num),
                f"Generation {num} is reported as {what} by {ev['node']}, but was first reported "
                f"as members {', '.join(known.members)} of {', '.join(known.configured)}: one "
                "generation number has one member set.",
                ev["ts_ms"], instance=num, node=ev["node"], evidence=[known.first, ctx.ref(ev, src)])

    # -- per node ------------------------------------------------------------------------------------
    def regression(self, gn: GenNode, node: str, values: dict[str, int], ev: dict[str, Any],
                   src: Src) -> None:
        """GEN_REGRESSION: a persisted number lower than the node reported before (any
        incarnation). ``values``: field -> value of this report."""
        # Seed "The algorithm for safety", GenState: the generation state is written to disk when
        # it changes and never moves back; TLA+: the state is saved before it is used (MtmStateSave in src/state.c),
        # and LastVoteGECurrentGen holds across every action only if no number decreases.
        ctx = self.ctx
        before = {"gen.num": gn.max_gen, "last_vote.num": gn.max_vote, "last_online_in": gn.max_loi}
        for name, value in values.items():
            old = before[name]
            if 0 <= value < old:
                ctx.violation(
                    # Once per field and incarnation: a node that loaded a stale state repeats
                    # it in every later report (docs/rules.md, "GEN_REGRESSION").
                    "GEN_REGRESSION", (node, name, ev["incarnation"]),
                    f"{node} reports {name} {value}, lower than the {old} it reported before: the "
                    "generation state is persisted before it is acted on and must never go back.",
                    ev["ts_ms"], node=node,
                    evidence=[e for e in (gn.report, ctx.ref(ev, src)) if e is not None])
        gn.max_gen = max(gn.max_gen, values["gen.num"])
        gn.max_vote = max(gn.max_vote, values["last_vote.num"])
        gn.max_loi = max(gn.max_loi, values["last_online_in"])

    def inconsistent(self, node: str, why: list[str], ev: dict[str, Any], src: Src) -> None:
        """GEN_STATE_INCONSISTENT: one report contradicts itself (``why``: what, in words)."""
        # Seed "The algorithm for safety" (last_vote >= current_gen; ONLINE only in the current
        # generation); TLA+ invariant LastVoteGECurrentGen.
        if why:
            self.ctx.violation(
                "GEN_STATE_INCONSISTENT", (node, ev["incarnation"], ev["seq"]),
                f"{node} reports an impossible generation state: {'; '.join(why)}.",
                ev["ts_ms"], node=node, evidence=[self.ctx.ref(ev, src)])

    def vote_granted(self, gn: GenNode, node: str, ev: dict[str, Any], src: Src) -> None:
        """GEN_VOTE_PROMISE_BROKEN (a): a vote for (n, M, C) while the node had reported a
        last_vote numbered n or higher, unless its last full last_vote is exactly (n, M, C) (a
        re-grant changes nothing)."""
        # Seed "The voting procedure" (VoteGenNumTooLow: a vote is refused for a number at or
        # below the last one voted for); TLA+ ElectNewGen's guard ``last_vote < num``.
        v = ev["vote"]
        n, grant = v["num"], [v["num"], list(members_of(v["members"])), list(members_of(v["configured"]))]
        if gn.max_vote >= n and gn.vote != grant:
            self.ctx.violation(
                "GEN_VOTE_PROMISE_BROKEN", (node, "vote", n),
                f"{node} granted a vote for generation {n} ({', '.join(grant[1])}) to "
                f"{v['candidate']} after promising generation {gn.max_vote}"
                + (f" as ({gn.vote[0]}: {', '.join(gn.vote[1])})" if gn.vote else "") + ".",
                ev["ts_ms"], instance=n, node=node,
                evidence=[e for e in (gn.report, self.ctx.ref(ev, src)) if e is not None])

    def went_online(self, gn: GenNode, node: str, m: int, members: Members, configured: Members,
                    ev: dict[str, Any], src: Src) -> None:
        """The rules of a transition into ONLINE in ``m`` (module docstring), generation ``m``
        being (``members``, ``configured``); ``gn`` still holds the node's previous report."""
        # GEN_VOTE_PROMISE_BROKEN (b): seed "Generation switching procedure" (a node whose
        # last_vote.num exceeds the generation never gets online in it); TLA+ LearnNewGen.
        # GEN_ONLINE_INELIGIBLE: seed "The algorithm for safety" (a non-member never takes part;
        # a normal generation is a majority of configured, the 2-node referee excepted); TLA+
        # LearnNewGen and GetOnline. GEN_ONLINE_UNRECOVERED (a): seed "The algorithm for safety",
        # the induction (online in n only as a donor of n or after recovering to ParallelSafe<n>);
        # TLA+ LearnNewGen (donor) and GetOnline (after recovery). GEN_DONOR_STALE below.
        ctx = self.ctx
        cause = ev["cause"]
        evidence = [e for e in (gn.report, ctx.ref(ev, src)) if e is not None]
        lv = ev["last_vote"]["num"]
        if lv > m:
            ctx.violation(
                "GEN_VOTE_PROMISE_BROKEN", (node, "online", m),
                f"{node} became ONLINE in generation {m} after promising generation {lv}: a node "
                "that voted for a later generation can never get online in an earlier one.",
                ev["ts_ms"], instance=m, node=node, evidence=evidence)
        if node not in members or (len(members) < majority(len(configured))
                                   and not referee(members, configured)):
            why = ("it is not a member" if node not in members else
                   f"it has {len(members)} members of {len(configured)} configured, not a majority")
            ctx.violation(
                "GEN_ONLINE_INELIGIBLE", (node, m),
                f"{node} became ONLINE in generation {m} though {why}.",
                ev["ts_ms"], instance=m, node=node, evidence=evidence)
        if cause == "switch" and node not in ev["donors"]:
            ctx.violation(
                "GEN_ONLINE_UNRECOVERED", (node, m),
                f"{node} switched to generation {m} and reported ONLINE without being one of its "
                f"donors ({', '.join(sorted(ev['donors']))}): a node gets online in a generation "
                "only as a donor or by recovering until ParallelSafe.",
                ev["ts_ms"], instance=m, node=node, evidence=evidence)
        if cause == "switch" and node in ev["donors"] and len(configured) != 2:
            entry = [node, m, gn.loi, list(configured), ctx.ref(ev, src)]
            self.switches.append(entry)
            del self.switches[:-GENS_KEPT]
            self._donor_stale(entry)

    # -- transactions --------------------------------------------------------------------------------
    def xact(self, node: str, ev: dict[str, Any], src: Src) -> None:
        """The rules over one traced transaction report (``gen.xact``)."""
        # GEN_BARRIER_BROKEN: seed "Backend actions" and "Walreceiver" (the barrier between the
        # PREPAREs of the old and the new generation); TLA+ DoPrepare, PullNormal, PullRecovery.
        # GEN_COMMIT_UNPREPARED: seed "Basics" (a transaction commits only once every member of
        # its generation has its PREPARE); TLA+ CommitTx. GEN_XACT_DIVERGENT: seed "Basics"
        # (atomic commitment); TLA+ OrderOk (one outcome per transaction).
        ctx = self.ctx
        gid, xgen, phase = ev["gid"], ev["xgen"], ev["phase"]
        here = ctx.ref(ev, src) | {"gid": gid, "xgen": xgen, "phase": phase}
        if ev["role"] == "coordinator" and "xmembers" in ev:
            self.register(xgen, members_of(ev["xmembers"]), None, ev, src)
        if phase == "prepared":
            at = ev["at"]
            normal = ev["role"] == "coordinator" or ev.get("mode") == "normal"
            if (normal and (at["num"], at["status"]) != (xgen, "ONLINE")) or xgen > at["num"]:
                ctx.violation(
                    "GEN_BARRIER_BROKEN", (node, gid),
                    f"{node} prepared {gid} of generation {xgen} while in generation {at['num']} "
                    f"as {at['status']} ({ev['role']}"
                    + (f", {ev['mode']} mode" if "mode" in ev else "") + "): the barrier between "
                    "the prepares of old and new generations is broken.",
                    ev["ts_ms"], instance=xgen, node=node, evidence=[here])
            return
        if phase == "committed" and ev["role"] == "coordinator" and "prepared_by" in ev:
            known = self.gens.get(xgen)
            need = known.members if known is not None else members_of(ev.get("xmembers", []))
            missing = sorted(set(need) - set(ev["prepared_by"]))
            if missing:
                ctx.violation(
                    "GEN_COMMIT_UNPREPARED", (gid,),
                    f"{gid} committed in generation {xgen} without the PREPARE of "
                    f"{', '.join(missing)}: every member of the transaction's generation must "
                    "have prepared it.",
                    ev["ts_ms"], instance=xgen, node=node, evidence=[here])
        code = _OUTCOME[phase]
        known = self.xacts.get(gid)
        if known is None:
            where = " " + json.dumps(src, separators=(",", ":")) if src else ""
            self.xacts[gid] = f"{code} {xgen} {node} {ev['ts_ms']} {ev['incarnation']} {ev['seq']}{where}"
            if len(self.xacts) > XACT_MAX:
                del self.xacts[next(iter(self.xacts))]
        elif known[0] != code:
            first = outcome_of(gid, known)
            c, a = (here, first) if code == "c" else (first, here)
            ctx.violation(
                "GEN_XACT_DIVERGENT", (gid,),
                f"{gid} was committed on {c['node']} and aborted on {a['node']}.",
                max(c["ts_ms"], a["ts_ms"]), instance=xgen, evidence=[c, a])
        if phase == "committed" and xgen not in self.committed:
            self.committed[xgen] = [gid, here]
            if len(self.committed) > GENS_KEPT:
                del self.committed[min(self.committed)]
            for entry in self.switches:
                self._donor_stale(entry)

    def _donor_stale(self, entry: list[Any]) -> None:
        """GEN_DONOR_STALE: donor d went ONLINE in n by a switch with last_online_in p before,
        and a transaction committed in some m, p < m < n, with configured(m) = configured(n)."""
        # Seed "The algorithm for safety", the induction step (a donor of n has every committable
        # transaction of the generations p < m < n: none exists, by majority intersection); TLA+
        # invariant OrderOk. Off across changes of configured and for 2-node referee clusters,
        # where the intersection argument does not hold (docs/families.md 5.4).
        d, n, p, configured, switch = entry
        for m, (gid, commit) in sorted(self.committed.items()):
            if not p < m < n:
                continue
            gm = self.gens.get(m)
            if gm is None or list(gm.configured) != configured:
                continue
            self.ctx.violation(
                "GEN_DONOR_STALE", (d, n),
                f"{d} was a donor of generation {n} with last_online_in {p}, but {gid} committed "
                f"in generation {m} between them: the donor misses committed transactions.",
                max(switch["ts_ms"], commit["ts_ms"]), instance=n, node=d, evidence=[switch, commit])
            return

    def prune(self, now: int) -> None:
        """Forget traced gids older than ``XACT_KEEP_MS`` of group clock: from the oldest first
        reported (the dict's order, kept by the saved state), up to the first one with a phase
        still inside the window. This runs at every evaluation, so it must not walk every gid: a
        scan of all of them made the generations monitor 20 times slower after a few minutes."""
        xacts = self.xacts
        while xacts:
            gid = next(iter(xacts))
            if now - int(xacts[gid].split(" ", 4)[3]) <= XACT_KEEP_MS:
                return
            del xacts[gid]



def outcome_of(gid: str, kept: str) -> dict[str, Any]:
    """The evidence of a remembered outcome, as ``ref`` gave it when it was reported."""
    code, xgen, node, ts, inc, seq, *where = kept.split(" ", 6)
    out: dict[str, Any] = {"type": "gen.xact", "node": node, "ts_ms": int(ts), "incarnation": int(inc),
                           "seq": int(seq)}
    if where:
        out.update(json.loads(where[0]))
    return out | {"gid": gid, "xgen": int(xgen), "phase": _PHASE[code]}


def migrate_xacts(saved: dict[str, Any]) -> dict[str, str]:
    """``xacts`` of a saved state, in today's form: a state saved before kept each outcome of a
    gid with its evidence ({phase: [node, ts, evidence]}); its first outcome is kept."""
    out: dict[str, str] = {}
    for gid, v in saved.items():
        if isinstance(v, str):
            out[gid] = v
            continue
        outcomes = sorted((e[1], p) for p, e in v.items() if p in _OUTCOME)
        if outcomes:
            phase = outcomes[0][1]
            node, ts, here = v[phase]
            src = {k: here[k] for k in ("topic", "partition", "offset", "file", "line") if k in here}
            where = " " + json.dumps(src, separators=(",", ":")) if src else ""
            out[gid] = (f"{_OUTCOME[phase]} {here.get('xgen', 0)} {node} {ts} {here.get('incarnation', 0)} "
                        f"{here.get('seq', 0)}{where}")
    return out
