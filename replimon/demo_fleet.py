"""The demo's simulated fleet: which protocol families run, their simulators side by side, and
the tables of what the simulators did (the "fleet" half of ``replimon demo``'s live view).

By default the demo runs a mixed fleet (docs/families.md, "Which family a group is"): the XCom
simulator's groups ``g1``, ``g2``, ... and the generations simulator's ``pg1``, ``pg2``, ...,
publishing into the same broker, each family with a few faults of its catalogue timed within the
first two minutes. The names never collide (the two simulators name their groups with different
prefixes), so every group's first event gives it its family.

Everything here is pure (no broker, no Spark): ``DemoFleet`` is built before the embedded stack
starts, so a bad flag fails in one line before anything is started; its events wait in a buffer
until ``attach`` gives it the publisher.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.table import Table

from replimon.console import sim_options
from replimon.producers import simulator as xcom_sim
from replimon.producers import simulator_gen as gen_sim
from replimon.producers.fleet_run import Injection
from replimon.producers.simulator.fleet import group_names as xcom_names
from replimon.producers.simulator.group import GroupSim
from replimon.producers.simulator_gen.fleet import group_names as gen_names
from replimon.producers.simulator_gen.group import GenGroupSim
from replimon.producers.simulator_gen.model import majority

FAMILIES = ("xcom", "gen")
DEFAULT_FAMILIES = "xcom,gen"
DEFAULT_GROUPS = 6
DEFAULT_GEN_GROUPS = 3

# The default faults, spread over the first two minutes so the live view shows each one firing
# (and the wedges resolving). XCom's as before; the generations' are a safety violation (a node
# loads an older generation state: GEN_REGRESSION) and a wedge (every node cut off for 20 s:
# GEN_NO_ONLINE after thresholds.gen_no_online_s, resolved when they reconnect).
XCOM_FAULTS = [
    "beyond_horizon:g2@20s",
    "node_silent:g3@35s",
    "eh_out_of_domain:g4@50s",
    "horizon_wedge:g5@70s",
    "divergent_decision:g6@90s",
]
GEN_FAULTS = [
    "gen_regression:pg1@30s",
    "gen_no_online:pg2@60s",
]

Sink = Callable[[dict[str, Any]], None]


def parse_families(text: str) -> tuple[str, ...]:
    """``xcom,gen`` -> ("xcom", "gen"), in the order of ``FAMILIES``; ValueError (one line) for
    an unknown or missing family."""
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        raise ValueError(f"--families: unknown family {unknown[0]!r} (families are {', '.join(FAMILIES)})")
    if not names:
        raise ValueError(f"--families: name at least one of {', '.join(FAMILIES)}")
    return tuple(f for f in FAMILIES if f in names)


def parse_injection(text: str) -> Injection:
    """``NAME[:GROUP][@TIME]`` of either catalogue: a generations fault (``gen_*``, groups
    ``pgN``) or an XCom one (groups ``gN``)."""
    name = text.partition("@")[0].partition(":")[0]
    if name in gen_sim.CATALOGUE:
        return gen_sim.parse_injection(text)
    return xcom_sim.parse_injection(text)


def is_gen(inj: Injection) -> bool:
    """A generations fault (the simulators share one ``Injection``: the catalogue tells them apart)."""
    return inj.fault in gen_sim.CATALOGUE


@dataclass(frozen=True)
class FleetChoice:
    """What the flags ask for: the families and each one's group count."""

    families: tuple[str, ...] = ("xcom", "gen")
    groups: int = DEFAULT_GROUPS  # XCom groups
    gen_groups: int = DEFAULT_GEN_GROUPS
    nodes: int = 3

    def default_injections(self) -> list[Injection]:
        """The default faults of the chosen families, in the groups the fleet has."""
        out: list[Injection] = []
        if "xcom" in self.families:
            xs = [xcom_sim.parse_injection(t) for t in XCOM_FAULTS]
            out += [i for i in xs if i.group in xcom_names(self.groups)]
        if "gen" in self.families and self.nodes >= 3:  # the gen faults need nodes A, B and C
            gs = [gen_sim.parse_injection(t) for t in GEN_FAULTS]
            out += [i for i in gs if i.group in gen_names(self.gen_groups)]
        return out


