"""The quorum-log fault catalogue (docs/families.md 3.7): each named fault makes the history behind
exactly one alert kind in an otherwise clean run, and each has a legal near miss that must raise
nothing (``<name>_near_miss``, alert ``None``).

A fault is a script over a :class:`QlogGroupSim` (as in the other simulators): a generator that
first waits for the group to settle (a leader, every member live and caught up), then makes the
one illegal step, and yields waits. While it runs the group's background crashes and delays
pause. Roles, for a current list ``M`` of ``n`` members with majority ``q``: A is the head (the
leader), the *up-to-date* replicas are ``M[:q]`` and the *delayed* ones ``M[q:]`` (D and E of
the RFC's five). Injections are written ``NAME[:GROUP][@TIME]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from replimon.producers import fleet_run
from replimon.producers.fleet_run import FaultSpec, Injection
from replimon.producers.simulator_qlog.group import QlogGroupSim, Wait
from replimon.producers.simulator_qlog.model import Replica, Value, majority

FAR = 600_000  # "until the script says otherwise"


def parse_injection(text: str) -> Injection:
    """``NAME[:GROUP][@TIME]``, e.g. ``qlog_recover_unsafe:ql2@40s`` (the group defaults to ql1)."""
    return fleet_run.parse_injection(text, CATALOGUE, "ql1")


# ------------------------------------------------------------------------------ shared steps
def _settled(g: QlogGroupSim) -> Iterator[Wait]:
    yield g.settled


def _roles(g: QlogGroupSim) -> tuple[Replica, list[Replica], int]:
    """The leader, the current members in order, and their majority."""
    lead = g.leader()
    assert lead is not None
    ms = [g.nodes[m] for m in lead.members]
    return lead, ms, majority(len(ms))


def _executed_by(g: QlogGroupSim, replicas: list[Replica], num: int) -> Wait:
    return lambda: all(r.w > num for r in replicas)


def _value(g: QlogGroupSim, what: str) -> Value:
    return Value.values(f"{g.name}/{what}/{g.t}")


# ------------------------------------------------------------------------------- violations
def divergent_decree(g: QlogGroupSim, inj: Injection) -> Iterator[Wait]:
    """RFC (2): while D and E are delayed, A passes a values decree at k with A, B, C; then D passes
    a Reconf at the same (leg, k) with C, D and E (C acks two values at one decree),
    and D and E execute it. D and E's legislature is then adopted by the others (the group goes
    on consistent from k + 1)."""
    yield from _settled(g)
    g.paused = True
    lead, ms, q = _roles(g)
    upto, late = ms[:q], ms[q:]
    for r in late:
        r.delayed_until = g.t + FAR
    first = g.propose(lead, _value(g, "divergent"))
    assert first is not None
    yield _executed_by(g, upto, first.num)
    d = late[0]
    bad = g.propose(d, Value.reconf(d.leg + 1, d.members), num=first.num,
                    acked=[r.id for r in ms[-q:]])  # the delayed ones and enough of the others
    assert bad is not None
    for r in late:
        g.forced[(r.id, first.num)] = bad
        r.delayed_until = None
    yield _executed_by(g, late, first.num)
    for r in upto:  # they hear of the newer legislature of the same members, and adopt it
        r.leg = max(r.leg, d.leg)
    g.paused = False
    inj.notes.update(num=first.num, leg=first.leg, node=d.id)


def stale_proposer(g: QlogGroupSim, inj: Injection, mode: str = "skip") -> Iterator[Wait]:
    """While E (the last member) is delayed, A renews its lease with a Reconf at k; E, still in the
    old legislature, passes a values decree at k + 1 with a majority of that legislature (legal:
    the decree is unreachable); A passes k + 1 in the new legislature. ``mode``: ``skip`` (E
    catches up and skips the old decree: legal), ``teleport`` (E catches up by teleportation:
    decrees without a legislature, legal), ``execute`` (E executes the old decree: a fault; its
    value is the one A passed, so only the legislature is wrong)."""
    yield from _settled(g)
    g.paused = True
    lead, ms, q = _roles(g)
    e = ms[-1]
    e.delayed_until = g.t + FAR
    renew = g.propose(lead, Value.reconf(lead.leg + 1, lead.members))
    assert renew is not None
    yield _executed_by(g, ms[:-1], renew.num)
    value = _value(g, "stale")
    stale = g.propose(e, value, num=renew.num + 1, acked=[r.id for r in ms[-q:]])
    assert stale is not None
    new = g.propose(lead, value if mode == "execute" else _value(g, "new"))
    assert new is not None and new.num == stale.num
    if mode == "execute":
        g.forced[(e.id, stale.num)] = stale
    e.delayed_until = None
    e.teleport = mode == "teleport"
    yield _executed_by(g, [e], stale.num)
    g.paused = False
    inj.notes.update(node=e.id, num=stale.num, leg=stale.leg)


def reconf_without_old_quorum(g: QlogGroupSim, inj: Injection, legal: bool = False) -> Iterator[Wait]:
    """A Reconf removing A and B (the first n - q members) passed with the new members as
    acceptors, acked by D and E only (``legal``: by C, D and E, a majority of the old list)."""
    yield from _settled(g)
    g.paused = True
    _, ms, q = _roles(g)
    n = len(ms)
    new = tuple(r.id for r in ms[n - q:])
    acked = list(new) if legal else [r.id for r in ms[q:]]
    p = g.nodes[new[0]]
    entry = g.propose(p, Value.reconf(p.leg + 1, new), acceptors=new, acked=acked)
    assert entry is not None
    yield _executed_by(g, [g.nodes[m] for m in new], entry.num)
    g.paused = False
    inj.notes.update(num=entry.num, leg=entry.leg, acked=acked)


def decree_without_quorum(g: QlogGroupSim, inj: Injection) -> Iterator[Wait]:
    """A values decree acked by one member less than a majority, executed by everyone."""
    yield from _settled(g)
    g.paused = True
    lead, ms, q = _roles(g)
    entry = g.propose(lead, _value(g, "minority"), acked=[r.id for r in ms[:q - 1]])
    assert entry is not None
    yield _executed_by(g, ms, entry.num)
    g.paused = False
    inj.notes.update(num=entry.num, leg=entry.leg)


def recover(g: QlogGroupSim, inj: Injection, *, relocate: bool = True, late_ms: int = 0,
            partial: bool = False, quorum_lost: bool = False) -> Iterator[Wait]:
    """The operator moves D and E (the members after the first q) to new hosts X.. (seeded from
    their disks when ``relocate``, else fresh) and adds a fresh Y that boots ``late_ms`` after the
    others, by asking C (the last of the first q) to recover to [C, X.., Y]. The leader is not in
    the new list, so C takes the sync path (`Internal.hs` go/Recover: no leader "in the new
    membership"). ``partial`` (a fault): C syncs with the acceptors online, not all of ``new``.
    D and E keep running until the Reconf removes them, so nothing else goes silent; with
    ``quorum_lost`` (what ``recover`` is for: RFC, "The group has no quorum") their hosts are gone
    and so is the first member's, so the old membership can pass nothing (no lease: QLOG_NO_LEADER,
    QUORUM_LOST and their NODE_SILENT, ``IMPLIED``) until the recovery's Reconf opens the new one;
    otherwise the old quorum's lease renewals would end the episode as abandoned."""
    yield from _settled(g)
    _, ms, q = _roles(g)
    moved, server = ms[q:], ms[q - 1]
    hosts = [g.new_host() for _ in moved]
    late = g.new_host()
    for host, old in zip(hosts, moved, strict=True):
        g.boot(host, old if relocate else server)
    if quorum_lost:
        for gone in (*moved, ms[0]):
            g.crash(gone, None)
    if not late_ms:
        g.boot(late, server)
    yield g.after(1_000)
    new = (server.id, *[h.id for h in hosts], late.id)
    relocated = [{"node": h.id, "from": old.id} for h, old in zip(hosts, moved, strict=True)] if relocate else []
    g.start_recovery(server, new, relocated, sync_partial=partial)
    inj.notes.update(node=server.id, new=list(new), relocated=relocated)
    if late_ms:
        yield g.after(late_ms)
        g.boot(late, server)
    yield lambda: g.recovery is None and all(g.nodes[m].w == g.frontier() for m in new if g.nodes[m].up)


