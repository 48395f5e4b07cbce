"""What one simulated group is at a moment: its nodes, configuration map, decided log and knobs.

:class:`GroupState` holds the state every step of a tick reads and writes (consensus in
``consensus.py``, membership in ``membership.py``, publishing in ``publishing.py``) and the
questions they and the fault scripts ask of it: who the members and the primary are, a node's
effective horizon, whether a configuration is pending. It also takes config commands to propose.
It advances nothing itself; :class:`replimon.producers.simulator.group.GroupSim` does.

Guarantees: everything random comes from the group's own ``random.Random``, seeded from the fleet
seed and the group name, and is drawn in a fixed order, so a group's history depends on nothing
but its seed and options. The founding members (the first always new-protocol, so the group can
always reconfigure through it) and the ``boot`` command at instance 0 are set up on construction.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

from replimon.core.configmap import Command, ConfigMap, Rules
from replimon.producers.fleet_run import Wait
from replimon.producers.simulator.model import (
    NEW_PROTOCOL,
    OLD_PROTOCOL,
    Block,
    DecidedCommand,
    Emit,
    NodeSim,
    Proposal,
)


class GroupState:
    """One group's state and the queries over it; see the module docstring."""

    def __init__(
        self,
        name: str,
        nodes: int,
        *,
        seed: int,
        tick_ms: int,
        decisions_per_s: float,
        heartbeat_ms: int,
        old_node_fraction: float,
        reconfig_every_s: float,
        restart_every_s: float,
        cache_size: int,
        rules: Rules,
        base_ms: int,
        emit: Emit,
    ) -> None:
        self.name = name
        self.rng = random.Random(f"replimon-sim/{seed}/{name}")
        self.tick_ms = tick_ms
        self.rate = decisions_per_s
        self.heartbeat_ms = heartbeat_ms
        self.old_fraction = old_node_fraction
        self.reconfig_every_ms = reconfig_every_s * 1000
        self.restart_every_ms = restart_every_s * 1000
        self.cache_size = cache_size
        self.rules = rules
        self.base_ms = base_ms
        self.sink = emit
        self.t = 0
        self.cmap = ConfigMap(rules)
        self.nodes: dict[str, NodeSim] = {}
        self.blocks: list[Block] = []
        self.commands: dict[int, DecidedCommand] = {}
        self.queue: list[tuple[Command, dict[str, Any], Proposal]] = []
        self.decided = 0
        self.credit = 0.0
        self.rate_override: tuple[float, int] | None = None  # (rate, until)
        self.decide_pause_until: int | None = None
        self.silent_until: int | None = None
        self.hidden_until: int | None = None  # incomplete_history: nothing published before
        self.next_block_hook: Callable[[int, str, int], Block | None] | None = None
        self.bypass_acceptors = False
        self.scripts: list[tuple[Iterator[Wait], Wait]] = []  # fleet_run.Scripted
        self.quiet = False  # a fault script runs: background restarts and reconfigurations pause
        self.next_id = nodes + 1
        self.next_reconfig = self.exp(self.reconfig_every_ms)
        self.next_restart = self.exp(self.restart_every_ms)
        self.events = 0
        self.dropped = 0
        members = []
        for i in range(1, nodes + 1):
            # The first node is always new so a group can always reconfigure through it.
            old = i > 1 and self.rng.random() < old_node_fraction
            node = self.new_node(f"n{i}", OLD_PROTOCOL if old else NEW_PROTOCOL)
            node.running = True
            members.append((node.id, node.protocol))
        command = Command("boot", tuple(members), rules.default_eh)
        boot = self.cmap.apply(0, command)
        assert boot.config is not None
        self.commands[0] = DecidedCommand(0, command, boot)
        self.blocks.append(Block(0, 1, "n1", "config", 0, command))

    def exp(self, mean_ms: float) -> int:
        """A time an exponentially distributed wait of mean ``mean_ms`` from now."""
        return self.t + int(self.rng.expovariate(1.0 / mean_ms))

    def new_node(self, node_id: str, protocol: int) -> NodeSim:
        """Create node ``node_id`` (not yet running) with its own speed, clock offset and phase."""
        node = NodeSim(
            id=node_id,
            protocol=protocol,
            speed=self.rate * self.rng.uniform(5, 20) + 50,
            clock_offset_ms=self.rng.randint(-150, 150),
            hb_phase_ms=self.rng.randint(0, self.heartbeat_ms - 1),
            cache_size=self.cache_size,
        )
        node.next_hb = self.t + node.hb_phase_ms
        self.nodes[node_id] = node
        return node

    def new_node_id(self) -> str:
        node_id = f"n{self.next_id}"
        self.next_id += 1
        return node_id

    def propose(self, command: Command, **flags: Any) -> Proposal:
        """Queue a config command; the proposal, as a wait, is true once it has been decided."""
        proposal = Proposal(command)
        self.queue.append((command, flags, proposal))
        return proposal

    def no_pending(self) -> bool:
        return not self.cmap.pending(self.decided)

    def members(self) -> list[NodeSim]:
        """Running nodes of the latest configuration."""
        return [self.nodes[m] for m in self.cmap.latest().member_ids if self.nodes[m].running]

    def primary(self) -> NodeSim:
        active = self.cmap.active(self.decided + 1)
        for m in active.member_ids:
            node = self.nodes[m]
            if node.reachable(self.t):
                return node
        return self.nodes[active.member_ids[0]]

    def secondary(self) -> NodeSim:
        """A running member that is not the primary (deterministic choice)."""
        primary = self.primary()
        others = [n for n in self.members() if n is not primary and n.up(self.t)]
        return others[-1] if others else primary

    def bound(self, node: NodeSim) -> int:
        """The node's effective horizon with MySQL's bound, from the map as it knows it."""
        return self.cmap.as_of(node.executed).effective_horizon(node.executed, mysql=True)
