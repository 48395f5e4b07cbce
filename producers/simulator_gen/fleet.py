"""The generations fleet simulator: N groups x M configured mtm nodes, seeded, clock-injected.

The public API is parallel to ``replimon.producers.simulator`` (``SimOptions``,
``Simulator(options, injections, sink)``, ``run()``, ``summary()``, ``manifest()``): the same
seed and options give the same events in the same order, byte for byte; ``realtime=True`` paces
ticks against an injected clock for live publishing. Groups are named ``pg1``, ``pg2``, ... so a
mixed fleet can run beside the XCom simulator's ``g1``, ``g2``, ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from replimon.producers import fleet_run
from replimon.producers.fleet_run import FleetRun, Injection
from replimon.producers.simulator.fleet import DEFAULT_START_MS
from replimon.producers.simulator_gen.faults import CATALOGUE
from replimon.producers.simulator_gen.group import GenGroupSim

Sink = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class SimOptions:
    groups: int = 3
    nodes: int = 3
    seed: int = 0
    duration_ms: int = 30_000
    tick_ms: int = 100
    heartbeat_interval_s: float = 1.0  # docs/families.md 2.2: gen.heartbeat every 1 s
    xacts_per_s: float = 20.0  # transactions per second per group, sampled below
    xact_sample: int = 4  # gen.xact for gids with crc32(gid) % xact_sample == 0 (0: none)
    restart_every_s: float = 60.0  # mean time between node restarts per group
    start_ms: int = DEFAULT_START_MS
    group_prefix: str = "pg"


def group_names(n: int, prefix: str = "pg") -> list[str]:
    return fleet_run.group_names(n, prefix)


class Simulator(FleetRun[GenGroupSim]):
    """Drives the groups; see the module docstring."""

    CATALOGUE = CATALOGUE

    def __init__(self, options: SimOptions, injections: Iterable[Injection] = (), sink: Sink | None = None) -> None:
        if options.nodes < 2 or options.groups < 1:
            raise ValueError("a generations group needs at least 2 nodes, and a fleet 1 group")
        self.options = options
        self.sink: Sink = sink or (lambda _e: None)
        self.groups = {
            name: GenGroupSim(name, options.nodes, seed=options.seed, tick_ms=options.tick_ms,
                              heartbeat_ms=int(options.heartbeat_interval_s * 1000),
                              xacts_per_s=options.xacts_per_s, xact_sample=options.xact_sample,
                              restart_every_s=options.restart_every_s, base_ms=options.start_ms,
                              emit=self._emit)
            for name in group_names(options.groups, options.group_prefix)
        }
        self._start(injections)
        if self.injections and options.nodes < 3:
            raise ValueError("the generations faults need at least 3 nodes (A, B and C)")

    def group_summary(self, g: GenGroupSim) -> dict[str, int]:
        return {"events": g.events, "lost": 0, "gen": max(n.gen.num for n in g.nodes.values())}