class DemoFleet:
    """The simulators of the chosen families, stepped together tick by tick (both tick every
    100 ms; the one behind steps first). Events go to the sink ``attach`` sets; until then they
    are buffered in order (the simulators publish their nodes' boot as they are built)."""

    def __init__(self, settings: Any, choice: FleetChoice, injections: Sequence[Injection], *,
                 start_ms: int, duration_ms: int) -> None:
        self.choice = choice
        self.injections = list(injections)
        self.buffer: list[dict[str, Any]] = []
        self._sink: Sink = self.buffer.append
        xcom_inj = [i for i in injections if not is_gen(i)]
        gen_inj = [i for i in injections if is_gen(i)]
        if xcom_inj and "xcom" not in choice.families:
            raise ValueError(f"--inject {xcom_inj[0].fault}: an XCom fault, and xcom is not in --families")
        if gen_inj and "gen" not in choice.families:
            raise ValueError(f"--inject {gen_inj[0].fault}: a generations fault, and gen is not in --families")
        self.xcom: xcom_sim.Simulator | None = None
        self.gen: gen_sim.Simulator | None = None
        if "xcom" in choice.families:
            options = sim_options("xcom", settings, seed=None, groups=choice.groups, nodes=choice.nodes,
                                  rate=None, duration_ms=duration_ms, start_ms=start_ms)
            self.xcom = xcom_sim.Simulator(options, xcom_inj, self._emit)
        if "gen" in choice.families:
            options = sim_options("gen", settings, seed=None, groups=choice.gen_groups, nodes=choice.nodes,
                                  rate=None, duration_ms=duration_ms, start_ms=start_ms)
            self.gen = gen_sim.Simulator(options, gen_inj, self._emit)

    @property
    def sims(self) -> list[Any]:
        return [s for s in (self.xcom, self.gen) if s is not None]

    def _emit(self, event: dict[str, Any]) -> None:
        self._sink(event)

    def attach(self, sink: Sink) -> None:
        """From now on events go to ``sink``; the buffered ones first, in order."""
        for event in self.buffer:
            sink(event)
        self.buffer.clear()
        self._sink = sink

    @property
    def t(self) -> int:
        return min(s.t for s in self.sims)

    def step(self) -> None:
        """One tick of whichever simulator is behind (all of them when level)."""
        t = self.t
        for sim in self.sims:
            if sim.t == t:
                sim.step()

    @property
    def events(self) -> int:
        return sum(s.summary().events for s in self.sims)

    @property
    def group_names(self) -> list[str]:
        return [name for s in self.sims for name in s.groups]

    def tables(self) -> list[Table]:
        """One table per family (what the simulators did, with their faults' state)."""
        faults: dict[str, list[str]] = {}
        for inj in self.injections:
            state = "pending" if inj.at_ms > self.t else "injected"
            faults.setdefault(inj.group, []).append(f"{inj.fault}@{inj.at_ms // 1000}s {state}")
        out = []
        if self.xcom is not None:
            out.append(xcom_table(self.xcom, faults))
        if self.gen is not None:
            out.append(gen_table(self.gen, faults))
        return out


def xcom_table(sim: Any, faults: dict[str, list[str]]) -> Table:
    """One row per XCom group: membership, frontiers, horizon, window use, injected faults."""
    table = Table(title=f"replimon demo fleet (XCom), t = {sim.t / 1000:.0f} s", expand=False)
    for col in ("group", "members", "decided", "executed", "eh", "eff. horizon", "window", "pending", "events", "faults"):
        table.add_column(col, justify="right" if col not in ("group", "faults") else "left")
    for name, g in sim.groups.items():
        table.add_row(*group_row(g), "\n".join(faults.get(name, [])))
    return table


def group_row(g: GroupSim) -> list[str]:
    running = [n for n in g.members() if n.up(g.t)]
    latest = g.cmap.latest()
    old = sum(1 for _, p in latest.members if p < g.rules.min_protocol_for_eh)
    executed = [n.executed for n in running] or [0]
    active = g.cmap.active(g.decided + 1)
    horizon = g.bound(g.primary())
    window = (g.decided - min(executed)) / active.event_horizon if active.event_horizon else 0.0
    return [
        g.name,
        f"{len(running)}/{len(latest.members)}" + (f" ({old} old)" if old else ""),
        str(g.decided),
        f"{min(executed)}..{max(executed)}",
        str(active.event_horizon),
        str(horizon),
        f"{window:.0%}",
        str(len(g.cmap.pending(g.decided))),
        str(g.events),
    ]


def gen_table(sim: Any, faults: dict[str, list[str]]) -> Table:
    """One row per generations group, as the simulator has it: the highest generation a node
    holds, its members of the configured nodes, and each node's status in its own generation."""
    table = Table(title=f"replimon demo fleet (generations), t = {sim.t / 1000:.0f} s", expand=False)
    for col in ("group", "gen", "members", "nodes", "events", "faults"):
        table.add_column(col, justify="right" if col in ("gen", "events") else "left")
    for name, g in sim.groups.items():
        table.add_row(*gen_row(g), "\n".join(faults.get(name, [])))
    return table


def gen_row(g: GenGroupSim) -> list[str]:
    top = max(g.nodes.values(), key=lambda n: n.gen.num).gen
    minority = len(top.members) < majority(len(top.configured))
    nodes = " ".join(f"{n.id}:{n.status if n.up else 'down'}" for n in g.nodes.values())
    return [g.name, str(top.num),
            f"{len(top.members)}/{len(top.configured)}" + (" minority" if minority else ""),
            nodes, str(g.events)]
