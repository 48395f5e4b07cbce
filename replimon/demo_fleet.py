"""The demo's simulated fleet: which protocol families run, their simulators side by side, and
the tables of what the simulators did (the "fleet" half of ``replimon demo``'s live view).

By default the demo runs a mixed fleet of the four families (docs/families.md, "Which family a
group is"): the XCom simulator's groups ``g1``, ``g2``, ..., the generations simulator's ``pg1``,
..., the quorum-log simulator's ``ql1``, ... and the chain simulator's ``ch1``, ..., publishing
into the same broker, each family with a few faults of its catalogue timed within the first two
minutes. The names never collide
(each simulator names its groups with its own prefix), so every group's first event gives it its
family.

Everything here is pure (no broker, no Spark): ``DemoFleet`` is built before the embedded stack
starts, so a bad flag fails in one line before anything is started; its events wait in a buffer
until ``attach`` gives it the publisher. What differs between families is one row of
``FAMILIES`` (simulator, group names, default faults, fleet table): nothing else is per family.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.table import Table

from replimon.console import sim_options
from replimon.producers import simulator as xcom_sim
from replimon.producers import simulator_chain as chain_sim
from replimon.producers import simulator_gen as gen_sim
from replimon.producers import simulator_qlog as qlog_sim
from replimon.producers.fleet_run import Injection
from replimon.producers.simulator.fleet import group_names as xcom_names
from replimon.producers.simulator.group import GroupSim
from replimon.producers.simulator_chain.fleet import group_names as chain_names
from replimon.producers.simulator_chain.group import ChainGroupSim
from replimon.producers.simulator_gen.fleet import group_names as gen_names
from replimon.producers.simulator_gen.group import GenGroupSim
from replimon.producers.simulator_gen.model import majority
from replimon.producers.simulator_qlog.fleet import group_names as qlog_names
from replimon.producers.simulator_qlog.group import QlogGroupSim

DEFAULT_FAMILIES = "xcom,gen,qlog,chain"
DEFAULT_GROUPS = 6
DEFAULT_GEN_GROUPS = 3
DEFAULT_QLOG_GROUPS = 3
DEFAULT_CHAIN_GROUPS = 3

Sink = Callable[[dict[str, Any]], None]

# The default faults, spread over the first two minutes so the live view shows each one firing
# (and the wedges resolving). XCom's as before; each other family has a safety violation and a
# wedge. Generations: a node loads an older generation state (GEN_REGRESSION), every node cut off
# for 20 s (GEN_NO_ONLINE after thresholds.gen_no_online_s, resolved when they reconnect).
# Quorum-log: delayed replicas pass a Reconf at a number the others passed (QLOG_DIVERGENT_DECREE
# at once), the leader's proposer wedges for 25 s (QLOG_NO_LEADER after thresholds.qlog_no_leader_s,
# about 18 s after the fault, resolved when a lease is taken again, about 25 s after it).
# Chain: the head is cut off from the view manager while a stale client-proxy still writes to it,
# and its successor, head of the next epoch, accepts one of its old-epoch runs
# (CHAIN_STALE_EPOCH_WRITE a few seconds after the fault); the tail's upstream wrongly suspects
# the tail and wedges with the view manager stalled 20 s (CHAIN_WEDGE_NOT_REPLACED after
# thresholds.chain_wedge_s, resolved when the view manager installs the next epoch).
XCOM_FAULTS = (
    "beyond_horizon:g2@20s",
    "node_silent:g3@35s",
    "eh_out_of_domain:g4@50s",
    "horizon_wedge:g5@70s",
    "divergent_decision:g6@90s",
)
GEN_FAULTS = ("gen_regression:pg1@30s", "gen_no_online:pg2@60s")
QLOG_FAULTS = ("qlog_divergent_decree:ql1@40s", "qlog_no_leader:ql2@75s")
CHAIN_FAULTS = ("chain_stale_epoch_write:ch1@45s", "chain_wedge_not_replaced:ch2@80s")


@dataclass(frozen=True)
class Family:
    """What the demo needs of one family: its simulator package (``CATALOGUE``, ``Simulator``,
    ``parse_injection``), how it names its groups, its default faults and the nodes they need,
    and its table of what the simulator did."""

    name: str  # as --families and docs/families.md name it
    title: str
    a_fault: str  # how an error names one of its faults: "an XCom fault"
    sim: Any
    names: Callable[[int], list[str]]
    faults: tuple[str, ...]
    fault_nodes: int  # the default faults' scripts need this many nodes per group
    table: Callable[[Any, dict[str, list[str]]], Table] = field(repr=False)


def family_of(inj: Injection) -> Family:
    """The family whose catalogue holds the fault (the simulators share one ``Injection``; a
    fault name is in exactly one catalogue, and an unknown one is XCom's, whose parser says so)."""
    return next((f for f in FAMILIES if inj.fault in f.sim.CATALOGUE), FAMILIES[0])


def parse_families(text: str) -> tuple[str, ...]:
    """``xcom,qlog`` -> ("xcom", "qlog"), in the order of ``FAMILIES``; ValueError (one line) for
    an unknown or missing family."""
    known = [f.name for f in FAMILIES]
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"--families: unknown family {unknown[0]!r} (families are {', '.join(known)})")
    if not names:
        raise ValueError(f"--families: name at least one of {', '.join(known)}")
    return tuple(f for f in known if f in names)


