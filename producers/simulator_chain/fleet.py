"""The chain-replication fleet simulator: N groups of M replicas and their view managers, seeded,
clock-injected.

The public API is parallel to the other simulators (``SimOptions``, ``Simulator(options,
injections, sink)``, ``run()``, ``summary()``, ``manifest()``, on ``FleetRun``): the same seed and
options give the same events in the same order, byte for byte; ``realtime=True`` paces ticks
against an injected clock for live publishing. Groups are named ``ch1``, ``ch2``, ... so a mixed
fleet can run beside the other families' ``g1``, ``pg1``, ``ql1``, ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from replimon.producers import fleet_run
from replimon.producers.fleet_run import FleetRun, Injection
from replimon.producers.simulator.fleet import DEFAULT_START_MS
from replimon.producers.simulator_chain.faults import CATALOGUE
from replimon.producers.simulator_chain.group import ChainGroupSim

Sink = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class SimOptions:
    groups: int = 3
    nodes: int = 3
    seed: int = 0
    duration_ms: int = 30_000
    tick_ms: int = 100
    ttl_ms: int = 2_000  # `etcd.rs`: a slot's TTL, renewed every TTL/2 (docs/families.md 4.1)
    writes_per_s: float = 5.0  # client writes per second per group
    crash_every_s: float = 60.0  # mean time between replica crashes per group (0: none)
    start_ms: int = DEFAULT_START_MS
    group_prefix: str = "ch"


def group_names(n: int, prefix: str = "ch") -> list[str]:
    return fleet_run.group_names(n, prefix)


class Simulator(FleetRun[ChainGroupSim]):
    """Drives the groups; see the module docstring."""

    CATALOGUE = CATALOGUE

    def __init__(self, options: SimOptions, injections: Iterable[Injection] = (), sink: Sink | None = None) -> None:
        if options.nodes < 3 or options.groups < 1:
            raise ValueError("a chain group needs at least 3 replicas, and a fleet 1 group")
        if options.ttl_ms < 4 * options.tick_ms:
            raise ValueError("the lease TTL must span at least 4 ticks")
        self.options = options
        self.sink: Sink = sink or (lambda _e: None)
        self.groups = {
            name: ChainGroupSim(name, options.nodes, seed=options.seed, tick_ms=options.tick_ms,
                                heartbeat_ms=options.ttl_ms // 2, ttl_ms=options.ttl_ms,
                                writes_per_s=options.writes_per_s, crash_every_s=options.crash_every_s,
                                base_ms=options.start_ms, emit=self._emit)
            for name in group_names(options.groups, options.group_prefix)
        }
        self._start(injections)

    def group_summary(self, g: ChainGroupSim) -> dict[str, int]:
        return {"events": g.events, "lost": 0, "epoch": g.view_epoch, "views": len(g.epochs),
                "writes": g.writes}
