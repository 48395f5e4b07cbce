"""The generations fault catalogue (docs/families.md 2.7): each named fault makes the history
behind exactly one alert kind in an otherwise clean run, and each has a legal near miss that must
raise nothing (``<name>_near_miss``, alert ``None``).

A fault is a script over a :class:`GenGroupSim` (as in ``replimon.producers.simulator.faults``):
a generator that first waits for the group to settle (every node up and ONLINE in one
generation), then makes the one illegal step, and yields waits. While it runs the group's
background restarts pause. Injections are written ``NAME[:GROUP][@TIME]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from replimon.producers import fleet_run
from replimon.producers.fleet_run import FaultSpec, Injection
from replimon.producers.simulator_gen.group import GenGroupSim, Wait
from replimon.producers.simulator_gen.model import Gen, GenNode


def parse_injection(text: str) -> Injection:
    """``NAME[:GROUP][@TIME]``, e.g. ``gen_regression:pg2@40s`` (the group defaults to pg1)."""
    return fleet_run.parse_injection(text, CATALOGUE, "pg1")


# ------------------------------------------------------------------------------ shared steps
# The roles of docs/families.md 2.7: A, B and C are the first, second and last configured node.
def _abc(g: GenGroupSim) -> tuple[GenNode, GenNode, GenNode]:
    ids = g.configured
    return g.nodes[ids[0]], g.nodes[ids[1]], g.nodes[ids[-1]]


def _settled(g: GenGroupSim) -> Iterator[Wait]:
    """Wait until every node is up and ONLINE in one generation."""
    yield g.settled


def _excluded(g: GenGroupSim, node: GenNode, hold: bool = False) -> Iterator[Wait]:
    """Crash ``node`` until the others have elected a generation without it and are ONLINE in
    it; unless ``hold``, let it restart then (it comes back DEAD and campaigns to rejoin)."""
    yield from _settled(g)
    g.crash(node, 600_000)
    others = [n for n in g.nodes.values() if n is not node]
    yield lambda: all(node.id not in n.gen.members and n.status == "ONLINE" for n in others)
    if not hold:
        g.restart(node)


def _back_dead(g: GenGroupSim, node: GenNode) -> Wait:
    return lambda: node.up and node.status == "DEAD" and node.gen.num == max(g.elected)


def _rejoined(g: GenGroupSim, node: GenNode) -> Iterator[Wait]:
    yield from _excluded(g, node)
    yield g.settled


def _not_first_gen(g: GenGroupSim) -> Iterator[Wait]:
    """Make sure an older generation exists (a rejoin elects two)."""
    if max(g.elected) < 3:
        yield from _rejoined(g, _abc(g)[2])


# ------------------------------------------------------------------------------- violations
def gen_regression(g: GenGroupSim, inj: Injection, stale: bool = True) -> Iterator[Wait]:
    """B restarts and loads an older state (then, restarted again, its real one)."""
    yield from _not_first_gen(g)
    yield from _settled(g)
    _, b, _ = _abc(g)
    g.crash(b, 600_000)
    yield g.after(1_500)
    if stale:
        k = max(num for num in g.elected if num < b.gen.num)
        gen, donors = g.elected[k]
        old = replace(b, gen=gen, donors=donors, last_online_in=min(b.last_online_in, k),
                      last_vote=gen)
        g.restart(b, state=old)
        inj.notes.update(node=b.id, loaded=k, had=b.gen.num)
    g.restart(b)


def gen_state_inconsistent(g: GenGroupSim, inj: Injection) -> Iterator[Wait]:
    """B, back from a crash, switches to the new generation but reports its old last_vote."""
    _, b, _ = _abc(g)
    yield from _excluded(g, b, hold=True)
    old = b.last_vote  # what it had before the generation elected without it

    def stale_vote(e: dict[str, Any]) -> dict[str, Any] | None:
        return {**e, "last_vote": old.to_json()} if e["cause"] == "switch" else None

    g.tamper[b.id] = stale_vote
    g.restart(b)
    inj.notes.update(node=b.id, last_vote=old.num)
    yield _back_dead(g, b)


def gen_state_inconsistent_near_miss(g: GenGroupSim, inj: Injection) -> Iterator[Wait]:
    """B, back from a crash and DEAD in the new generation, bumps its last_vote well ahead."""
    _, b, _ = _abc(g)
    yield from _excluded(g, b)
    yield _back_dead(g, b)
    b.last_vote = Gen(b.gen.num + 3, (), ())
    g.publish_state(b, "bump")


def gen_members_conflict(g: GenGroupSim, inj: Injection) -> Iterator[Wait]:
    """C, back from a crash, reports the new generation with itself in place of A."""
    a, _, c = _abc(g)

    def other_members(e: dict[str, Any]) -> dict[str, Any] | None:
        if e["cause"] != "switch":
            return None
        members = [c.id if m == a.id else m for m in e["gen"]["members"]]
        return {**e, "gen": {**e["gen"], "members": members}}

    yield from _excluded(g, c, hold=True)
    g.tamper[c.id] = other_members
    g.restart(c)
    inj.notes["node"] = c.id
    yield _back_dead(g, c)


def gen_members_conflict_near_miss(g: GenGroupSim, inj: Injection) -> Iterator[Wait]:
    """Two campaigners win the same (n, members): C hears it with donors {A}, the others with
    donors {A, B} (each campaigner counts its own voters, ``CampaignTour``)."""
    yield from _settled(g)
    a, b, c = _abc(g)
    won = g.campaign(a, hold=True)
    g.held = None
    if won is not None:
        g.consider_switch(c, won, (a.id,))
        g.announce(a, won, (a.id, b.id))
        inj.notes["num"] = won.num


def gen_vote_promise_broken(g: GenGroupSim, inj: Injection) -> Iterator[Wait]:
    """A grants the number of its current generation again, for other members."""
    yield from _settled(g)
    a, _, c = _abc(g)
    n = a.last_vote.num
    grant = Gen(n, (a.id, c.id), g.configured)
    a.last_vote = grant
    g.publish_state(a, "vote", vote={**grant.to_json(), "candidate": c.id})
    inj.notes.update(node=a.id, num=n)


def _held_campaign(g: GenGroupSim, inj: Injection, ms: int) -> Iterator[Wait]:
    """A wins a campaign and tells nobody for ``ms`` (a polled node never answers)."""
    yield from _settled(g)
    a, _, _ = _abc(g)
    won = g.campaign(a, hold=True)
    inj.notes.update(node=a.id, num=won.num if won else None, held_ms=ms)
    yield g.after(ms)
    if g.held is not None:
        g.announce(*g.held)
        g.held = None


def gen_vote_promise_broken_near_miss(g: GenGroupSim, inj: Injection) -> Iterator[Wait]:
    """Every node, ONLINE, grants the next number and stays ONLINE for 5 s until the switch."""
    yield from _held_campaign(g, inj, 5_000)


def gen_online_ineligible(g: GenGroupSim, inj: Injection, anyway: bool = True) -> Iterator[Wait]:
    """C campaigns for a generation of itself alone, wins it, and goes ONLINE in it."""
    yield from _settled(g)
    g.xacts_paused = True
    _, _, c = _abc(g)
    if anyway:
        g.online_anyway = c.id
    won = g.campaign(c, members=(c.id,))
    inj.notes.update(node=c.id, num=won.num if won else None)
    yield from _settled(g)
    g.xacts_paused = False


def gen_online_unrecovered(g: GenGroupSim, inj: Injection, anyway: bool = True) -> Iterator[Wait]:
    """C, back from a crash, switches into the generation it rejoins as ONLINE, not a donor."""
    _, _, c = _abc(g)
    yield from _excluded(g, c)
    yield _back_dead(g, c)
    if anyway:
        g.online_anyway = c.id
    inj.notes["node"] = c.id
    yield g.settled


def gen_donor_stale(g: GenGroupSim, inj: Injection, commit: bool = True) -> Iterator[Wait]:
    """While C is out, A commits in a generation without C; C rejoins as the only donor."""
    a, _, c = _abc(g)
    g.xacts_paused = True
    yield from _excluded(g, c, hold=True)
    gid = g.xact(a, sampled=True, abort=not commit)
    g.restart(c)
    yield _back_dead(g, c)
    g.donors_override = (c.id,)
    inj.notes.update(node=c.id, gid=gid)
    yield g.settled
    g.xacts_paused = False


def gen_barrier_broken(g: GenGroupSim, inj: Injection) -> Iterator[Wait]:
    """B, ONLINE in n, prepares a transaction of generation n-1 in normal mode."""
    yield from _not_first_gen(g)
    yield from _settled(g)
    _, b, _ = _abc(g)
    _old_prepare(g, b, "normal")
    inj.notes["node"] = b.id


def _old_prepare(g: GenGroupSim, b: GenNode, mode: str) -> None:
    n = b.gen.num
    gid = f"MTM-0-{g.t}-{n - 1}"
    base = {"gid": gid, "xgen": n - 1, "role": "replica", "mode": mode}
    g.publish(b, "gen.xact", {**base, "phase": "prepared", "at": {"num": n, "status": b.status}})
    g.publish(b, "gen.xact", {**base, "phase": "aborted"})


def gen_barrier_broken_near_miss(g: GenGroupSim, inj: Injection) -> Iterator[Wait]:
    """B, RECOVERY in n, applies a prepare of generation n-1 in recovery mode."""
    _, b, _ = _abc(g)
    yield from _excluded(g, b)
    yield lambda: b.status == "RECOVERY"
    _old_prepare(g, b, "recovery")


def gen_commit_unprepared(g: GenGroupSim, inj: Injection) -> Iterator[Wait]:
    """A commits a transaction without the PREPARED ack of one member."""
    yield from _settled(g)
    a, _, _ = _abc(g)
    inj.notes["gid"] = g.xact(a, sampled=True, fault="unprepared")


def gen_commit_unprepared_near_miss(g: GenGroupSim, inj: Injection) -> Iterator[Wait]:
    """A commits with the acks of A and B in a generation that excludes C."""
    a, _, c = _abc(g)
    yield from _excluded(g, c, hold=True)
    inj.notes["gid"] = g.xact(a, sampled=True)
    g.restart(c)


def gen_xact_divergent(g: GenGroupSim, inj: Injection, abort: bool = False) -> Iterator[Wait]:
    """A commits a transaction that a replica aborts."""
    yield from _settled(g)
    a, _, _ = _abc(g)
    inj.notes["gid"] = g.xact(a, sampled=True, abort=abort, fault=None if abort else "divergent")


# ------------------------------------------------------------------------------------ wedges
def _isolated(g: GenGroupSim, inj: Injection, ms: int) -> Iterator[Wait]:
    """Every node cut off from every other for ``ms``."""
    yield from _settled(g)
    for node in g.nodes.values():
        node.isolated_until = g.t + ms
    inj.notes["duration_ms"] = ms
    yield g.after(ms)


def _stream_blocked(g: GenGroupSim, inj: Injection, ms: int) -> Iterator[Wait]:
    """C rejoins, and no donor streams it to ParallelSafe for ``ms``."""
    _, _, c = _abc(g)
    yield from _excluded(g, c)
    g.stream_blocked_until = g.t + ms
    inj.notes.update(node=c.id, duration_ms=ms)
    yield g.settled


def gen_vote_stuck_near_miss(g: GenGroupSim, inj: Injection) -> Iterator[Wait]:
    """C alone votes for itself again and again, refused (nobody is asked)."""
    yield from _settled(g)
    _, _, c = _abc(g)
    for _ in range(4):
        grant = Gen(c.last_vote.num + 1, g.configured, g.configured)
        c.last_vote = grant
        g.publish_state(c, "vote", vote={**grant.to_json(), "candidate": c.id})
        yield g.after(3_000)


def _spec(name: str, alert: str | None, summary: str,
          script: Callable[[GenGroupSim, Injection], Iterator[Wait]]) -> FaultSpec[GenGroupSim]:
    return FaultSpec(name, alert, summary, script)


CATALOGUE: dict[str, FaultSpec[GenGroupSim]] = {
    spec.name: spec
    for spec in [
        _spec("gen_regression", "GEN_REGRESSION", "B restarts and loads an older generation state", gen_regression),
        _spec("gen_regression_near_miss", None, "B restarts and loads its current state",
              lambda g, i: gen_regression(g, i, stale=False)),
        _spec("gen_state_inconsistent", "GEN_STATE_INCONSISTENT", "B switches and reports a last_vote below the generation", gen_state_inconsistent),
        _spec("gen_state_inconsistent_near_miss", None, "B, DEAD, bumps its last_vote ahead", gen_state_inconsistent_near_miss),
        _spec("gen_members_conflict", "GEN_MEMBERS_CONFLICT", "C reports a generation number with other members", gen_members_conflict),
        _spec("gen_members_conflict_near_miss", None, "two campaigners win one generation with other donors", gen_members_conflict_near_miss),
        _spec("gen_vote_promise_broken", "GEN_VOTE_PROMISE_BROKEN", "A grants its generation's number again for other members", gen_vote_promise_broken),
        _spec("gen_vote_promise_broken_near_miss", None, "ONLINE nodes grant the next number and stay ONLINE 5 s", gen_vote_promise_broken_near_miss),
        _spec("gen_online_ineligible", "GEN_ONLINE_INELIGIBLE", "C goes ONLINE in a generation of itself alone", gen_online_ineligible),
        _spec("gen_online_ineligible_near_miss", None, "C's one-node generation is elected; C is DEAD in it",
              lambda g, i: gen_online_ineligible(g, i, anyway=False)),
        _spec("gen_online_unrecovered", "GEN_ONLINE_UNRECOVERED", "C rejoins ONLINE without being a donor", gen_online_unrecovered),
        _spec("gen_online_unrecovered_near_miss", None, "C rejoins, recovers to ParallelSafe from a donor",
              lambda g, i: gen_online_unrecovered(g, i, anyway=False)),
        _spec("gen_donor_stale", "GEN_DONOR_STALE", "C rejoins as the only donor after a commit it missed", gen_donor_stale),
        _spec("gen_donor_stale_near_miss", None, "the same, but the missed transaction aborted",
              lambda g, i: gen_donor_stale(g, i, commit=False)),
        _spec("gen_barrier_broken", "GEN_BARRIER_BROKEN", "B, ONLINE in n, prepares a gen n-1 transaction normally", gen_barrier_broken),
        _spec("gen_barrier_broken_near_miss", None, "B, RECOVERY in n, applies a gen n-1 prepare in recovery", gen_barrier_broken_near_miss),
        _spec("gen_commit_unprepared", "GEN_COMMIT_UNPREPARED", "A commits without one member's PREPARED ack", gen_commit_unprepared),
        _spec("gen_commit_unprepared_near_miss", None, "A commits with the acks of a generation without C", gen_commit_unprepared_near_miss),
        _spec("gen_xact_divergent", "GEN_XACT_DIVERGENT", "a replica aborts what the coordinator commits", gen_xact_divergent),
        _spec("gen_xact_divergent_near_miss", None, "the coordinator aborts and every node aborts",
              lambda g, i: gen_xact_divergent(g, i, abort=True)),
        _spec("gen_no_online", "GEN_NO_ONLINE", "every node isolated for 20 s", lambda g, i: _isolated(g, i, 20_000)),
        _spec("gen_no_online_near_miss", None, "every node isolated for 8 s", lambda g, i: _isolated(g, i, 8_000)),
        _spec("gen_recovery_stuck", "GEN_RECOVERY_STUCK", "no donor streams to rejoining C for 90 s", lambda g, i: _stream_blocked(g, i, 90_000)),
        _spec("gen_recovery_stuck_near_miss", None, "rejoining C recovers in 20 s", lambda g, i: _stream_blocked(g, i, 20_000)),
        _spec("gen_vote_stuck", "GEN_VOTE_STUCK", "a majority grants a number and nobody switches for 40 s", lambda g, i: _held_campaign(g, i, 40_000)),
        _spec("gen_vote_stuck_near_miss", None, "one node votes for itself repeatedly, refused", gen_vote_stuck_near_miss),
    ]
}