def parse_injection(text: str) -> Injection:
    """``NAME[:GROUP][@TIME]`` of any family's catalogue, parsed by that family's simulator (its
    default group and its group names: ``gN``, ``pgN``, ``qlN``, ``chN``)."""
    name = text.partition("@")[0].partition(":")[0]
    return family_of(Injection(name)).sim.parse_injection(text)


@dataclass(frozen=True)
class FleetChoice:
    """What the flags ask for: the families, each one's group count, the nodes per group, and
    (``bench/demo_soak.py``'s rate mode, no flag of ``replimon demo``) a family's rate option where
    it is not the settings' (``console.sim_options``' ``rate``: XCom decisions, generations
    transactions, quorum-log decrees, chain writes, per second per group)."""

    families: tuple[str, ...] = ("xcom", "gen", "qlog", "chain")
    groups: int = DEFAULT_GROUPS  # XCom groups
    gen_groups: int = DEFAULT_GEN_GROUPS
    qlog_groups: int = DEFAULT_QLOG_GROUPS
    nodes: int = 3
    chain_groups: int = DEFAULT_CHAIN_GROUPS
    rates: tuple[tuple[str, float], ...] = ()  # (family, rate option) pairs

    def count(self, family: str) -> int:
        """How many groups of ``family`` the fleet has."""
        return {"xcom": self.groups, "gen": self.gen_groups, "qlog": self.qlog_groups,
                "chain": self.chain_groups}[family]

    def rate(self, family: str) -> float | None:
        """The rate option ``family`` runs at; None: its default (the settings')."""
        return dict(self.rates).get(family)

    def chosen(self) -> list[Family]:
        return [f for f in FAMILIES if f.name in self.families]

    def default_injections(self) -> list[Injection]:
        """The default faults of the chosen families, in the groups the fleet has."""
        out: list[Injection] = []
        for fam in self.chosen():
            if self.nodes < fam.fault_nodes:
                continue
            injections = [fam.sim.parse_injection(t) for t in fam.faults]
            out += [i for i in injections if i.group in fam.names(self.count(fam.name))]
        return out


class DemoFleet:
    """The simulators of the chosen families, stepped together tick by tick (all tick every
    100 ms; the ones behind step first). Events go to the sink ``attach`` sets; until then they
    are buffered in order (the simulators publish their nodes' boot as they are built)."""

    def __init__(self, settings: Any, choice: FleetChoice, injections: Sequence[Injection], *,
                 start_ms: int, duration_ms: int) -> None:
        self.choice = choice
        self.injections = list(injections)
        self.buffer: list[dict[str, Any]] = []
        self._sink: Sink = self.buffer.append
        by_family: dict[str, list[Injection]] = {}
        for inj in self.injections:
            by_family.setdefault(family_of(inj).name, []).append(inj)
        for fam in FAMILIES:
            if by_family.get(fam.name) and fam.name not in choice.families:
                raise ValueError(f"--inject {by_family[fam.name][0].fault}: {fam.a_fault}, "
                                 f"and {fam.name} is not in --families")
        self.sims: dict[str, Any] = {}
        for fam in choice.chosen():
            options = sim_options(fam.name, settings, seed=None, groups=choice.count(fam.name),
                                  nodes=choice.nodes, rate=choice.rate(fam.name), duration_ms=duration_ms, start_ms=start_ms)
            self.sims[fam.name] = fam.sim.Simulator(options, by_family.get(fam.name, []), self._emit)

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
        return min(s.t for s in self.sims.values())

    def step(self) -> None:
        """One tick of whichever simulator is behind (all of them when level)."""
        t = self.t
        for sim in self.sims.values():
            if sim.t == t:
                sim.step()

    @property
    def events(self) -> int:
        return sum(s.summary().events for s in self.sims.values())

    @property
    def group_names(self) -> list[str]:
        return [name for s in self.sims.values() for name in s.groups]

    def tables(self) -> list[Table]:
        """One table per family (what the simulators did, with their faults' state)."""
        faults: dict[str, list[str]] = {}
        for inj in self.injections:
            state = "pending" if inj.at_ms > self.t else "injected"
            faults.setdefault(inj.group, []).append(f"{inj.fault}@{inj.at_ms // 1000}s {state}")
        return [fam.table(self.sims[fam.name], faults) for fam in self.choice.chosen()]


