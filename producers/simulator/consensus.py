"""The group's log: deciding instances, nodes learning and executing them, pruning what all have.

The decision model follows the worklog (WL#11512, `docs/sources.md`) and
MySQL's ``xcom_base.cc``, as `docs/simulator.md` "Model" describes:

* Each tick the proposer (the first reachable member of the active configuration: a
  single-primary group) reserves a block of consecutive ``app`` instances at the configured rate;
  now and then another member proposes a ``noop``. A queued config command takes the first
  instance of a tick.
* A proposer never reserves beyond its own effective horizon computed with MySQL's stricter bound
  (``ConfigMap.effective_horizon(mysql=True)``, worklog 3.6.3), and an instance is decided only
  when a majority of the active configuration's reachable members have it within their own
  horizon. That is what makes ``can_leave`` safe (worklog 3.6.3, `docs/rules.md`
  "CAN_LEAVE_UNSAFE") and what wedges a group whose executors stall.
* Config commands are validated and placed by :class:`replimon.core.configmap.ConfigMap` as
  `docs/rules.md` "The configuration map" says (against the latest configuration, pending
  included). Every member reports the outcome in a ``config`` event when its executor passes the
  command's instance, once per instance even across restarts.
* A node learns decisions while it is up and reachable (one ``decision`` event per block) and
  executes them at its own speed (an ``execution`` event when its frontier moved).

The fault hooks (``next_block_hook``, ``bypass_acceptors``, ``force_install`` and
``start_offset`` flags, executor caps and stalls) are the only ways around these rules.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from replimon.core.configmap import Command, Config, ConfigMap, Rules
from replimon.producers.simulator.model import (
    NEW_PROTOCOL,
    Block,
    DecidedCommand,
    NodeSim,
    Proposal,
)
from replimon.producers.simulator.publishing import config_event, decision_event, publish
from replimon.producers.simulator.state import GroupState


def decide(g: GroupState) -> None:
    """Decide this tick's instances: a queued command first, maybe a noop, then an app block."""
    t = g.t
    if g.decide_pause_until is not None:
        return
    rate = g.rate_override[0] if g.rate_override else g.rate
    g.credit = min(g.credit + rate * g.tick_ms / 1000, rate + 1)
    active = g.cmap.active(g.decided + 1)
    proposer = g.primary()
    if not proposer.reachable(t):
        return
    limit = min(g.bound(proposer), _acceptor_bound(g, active))
    if g.bypass_acceptors:
        limit = g.bound(proposer)
    if g.next_block_hook is not None:
        block = g.next_block_hook(g.decided, proposer.id, limit)
        if block is not None:
            g.next_block_hook = None
            g.blocks.append(block)
            g.decided = block.last
            return
    if limit <= g.decided or g.credit < 1:
        return
    if g.queue:
        command, flags, done = g.queue.pop(0)
        _decide_command(g, proposer, command, flags, done)
        g.credit -= 1
        if limit <= g.decided:
            return
    if g.rng.random() < 0.03:
        others = [n for n in g.members() if n is not proposer and n.reachable(t)]
        others = [n for n in others if g.bound(n) > g.decided]
        if others:
            noop = g.rng.choice(others)
            g.blocks.append(Block(g.decided + 1, 1, noop.id, "noop", noop.executed))
            g.decided += 1
            g.credit -= 1
    count = min(int(g.credit), limit - g.decided)
    if count <= 0:
        return
    g.blocks.append(Block(g.decided + 1, count, proposer.id, "app", proposer.executed))
    g.decided += count
    g.credit -= count


def _acceptor_bound(g: GroupState, cfg: Config) -> int:
    """The highest instance a majority of ``cfg``'s reachable members could accept."""
    bounds = sorted(
        (g.bound(g.nodes[m]) for m in cfg.member_ids if g.nodes[m].reachable(g.t)),
        reverse=True,
    )
    if len(bounds) < cfg.majority:
        return g.decided  # no quorum: nothing can be decided
    return bounds[cfg.majority - 1]


def _decide_command(
    g: GroupState, proposer: NodeSim, command: Command, flags: dict[str, Any], proposal: Proposal
) -> None:
    """Decide ``command`` at the next instance; install its configuration unless it is refused.

    ``force_install`` places it under rules that refuse nothing (the group breaking the domain or
    protocol rules); ``start_offset`` moves its start (the group misplacing it)."""
    instance = g.decided + 1
    if flags.get("force_install"):
        permissive = Rules(
            eh_min=0, eh_max=2**31, default_eh=g.rules.default_eh, min_protocol_for_eh=0
        )
        outcome = ConfigMap(permissive, list(g.cmap.configs)).decide(instance, command)
    else:
        outcome = g.cmap.decide(instance, command)
    if outcome.config is not None and flags.get("start_offset"):
        moved = replace(outcome.config, start=outcome.config.start + flags["start_offset"])
        outcome = replace(outcome, config=moved)
    if outcome.config is not None:
        g.cmap.install(outcome.config)
        if command.op == "add_nodes":
            for node_id, proto in command.nodes:
                if node_id not in g.nodes:
                    g.new_node(node_id, proto if proto is not None else NEW_PROTOCOL)
    rec = DecidedCommand(instance, command, outcome)
    g.commands[instance] = rec
    g.blocks.append(Block(instance, 1, proposer.id, "config", proposer.executed, command))
    g.decided = instance
    proposal.record = rec


def learn(g: GroupState) -> None:
    """Every up and reachable node learns the blocks decided since it last did."""
    t = g.t
    for node in g.nodes.values():
        if not node.reachable(t) or node.decided >= g.decided:
            continue
        for block in _blocks_after(g, node.decided):
            if block.last > node.decided:
                decision_event(g, node, block)
        node.decided = g.decided


def _blocks_after(g: GroupState, instance: int) -> list[Block]:
    """The blocks that end after ``instance`` (the log is in instance order)."""
    lo, hi = 0, len(g.blocks)
    while lo < hi:
        mid = (lo + hi) // 2
        if g.blocks[mid].last <= instance:
            lo = mid + 1
        else:
            hi = mid
    return g.blocks[lo:]


def execute(g: GroupState) -> None:
    """Every up node executes what it has learned at its own speed, reporting config commands."""
    t = g.t
    for node in g.nodes.values():
        if not node.up(t) or node.executed >= node.decided:
            if node.up(t) and node.status == "RECOVERING" and node.executed >= node.decided:
                node.status = "ONLINE"
            continue
        if node.exec_stall_until is not None:
            continue
        node.exec_credit += node.speed * g.tick_ms / 1000
        target = min(node.decided, node.executed + int(node.exec_credit))
        if node.exec_cap is not None:
            target = min(target, node.exec_cap)
        if target <= node.executed:
            continue
        node.exec_credit -= target - node.executed
        for instance in sorted(i for i in g.commands if node.executed < i <= target):
            if instance > node.reported_upto:
                config_event(g, node, g.commands[instance])
        node.executed = target
        node.reported_upto = max(node.reported_upto, target)
        publish(g, node, "execution", {"executed": target})


def prune(g: GroupState) -> None:
    """Forget the blocks every live node has learned and the commands every one has executed."""
    alive = [n for n in g.nodes.values() if n.running and not n.left]
    low_decided = min(n.decided for n in alive)
    keep = _blocks_after(g, low_decided)
    if len(keep) < len(g.blocks):
        g.blocks = keep
    low_exec = min(n.executed for n in alive)
    for instance in [i for i in g.commands if i <= low_exec]:
        del g.commands[instance]
    g.cmap.prune(low_exec)