def legislature_regression(g: QlogGroupSim, inj: Injection, stale: bool = True) -> Iterator[Wait]:
    """B restarts and first reports the legislature two below the one it had (then, restarted
    again, its real one); ``stale`` False: it restarts and replays from its snapshot."""
    yield from _settled(g)
    _, ms, _ = _roles(g)
    b = ms[1]
    g.crash(b, FAR)
    yield g.after(1_500)
    had = b.leg
    g.restart(b)
    if stale:
        g.hb_tamper[b.id] = {"leg": had - 2}
        yield lambda: b.id not in g.hb_tamper
        g.restart(b)
        inj.notes.update(node=b.id, reported=had - 2, had=had)
    yield g.settled


def no_leader(g: QlogGroupSim, inj: Injection, wedged_ms: int) -> Iterator[Wait]:
    """The leader's proposer wedges (it publishes, but renews nothing) and nobody asks for the
    lease, for ``wedged_ms``."""
    yield from _settled(g)
    lead, _, _ = _roles(g)
    g.paused = True
    inj.notes.update(node=lead.id, wedged_ms=wedged_ms)
    yield g.after(wedged_ms)
    g.paused = False
    yield g.settled


def leader_killed(g: QlogGroupSim, inj: Injection, down_ms: int) -> Iterator[Wait]:
    """The leader crashes for ``down_ms``; another member takes the lease when it runs out."""
    yield from _settled(g)
    lead, _, _ = _roles(g)
    g.crash(lead, down_ms)
    inj.notes.update(node=lead.id, down_ms=down_ms)
    yield g.after(down_ms)
    yield g.settled