def _table(sim: Any, title: str, columns: Sequence[str], right: Sequence[str],
           row: Callable[[Any], list[str]], faults: dict[str, list[str]]) -> Table:
    """One row per group of ``sim``: ``row(group)``'s cells, then the group's injected faults."""
    table = Table(title=f"replimon demo fleet ({title}), t = {sim.t / 1000:.0f} s", expand=False)
    for col in (*columns, "faults"):
        table.add_column(col, justify="right" if col in right else "left")
    for name, g in sim.groups.items():
        table.add_row(*row(g), "\n".join(faults.get(name, [])))
    return table


def xcom_table(sim: Any, faults: dict[str, list[str]]) -> Table:
    """One row per XCom group: membership, frontiers, horizon, window use, injected faults."""
    columns = ("group", "members", "decided", "executed", "eh", "eff. horizon", "window", "pending", "events")
    return _table(sim, "XCom", columns, columns[1:], group_row, faults)


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
    return _table(sim, "generations", ("group", "gen", "members", "nodes", "events"), ("gen", "events"),
                  gen_row, faults)


def gen_row(g: GenGroupSim) -> list[str]:
    top = max(g.nodes.values(), key=lambda n: n.gen.num).gen
    minority = len(top.members) < majority(len(top.configured))
    nodes = " ".join(f"{n.id}:{n.status if n.up else 'down'}" for n in g.nodes.values())
    return [g.name, str(top.num),
            f"{len(top.members)}/{len(top.configured)}" + (" minority" if minority else ""),
            nodes, str(g.events)]


def qlog_table(sim: Any, faults: dict[str, list[str]]) -> Table:
    """One row per quorum-log group, as the simulator has it: the newest legislature, its
    members in order with the lease holder marked, the highest passed decree, each replica's
    state."""
    columns = ("group", "leg", "members", "passed", "nodes", "events")
    return _table(sim, "quorum-log", columns, ("leg", "passed", "events"), qlog_row, faults)


def qlog_row(g: QlogGroupSim) -> list[str]:
    lead = g.leader()
    newest = max(r.leg for r in g.nodes.values())
    members = " ".join(m + (" (leader)" if lead is not None and m == lead.id else "") for m in g.members())

    def state(r: Any) -> str:
        return "down" if not r.up else "delayed" if r.delayed_until is not None else "up"

    nodes = " ".join(f"{r.id}:{state(r)}" for r in g.nodes.values() if r.booted and not r.retired)
    return [g.name, str(newest), members, str(g.frontier() - 1), nodes, str(g.events)]


def chain_table(sim: Any, faults: dict[str, list[str]]) -> Table:
    """One row per chain group, as the simulator has it: the view manager's epoch, its chain
    head..tail with the head marked, the client writes, each replica's state."""
    columns = ("group", "epoch", "chain", "writes", "nodes", "events")
    return _table(sim, "chain", columns, ("epoch", "writes", "events"), chain_row, faults)


def chain_row(g: ChainGroupSim) -> list[str]:
    chain = " ".join(m + (" (head)" if i == 0 else "") for i, m in enumerate(g.view_chain))

    def state(r: Any) -> str:
        if not r.up:
            return "down"
        return "wedged" if r.is_wedged() else "cut off" if r.cut_at is not None else "up"

    nodes = " ".join(f"{r.id}:{state(r)}" for r in g.nodes.values() if not r.gone)
    return [g.name, str(g.view_epoch), chain, str(g.writes), nodes, str(g.events)]


# The families the demo runs, in the order of the live view (XCom first, as before).
FAMILIES: tuple[Family, ...] = (
    Family("xcom", "XCom", "an XCom fault", xcom_sim, xcom_names, XCOM_FAULTS, 1, xcom_table),
    Family("gen", "generations", "a generations fault", gen_sim, gen_names, GEN_FAULTS, 3, gen_table),  # the faults name nodes A, B, C
    Family("qlog", "quorum-log", "a quorum-log fault", qlog_sim, qlog_names, QLOG_FAULTS, 3, qlog_table),
    Family("chain", "chain", "a chain fault", chain_sim, chain_names, CHAIN_FAULTS, 3, chain_table),
)
