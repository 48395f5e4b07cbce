"""What a simulated node publishes: the contract-v1 events of `docs/contract.md`, field order fixed.

Every event goes through :func:`publish`, which owns the envelope (``v``, ``type``, ``group``,
``node``, ``ts_ms``, ``seq``, ``incarnation``) and the ways an event does not reach the sink: a
silent node or group publishes nothing (and takes no seq); an event lost to ``events_lost`` or
hidden by ``incomplete_history`` takes its seq, so the monitor sees the gap. The builders below
give each event type its fields in the contract's order, so the same history is the same bytes.

A node's ``ts_ms`` is the run's start plus simulated time plus its constant clock offset. Its
heartbeat reports the view it knows (the map as of its executed frontier), and whom its failure
detector suspects: a peer of that view unreachable for ``DETECTOR_MS`` (XCom's 5 s).
"""

from __future__ import annotations

from typing import Any

from replimon.core.configmap import Command
from replimon.producers.simulator.model import (
    DETECTOR_MS,
    NEW_VERSION,
    OLD_VERSION,
    Block,
    DecidedCommand,
    NodeSim,
    digest_of,
)
from replimon.producers.simulator.state import GroupState


def publish(g: GroupState, node: NodeSim, etype: str, fields: dict[str, Any]) -> None:
    """Publish one event of ``node`` unless it is silent; a lost event still takes its seq."""
    t = g.t
    if (node.silent_until is not None and t < node.silent_until) or (
        g.silent_until is not None and t < g.silent_until
    ):
        return
    event = {
        "v": 1,
        "type": etype,
        "group": g.name,
        "node": node.id,
        "ts_ms": g.base_ms + t + node.clock_offset_ms,
        "seq": node.seq,
        "incarnation": node.incarnation,
        **fields,
    }
    node.seq += 1
    if g.hidden_until is not None and t < g.hidden_until:
        return  # published before the history the monitor gets to see (incomplete_history)
    if node.drop_next > 0:
        node.drop_next -= 1
        g.dropped += 1
        return
    g.events += 1
    g.sink(event)


def decision_event(g: GroupState, node: NodeSim, block: Block) -> None:
    """``node`` learned ``block`` (the proposer's own event carries ``window_base``)."""
    fields: dict[str, Any] = {"instance": block.first}
    if block.count != 1:
        fields["count"] = block.count
    fields["proposer"] = block.proposer
    fields["kind"] = block.kind
    if block.count == 1:
        fields["digest"] = block.digests.get(node.id) or digest_of(
            g.name, block.first, block.proposer, block.kind
        )
    if node.id == block.proposer and block.window_base is not None:
        fields["window_base"] = block.window_base
    if block.command is not None:
        fields["config"] = command_json(block.command)
    publish(g, node, "decision", fields)


def config_event(g: GroupState, node: NodeSim, rec: DecidedCommand) -> None:
    """``node`` executed the config command ``rec`` and reports its outcome."""
    fields: dict[str, Any] = {"instance": rec.instance}
    cfg = rec.outcome.config
    if cfg is not None:
        fields.update(outcome="installed", start=cfg.start, event_horizon=cfg.event_horizon)
        fields["members"] = [{"id": m, "protocol": p} for m, p in cfg.members]
    else:
        fields.update(outcome="refused", reason=rec.outcome.reason)
    publish(g, node, "config", fields)


def heartbeat(g: GroupState, node: NodeSim) -> None:
    """``node``'s heartbeat: its frontiers, status, the view it knows, cache and suspects."""
    known = g.cmap.as_of(node.executed)
    view = known.active(node.executed + 1)
    eh = view.event_horizon
    if node.view_override_until is not None and g.t < node.view_override_until:
        eh = node.view_eh_override if node.view_eh_override is not None else eh
    fields: dict[str, Any] = {
        "executed": node.executed,
        "decided": node.decided,
        "protocol": node.protocol,
        "status": node.status,
        "view": {
            "start": view.start,
            "event_horizon": eh,
            "members": [{"id": m, "protocol": p} for m, p in view.members],
        },
        "cache_size": node.cache_size,
        "suspects": list(node.last_suspects),
        "version": OLD_VERSION if node.old else NEW_VERSION,
    }
    publish(g, node, "heartbeat", fields)


def heartbeats(g: GroupState) -> None:
    """Each up node's heartbeat every interval, and at once when whom it suspects changes."""
    t = g.t
    for node in g.nodes.values():
        if not node.up(t):
            continue
        suspects = _suspects(g, node)
        if t >= node.next_hb or suspects != node.last_suspects:
            node.last_suspects = suspects
            node.next_hb = t + g.heartbeat_ms
            heartbeat(g, node)


def _suspects(g: GroupState, node: NodeSim) -> tuple[str, ...]:
    """The peers of ``node``'s view it has not heard from for ``DETECTOR_MS`` (an isolated node
    has heard from nobody since it was cut off)."""
    t = g.t
    view = g.cmap.as_of(node.executed).active(node.executed + 1)
    out = []
    for m in view.member_ids:
        peer = g.nodes.get(m)
        if peer is None or peer is node or peer.left:
            continue
        since = peer.unreachable_since
        if node.isolated_until is not None and node.unreachable_since is not None:
            since = node.unreachable_since if since is None else min(since, node.unreachable_since)
        if since is not None and t - since >= DETECTOR_MS:
            out.append(m)
    return tuple(out)


def command_json(command: Command) -> dict[str, Any]:
    """The contract's ``decision.config`` object of a command."""
    out: dict[str, Any] = {"op": command.op}
    if command.nodes:
        out["nodes"] = [
            {"id": n} if p is None else {"id": n, "protocol": p} for n, p in command.nodes
        ]
    if command.event_horizon is not None:
        out["event_horizon"] = command.event_horizon
    return out
