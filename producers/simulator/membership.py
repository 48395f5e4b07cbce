"""Who is in the simulated group over time: restarts, joins, leaves and a healthy group's churn.

:func:`node_lifecycle` moves nodes between states as time passes: a crashed node restarts in a new
incarnation with seq 0 (RECOVERING until caught up); a partition, a silence, an executor stall or a
view override ends when its time is up; a node added by a configuration starts (state transfer to
``start - 1``) when the group is about to decide in that configuration; a removed node sends a last
OFFLINE heartbeat and leaves once ``can_leave`` of the configuration that dropped it is decided
(worklog 3.6.3).

:func:`background` is the legal life of a healthy group (`docs/simulator.md` "Model"): short
restarts (1 to 3 s, under NODE_SILENT's threshold, one node at a time and only with every member
up) and random reconfigurations (horizon changes in and out of the domain, adds of new and old
nodes, removals). It never lets a pending configuration wait long enough to look stuck
(`docs/rules.md` "PENDING_CONFIG_STUCK") and pauses while a fault script runs, so a fault's
history holds its one illegal step and nothing else.
"""

from __future__ import annotations

from replimon.core.configmap import Command
from replimon.producers.simulator.model import MAX_MEMBERS, NEW_PROTOCOL, OLD_PROTOCOL
from replimon.producers.simulator.publishing import heartbeat
from replimon.producers.simulator.state import GroupState


def node_lifecycle(g: GroupState) -> None:
    """Restart, reconnect, start and retire nodes whose time has come; expire timed faults."""
    t = g.t
    for node in list(g.nodes.values()):
        if node.down_until is not None and t >= node.down_until:
            node.down_until = None
            node.unreachable_since = None
            node.incarnation += 1
            node.seq = 0
            node.status = "RECOVERING"
            node.next_hb = t
        if node.isolated_until is not None and t >= node.isolated_until:
            node.isolated_until = None
            node.unreachable_since = None
        for attr in ("silent_until", "exec_stall_until", "view_override_until"):
            until = getattr(node, attr)
            if until is not None and t >= until:
                setattr(node, attr, None)
    for attr in ("decide_pause_until", "silent_until"):
        until = getattr(g, attr)
        if until is not None and t >= until:
            setattr(g, attr, None)
    if g.rate_override is not None and t >= g.rate_override[1]:
        g.rate_override = None
    # Joiners start when the group is about to decide in their configuration.
    active = g.cmap.active(g.decided + 1)
    for m in active.member_ids:
        node = g.nodes[m]
        if not node.running and not node.left:
            node.running = True
            donor = max((n.executed for n in g.nodes.values() if n.up(t)), default=0)
            node.executed = node.decided = min(active.start - 1, donor)
            node.reported_upto = node.executed
            node.status = "RECOVERING"
            node.next_hb = t
    # Removed nodes leave once can_leave of the configuration that dropped them is decided.
    for cfg in g.cmap.configs[1:]:
        if g.decided < cfg.can_leave:
            continue
        prev = g.cmap.configs[g.cmap.configs.index(cfg) - 1]
        for m in sorted(set(prev.member_ids) - set(cfg.member_ids)):
            leaving = g.nodes.get(m)
            if leaving is None or leaving.left:
                continue
            node = leaving
            if node.up(t):
                node.status = "OFFLINE"
                heartbeat(g, node)
            node.left = True


def background(g: GroupState) -> None:
    """Legal life of a healthy group: restarts and reconfigurations (paused during faults)."""
    t = g.t
    if g.quiet:
        g.next_reconfig = max(g.next_reconfig, t + 5_000)
        g.next_restart = max(g.next_restart, t + 5_000)
        return
    if t >= g.next_restart:
        g.next_restart = g.exp(g.restart_every_ms)
        candidates = [n for n in g.members() if n.up(t) and n.isolated_until is None]
        if len(candidates) == len(g.members()) and len(candidates) >= 3:
            node = g.rng.choice(candidates)
            node.down_until = t + g.rng.randint(1_000, 3_000)
            node.unreachable_since = t
    if t >= g.next_reconfig:
        g.next_reconfig = g.exp(g.reconfig_every_ms)
        command = _random_command(g)
        if command is not None:
            g.propose(command)


def _random_command(g: GroupState) -> Command | None:
    """A command to propose, or None to skip this turn.

    Some are meant to be refused (horizons outside the domain, changes with an old member): a
    correct group's refusals are part of a healthy history and must raise no alert."""
    latest = g.cmap.latest()
    # Keep a pending configuration from waiting long (PENDING_CONFIG_STUCK must stay quiet).
    if (latest.start - g.decided + 2 * g.rules.eh_max + 2) / g.rate > 40:
        return None
    roll = g.rng.random()
    n_members = len(latest.members)
    if roll < 0.45:
        if g.rng.random() < 0.1:
            return Command("set_event_horizon", event_horizon=g.rng.choice([5, 250, 300]))
        choices = [10, 20, 30, 50, 100, 150, 200]
        return Command("set_event_horizon", event_horizon=g.rng.choice(choices))
    if (roll < 0.75 or n_members <= 3) and n_members < MAX_MEMBERS:
        proto = OLD_PROTOCOL if g.rng.random() < g.old_fraction else NEW_PROTOCOL
        return Command("add_nodes", ((g.new_node_id(), proto),))
    if n_members > 3:
        primary = g.primary().id
        victims = [m for m in latest.member_ids if m != primary]
        return Command("remove_nodes", ((g.rng.choice(victims), None),))
    return None
