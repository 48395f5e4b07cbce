"""The generations fleet simulator: N groups x M configured mtm nodes, seeded, clock-injected.

The public API is parallel to ``replimon.producers.simulator`` (``SimOptions``,
``Simulator(options, injections, sink)``, ``run()``, ``summary()``, ``manifest()``): the same
seed and options give the same events in the same order, byte for byte; ``realtime=True`` paces
ticks against an injected clock for live publishing. Groups are named ``pg1``, ``pg2``, ... so a
mixed fleet can run beside the XCom simulator's ``g1``, ``g2``, ...
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from replimon.producers.simulator.fleet import DEFAULT_START_MS, SimSummary
from replimon.producers.simulator_gen.faults import CATALOGUE, Injection
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
    return [f"{prefix}{i}" for i in range(1, n + 1)]


class Simulator:
    """Drives the groups; see the module docstring."""

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
        self.injections = sorted(injections, key=lambda i: (i.at_ms, i.group, i.fault))
        if self.injections and options.nodes < 3:
            raise ValueError("the generations faults need at least 3 nodes (A, B and C)")
        for inj in self.injections:
            if inj.group not in self.groups:
                raise ValueError(f"fault {inj.fault}: no group {inj.group!r} "
                                 f"(groups are {', '.join(self.groups)})")
        self._pending = list(self.injections)
        self.t = 0
        self.ticks = 0

    def step(self) -> None:
        """Advance every group by one tick."""
        t = self.t
        while self._pending and self._pending[0].at_ms <= t:
            inj = self._pending.pop(0)
            group = self.groups[inj.group]
            group.t = t
            group.start_script(CATALOGUE[inj.fault].script(group, inj))
        for group in self.groups.values():
            group.tick(t)
        self.ticks += 1
        self.t += self.options.tick_ms

    def _emit(self, event: dict[str, Any]) -> None:
        """Through ``self.sink`` as it is when the event is made (a caller may set the sink after
        building the simulator, as ``replimon simulate`` does to validate before opening a file)."""
        self.sink(event)

    def run(
        self,
        *,
        realtime: bool = False,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> SimSummary:
        """Run for ``options.duration_ms`` (0 = until ``should_stop``), paced when ``realtime``."""
        began = clock()
        duration = self.options.duration_ms
        while (duration <= 0 or self.t < duration) and not should_stop():
            if realtime:
                ahead = self.t / 1000 - (clock() - began)
                if ahead > 0:
                    sleep(ahead)
            self.step()
        return self.summary()

    def summary(self) -> SimSummary:
        per_group = {name: {"events": g.events, "lost": 0, "gen": max(n.gen.num for n in g.nodes.values())}
                     for name, g in self.groups.items()}
        return SimSummary(events=sum(g.events for g in self.groups.values()), lost=0,
                          ticks=self.ticks, duration_ms=self.t, faults=self.manifest(),
                          per_group=per_group)

    def manifest(self) -> list[dict[str, Any]]:
        """The injected faults with the alert kind each must produce."""
        return [inj.record(self.options.start_ms) for inj in self.injections if inj.at_ms < max(self.t, 1)]
