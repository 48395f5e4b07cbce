"""What every family's fleet simulator shares: fault injections (``NAME[:GROUP][@TIME]``), the
tick loop that starts them, the paced run, the summary's shape and the manifest of injected faults.

A family's simulator subclasses :class:`FleetRun`, builds ``self.groups`` (objects with ``t``,
``start_script(script)`` and ``tick(t)``: :class:`Scripted` gives the script runner), and names
its fault catalogue in ``CATALOGUE`` (name -> a :class:`FaultSpec`). The run is deterministic per seed: the
injections start in (time, group, fault) order at the first tick at or after their time.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar


@dataclass
class Injection:
    """A fault to inject: by name, into a group, at a time (ms since the run's start)."""

    fault: str
    group: str = "g1"
    at_ms: int = 10_000
    notes: dict[str, Any] = field(default_factory=dict)

    def record(self, base_ms: int, alert: str | None) -> dict[str, Any]:
        """The manifest's line: the fault, the alert kind it must raise (None: a near miss that
        must raise nothing), where and when, and what the script noted."""
        return {"fault": self.fault, "alert": alert, "group": self.group, "at_ms": self.at_ms,
                "ts_ms": base_ms + self.at_ms, **self.notes}


Wait = Callable[[], bool]  # a fault script's wait: true once the script may go on


class Scripted:
    """The fault-script runner a group simulator mixes in. A script is a generator that changes
    the group and yields a :data:`Wait` each time it must wait (``yield group.after(5_000)``, or
    any condition); each tick (``_run_scripts``, first thing in ``tick``) resumes the scripts whose
    wait came true, in the order they parked. ``quiet`` is true while any script runs: the
    family's background disturbances (restarts, reconfigurations) pause, so a fault is alone with
    the group. The group's ``__init__`` sets ``t`` (ms since the run's start), ``scripts`` ([]) and
    ``quiet`` (False)."""

    t: int
    scripts: list[tuple[Iterator[Wait], Wait]]  # each running script, with the wait it parked on
    quiet: bool

    def after(self, ms: int) -> Wait:
        """A wait that turns true ``ms`` from now."""
        deadline = self.t + ms
        return lambda: self.t >= deadline

    def start_script(self, script: Iterator[Wait]) -> None:
        """Run a fault script up to its first wait."""
        self.quiet = True
        self._advance(script)

    def _advance(self, script: Iterator[Wait]) -> None:
        try:
            self.scripts.append((script, next(script)))
        except StopIteration:
            self.quiet = bool(self.scripts)

    def _run_scripts(self) -> None:
        for item in [item for item in self.scripts if item[1]()]:
            self.scripts.remove(item)
            self._advance(item[0])


S = TypeVar("S")


@dataclass(frozen=True)
class FaultSpec(Generic[S]):
    """A catalogue entry: the fault's name, the alert kind it must raise (None: a legal near miss
    that must raise nothing), what happens, and its script over a group of type ``S``."""

    name: str
    alert: str | None
    summary: str
    script: Callable[[S, Injection], Iterator[Wait]]


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")


def parse_duration_ms(text: str) -> int:
    """``500ms``, ``30s``, ``2m``, ``1h`` or a plain number of seconds, as milliseconds."""
    match = _DURATION.match(text.strip())
    if not match:
        raise ValueError(f"not a duration: {text!r} (use e.g. 500ms, 30s, 2m)")
    value, unit = float(match.group(1)), match.group(2) or "s"
    return int(value * {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}[unit])


def parse_injection(text: str, catalogue: Mapping[str, Any], default_group: str) -> Injection:
    """``NAME[:GROUP][@TIME]`` (e.g. ``beyond_horizon:g2@40s``) against a family's catalogue."""
    name, _, at = text.partition("@")
    name, _, group = name.partition(":")
    if name not in catalogue:
        raise ValueError(f"unknown fault {name!r}; `replimon simulate --list-faults` lists them")
    inj = Injection(name, group or default_group)
    if at:
        inj.at_ms = parse_duration_ms(at)
    return inj


@dataclass
class SimSummary:
    events: int
    lost: int
    ticks: int
    duration_ms: int
    faults: list[dict[str, Any]]
    per_group: dict[str, dict[str, int]]


def group_names(n: int, prefix: str) -> list[str]:
    """A fleet's group names: ``prefix`` + 1, 2, ... (``g``, ``pg``, ``ql``: families never collide)."""
    return [f"{prefix}{i}" for i in range(1, n + 1)]


class _Group(Protocol):
    t: int
    events: int

    def start_script(self, script: Any) -> None: ...

    def tick(self, t: int) -> None: ...


G = TypeVar("G", bound=_Group)


class FleetRun(Generic[G]):
    """The tick loop of a fleet simulator (module docstring); ``G``: its groups' type."""

    CATALOGUE: ClassVar[Mapping[str, Any]]
    groups: dict[str, G]
    options: Any  # a dataclass with at least ``tick_ms``, ``duration_ms`` and ``start_ms``
    sink: Callable[[dict[str, Any]], None]

    def _start(self, injections: Iterable[Injection]) -> None:
        """Once ``self.groups`` is built: order the injections, check their groups exist (one-line
        ValueError), and reset the clock."""
        self.injections = sorted(injections, key=lambda i: (i.at_ms, i.group, i.fault))
        names = list(self.groups)
        for inj in self.injections:
            if inj.group not in self.groups:
                known = ", ".join(names) if len(names) <= 3 else f"{names[0]}..{names[-1]}"
                raise ValueError(f"fault {inj.fault}: no group {inj.group!r} (groups are {known})")
        self._pending = list(self.injections)
        self.t = 0
        self.ticks = 0

    def _emit(self, event: dict[str, Any]) -> None:
        """Through ``self.sink`` as it is when the event is made (a caller may set the sink after
        building the simulator, as ``replimon simulate`` does to validate before opening a file)."""
        self.sink(event)

    def step(self) -> None:
        """Advance every group by one tick, starting the injections that are due first."""
        t = self.t
        while self._pending and self._pending[0].at_ms <= t:
            inj = self._pending.pop(0)
            group = self.groups[inj.group]
            group.t = t
            group.start_script(self.CATALOGUE[inj.fault].script(group, inj))
        for group in self.groups.values():
            group.tick(t)
        self.ticks += 1
        self.t += self.options.tick_ms

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

    def group_summary(self, group: G) -> dict[str, int]:
        """A group's line of the summary: ``events``, ``lost`` and the family's own counters."""
        raise NotImplementedError

    def summary(self) -> SimSummary:
        per_group = {name: self.group_summary(g) for name, g in self.groups.items()}
        return SimSummary(events=sum(p["events"] for p in per_group.values()),
                          lost=sum(p["lost"] for p in per_group.values()), ticks=self.ticks,
                          duration_ms=self.t, faults=self.manifest(), per_group=per_group)

    def manifest(self) -> list[dict[str, Any]]:
        """The injected faults with the alert kind each must produce and what it touched."""
        return [inj.record(self.options.start_ms, self.CATALOGUE[inj.fault].alert)
                for inj in self.injections if inj.at_ms < max(self.t, 1)]
