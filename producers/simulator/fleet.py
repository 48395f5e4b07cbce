"""The fleet simulator: N groups x M nodes, a seeded RNG, an injected clock, named faults.

``Simulator(options, injections, sink).run()`` advances every group tick by tick and hands each
event (a contract-v1 dict, field order fixed) to ``sink``. Event times are ``options.start_ms``
plus simulated time (plus each node's small clock offset), so the same seed and options give the
same events in the same order, byte for byte, whatever the wall clock says. ``realtime=True``
paces ticks against a clock (injected; ``time.monotonic`` by default) for live publishing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from replimon.config import Settings
from replimon.core.configmap import Rules
from replimon.producers import fleet_run
from replimon.producers.fleet_run import FleetRun, Injection
from replimon.producers.simulator.faults import CATALOGUE
from replimon.producers.simulator.group import GroupSim

# 2026-01-01T00:00:00Z: the default start of a file run, so files do not depend on the wall clock.
DEFAULT_START_MS = 1_767_225_600_000

Sink = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class SimOptions:
    groups: int = 3
    nodes: int = 3
    seed: int = 0
    duration_ms: int = 30_000
    tick_ms: int = 100
    decisions_per_s: float = 20.0
    heartbeat_interval_s: float = 1.0
    old_node_fraction: float = 0.2
    reconfig_every_s: float = 20.0
    restart_every_s: float = 120.0
    cache_size: int = 50_000
    start_ms: int = DEFAULT_START_MS
    rules: Rules = field(default_factory=Rules)

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> SimOptions:
        sim, th = settings.simulator, settings.thresholds
        rules = Rules.from_thresholds(th)
        values: dict[str, Any] = {
            "groups": sim.groups,
            "nodes": sim.nodes,
            "seed": sim.seed,
            "tick_ms": sim.tick_ms,
            "decisions_per_s": sim.decisions_per_s,
            "heartbeat_interval_s": sim.heartbeat_interval_s,
            "old_node_fraction": sim.old_node_fraction,
            "reconfig_every_s": sim.reconfig_every_s,
            "restart_every_s": sim.restart_every_s,
            "cache_size": sim.cache_size,
            "rules": rules,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def group_names(n: int) -> list[str]:
    return fleet_run.group_names(n, "g")


class Simulator(FleetRun[GroupSim]):
    """Drives the groups; see the module docstring."""

    CATALOGUE = CATALOGUE

    def __init__(self, options: SimOptions, injections: Iterable[Injection] = (), sink: Sink | None = None) -> None:
        if options.nodes < 1 or options.groups < 1:
            raise ValueError("groups and nodes must be at least 1")
        self.options = options
        self.sink: Sink = sink or (lambda _e: None)
        self.groups: dict[str, GroupSim] = {}
        for name in group_names(options.groups):
            self.groups[name] = GroupSim(
                name,
                options.nodes,
                seed=options.seed,
                tick_ms=options.tick_ms,
                decisions_per_s=options.decisions_per_s,
                heartbeat_ms=int(options.heartbeat_interval_s * 1000),
                old_node_fraction=options.old_node_fraction,
                reconfig_every_s=options.reconfig_every_s,
                restart_every_s=options.restart_every_s,
                cache_size=options.cache_size,
                rules=options.rules,
                base_ms=options.start_ms,
                emit=self._emit,
            )
        self._start(injections)
        for inj in self.injections:
            if inj.fault == "incomplete_history":
                self.groups[inj.group].hidden_until = inj.at_ms

    def group_summary(self, g: GroupSim) -> dict[str, int]:
        return {"events": g.events, "lost": g.dropped, "decided": g.decided}


class JsonlSink:
    """Writes one compact JSON object per line (the bytes a Kafka message would carry)."""

    def __init__(self, out: str | Path | IO[str]) -> None:
        if isinstance(out, str | Path) and str(out) != "-":
            self._fh: IO[str] = open(out, "w", encoding="utf-8", newline="\n")  # noqa: SIM115
            self._owned = True
        else:
            self._fh = sys.stdout if str(out) == "-" else out  # type: ignore[assignment]
            self._owned = False
        self.count = 0

    def __call__(self, event: dict[str, Any]) -> None:
        self._fh.write(json.dumps(event, separators=(",", ":"), ensure_ascii=False))
        self._fh.write("\n")
        self.count += 1

    def close(self) -> None:
        if self._owned:
            self._fh.close()
        else:
            self._fh.flush()
