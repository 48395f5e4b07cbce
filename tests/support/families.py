"""What the tests of every protocol family's simulator share: a simulated run as JSON lines
(cached: the runs are deterministic per seed and several tests read the same one), and the
non-info alert kinds each group raised."""

from __future__ import annotations

import json
from collections import defaultdict
from functools import lru_cache
from types import ModuleType
from typing import Any

from replimon.core.alerts import KINDS

NOT_INFO = {k for k, (severity, _category) in KINDS.items() if severity != "info"}


@lru_cache(maxsize=128)
def simulated(sim: ModuleType, fault: str | None, *, first: str, seed: int, groups: int, nodes: int,
              duration_ms: int) -> tuple[str, ...]:
    """The events of a run of the simulator package ``sim`` (its ``SimOptions``, ``Simulator``,
    ``parse_injection``), ``fault`` injected into group ``first`` at 10 s, as JSON lines."""
    out: list[str] = []
    injections = [sim.parse_injection(f"{fault}:{first}@10s")] if fault else []
    sim.Simulator(sim.SimOptions(duration_ms=duration_ms, groups=groups, nodes=nodes, seed=seed), injections,
                  lambda e: out.append(json.dumps(e))).run()
    return tuple(out)


def kinds_by_group(alerts: list[Any]) -> dict[str, set[str]]:
    """group -> the kinds of its alerts that are not info."""
    got: dict[str, set[str]] = defaultdict(set)
    for a in alerts:
        if a.kind in NOT_INFO:
            got[a.group].add(a.kind)
    return dict(got)