def _spec(name: str, alert: str | None, summary: str,
          script: Callable[[QlogGroupSim, Injection], Iterator[Wait]]) -> FaultSpec[QlogGroupSim]:
    return FaultSpec(name, alert, summary, script)


# Kinds a fault raises besides its own because its situation is them: a recovery is stuck only in
# a group without quorum (docs/families.md 3.1: ``recover`` is for such a group), whose old
# members are silent, whose quorum is lost and in which nobody can take the lease.
IMPLIED = {"QLOG_RECOVER_STUCK": frozenset({"NODE_SILENT", "QUORUM_LOST", "QLOG_NO_LEADER"})}

CATALOGUE: dict[str, FaultSpec[QlogGroupSim]] = {
    spec.name: spec
    for spec in [
        _spec("qlog_divergent_decree", "QLOG_DIVERGENT_DECREE",
              "delayed D and E pass a Reconf at a number A, B, C passed (C acks both)", divergent_decree),
        _spec("qlog_divergent_decree_near_miss", None,
              "delayed E passes a decree at an unreachable number; everyone skips it", stale_proposer),
        _spec("qlog_reconf_without_old_quorum", "QLOG_RECONF_WITHOUT_OLD_QUORUM",
              "a Reconf removing A and B acked by D and E only", reconf_without_old_quorum),
        _spec("qlog_reconf_without_old_quorum_near_miss", None, "the same Reconf acked by C, D and E",
              lambda g, i: reconf_without_old_quorum(g, i, legal=True)),
        _spec("qlog_decree_without_quorum", "QLOG_DECREE_WITHOUT_QUORUM",
              "a values decree acked by one less than a majority", decree_without_quorum),
        _spec("qlog_decree_without_quorum_near_miss", None,
              "a stale proposer's decree in an old legislature, acked by a majority of it", stale_proposer),
        _spec("qlog_obsolete_decree_executed", "QLOG_OBSOLETE_DECREE_EXECUTED",
              "E executes an old legislature's decree after the Reconf that closed it",
              lambda g, i: stale_proposer(g, i, mode="execute")),
        _spec("qlog_obsolete_decree_executed_near_miss", None, "E skips the old legislature's decree",
              stale_proposer),
        _spec("qlog_obsolete_decree_executed_near_miss_teleported", None,
              "E catches up by teleportation (decrees without a legislature)",
              lambda g, i: stale_proposer(g, i, mode="teleport")),
        _spec("qlog_recover_unsafe", "QLOG_RECOVER_UNSAFE", "move D and E: recover to [C, X, Z, Y] of fresh hosts, no relocation",
              lambda g, i: recover(g, i, relocate=False)),
        _spec("qlog_recover_unsafe_near_miss", None, "the same with X and Z seeded from D's and E's disks",
              recover),
        _spec("qlog_recover_unsynced", "QLOG_RECOVER_UNSYNCED", "the recovery Reconf passes before Y is synced",
              lambda g, i: recover(g, i, late_ms=3_000, partial=True)),
        _spec("qlog_recover_unsynced_near_miss", None, "synced with every new acceptor, then passed",
              lambda g, i: recover(g, i, late_ms=3_000)),
        _spec("qlog_legislature_regression", "QLOG_LEGISLATURE_REGRESSION",
              "B restarts and reports a legislature two below its own", legislature_regression),
        _spec("qlog_legislature_regression_near_miss", None, "B restarts and replays from its snapshot",
              lambda g, i: legislature_regression(g, i, stale=False)),
        _spec("qlog_no_leader", "QLOG_NO_LEADER", "the leader's proposer wedges; no lease is taken for 25 s",
              lambda g, i: no_leader(g, i, 25_000)),
        _spec("qlog_no_leader_near_miss", None, "the leader is killed; a new one takes the lease within 5 s",
              lambda g, i: leader_killed(g, i, 2_000)),
        _spec("qlog_recover_stuck", "QLOG_RECOVER_STUCK",
              "the old quorum is lost; one host of the new membership stays down 90 s",
              lambda g, i: recover(g, i, late_ms=90_000, quorum_lost=True)),
        _spec("qlog_recover_stuck_near_miss", None, "the recovery completes in 10 s",
              lambda g, i: recover(g, i, late_ms=8_000)),
    ]
}
