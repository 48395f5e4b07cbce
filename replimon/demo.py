"""`replimon demo`: the embedded default stack with a simulated fleet and a live terminal view.

Brings up the embedded broker (with replimon's topics) and PostgreSQL, publishes a simulated
fleet in real time with a few injected faults, runs the Spark monitoring job on it (local mode,
live: processing-time timers, PostgreSQL and Kafka sinks), and shows where every group stands as
the monitor sees it, with alerts as they come. Ctrl-C (or ``--duration``) flushes the publisher,
stops the job, and stops everything.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from replimon.config import Settings
from replimon.demo_fleet import (
    DEFAULT_CHAIN_GROUPS,
    DEFAULT_QLOG_GROUPS,
    DemoFleet,
    FleetChoice,
    Injection,
    parse_families,
    parse_injection,
)
from replimon.producers.simulator import parse_duration_ms


@dataclass(frozen=True)
class DemoPlan:
    """What the flags ask for: the fleet, its faults, the run's length (0: until Ctrl-C)."""

    choice: FleetChoice
    injections: list[Injection]
    duration_ms: int

    def fleet(self, settings: Settings, start_ms: int) -> DemoFleet:
        """The simulators, their clocks starting at ``start_ms`` (epoch ms)."""
        return DemoFleet(settings, self.choice, self.injections, start_ms=start_ms,
                         duration_ms=self.duration_ms)


def plan_demo(settings: Settings, *, families: str, groups: int, gen_groups: int, nodes: int,
              duration: str, inject: list[str] | None, qlog_groups: int = DEFAULT_QLOG_GROUPS,
              chain_groups: int = DEFAULT_CHAIN_GROUPS, rates: Mapping[str, float] | None = None) -> DemoPlan:
    """The demo the flags ask for; ValueError (one line) for a bad flag: an unknown family, fault
    or group, a fault at or after the end of the run, too few nodes for a family. The fleet is
    built once here to check it, before anything is started. ``rates``: a family's rate option
    per group where it is not the settings' (``FleetChoice.rates``; ``bench/demo_soak.py``)."""
    duration_ms = parse_duration_ms(duration)
    choice = FleetChoice(parse_families(families), groups=groups, gen_groups=gen_groups,
                         qlog_groups=qlog_groups, nodes=nodes, chain_groups=chain_groups,
                         rates=tuple(sorted((rates or {}).items())))
    if inject is None:  # the defaults are spread over a long demo; a short one keeps the early ones
        injections = [i for i in choice.default_injections() if duration_ms <= 0 or i.at_ms < duration_ms]
    else:
        injections = [parse_injection(t) for t in inject]
        late = [i for i in injections if duration_ms > 0 and i.at_ms >= duration_ms]
        if late:
            raise ValueError(f"--inject {late[0].fault}:{late[0].group}@{late[0].at_ms / 1000:g}s is at or "
                             f"after the end of the run (--duration {duration}): it would never be injected")
    plan = DemoPlan(choice, injections, duration_ms)
    plan.fleet(settings, 0)
    return plan


# -- what the live view shows of a group, per family (docs/families.md 5.2) ------------------------
Cell = Callable[[dict[str, Any]], str]


@dataclass(frozen=True)
class FamilyView:
    """One family's table in the live view: its title and its columns between "group" and
    "firing", each a header, a justification and the cell's text from the group's snapshot."""

    family: str
    title: str
    columns: tuple[tuple[str, str, Cell], ...]


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _active(snap: dict[str, Any]) -> dict[str, Any]:
    return snap.get("active") or {}


def _config(snap: dict[str, Any]) -> dict[str, Any]:
    return snap.get("config") or {}


def _nodes(snap: dict[str, Any], line: Callable[[str, dict[str, Any]], str]) -> str:
    """One line per node, ``line(node, its snapshot)``, a node outside the current
    configuration and a silent one flagged."""
    out = []
    for node, n in sorted((snap.get("nodes") or {}).items()):
        text = line(node, n)
        if not n.get("member"):
            text += " not configured"
        if n.get("silent"):
            text += " silent"
        out.append(text)
    return "\n".join(out)


def _gen_members(snap: dict[str, Any]) -> str:
    """``1/3 minority``: the generation's members of the configured nodes."""
    config = _config(snap)
    if not config:
        return ""
    text = f"{len(config.get('members') or [])}/{len(config.get('configured') or [])}"
    return text + " minority" if config.get("minority") else text


def _qlog_members(snap: dict[str, Any]) -> str:
    """``n3 (leader) n2 n1``: M(L) in order, the members that hold the lease marked."""
    return " ".join(m["id"] + (" (leader)" if m.get("leader") else "") for m in _config(snap).get("members") or [])


