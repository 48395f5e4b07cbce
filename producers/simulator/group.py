"""One simulated XCom group: consensus, executors, config commands, heartbeats, faults.

A discrete-time model, advanced by :meth:`GroupSim.tick`. Everything random comes from the
group's own ``random.Random`` (seeded from the fleet seed and the group name) and every time from
the tick clock, so a run is reproducible to the byte.

The model, and where it follows the worklog (seed 000) and MySQL's ``xcom_base.cc``:

* The group decides consensus instances in order. Instance 0 holds the ``boot`` command (start 0).
  Each tick the proposer (the first member that may propose: a single-primary group) reserves a
  block of consecutive ``app`` instances at the configured rate; now and then another member
  proposes a ``noop``. A pending config command takes the first instance of a tick.
* A proposer never reserves beyond its own effective horizon computed with MySQL's stricter
  bound (``ConfigMap.effective_horizon(mysql=True)``, worklog 3.6.3), and an instance is decided
  only when a majority of the acceptors of the active configuration could accept it within their
  own horizon. That is what makes ``can_leave`` safe (worklog 3.6.3) and what wedges a group whose
  executors stall.
* Config commands are validated and placed by :class:`replimon.core.configmap.ConfigMap` exactly
  as SPEC section 4 says (against the latest configuration, pending included), and every member
  reports the outcome in a ``config`` event when its executor passes the command's instance.
* Each node has its own executor speed, learns decisions when it is up and reachable, publishes a
  ``decision`` event per decided block it learns (the proposer's carries ``window_base``), an
  ``execution`` event when its frontier moved, and a ``heartbeat`` every interval (and at once
  when whom it suspects changes). XCom's failure detector suspects a peer unreachable for 5 s.
* Node restarts are short (1 to 3 s, under NODE_SILENT's threshold) and start a new incarnation.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from replimon.core.configmap import Command, Config, ConfigMap, Outcome, Rules

NEW_PROTOCOL = 9  # x_1_8 and later speak a configurable horizon
OLD_PROTOCOL = 4  # before x_1_4 (5): the horizon is fixed at 10
NEW_VERSION = "8.4.3"
OLD_VERSION = "8.0.13"
DETECTOR_MS = 5_000  # XCom suspects a peer after 5 s without hearing from it
MAX_MEMBERS = 7

Wait = Callable[[], bool]
Emit = Callable[[dict[str, Any]], None]


def digest_of(*parts: object) -> str:
    """A short deterministic hex digest of a decided value."""
    return hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=8).hexdigest()


@dataclass
class Block:
    """A run of consecutive decided instances with one proposer and kind."""

    first: int
    count: int
    proposer: str
    kind: str  # app | noop | config
    window_base: int | None
    command: Command | None = None
    digests: dict[str, str] = field(default_factory=dict)  # per-node digest override (fault)

    @property
    def last(self) -> int:
        return self.first + self.count - 1


@dataclass
class DecidedCommand:
    """A config command the simulated group decided at ``instance``, and the outcome every member
    gets executing it (what a correct node reports)."""

    instance: int
    command: Command
    outcome: Outcome


@dataclass
class Proposal:
    """A queued config command; calling it tells whether it has been decided (a script wait)."""

    command: Command
    record: DecidedCommand | None = None

    def __call__(self) -> bool:
        return self.record is not None


@dataclass
class NodeSim:
    """One replica node."""

    id: str
    protocol: int
    speed: float  # instances executed per second
    clock_offset_ms: int
    hb_phase_ms: int
    incarnation: int = 0
    seq: int = 0
    executed: int = 0
    decided: int = 0
    exec_credit: float = 0.0
    running: bool = False  # started (booted, or joined)
    left: bool = False  # removed from the group and gone
    down_until: int | None = None  # crashed, restarts at this time
    unreachable_since: int | None = None  # down or isolated since
    isolated_until: int | None = None  # partitioned away from every peer (still publishing)
    silent_until: int | None = None  # publishes nothing (still working)
    exec_stall_until: int | None = None
    exec_cap: int | None = None  # executor may not pass this instance (fault)
    drop_next: int = 0  # events to lose after taking their seq (fault)
    view_eh_override: int | None = None
    view_override_until: int | None = None
    cache_size: int = 0
    next_hb: int = 0
    last_suspects: tuple[str, ...] = ()
    reported_upto: int = 0  # config commands reported up to this instance (no re-reports)
    status: str = "ONLINE"

    @property
    def old(self) -> bool:
        return self.protocol < 5

    def up(self, t: int) -> bool:
        return self.running and not self.left and self.down_until is None

    def reachable(self, t: int) -> bool:
        return self.up(t) and self.isolated_until is None


class GroupSim:
    """One group of the fleet."""

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
        self._emit = emit
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
        self.scripts: list[Iterator[Wait]] = []
        self.waiting: list[tuple[Iterator[Wait], Wait]] = []
        self.next_id = nodes + 1
        self.next_reconfig = self._exp(self.reconfig_every_ms)
        self.next_restart = self._exp(self.restart_every_ms)
        self.events = 0
        self.dropped = 0
        self._booted = False
        members = []
        for i in range(1, nodes + 1):
            # The first node is always new so a group can always reconfigure through it.
            old = i > 1 and self.rng.random() < old_node_fraction
            node = self._new_node(f"n{i}", OLD_PROTOCOL if old else NEW_PROTOCOL)
            node.running = True
            members.append((node.id, node.protocol))
        boot = self.cmap.apply(0, Command("boot", tuple(members), rules.default_eh))
        assert boot.config is not None
        self.commands[0] = DecidedCommand(0, Command("boot", tuple(members), rules.default_eh), boot)
        self.blocks.append(
            Block(0, 1, "n1", "config", 0, self.commands[0].command)
        )

    # ---------------------------------------------------------------- helpers for fault scripts
    def _exp(self, mean_ms: float) -> int:
        return self.t + int(self.rng.expovariate(1.0 / mean_ms))

    def _new_node(self, node_id: str, protocol: int) -> NodeSim:
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

    def after(self, ms: int) -> Wait:
        deadline = self.t + ms
        return lambda: self.t >= deadline

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

    def start_script(self, script: Iterator[Wait]) -> None:
        self.scripts.append(script)
        self._advance(script)

    def _advance(self, script: Iterator[Wait]) -> None:
        try:
            wait = next(script)
        except StopIteration:
            self.scripts.remove(script)
            return
        self.waiting.append((script, wait))

    # ----------------------------------------------------------------------------- publishing
    def emit(self, node: NodeSim, etype: str, fields: dict[str, Any]) -> None:
        """Publish one event of ``node`` unless it is silent; a lost event still takes its seq."""
        t = self.t
        if (node.silent_until is not None and t < node.silent_until) or (
            self.silent_until is not None and t < self.silent_until
        ):
            return
        event = {
            "v": 1,
            "type": etype,
            "group": self.name,
            "node": node.id,
            "ts_ms": self.base_ms + t + node.clock_offset_ms,
            "seq": node.seq,
            "incarnation": node.incarnation,
            **fields,
        }
        node.seq += 1
        if self.hidden_until is not None and t < self.hidden_until:
            return  # published before the history the monitor gets to see (incomplete_history)
        if node.drop_next > 0:
            node.drop_next -= 1
            self.dropped += 1
            return
        self.events += 1
        self._emit(event)

    def _decision_event(self, node: NodeSim, block: Block) -> None:
        fields: dict[str, Any] = {"instance": block.first}
        if block.count != 1:
            fields["count"] = block.count
        fields["proposer"] = block.proposer
        fields["kind"] = block.kind
        if block.count == 1:
            fields["digest"] = block.digests.get(node.id) or digest_of(
                self.name, block.first, block.proposer, block.kind
            )
        if node.id == block.proposer and block.window_base is not None:
            fields["window_base"] = block.window_base
        if block.command is not None:
            fields["config"] = command_json(block.command)
        self.emit(node, "decision", fields)

    def _config_event(self, node: NodeSim, rec: DecidedCommand) -> None:
        fields: dict[str, Any] = {"instance": rec.instance}
        cfg = rec.outcome.config
        if cfg is not None:
            fields.update(outcome="installed", start=cfg.start, event_horizon=cfg.event_horizon)
            fields["members"] = [{"id": m, "protocol": p} for m, p in cfg.members]
        else:
            fields.update(outcome="refused", reason=rec.outcome.reason)
        self.emit(node, "config", fields)

    def _suspects(self, node: NodeSim) -> tuple[str, ...]:
        t = self.t
        view = self.cmap.as_of(node.executed).active(node.executed + 1)
        out = []
        for m in view.member_ids:
            peer = self.nodes.get(m)
            if peer is None or peer is node or peer.left:
                continue
            since = peer.unreachable_since
            if node.isolated_until is not None and node.unreachable_since is not None:
                since = node.unreachable_since if since is None else min(since, node.unreachable_since)
            if since is not None and t - since >= DETECTOR_MS:
                out.append(m)
        return tuple(out)

    def _heartbeat(self, node: NodeSim) -> None:
        known = self.cmap.as_of(node.executed)
        view = known.active(node.executed + 1)
        eh = view.event_horizon
        if node.view_override_until is not None and self.t < node.view_override_until:
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
        self.emit(node, "heartbeat", fields)

    # ----------------------------------------------------------------------------------- tick
    def tick(self, t: int) -> None:
        self.t = t
        if not self._booted:
            self._booted = True
            for node in self.nodes.values():  # every founding member learns and runs the boot
                self._decision_event(node, self.blocks[0])
                self._config_event(node, self.commands[0])
                self.emit(node, "execution", {"executed": 0})
        self._run_scripts()
        self._node_lifecycle()
        self._background()
        self._decide()
        self._learn()
        self._execute()
        self._heartbeats()
        self._prune()

    def _run_scripts(self) -> None:
        ready = [(s, w) for s, w in self.waiting if w()]
        for item in ready:
            self.waiting.remove(item)
            self._advance(item[0])

    def _node_lifecycle(self) -> None:
        t = self.t
        for node in list(self.nodes.values()):
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
            until = getattr(self, attr)
            if until is not None and t >= until:
                setattr(self, attr, None)
        if self.rate_override is not None and t >= self.rate_override[1]:
            self.rate_override = None
        # Joiners start when the group is about to decide in their configuration.
        active = self.cmap.active(self.decided + 1)
        for m in active.member_ids:
            node = self.nodes[m]
            if not node.running and not node.left:
                node.running = True
                donor = max((n.executed for n in self.nodes.values() if n.up(t)), default=0)
                node.executed = node.decided = min(active.start - 1, donor)
                node.reported_upto = node.executed
                node.status = "RECOVERING"
                node.next_hb = t
        # Removed nodes leave once can_leave of the configuration that dropped them is decided.
        for cfg in self.cmap.configs[1:]:
            if self.decided < cfg.can_leave:
                continue
            prev = self.cmap.configs[self.cmap.configs.index(cfg) - 1]
            for m in sorted(set(prev.member_ids) - set(cfg.member_ids)):
                leaving = self.nodes.get(m)
                if leaving is None or leaving.left:
                    continue
                node = leaving
                if node.up(t):
                    node.status = "OFFLINE"
                    self._heartbeat(node)
                node.left = True

    def _background(self) -> None:
        """Legal life of a healthy group: restarts and reconfigurations (paused during faults)."""
        t = self.t
        if self.scripts:
            self.next_reconfig = max(self.next_reconfig, t + 5_000)
            self.next_restart = max(self.next_restart, t + 5_000)
            return
        if t >= self.next_restart:
            self.next_restart = self._exp(self.restart_every_ms)
            candidates = [n for n in self.members() if n.up(t) and n.isolated_until is None]
            if len(candidates) == len(self.members()) and len(candidates) >= 3:
                node = self.rng.choice(candidates)
                node.down_until = t + self.rng.randint(1_000, 3_000)
                node.unreachable_since = t
        if t >= self.next_reconfig:
            self.next_reconfig = self._exp(self.reconfig_every_ms)
            command = self._random_command()
            if command is not None:
                self.propose(command)

    def _random_command(self) -> Command | None:
        latest = self.cmap.latest()
        # Keep a pending configuration from waiting long (PENDING_CONFIG_STUCK must stay quiet).
        if (latest.start - self.decided + 2 * self.rules.eh_max + 2) / self.rate > 40:
            return None
        roll = self.rng.random()
        n_members = len(latest.members)
        if roll < 0.45:
            if self.rng.random() < 0.1:
                return Command("set_event_horizon", event_horizon=self.rng.choice([5, 250, 300]))
            choices = [10, 20, 30, 50, 100, 150, 200]
            return Command("set_event_horizon", event_horizon=self.rng.choice(choices))
        if (roll < 0.75 or n_members <= 3) and n_members < MAX_MEMBERS:
            proto = OLD_PROTOCOL if self.rng.random() < self.old_fraction else NEW_PROTOCOL
            return Command("add_nodes", ((self.new_node_id(), proto),))
        if n_members > 3:
            primary = self.primary().id
            victims = [m for m in latest.member_ids if m != primary]
            return Command("remove_nodes", ((self.rng.choice(victims), None),))
        return None

    # ---------------------------------------------------------------------------- consensus
    def _acceptor_bound(self, cfg: Config) -> int:
        bounds = sorted(
            (self.bound(self.nodes[m]) for m in cfg.member_ids if self.nodes[m].reachable(self.t)),
            reverse=True,
        )
        if len(bounds) < cfg.majority:
            return self.decided  # no quorum: nothing can be decided
        return bounds[cfg.majority - 1]

    def _decide(self) -> None:
        t = self.t
        if self.decide_pause_until is not None:
            return
        rate = self.rate_override[0] if self.rate_override else self.rate
        self.credit = min(self.credit + rate * self.tick_ms / 1000, rate + 1)
        active = self.cmap.active(self.decided + 1)
        proposer = self.primary()
        if not proposer.reachable(t):
            return
        limit = min(self.bound(proposer), self._acceptor_bound(active))
        if self.bypass_acceptors:
            limit = self.bound(proposer)
        if self.next_block_hook is not None:
            block = self.next_block_hook(self.decided, proposer.id, limit)
            if block is not None:
                self.next_block_hook = None
                self.blocks.append(block)
                self.decided = block.last
                return
        if limit <= self.decided or self.credit < 1:
            return
        if self.queue:
            command, flags, done = self.queue.pop(0)
            self._decide_command(proposer, command, flags, done)
            self.credit -= 1
            if limit <= self.decided:
                return
        if self.rng.random() < 0.03:
            others = [n for n in self.members() if n is not proposer and n.reachable(t)]
            others = [n for n in others if self.bound(n) > self.decided]
            if others:
                noop = self.rng.choice(others)
                self.blocks.append(Block(self.decided + 1, 1, noop.id, "noop", noop.executed))
                self.decided += 1
                self.credit -= 1
        count = min(int(self.credit), limit - self.decided)
        if count <= 0:
            return
        self.blocks.append(Block(self.decided + 1, count, proposer.id, "app", proposer.executed))
        self.decided += count
        self.credit -= count

    def _decide_command(
        self, proposer: NodeSim, command: Command, flags: dict[str, Any], proposal: Proposal
    ) -> None:
        instance = self.decided + 1
        if flags.get("force_install"):
            permissive = Rules(
                eh_min=0, eh_max=2**31, default_eh=self.rules.default_eh, min_protocol_for_eh=0
            )
            outcome = ConfigMap(permissive, list(self.cmap.configs)).decide(instance, command)
        else:
            outcome = self.cmap.decide(instance, command)
        if outcome.config is not None and flags.get("start_offset"):
            outcome = replace(outcome, config=replace(outcome.config, start=outcome.config.start + flags["start_offset"]))
        if outcome.config is not None:
            self.cmap.install(outcome.config)
            if command.op == "add_nodes":
                for node_id, proto in command.nodes:
                    if node_id not in self.nodes:
                        self._new_node(node_id, proto if proto is not None else NEW_PROTOCOL)
        rec = DecidedCommand(instance, command, outcome)
        self.commands[instance] = rec
        self.blocks.append(Block(instance, 1, proposer.id, "config", proposer.executed, command))
        self.decided = instance
        proposal.record = rec

    def _learn(self) -> None:
        t = self.t
        for node in self.nodes.values():
            if not node.reachable(t) or node.decided >= self.decided:
                continue
            for block in self._blocks_after(node.decided):
                if block.last > node.decided:
                    self._decision_event(node, block)
            node.decided = self.decided

    def _blocks_after(self, instance: int) -> list[Block]:
        lo, hi = 0, len(self.blocks)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.blocks[mid].last <= instance:
                lo = mid + 1
            else:
                hi = mid
        return self.blocks[lo:]

    def _execute(self) -> None:
        t = self.t
        for node in self.nodes.values():
            if not node.up(t) or node.executed >= node.decided:
                if node.up(t) and node.status == "RECOVERING" and node.executed >= node.decided:
                    node.status = "ONLINE"
                continue
            if node.exec_stall_until is not None:
                continue
            node.exec_credit += node.speed * self.tick_ms / 1000
            target = min(node.decided, node.executed + int(node.exec_credit))
            if node.exec_cap is not None:
                target = min(target, node.exec_cap)
            if target <= node.executed:
                continue
            node.exec_credit -= target - node.executed
            for instance in sorted(i for i in self.commands if node.executed < i <= target):
                if instance > node.reported_upto:
                    self._config_event(node, self.commands[instance])
            node.executed = target
            node.reported_upto = max(node.reported_upto, target)
            self.emit(node, "execution", {"executed": target})

    def _heartbeats(self) -> None:
        t = self.t
        for node in self.nodes.values():
            if not node.up(t):
                continue
            suspects = self._suspects(node)
            if t >= node.next_hb or suspects != node.last_suspects:
                node.last_suspects = suspects
                node.next_hb = t + self.heartbeat_ms
                self._heartbeat(node)

    def _prune(self) -> None:
        alive = [n for n in self.nodes.values() if n.running and not n.left]
        low_decided = min(n.decided for n in alive)
        keep = self._blocks_after(low_decided)
        if len(keep) < len(self.blocks):
            self.blocks = keep
        low_exec = min(n.executed for n in alive)
        for instance in [i for i in self.commands if i <= low_exec]:
            del self.commands[instance]
        self.cmap.prune(low_exec)


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
