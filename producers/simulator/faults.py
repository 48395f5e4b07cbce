"""The fault catalogue: each named fault makes the history behind exactly one alert kind.

The alert kinds and what makes each fire are `docs/rules.md` "The alerts" (one section per kind);
`docs/simulator.md` "Fault catalogue" lists the faults for users.

A fault is a small script over a :class:`GroupSim`: a generator that changes the group (queues a
command, stalls an executor, cuts a node off) and yields *waits* (callables that turn true when the
script may go on). Scripts first bring the group into the state the fault needs using only legal
steps (remove old members, settle pending configurations), so the one illegal step is the fault.
While a script runs, the group's background restarts and reconfigurations pause, so nothing else
muddies the evidence.

How a monitor must classify what a fault produces (the expected alert kind is ``FaultSpec.alert``)
is written next to each fault and in `docs/simulator.md` "How a monitor must classify": where two
rules could both claim the evidence, the more specific one is expected (for example a
refused-by-the-rules horizon change that a node installed is EH_OUT_OF_DOMAIN, not also
CONFIG_MISMATCH; a silent group is GROUP_SILENT, not also one NODE_SILENT per member).
"""

from __future__ import annotations

from collections.abc import Iterator

from replimon.core.configmap import Command
from replimon.producers import fleet_run
from replimon.producers.fleet_run import FaultSpec, Injection, Wait
from replimon.producers.simulator.group import GroupSim
from replimon.producers.simulator.model import (
    MAX_MEMBERS,
    NEW_PROTOCOL,
    OLD_PROTOCOL,
    Block,
    NodeSim,
    digest_of,
)
from replimon.producers.simulator.publishing import publish


def parse_injection(text: str) -> Injection:
    """``NAME[:GROUP][@TIME]``, e.g. ``beyond_horizon:g2@40s`` (the group defaults to g1)."""
    return fleet_run.parse_injection(text, CATALOGUE, "g1")


# ------------------------------------------------------------------------------ shared steps
def _settled(g: GroupSim) -> Iterator[Wait]:
    """Wait until no configuration is pending and no command is queued."""
    yield lambda: g.no_pending() and not g.queue


def _no_old_members(g: GroupSim) -> Iterator[Wait]:
    """Legally remove old-protocol members (adding a new one first if the group would shrink)."""
    while True:
        latest = g.cmap.latest()
        old = [m for m, p in latest.members if p < g.rules.min_protocol_for_eh]
        if not old:
            return
        if len(latest.members) <= 3:
            yield g.propose(Command("add_nodes", ((g.new_node_id(), NEW_PROTOCOL),)))
        yield g.propose(Command("remove_nodes", ((old[0], None),)))
        yield from _settled(g)


def _growth_command(g: GroupSim) -> Command:
    """A legal command that grows eh * members (for CACHE_INVARIANT and friends)."""
    latest = g.cmap.latest()
    if not latest.has_old_member(g.rules) and latest.event_horizon + 10 <= g.rules.eh_max:
        return Command("set_event_horizon", event_horizon=latest.event_horizon + 10)
    return Command("add_nodes", ((g.new_node_id(), NEW_PROTOCOL),))


def _member_change(g: GroupSim) -> Command:
    latest = g.cmap.latest()
    if len(latest.members) < MAX_MEMBERS:
        return Command("add_nodes", ((g.new_node_id(), NEW_PROTOCOL),))
    return Command("remove_nodes", ((g.secondary().id, None),))


# ------------------------------------------------------------------------------- violations
def eh_out_of_domain(g: GroupSim, inj: Injection) -> Iterator[Wait]:
    """The group installs set_event_horizon(max + 50), which the domain rule must refuse."""
    yield from _no_old_members(g)
    yield from _settled(g)
    p = g.propose(Command("set_event_horizon", event_horizon=g.rules.eh_max + 50), force_install=True)
    yield p
    inj.notes["instance"] = p.record.instance  # type: ignore[union-attr]


def eh_change_with_old_member(g: GroupSim, inj: Injection) -> Iterator[Wait]:
    """With an old member present, the group installs a horizon change (must be UNCHANGEABLE)."""
    yield from _settled(g)
    latest = g.cmap.latest()
    if not latest.has_old_member(g.rules):
        if latest.event_horizon != g.rules.default_eh:
            yield g.propose(Command("set_event_horizon", event_horizon=g.rules.default_eh))
        yield g.propose(Command("add_nodes", ((g.new_node_id(), OLD_PROTOCOL),)))
        yield from _settled(g)
    p = g.propose(Command("set_event_horizon", event_horizon=g.rules.default_eh + 10), force_install=True)
    yield p
    inj.notes["instance"] = p.record.instance  # type: ignore[union-attr]


