"""`replimon demo`: the embedded default stack with a simulated fleet and a live terminal view.

Brings up the embedded broker (with replimon's topics) and PostgreSQL, publishes a simulated
fleet in real time with a few injected faults, runs the Spark monitoring job on it (local mode,
live: processing-time timers, PostgreSQL and Kafka sinks), and shows where every group stands as
the monitor sees it, with alerts as they come. Ctrl-C (or ``--duration``) flushes the publisher,
stops the job, and stops everything.
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


class MonitorView:
    """What the job has reported so far (fed by the job's foreachBatch on the driver)."""

    def __init__(self) -> None:
        self.snapshots: dict[str, dict[str, Any]] = {}
        self.alerts: list[dict[str, Any]] = []
        self.firing: dict[str, dict[str, Any]] = {}
        self.batches = 0
        self.dead_letters = 0

    def __call__(self, result: Any) -> None:
        self.batches += 1
        self.dead_letters += len(result.dead_letters)
        for snap in result.snapshots:
            self.snapshots[snap["group"]] = snap
        for alert in result.alerts:
            if alert["severity"] == "info":  # an event (a config installed, ...), never firing
                continue
            self.alerts.append(alert)
            if alert["status"] == "firing":
                self.firing[alert["alert_id"]] = alert
            else:
                self.firing.pop(alert["alert_id"], None)
        del self.alerts[:-12]

    def table(self) -> Table:
        table = Table(title=f"monitor (Spark job): {self.batches} batches, {self.dead_letters} dead letters")
        for col in ("group", "members", "decided", "executed (majority)", "eh", "eff. horizon", "window", "pending", "firing"):
            table.add_column(col, justify="left" if col in ("group", "firing") else "right")
        for name in sorted(self.snapshots, key=lambda g: (len(g), g)):
            snap = self.snapshots[name]
            active = snap.get("active") or {}
            firing = sorted({a["kind"] for a in self.firing.values() if a["group"] == name})
            table.add_row(
                name, str(len(active.get("members", []))), str(snap.get("decided")),
                str(snap.get("executed_majority", "")), str(active.get("event_horizon", "")),
                str(snap.get("effective_horizon", "")),
                "" if snap.get("window_fraction") is None else f"{snap['window_fraction']:.0%}",
                str(len(snap.get("pending") or [])), Text(", ".join(firing), style="bold red" if firing else ""),
            )
        return table

    def recent(self) -> Table:
        """The last alerts, each message whole: it wraps within the terminal's width (the
        explanation is the point of an alert; a cut one hides the numbers that matter)."""
        table = Table(title="recent alerts", expand=True)
        for col in ("status", "severity", "kind", "group", "node", "instance"):
            table.add_column(col, no_wrap=True)
        table.add_column("message", overflow="fold", ratio=1)
        for a in self.alerts[-8:]:
            style = "red" if a["status"] == "firing" and a["severity"] == "critical" else ""
            table.add_row(a["status"], a["severity"], Text(a["kind"], style=style), a["group"], a.get("node") or "",
                          "" if a.get("instance") is None else str(a["instance"]), a["message"])
        return table


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
    with_job: bool = True,
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
        view = MonitorView()
        job = start_job(settings, stack, view, console) if with_job else None
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
                            firing = sorted(f"{a['group']}:{a['kind']}" for a in view.firing.values())
                            console.print(f"t={sim.t // 1000}s events={sim.summary().events} delivered={stats.delivered} "
                                          f"batches={view.batches} firing={firing}")
                        else:
                            parts = [fleet_table(sim, injections)]
                            if job is not None:
                                parts += [view.table(), view.recent()]
                            live.update(Group(*parts, footer), refresh=True)
        except KeyboardInterrupt:
            console.print("stopping ...")
        if job is not None:
            job.stop()
        remaining = publisher.flush(30)
        stats = publisher.stats()
        publisher.close()
        summary = sim.summary()
        console.print(
            f"simulated {summary.duration_ms / 1000:.0f} s: {summary.events} events, "
            f"{stats.delivered} delivered, {stats.failed} failed, {remaining} undelivered"
        )
    console.print("broker and PostgreSQL stopped")
    return {"events": summary.events, "delivered": stats.delivered, "failed": stats.failed,
            "alerts": list(view.alerts), "batches": view.batches}


class _Job:
    """The demo's query; ``stop`` also removes its checkpoint directory (the demo's broker and
    database are gone with it, so nothing could resume from it)."""

    def __init__(self, query: Any, pg: Any, checkpoint: str | None = None) -> None:
        self.query, self.pg, self.checkpoint = query, pg, checkpoint

    def stop(self) -> None:
        import shutil

        try:
            self.query.stop()
            self.query.awaitTermination(60)
        finally:
            self.pg.close()
            if self.checkpoint:
                shutil.rmtree(self.checkpoint, ignore_errors=True)


def start_job(settings: Settings, stack: Any, view: MonitorView, console: Console) -> _Job:
    """The Spark job on the embedded broker and PostgreSQL, live, feeding ``view``."""
    import tempfile

    from replimon.streaming.runner import start_query
    from replimon.streaming.session import get_session
    from replimon.streaming.sinks.postgres import PostgresSink

    console.print("starting Spark (local mode) and the monitoring job ...")
    local = settings.model_copy(update={
        "kafka": settings.kafka.model_copy(update={"bootstrap_servers": stack.bootstrap_servers}),
        "postgres": settings.postgres.model_copy(update={"dsn": stack.dsn}),
    })
    spark = get_session(local.streaming.master, local.streaming.shuffle_partitions,
                        **local.streaming.spark_conf)
    pg = PostgresSink(stack.dsn, run_id="live")
    ckpt = tempfile.mkdtemp(prefix="replimon-demo-ckpt-")
    query = start_query(spark, local, run_id="live", checkpoint=ckpt, observers=[view], pg=pg,
                        starting="earliest")
    return _Job(query, pg, ckpt)
