"""The quorum-log fleet simulator: N groups of M halon replicas, seeded, clock-injected.

The public API is parallel to the other simulators (``SimOptions``, ``Simulator(options,
injections, sink)``, ``run()``, ``summary()``, ``manifest()``): the same seed and options give
the same events in the same order, byte for byte; ``realtime=True`` paces ticks against an
injected clock for live publishing. Groups are named ``ql1``, ``ql2``, ... so a mixed fleet can
run beside the XCom simulator's ``g1``, ... and the generations simulator's ``pg1``, ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from replimon.producers import fleet_run
from replimon.producers.fleet_run import FleetRun, Injection
from replimon.producers.simulator.fleet import DEFAULT_START_MS
from replimon.producers.simulator_qlog.faults import CATALOGUE
from replimon.producers.simulator_qlog.group import QlogGroupSim

Sink = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class SimOptions:
    groups: int = 3
    nodes: int = 5
    seed: int = 0
    duration_ms: int = 30_000
    tick_ms: int = 100
    heartbeat_interval_s: float = 1.0  # docs/families.md 3.2: qlog.heartbeat every 1 s
    decrees_per_s: float = 5.0  # client values decrees per second per group
    lease_ms: int = 3_000  # `Internal.hs` leaseTimeout
    renew_ms: int = 1_000  # leaseRenewTimeout: the leader renews this long before the lease ends
    restart_every_s: float = 60.0  # mean time between replica crashes per group
    delay_every_s: float = 30.0  # mean time between delayed replicas per group
    start_ms: int = DEFAULT_START_MS
    group_prefix: str = "ql"


def group_names(n: int, prefix: str = "ql") -> list[str]:
    return fleet_run.group_names(n, prefix)


class Simulator(FleetRun[QlogGroupSim]):
    """Drives the groups; see the module docstring."""

    CATALOGUE = CATALOGUE

    def __init__(self, options: SimOptions, injections: Iterable[Injection] = (), sink: Sink | None = None) -> None:
        if options.nodes < 3 or options.groups < 1:
            raise ValueError("a quorum-log group needs at least 3 replicas, and a fleet 1 group")
        if options.renew_ms >= options.lease_ms:
            raise ValueError("the lease must last longer than its renewal margin")
        self.options = options
        self.sink: Sink = sink or (lambda _e: None)
        self.groups = {
            name: QlogGroupSim(name, options.nodes, seed=options.seed, tick_ms=options.tick_ms,
                               heartbeat_ms=int(options.heartbeat_interval_s * 1000),
                               decrees_per_s=options.decrees_per_s, lease_ms=options.lease_ms,
                               renew_ms=options.renew_ms, restart_every_s=options.restart_every_s,
                               delay_every_s=options.delay_every_s, base_ms=options.start_ms,
                               emit=self._emit)
            for name in group_names(options.groups, options.group_prefix)
        }
        self._start(injections)

    def group_summary(self, g: QlogGroupSim) -> dict[str, int]:
        return {"events": g.events, "lost": 0, "leg": max(r.leg for r in g.nodes.values())}