def old_member_join_custom_eh(g: GroupSim, inj: Injection) -> Iterator[Wait]:
    """With a custom horizon, the group installs the add of an old node (must be refused)."""
    yield from _no_old_members(g)
    if g.cmap.latest().event_horizon == g.rules.default_eh:
        yield g.propose(Command("set_event_horizon", event_horizon=g.rules.default_eh + 10))
    yield from _settled(g)
    node_id = g.new_node_id()
    p = g.propose(Command("add_nodes", ((node_id, OLD_PROTOCOL),)), force_install=True)
    yield p
    inj.notes.update(instance=p.record.instance, node=node_id)  # type: ignore[union-attr]


def config_mismatch(g: GroupSim, inj: Injection) -> Iterator[Wait]:
    """Every member installs a legal command one instance later than the map places it."""
    yield from _settled(g)
    p = g.propose(_member_change(g), start_offset=1)
    yield p
    inj.notes["instance"] = p.record.instance  # type: ignore[union-attr]


def config_disagreement(g: GroupSim, inj: Injection) -> Iterator[Wait]:
    """One member's heartbeats report a view whose horizon differs from the map for 3 s."""
    node = g.secondary()
    node.view_eh_override = g.cmap.active(node.executed + 1).event_horizon + 7
    node.view_override_until = g.t + 3_000
    inj.notes["node"] = node.id
    yield g.after(3_000)


def beyond_horizon(g: GroupSim, inj: Injection) -> Iterator[Wait]:
    """The proposer reserves a block ending 3 instances past its (worklog) effective horizon."""
    yield from _settled(g)

    def hook(decided: int, proposer_id: str, limit: int) -> Block | None:
        del limit  # the fault is precisely to ignore it
        proposer = g.nodes[proposer_id]
        base = proposer.executed
        top = max(g.cmap.as_of(base).effective_horizon(base) + 3, decided + 1)
        inj.notes.update(node=proposer_id, instance=decided + 1, last=top, window_base=base)
        return Block(decided + 1, top - decided, proposer_id, "app", base)

    g.next_block_hook = hook
    yield lambda: g.next_block_hook is None


def can_leave_unsafe(g: GroupSim, inj: Injection) -> Iterator[Wait]:
    """can_leave(c) is decided while only the proposer has executed start(c) - 1."""
    yield from _settled(g)
    primary = g.primary()
    latest = g.cmap.latest()
    if latest.has_old_member(g.rules):
        command = Command("add_nodes", ((g.new_node_id(), NEW_PROTOCOL),))
    else:
        eh = g.rules.default_eh + 10 if latest.event_horizon == g.rules.default_eh else g.rules.default_eh
        command = Command("set_event_horizon", event_horizon=eh)
    p = g.propose(command)
    yield p
    cfg = p.record.outcome.config  # type: ignore[union-attr]
    assert cfg is not None
    others = [g.nodes[m] for m in cfg.member_ids if m != primary.id]
    for node in others:
        node.exec_cap = cfg.start - 2
    g.bypass_acceptors = True
    inj.notes.update(instance=p.record.instance, start=cfg.start, can_leave=cfg.can_leave)  # type: ignore[union-attr]
    yield lambda: g.decided >= cfg.can_leave
    for node in others:
        node.exec_cap = None
    g.bypass_acceptors = False


def divergent_decision(g: GroupSim, inj: Injection) -> Iterator[Wait]:
    """One member learns a different value (digest) for an instance than the others."""
    victim = g.secondary()

    def hook(decided: int, proposer_id: str, limit: int) -> Block | None:
        if limit <= decided:
            return None
        block = Block(decided + 1, 1, proposer_id, "app", g.nodes[proposer_id].executed)
        block.digests[victim.id] = digest_of("divergent", g.name, decided + 1)
        inj.notes.update(node=victim.id, instance=decided + 1)
        return block

    g.next_block_hook = hook
    yield lambda: g.next_block_hook is None


