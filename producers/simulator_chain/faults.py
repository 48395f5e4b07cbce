"""The chain fault catalogue (docs/families.md 4.7): each named fault makes the history behind
exactly one alert kind in an otherwise clean run (``IMPLIED`` names the one exception: a view left
stale 10 s has had its lease expired first), and each has at least one legal near miss that must
raise nothing (``<name>_near_miss...``, alert ``None``).

A fault is a script over a :class:`ChainGroupSim`: a generator that first waits for the group to
settle (the view installed everywhere, everyone caught up), then makes its step, and yields waits.
While it runs the group's background crashes pause. Roles, for the current chain ``C`` of ``n``
replicas: A is the head ``C[0]``, B its successor ``C[1]``, T the tail ``C[-1]`` and U the
tail's upstream ``C[-2]`` (B when n = 3). Injections are written ``NAME[:GROUP][@TIME]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from replimon.producers import fleet_run
from replimon.producers.fleet_run import FaultSpec, Injection
from replimon.producers.simulator_chain.group import DETECT_MS, ChainGroupSim, Wait
from replimon.producers.simulator_chain.model import Replica

IMPLIED = {"CHAIN_VIEW_STALE": frozenset({"CHAIN_LEASE_EXPIRED"})}
"""Kinds a fault raises besides its own because its own requires them (4.5: a view is stale only
after the lease expired, and for longer than CHAIN_LEASE_EXPIRED's bound)."""


def parse_injection(text: str) -> Injection:
    """``NAME[:GROUP][@TIME]``, e.g. ``chain_two_heads:ch2@40s`` (the group defaults to ch1)."""
    return fleet_run.parse_injection(text, CATALOGUE, "ch1")


# ------------------------------------------------------------------------------ shared steps
def _settled(g: ChainGroupSim) -> Iterator[Wait]:
    yield g.settled


def _roles(g: ChainGroupSim) -> tuple[Replica, Replica, Replica, Replica]:
    """A (head), B (its successor), U (the tail's upstream), T (the tail)."""
    c = [g.nodes[m] for m in g.view_chain]
    return c[0], c[1], c[-2], c[-1]


def _re_view(g: ChainGroupSim) -> Wait:
    """Ask the view manager for the same chain under a higher epoch; wait until it is installed."""
    g.force_view = True
    return g.settled


def _data_tail(g: ChainGroupSim, r: Replica, k: int) -> Wait:
    """Until ``r``'s last ``k`` entries are data of its epoch, and it is caught up."""
    return lambda: g.settled() and r.pos > k and all(e.kind == "data" and e.epoch == r.epoch for e in r.log[-k:])


# ------------------------------------------------------------------------------- the faults
def epoch_regression(g: ChainGroupSim, inj: Injection) -> Iterator[Wait]:
    """B's next heartbeat reports the epoch before its current one (same incarnation), with that
    epoch's chain: the view it states is the old view, so only the regression is wrong (under an
    epoch whose chain differs, the current chain would also be a second view of the old epoch,
    CHAIN_VIEW_CONFLICT: the same chain is re-viewed first)."""
    yield from _settled(g)
    if len(g.epochs) < 2 or g.chain_of[g.epochs[-2]] != g.view_chain:
        yield _re_view(g)
    _, b, _, _ = _roles(g)
    had = b.epoch
    g.hb_tamper[b.id] = {"epoch": g.epochs[-2]}
    inj.notes.update(node=b.id, reported=g.epochs[-2], had=had)
    yield lambda: b.id not in g.hb_tamper


def restart_empty(g: ChainGroupSim, inj: Injection) -> Iterator[Wait]:
    """B crashes with its store; a new replica with a new id replaces it at the tail."""
    yield from _settled(g)
    _, b, _, _ = _roles(g)
    g.crash(b)
    inj.notes.update(node=b.id)
    yield lambda: b.gone and g.settled()
    inj.notes.update(new=g.view_chain[-1])


def view_over_hole(g: ChainGroupSim, inj: Injection, *, fault: bool) -> Iterator[Wait]:
    """The append before a view change is lost on its way to T; T then gets the ViewChange with
    a precondition one past its position. ``fault``: T installs it over the hole (CAS broken) and
    is then wiped (it rejoins empty under a new id); else T answers BadSequence and its upstream
    resends from the hole."""
    yield from _settled(g)
    g.paused = True
    a, _, _, t = _roles(g)
    g.accept_client(a, 1)
    g.drop[t.id] = 1
    if fault:
        g.over_hole.add(t.id)
    inj.notes.update(node=t.id, pos=a.pos)
    yield _re_view(g)
    g.paused = False
    if fault:  # a store with a hole is wiped: the replica rejoins empty under a new id
        g.crash(t)
        yield lambda: t.gone and g.settled()


def wrong_epoch(g: ChainGroupSim, inj: Injection) -> Iterator[Wait]:
    """A stale view proxy hands head A ``viewChanged`` from an older epoch: A rejects it."""
    yield from _settled(g)
    if len(g.epochs) < 2:
        yield _re_view(g)
    a, _, _, _ = _roles(g)
    g.revision += 1
    g.publish_view(a, g.epochs[-2], g.revision, g.view_chain, a.pos + 1, "WrongEpoch")
    inj.notes.update(node=a.id, from_epoch=g.epochs[-2], epoch=g.revision)
    yield g.after(1_000)


def stale_head(g: ChainGroupSim, inj: Injection, mode: str) -> Iterator[Wait]:
    """Head A is cut off from the view manager (its renewals and view news stop) while its link to
    B still works, and a client-proxy that has not seen the next view keeps writing to it; A's
    slot expires and B heads the next view; 4 s later A hears of it and rejoins empty under a
    new id. ``mode``: ``legal`` (B takes A's runs before it installs the view, answers
    ``bad_sequence`` after), ``stale`` (a fault: B, at the new epoch, accepts one of A's old-epoch
    runs, and its successors what B sends them), ``wedged`` (B also suspects A, wedges, rejects
    A's runs as ``wedged``, then installs the view), ``wedged_write`` (a fault: the same, but B
    accepts one of A's runs of its wedged epoch)."""
    yield from _settled(g)
    a, b, _, _ = _roles(g)
    a.cut_at = g.t
    g.stale_writers.add(a.id)
    inj.notes.update(node=b.id, old_head=a.id, epoch=a.epoch)
    if mode.startswith("wedged"):
        g.suspicion[(b.id, a.id)] = g.t
        if mode == "wedged_write":
            g.accept_wedged.add(b.id)
        yield lambda: b.is_wedged()
        g.suspicion.pop((b.id, a.id))
        g.accept_client(a, 2)
    old = inj.notes["epoch"]
    yield lambda: b.epoch > old
    g.accept_wedged.discard(b.id)
    if mode == "stale":
        g.accept_stale.add(b.id)
        yield lambda: b.id not in g.accept_stale
    yield g.after(4_000)
    g.stale_writers.discard(a.id)
    a.cut_at = None
    yield lambda: a.gone and g.settled()


def resend(g: ChainGroupSim, inj: Injection, *, fault: bool) -> Iterator[Wait]:
    """T's upstream resends from two entries back (a stale ``last_sent_pos``). ``fault``: T
    accepts it, overwriting the same entries; else it answers ``bad_sequence`` and the upstream
    resends from T's position."""
    yield from _settled(g)
    _, _, _, t = _roles(g)
    yield _data_tail(g, t, 3)
    g.resend[t.id] = 2
    if fault:
        g.accept_resend.add(t.id)
    inj.notes.update(node=t.id, pos=t.pos)
    yield lambda: t.id not in g.resend
    g.accept_resend.discard(t.id)


def view_conflict(g: ChainGroupSim, inj: Injection, *, fault: bool) -> Iterator[Wait]:
    """The view manager writes the same chain under a higher epoch. ``fault``: T stores it with
    itself moved right after the head (the head and the others store the view as written); the
    next view puts it back."""
    yield from _settled(g)
    _, _, _, t = _roles(g)
    if fault:
        g.view_tamper.add(t.id)
    inj.notes.update(node=t.id)
    yield _re_view(g)
    inj.notes.update(epoch=g.view_epoch)
    if fault:
        yield g.after(1_000)
        yield _re_view(g)


def two_heads(g: ChainGroupSim, inj: Injection) -> Iterator[Wait]:
    """Tail T accepts a client write in the current epoch (its log now runs ahead of its
    upstream's); an operator wipes it and it rejoins empty under a new id."""
    yield from _settled(g)
    _, _, _, t = _roles(g)
    inj.notes.update(node=t.id, epoch=t.epoch)
    g.accept_client(t, 2)
    g.crash(t)
    yield lambda: t.gone and g.settled()


def divergence(g: ChainGroupSim, inj: Injection, *, fault: bool) -> Iterator[Wait]:
    """``fault``: T's store reports another digest for the next single entry it is sent. Near
    miss: T is held 1 s while a view change goes down the chain; it installs it at the same
    position, later in time."""
    yield from _settled(g)
    _, _, _, t = _roles(g)
    inj.notes.update(node=t.id)
    if fault:
        g.corrupt.add(t.id)
        yield lambda: t.id not in g.corrupt
        return
    g.hold[t.id] = g.t + 1_000
    yield _re_view(g)


def join(g: ChainGroupSim, inj: Injection, *, misplaced: bool) -> Iterator[Wait]:
    """A spare replica joins the group. ``misplaced`` (a fault): its slot is ordered right after
    the head's, so the view puts it before the others."""
    yield from _settled(g)
    g.misplace_next = misplaced
    new = g.new_host()
    g.boot(new)
    inj.notes.update(node=new.id)
    yield lambda: new.id in g.view_chain and g.settled()
    inj.notes.update(epoch=g.view_epoch, chain=list(g.view_chain))


def wedge_unreplaced(g: ChainGroupSim, inj: Injection, stalled_ms: int) -> Iterator[Wait]:
    """U wrongly suspects T and wedges (A..U wedge with it); the view manager is stalled for
    ``stalled_ms`` while everyone goes on heartbeating; then it drops T (its lease revoked), which
    rejoins empty under a new id."""
    yield from _settled(g)
    _, _, u, t = _roles(g)
    g.vm_stalled_until = g.t + stalled_ms
    g.suspicion[(u.id, t.id)] = g.t - DETECT_MS
    inj.notes.update(node=u.id, suspect=t.id, epoch=u.epoch, stalled_ms=stalled_ms)
    yield lambda: u.is_wedged()
    g.suspicion.pop((u.id, t.id))
    yield lambda: t.gone and g.settled()


def blocked_heartbeater(g: ChainGroupSim, inj: Injection, blocked_ms: int) -> Iterator[Wait]:
    """T's heartbeater is blocked ``blocked_ms`` (T goes on replicating); the view manager's
    watcher is stalled meanwhile, so no view leaves T out; then T renews."""
    yield from _settled(g)
    _, _, _, t = _roles(g)
    g.hb_blocked[t.id] = g.t + blocked_ms
    g.vm_stalled_until = g.t + blocked_ms + 1_500
    inj.notes.update(node=t.id, blocked_ms=blocked_ms)
    yield g.after(blocked_ms + 2_000)
    yield g.settled


def jitter(g: ChainGroupSim, inj: Injection) -> Iterator[Wait]:
    """T's renewals come 1.4 s apart for 10 s (TTL 2 s)."""
    yield from _settled(g)
    _, _, _, t = _roles(g)
    g.hb_jitter[t.id] = (400, g.t + 10_000)
    inj.notes.update(node=t.id)
    yield g.after(11_000)


def cut_off(g: ChainGroupSim, inj: Injection) -> Iterator[Wait]:
    """T is cut off from the view manager; its slot expires, and a view without T is installed
    1.5 s after that; T hears of it and rejoins empty under a new id."""
    yield from _settled(g)
    _, _, _, t = _roles(g)
    t.cut_at = g.t
    g.vm_grace[t.id] = 1_500
    inj.notes.update(node=t.id)
    yield lambda: t.id not in g.view_chain and g.settled()
    g.vm_grace.pop(t.id)
    t.cut_at = None
    yield lambda: t.gone and g.settled()


def _spec(name: str, alert: str | None, summary: str,
          script: Callable[[ChainGroupSim, Injection], Iterator[Wait]]) -> FaultSpec[ChainGroupSim]:
    return FaultSpec(name, alert, summary, script)


CATALOGUE: dict[str, FaultSpec[ChainGroupSim]] = {
    spec.name: spec
    for spec in [
        _spec("chain_epoch_regression", "CHAIN_EPOCH_REGRESSION",
              "B's heartbeat reports the epoch before its current one, same incarnation", epoch_regression),
        _spec("chain_epoch_regression_near_miss", None,
              "B crashes with its store and is replaced under a new id, added at the tail", restart_empty),
        _spec("chain_view_not_cas", "CHAIN_VIEW_NOT_CAS",
              "T installs a view change one past its position (the append before it was lost)",
              lambda g, i: view_over_hole(g, i, fault=True)),
        _spec("chain_view_not_cas_near_miss", None,
              "T answers the view change BadSequence; its upstream resends from the lost append",
              lambda g, i: view_over_hole(g, i, fault=False)),
        _spec("chain_view_not_cas_near_miss_wrong_epoch", None,
              "head A rejects a stale proxy's viewChanged from an older epoch (WrongEpoch)", wrong_epoch),
        _spec("chain_stale_epoch_write", "CHAIN_STALE_EPOCH_WRITE",
              "B, head of the next epoch, accepts a run of the old epoch from the stale head A",
              lambda g, i: stale_head(g, i, "stale")),
        _spec("chain_stale_epoch_write_near_miss", None,
              "B accepts A's runs before it installs the next view, answers bad_sequence after",
              lambda g, i: stale_head(g, i, "legal")),
        _spec("chain_append_not_cas", "CHAIN_APPEND_NOT_CAS",
              "T accepts a resend from two entries back, overwriting them",
              lambda g, i: resend(g, i, fault=True)),
        _spec("chain_append_not_cas_near_miss", None,
              "T answers the resend bad_sequence; its upstream resends from T's position",
              lambda g, i: resend(g, i, fault=False)),
        _spec("chain_wedged_write", "CHAIN_WEDGED_WRITE",
              "B suspects the stale head A and wedges, then accepts A's run of the wedged epoch",
              lambda g, i: stale_head(g, i, "wedged_write")),
        _spec("chain_wedged_write_near_miss", None,
              "B wedges, rejects A's run (wedged), installs the next view, accepts its data",
              lambda g, i: stale_head(g, i, "wedged")),
        _spec("chain_view_conflict", "CHAIN_VIEW_CONFLICT",
              "T stores a re-view with itself moved right after the head",
              lambda g, i: view_conflict(g, i, fault=True)),
        _spec("chain_view_conflict_near_miss", None,
              "a re-view installed alike by all (and every boot's default epoch-0 self-view)",
              lambda g, i: view_conflict(g, i, fault=False)),
        _spec("chain_two_heads", "CHAIN_TWO_HEADS",
              "tail T accepts a client write in the current epoch (then is wiped and rejoins)", two_heads),
        _spec("chain_two_heads_near_miss", None,
              "the stale head A accepts client writes in its epoch after B heads the next",
              lambda g, i: stale_head(g, i, "legal")),
        _spec("chain_log_divergence", "CHAIN_LOG_DIVERGENCE",
              "T reports another digest than its upstream at one position",
              lambda g, i: divergence(g, i, fault=True)),
        _spec("chain_log_divergence_near_miss", None,
              "T installs a view change at the same position 1 s after the others",
              lambda g, i: divergence(g, i, fault=False)),
        _spec("chain_add_not_at_tail", "CHAIN_ADD_NOT_AT_TAIL",
              "a new replica is put right after the head, before the others",
              lambda g, i: join(g, i, misplaced=True)),
        _spec("chain_add_not_at_tail_near_miss", None, "a new replica joins at the tail",
              lambda g, i: join(g, i, misplaced=False)),
        _spec("chain_add_not_at_tail_near_miss_splice", None,
              "B crashes: [A, B, C] becomes [A, C] (splice), B's replacement joins at the tail",
              restart_empty),
        _spec("chain_wedge_not_replaced", "CHAIN_WEDGE_NOT_REPLACED",
              "U wrongly suspects T and wedges; the view manager is stalled 20 s",
              lambda g, i: wedge_unreplaced(g, i, 20_000)),
        _spec("chain_wedge_not_replaced_near_miss", None, "the same, the view manager stalled 4 s",
              lambda g, i: wedge_unreplaced(g, i, 4_000)),
        _spec("chain_lease_expired", "CHAIN_LEASE_EXPIRED",
              "T's heartbeater is blocked 5 s (TTL 2 s + skew 2 s), the view manager's watcher too",
              lambda g, i: blocked_heartbeater(g, i, 5_000)),
        _spec("chain_lease_expired_near_miss", None, "T's renewals jitter to 1.4 s apart", jitter),
        _spec("chain_view_stale", "CHAIN_VIEW_STALE",
              "T's heartbeater is blocked 16 s, and no view leaves T out meanwhile",
              lambda g, i: blocked_heartbeater(g, i, 16_000)),
        _spec("chain_view_stale_near_miss", None,
              "T is cut off from the view manager; a view without T 1.5 s after its lease expired", cut_off),
    ]
}