def _qlog_recovering(snap: dict[str, Any]) -> str:
    """One line per open recover episode: the replica serving it, its legislature, the new list."""
    return "\n".join(f"{e[0]} leg {e[1]} -> {' '.join(map(str, e[2]))}"
                     for e in _config(snap).get("recovering") or [])


def _chain(snap: dict[str, Any]) -> str:
    """``n2 (head) n3 n5``: C(E), head..tail, the head marked."""
    return " ".join(m + (" (head)" if i == 0 else "") for i, m in enumerate(_config(snap).get("chain") or []))


def _chain_wedged(snap: dict[str, Any]) -> str:
    """``wedged 14`` while the current epoch is wedged (the epoch wedged, the newest open one)."""
    config = _config(snap)
    if not config.get("wedged"):
        return ""
    epoch = config.get("wedged_epoch")
    return "wedged" + ("" if epoch is None else f" {epoch}")


def _lease(ms: Any) -> str:
    """A member's lease as the monitor's clock sees it: the time left, or how long ago it ran out."""
    if ms is None:
        return "lease -"
    return f"lease {ms / 1000:.1f}s" if ms >= 0 else f"lease expired {-ms / 1000:.1f}s ago"


def _chain_node(node: str, n: dict[str, Any]) -> str:
    """``n3 epoch 14 pos 120 lease 1.2s wedged``: its epoch and log position, a member's lease
    (a replica out of the chain holds none the chain needs)."""
    text = f"{node} epoch {_text(n.get('epoch')) or '-'} pos {_text(n.get('pos')) or '-'}"
    if n.get("member"):
        text += " " + _lease(n.get("lease_remaining_ms"))
    return text + " wedged" if n.get("wedged") else text


XCOM_VIEW = FamilyView("xcom", "", (
    ("members", "right", lambda s: str(len(_active(s).get("members", [])))),
    ("decided", "right", lambda s: str(s.get("decided"))),
    ("executed (majority)", "right", lambda s: str(s.get("executed_majority", ""))),
    ("eh", "right", lambda s: str(_active(s).get("event_horizon", ""))),
    ("eff. horizon", "right", lambda s: str(s.get("effective_horizon", ""))),
    ("window", "right", lambda s: "" if s.get("window_fraction") is None else f"{s['window_fraction']:.0%}"),
    ("pending", "right", lambda s: str(len(s.get("pending") or []))),
))
# Generations (``snapshot()``'s ``config`` and ``nodes``): the current generation, its members of
# the configured nodes (a minority generation flagged), the open election, each node's status in
# its generation and mtm's node_status.
GEN_VIEW = FamilyView("gen", ", generations", (
    ("family", "left", lambda s: str(s.get("family"))),
    ("gen", "right", lambda s: _text(_config(s).get("num"))),
    ("members", "left", _gen_members),
    ("election", "right", lambda s: _text(_config(s).get("election"))),
    ("nodes", "left", lambda s: _nodes(s, lambda node, n: f"{node} {n.get('status') or '-'} "
                                       f"({n.get('node_status') or '-'}) gen {n.get('gen')}")),
))
# Quorum-log: the legislature, its members in order with the leader marked, the decree frontier
# (passed, executed, executed by a majority of the members), open recoveries, and each replica's
# status, legislature and watermark.
QLOG_VIEW = FamilyView("qlog", ", quorum-log", (
    ("family", "left", lambda s: str(s.get("family"))),
    ("leg", "right", lambda s: _text(_config(s).get("legislature"))),
    ("members", "left", _qlog_members),
    ("passed", "right", lambda s: _text(_config(s).get("passed"))),
    ("executed", "right", lambda s: _text(_config(s).get("executed"))),
    ("executed (majority)", "right", lambda s: _text(s.get("executed_majority"))),
    ("recovering", "left", _qlog_recovering),
    ("nodes", "left", lambda s: _nodes(s, lambda node, n: f"{node} {n.get('status') or '-'} "
                                       f"leg {n.get('legislature')} wm {n.get('watermark')}")),
))
# Chain (docs/families.md 5.2): the epoch E, its chain head..tail with the head marked, whether
# E is wedged (and the epoch wedged), and each replica's epoch, log position and lease remaining.
CHAIN_VIEW = FamilyView("chain", ", chain", (
    ("family", "left", lambda s: str(s.get("family"))),
    ("epoch", "right", lambda s: _text(_config(s).get("epoch"))),
    ("chain", "left", _chain),
    ("wedged", "left", _chain_wedged),
    ("nodes", "left", lambda s: _nodes(s, _chain_node)),
))
VIEWS = (XCOM_VIEW, GEN_VIEW, QLOG_VIEW, CHAIN_VIEW)


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

    def tables(self) -> list[Table]:
        """One table per family, in the order of ``VIEWS``, each shown only when the job has
        reported a group of that family (XCom's also before any group at all). A snapshot
        without a family (an older job's) is XCom's."""
        by_family: dict[str, dict[str, dict[str, Any]]] = {}
        for group, snap in self.snapshots.items():
            by_family.setdefault(snap.get("family") or "xcom", {})[group] = snap
        return [self.family_table(view, by_family.get(view.family, {})) for view in VIEWS
                if view.family in by_family or (view.family == "xcom" and not by_family)]

    def _firing(self, group: str) -> Text:
        firing = sorted({a["kind"] for a in self.firing.values() if a["group"] == group})
        return Text(", ".join(firing), style="bold red" if firing else "")

    def table(self, snapshots: dict[str, dict[str, Any]] | None = None) -> Table:
        """The XCom groups as the job sees them: membership, frontiers, horizon, window use."""
        return self.family_table(VIEWS[0], self.snapshots if snapshots is None else snapshots)

    def family_table(self, view: FamilyView, snapshots: dict[str, dict[str, Any]]) -> Table:
        """One row per group of ``view``'s family: the group, the view's cells of its snapshot,
        the alert kinds firing in it."""
        table = Table(title=f"monitor (Spark job){view.title}: {self.batches} batches, "
                            f"{self.dead_letters} dead letters")
        table.add_column("group")
        for header, justify, _ in view.columns:
            table.add_column(header, justify=justify)  # type: ignore[arg-type]
        table.add_column("firing")
        for name in sorted(snapshots, key=lambda g: (len(g), g)):
            snap = snapshots[name]
            table.add_row(name, *(cell(snap) for _, _, cell in view.columns), self._firing(name))
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