def execution_regression(g: GroupSim, inj: Injection) -> Iterator[Wait]:
    """A member reports an executed frontier 5 lower than its last, in the same incarnation."""
    node = g.secondary()
    yield lambda: node.up(g.t) and node.executed >= 10
    inj.notes.update(node=node.id, executed_from=node.executed, executed_to=node.executed - 5)
    node.executed -= 5
    publish(g, node, "execution", {"executed": node.executed})


def cache_invariant(g: GroupSim, inj: Injection) -> Iterator[Wait]:
    """Members report a cache that a legal growth of eh * members then no longer exceeds."""
    yield from _settled(g)
    command = _growth_command(g)
    predicted = g.cmap.decide(g.decided + 1, command).config
    assert predicted is not None
    cache = predicted.event_horizon * len(predicted.members)
    for node in g.nodes.values():
        node.cache_size = cache
    yield g.after(g.heartbeat_ms + g.tick_ms)  # the small cache is reported before the install
    p = g.propose(command)
    yield p
    inj.notes.update(instance=p.record.instance, cache_size=cache)  # type: ignore[union-attr]
    record = p.record
    yield lambda: all(n.executed >= record.instance for n in g.members() if n.up(g.t))  # type: ignore[union-attr]
    yield g.after(2 * g.heartbeat_ms)
    for node in g.nodes.values():
        node.cache_size = g.cache_size


# ------------------------------------------------------------------------ wedges and liveness
def _running_members(g: GroupSim) -> list[NodeSim]:
    return [n for n in g.members() if n.up(g.t)]


def horizon_wedge(g: GroupSim, inj: Injection) -> Iterator[Wait]:
    """Every executor stalls for 20 s: decisions fill the horizon and stop."""
    yield from _settled(g)
    for node in _running_members(g):
        node.exec_stall_until = g.t + 20_000
    inj.notes["duration_ms"] = 20_000
    yield g.after(20_000)


def no_progress(g: GroupSim, inj: Injection) -> Iterator[Wait]:
    """Executors and consensus freeze for 40 s with decided > executed, below the horizon."""
    yield from _settled(g)
    nodes = _running_members(g)
    for node in nodes:
        node.exec_stall_until = g.t + 41_000
    yield lambda: g.decided > min(n.executed for n in nodes)
    g.decide_pause_until = g.t + 40_000
    inj.notes["duration_ms"] = 40_000
    yield g.after(40_000)


def pending_config_stuck(g: GroupSim, inj: Injection) -> Iterator[Wait]:
    """A legal command's configuration takes about 90 s to start: the group slows to a crawl."""
    yield from _settled(g)
    p = g.propose(_member_change(g))
    yield p
    cfg = p.record.outcome.config  # type: ignore[union-attr]
    assert cfg is not None
    rate = (cfg.start - g.decided) / 90.0
    g.rate_override = (rate, g.t + 200_000)
    inj.notes.update(instance=p.record.instance, start=cfg.start)  # type: ignore[union-attr]
    yield lambda: g.decided >= cfg.start
    g.rate_override = None


def node_silent(g: GroupSim, inj: Injection) -> Iterator[Wait]:
    """A member keeps working but publishes nothing for 12 s."""
    node = g.secondary()
    node.silent_until = g.t + 12_000
    inj.notes.update(node=node.id, duration_ms=12_000)
    yield g.after(12_000)


def group_silent(g: GroupSim, inj: Injection) -> Iterator[Wait]:
    """The whole group publishes nothing for 25 s (it keeps working)."""
    g.silent_until = g.t + 25_000
    inj.notes["duration_ms"] = 25_000
    yield g.after(25_000)


def _isolate(g: GroupSim, nodes: list[NodeSim], ms: int) -> None:
    for node in nodes:
        node.isolated_until = g.t + ms
        node.unreachable_since = g.t


def quorum_at_risk(g: GroupSim, inj: Injection) -> Iterator[Wait]:
    """Members are cut off until the reachable ones are exactly a bare majority, for 15 s."""
    yield from _settled(g)
    active = g.cmap.active(g.decided + 1)
    primary = g.primary()
    cut = [g.nodes[m] for m in active.member_ids if m != primary.id]
    cut = cut[: len(active.members) - active.majority]
    _isolate(g, cut, 15_000)
    inj.notes.update(nodes=[n.id for n in cut], duration_ms=15_000)
    yield g.after(15_000)


