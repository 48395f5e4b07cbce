"""`replimon demo`: the embedded default stack with a simulated fleet and a live terminal view.

Brings up the embedded broker (with replimon's topics) and PostgreSQL, publishes a simulated
fleet in real time with a few injected faults, and shows where every group stands. Ctrl-C (or
``--duration``) flushes the publisher, reports what was delivered, and stops everything. Issue 4
adds the Spark job and its alerts to this view.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from replimon.config import Settings
from replimon.producers.simulator import Injection, SimOptions, Simulator
from replimon.producers.simulator.group import GroupSim

DEFAULT_FAULTS = [
    "beyond_horizon:g2@20s",
    "node_silent:g3@35s",
    "eh_out_of_domain:g4@50s",
    "horizon_wedge:g5@70s",
    "divergent_decision:g6@90s",
]


def fleet_table(sim: Simulator, injections: list[Injection]) -> Table:
    """One row per group: membership, frontiers, horizon, window use, injected faults."""
    table = Table(title=f"replimon demo fleet, t = {sim.t / 1000:.0f} s", expand=False)
    for col in ("group", "members", "decided", "executed", "eh", "eff. horizon", "window", "pending", "events", "faults"):
        table.add_column(col, justify="right" if col not in ("group", "faults") else "left")
    faults: dict[str, list[str]] = {}
    for inj in injections:
        state = "pending" if inj.at_ms > sim.t else "injected"
        faults.setdefault(inj.group, []).append(f"{inj.fault}@{inj.at_ms // 1000}s {state}")
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


def run_demo(
    settings: Settings,
    *,
    groups: int,
    nodes: int,
    duration_ms: int,
    injections: list[Injection],
    plain: bool = False,
    console: Console | None = None,
) -> dict[str, Any]:
    """Run the demo until Ctrl-C or ``duration_ms`` (0 = forever); return the final counts."""
    from replimon.embedded import EmbeddedStack
    from replimon.producers.publisher import Publisher

    console = console or Console()
    injections = [i for i in injections if int(i.group.removeprefix("g") or 0) <= groups]
    console.print("starting the embedded broker and PostgreSQL ...")
    with EmbeddedStack(list(settings.kafka.topics.all), settings.kafka.partitions) as stack:
        console.print(f"broker  {stack.bootstrap_servers}\npostgres {stack.dsn}")
        options = SimOptions.from_settings(
            settings, groups=groups, nodes=nodes, duration_ms=duration_ms,
            start_ms=int(time.time() * 1000),
        )
        publisher = Publisher.from_settings(settings, bootstrap_servers=stack.bootstrap_servers)
        sim = Simulator(options, injections, publisher.send)
        began = time.monotonic()
        last_draw = 0.0
        try:
            with Live(console=console, auto_refresh=False, transient=False) as live:
                while duration_ms <= 0 or sim.t < duration_ms:
                    ahead = sim.t / 1000 - (time.monotonic() - began)
                    if ahead > 0:
                        time.sleep(ahead)
                    sim.step()
                    publisher.poll(0)
                    now = time.monotonic()
                    if now - last_draw >= (3.0 if plain else 0.5):
                        last_draw = now
                        stats = publisher.stats()
                        footer = Text(
                            f"published {stats.delivered} delivered, {stats.in_flight} in flight, "
                            f"{stats.failed} failed - Ctrl-C stops",
                            style="dim",
                        )
                        if plain:
                            console.print(f"t={sim.t // 1000}s events={sim.summary().events} delivered={stats.delivered}")
                        else:
                            live.update(Group(fleet_table(sim, injections), footer), refresh=True)
        except KeyboardInterrupt:
            console.print("stopping ...")
        remaining = publisher.flush(30)
        stats = publisher.stats()
        publisher.close()
        summary = sim.summary()
        console.print(
            f"simulated {summary.duration_ms / 1000:.0f} s: {summary.events} events, "
            f"{stats.delivered} delivered, {stats.failed} failed, {remaining} undelivered"
        )
    console.print("broker and PostgreSQL stopped")
    return {"events": summary.events, "delivered": stats.delivered, "failed": stats.failed}
