"""The generations fault catalogue (docs/families.md 2.7): each named fault makes the history
behind exactly one alert kind in an otherwise clean run, and each has a legal near miss that must
raise nothing (``<name>_near_miss``, alert ``None``).

A fault is a script over a :class:`GenGroupSim` (as in ``replimon.producers.simulator.faults``):
a generator that first waits for the group to settle (every node up and ONLINE in one
generation), then makes the one illegal step, and yields waits. While it runs the group's
background restarts pause. Injections are written ``NAME[:GROUP][@TIME]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from replimon.producers.simulator.faults import parse_duration_ms
from replimon.producers.simulator_gen.group import GenGroupSim, Wait

Script = Callable[[GenGroupSim, "Injection"], Iterator[Wait]]


@dataclass
class Injection:
    """A fault to inject: by name, into a group, at a time (ms since the run's start)."""

    fault: str
    group: str = "pg1"
    at_ms: int = 10_000
    notes: dict[str, Any] = field(default_factory=dict)

    def record(self, base_ms: int) -> dict[str, Any]:
        spec = CATALOGUE[self.fault]
        return {"fault": self.fault, "alert": spec.alert, "group": self.group, "at_ms": self.at_ms,
                "ts_ms": base_ms + self.at_ms, **self.notes}


@dataclass(frozen=True)
class FaultSpec:
    """A catalogue entry: the fault's name, the alert kind it must produce (None for a near
    miss), and its script."""

    name: str
    alert: str | None
    summary: str
    script: Script


def parse_injection(text: str) -> Injection:
    """``NAME[:GROUP][@TIME]``, e.g. ``gen_regression:pg2@40s``."""
    name, _, at = text.partition("@")
    name, _, group = name.partition(":")
    if name not in CATALOGUE:
        raise ValueError(f"unknown fault {name!r}; `replimon simulate --list-faults` lists them")
    inj = Injection(name, group or "pg1")
    if at:
        inj.at_ms = parse_duration_ms(at)
    return inj


def _settled(g: GenGroupSim) -> Iterator[Wait]:
    yield g.settled


CATALOGUE: dict[str, FaultSpec] = {}