def quorum_lost(g: GroupSim, inj: Injection) -> Iterator[Wait]:
    """Every member is cut off from every other for 20 s."""
    yield from _settled(g)
    _isolate(g, _running_members(g), 20_000)
    inj.notes["duration_ms"] = 20_000
    yield g.after(20_000)


def executor_lag(g: GroupSim, inj: Injection) -> Iterator[Wait]:
    """A member's executor stalls until it lags the group by > 1000 instances for 15 s."""
    node = g.secondary()
    ms = int((1000 / g.rate + 15) * 1000)
    node.exec_stall_until = g.t + ms
    inj.notes.update(node=node.id, duration_ms=ms)
    yield g.after(ms)


# ------------------------------------------------------------------------------------- data
def events_lost(g: GroupSim, inj: Injection) -> Iterator[Wait]:
    """A member's next 3 events are lost after taking their seq numbers."""
    node = g.secondary()
    node.drop_next = 3
    inj.notes.update(node=node.id, lost=3, incarnation=node.incarnation, from_seq=node.seq)
    yield lambda: node.drop_next == 0


def incomplete_history(g: GroupSim, inj: Injection) -> Iterator[Wait]:
    """Nothing of the group is published before the fault's time (set when the run starts)."""
    return
    yield  # pragma: no cover - makes this a generator


CATALOGUE: dict[str, FaultSpec[GroupSim]] = {
    spec.name: spec
    for spec in [
        FaultSpec("eh_out_of_domain", "EH_OUT_OF_DOMAIN", "group installs an event horizon outside [min, max]", eh_out_of_domain),
        FaultSpec("eh_change_with_old_member", "EH_CHANGE_WITH_OLD_MEMBER", "group installs a horizon change while an old member is present", eh_change_with_old_member),
        FaultSpec("old_member_join_custom_eh", "OLD_MEMBER_JOIN_CUSTOM_EH", "group installs the add of an old node while the horizon is not 10", old_member_join_custom_eh),
        FaultSpec("config_mismatch", "CONFIG_MISMATCH", "every member installs a config one instance later than the map", config_mismatch),
        FaultSpec("config_disagreement", "CONFIG_DISAGREEMENT", "one member's heartbeat view disagrees with the map", config_disagreement),
        FaultSpec("beyond_horizon", "BEYOND_HORIZON", "a proposer reserves instances past its effective horizon", beyond_horizon),
        FaultSpec("can_leave_unsafe", "CAN_LEAVE_UNSAFE", "can_leave(c) decided before a majority executed start(c) - 1", can_leave_unsafe),
        FaultSpec("divergent_decision", "DIVERGENT_DECISION", "one member learns a different value for an instance", divergent_decision),
        FaultSpec("execution_regression", "EXECUTION_REGRESSION", "a member's executed frontier goes back within an incarnation", execution_regression),
        FaultSpec("cache_invariant", "CACHE_INVARIANT", "an installed config breaks cache_size > eh * members", cache_invariant),
        FaultSpec("horizon_wedge", "HORIZON_WEDGE", "all executors stall 20 s; decisions stop at the horizon", horizon_wedge),
        FaultSpec("no_progress", "NO_PROGRESS", "consensus and executors freeze 40 s with work pending", no_progress),
        FaultSpec("pending_config_stuck", "PENDING_CONFIG_STUCK", "a pending configuration takes ~90 s to start", pending_config_stuck),
        FaultSpec("node_silent", "NODE_SILENT", "a member publishes nothing for 12 s", node_silent),
        FaultSpec("group_silent", "GROUP_SILENT", "the whole group publishes nothing for 25 s", group_silent),
        FaultSpec("quorum_at_risk", "QUORUM_AT_RISK", "members cut off down to a bare majority for 15 s", quorum_at_risk),
        FaultSpec("quorum_lost", "QUORUM_LOST", "every member cut off from every other for 20 s", quorum_lost),
        FaultSpec("executor_lag", "EXECUTOR_LAG", "a member's executor stalls until it lags > 1000 instances", executor_lag),
        FaultSpec("events_lost", "EVENTS_LOST", "a member loses 3 events (a seq gap)", events_lost),
        FaultSpec("incomplete_history", "INCOMPLETE_HISTORY", "nothing of the group is published before the fault time", incomplete_history),
    ]
}
