"""Mixed fleets of the four protocol families for the benchmarks (``core.py``, ``traces.py``).

One row of ``FAMILIES`` per family: its simulator package, the option that sets its rate (XCom
``decisions_per_s``, generations ``xacts_per_s``, quorum-log ``decrees_per_s``, chain
``writes_per_s``) and a few faults of its catalogue that raise their alert at once or within a
couple of seconds of the fault (safety violations, no wedges: ``alert`` is not None, and the
latency of the pipeline benchmark is measured from the event the alert is about). Each simulator
names its groups with its own prefix (``g``, ``pg``, ``ql``, ``ch``), so a mixed fleet's names
never collide. The simulators are stepped in lockstep (whichever is behind steps), so their events
come out in time order, as one fleet's would. (``replimon demo`` has its own table of the
families, ``replimon.demo_fleet.FAMILIES``: its default faults are timed for a live view, these
for latency figures.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from replimon import demo_fleet
from replimon.producers import simulator as xcom_sim
from replimon.producers import simulator_chain as chain_sim
from replimon.producers import simulator_gen as gen_sim
from replimon.producers import simulator_qlog as qlog_sim
from replimon.producers.fleet_run import Injection


@dataclass(frozen=True)
class Family:
    name: str  # as --families names it (replimon demo's names)
    sim: Any  # the simulator package: SimOptions, Simulator, CATALOGUE
    knob: str  # the SimOptions field that sets the rate
    prefix: str  # its group names: prefix + 1, 2, ...
    faults: tuple[str, ...]  # quick ones: each raises its alert within ~2 s of the fault


FAMILIES: tuple[Family, ...] = (
    Family("xcom", xcom_sim, "decisions_per_s", "g",
           ("beyond_horizon", "divergent_decision", "execution_regression")),
    Family("gen", gen_sim, "xacts_per_s", "pg",
           ("gen_xact_divergent", "gen_commit_unprepared", "gen_members_conflict")),
    Family("qlog", qlog_sim, "decrees_per_s", "ql",
           ("qlog_divergent_decree", "qlog_decree_without_quorum", "qlog_reconf_without_old_quorum")),
    Family("chain", chain_sim, "writes_per_s", "ch",
           ("chain_two_heads", "chain_append_not_cas", "chain_view_conflict")),
)
BY_NAME = {f.name: f for f in FAMILIES}
ALL = ",".join(BY_NAME)


def parse_families(text: str) -> tuple[Family, ...]:
    """``xcom,qlog`` -> those rows, in the order of ``FAMILIES``; ValueError (one line, as
    ``replimon demo --families`` words it) for an unknown name."""
    return tuple(BY_NAME[name] for name in demo_fleet.parse_families(text))


def family_of(group: str) -> str:
    """The family of a group name (its prefix); ``warm-`` groups are XCom's."""
    head = group.removeprefix("warm-").rstrip("0123456789")
    return next((f.name for f in FAMILIES if f.prefix == head), "xcom")


def split(total: int, parts: int) -> list[int]:
    """``total`` spread over ``parts`` as evenly as possible (the first ones get the remainder)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def options(family: Family, groups: int, nodes: int | None, seconds: float, seed: int,
            tick_ms: int | None = None, knob: float | None = None) -> Any:
    """The family's ``SimOptions``: its defaults, with what is given."""
    opts = family.sim.SimOptions(groups=groups, seed=seed, duration_ms=int(seconds * 1000))
    changes: dict[str, Any] = {"nodes": nodes, "tick_ms": tick_ms, family.knob: knob}
    return dataclasses.replace(opts, **{k: v for k, v in changes.items() if v is not None})


def run_fleet(specs: Sequence[tuple[Family, Any, Sequence[Injection]]],
              sink: Callable[[int, str, dict[str, Any]], None]) -> list[Any]:
    """Run the families' simulators (family, options, injections) side by side, in lockstep
    (whichever is behind steps; their ticks may differ), each to its own duration.
    ``sink(t, family, event)`` gets every event in time order (``t``: the simulated ms of the
    tick that made it; 0 for a boot event made as a simulator is built). Returns the simulators
    (their ``summary()``)."""
    clock = [0]
    sims = []
    for fam, opts, injections in specs:
        def emit(ev: dict[str, Any], name: str = fam.name) -> None:
            sink(clock[0], name, ev)

        sims.append(fam.sim.Simulator(opts, list(injections), emit))
    active = list(sims)
    while active:
        t = clock[0] = min(s.t for s in active)
        for sim in active:
            if sim.t == t:
                sim.step()
        active = [s for s in active if s.t < s.options.duration_ms]
    return sims