def run_demo(
    settings: Settings,
    plan: DemoPlan,
    *,
    plain: bool = False,
    console: Console | None = None,
    with_job: bool = True,
    observers: Sequence[Callable[[Any], None]] = (),
    on_job: Callable[[_Job], None] | None = None,
) -> dict[str, Any]:
    """Run the demo until Ctrl-C or ``plan.duration_ms`` (0 = forever); return the final counts.

    ``observers`` get every micro-batch's result besides the live view, and ``on_job`` the job
    once it runs (``bench/demo_soak.py`` watches a long demo through both)."""
    from replimon.embedded import EmbeddedStack
    from replimon.producers.publisher import Publisher

    console = console or Console()
    duration_ms = plan.duration_ms
    console.print("starting the embedded broker and PostgreSQL ...")
    with EmbeddedStack(list(settings.kafka.topics.all), settings.kafka.partitions) as stack:
        console.print(f"broker  {stack.bootstrap_servers}\npostgres {stack.dsn}")
        publisher = Publisher.from_settings(settings, bootstrap_servers=stack.bootstrap_servers)
        view = MonitorView()
        job = start_job(settings, stack, [view, *observers], console) if with_job else None
        if job is not None and on_job is not None:
            on_job(job)
        # The fleet's clock starts with the loop that paces it, after Spark has started: an event's
        # ts_ms is then when it is published. (Built before start_job, every event was stamped
        # Spark's start-up time, 5 to 15 s, before it went out, and every alert looked that late.)
        fleet = plan.fleet(settings, int(time.time() * 1000))
        began = time.monotonic()
        fleet.attach(publisher.send)
        last_draw = 0.0
        try:
            with Live(console=console, auto_refresh=False, transient=False) as live:
                while duration_ms <= 0 or fleet.t < duration_ms:
                    ahead = fleet.t / 1000 - (time.monotonic() - began)
                    if ahead > 0:
                        time.sleep(ahead)
                    fleet.step()
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
                            console.print(f"t={fleet.t // 1000}s events={fleet.events} delivered={stats.delivered} "
                                          f"batches={view.batches} firing={firing}")
                        else:
                            parts: list[Any] = fleet.tables()
                            if job is not None:
                                parts += [*view.tables(), view.recent()]
                            live.update(Group(*parts, footer), refresh=True)
        except KeyboardInterrupt:
            console.print("stopping ...")
        if job is not None:
            job.stop()
        remaining = publisher.flush(30)
        stats = publisher.stats()
        publisher.close()
        events = fleet.events
        console.print(
            f"simulated {fleet.t / 1000:.0f} s: {events} events, "
            f"{stats.delivered} delivered, {stats.failed} failed, {remaining} undelivered"
        )
    console.print("broker and PostgreSQL stopped")
    return {"events": events, "delivered": stats.delivered, "failed": stats.failed,
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


def start_job(settings: Settings, stack: Any, observers: Sequence[Callable[[Any], None]], console: Console) -> _Job:
    """The Spark job on the embedded broker and PostgreSQL, live, feeding ``observers`` (the live
    view first)."""
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
    query = start_query(spark, local, run_id="live", checkpoint=ckpt, observers=list(observers), pg=pg,
                        starting="earliest")
    return _Job(query, pg, ckpt)
