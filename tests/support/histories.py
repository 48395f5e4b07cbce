"""Hand-made event histories of one group, for the monitor's rule tests.

A :class:`History` boots a group at instance 0 and then plays the group's life step by step:
decisions (runs, singles, config commands), executions (with the config reports a node publishes
when its executor passes a command), heartbeats and the passing of time. Every event is a
contract-v1 dict checked by ``replimon.contract.parse_event``, and each node keeps its own
``(incarnation, seq)``, so a history is what real replicas would publish, unless a test forges one
field on purpose (a wrong start, a lost seq, a stale view, a late arrival).

The builder keeps the *truth*: a :class:`~replimon.core.configmap.ConfigMap` that places and
refuses config commands as XCom does (docs/rules.md, "The configuration map"). Reports, heartbeat
views and proposers' ``window_base`` default to what that truth says, so a test states only the
fault it is about.

Time is explicit: nothing advances unless a test calls :meth:`History.advance` or
:meth:`History.tick`, so every threshold in a test can be placed to the millisecond.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from replimon.contract import Invalid, parse_event
from replimon.core.alerts import FIRING, Alert
from replimon.core.configmap import Command, Config, ConfigMap, Outcome, Rules
from replimon.core.group import EVAL_STEP_MS, GroupMonitor
from replimon.core.limits import Limits

BASE_MS = 1_700_000_000_000
NEW, OLD = 9, 4  # XCom protocols: x_1_8 (configurable horizon) and x_1_3 (fixed at 10)
AUTO: Any = object()  # "what the truth says" (a sentinel for optional fields)

Event = dict[str, Any]


def digest_of(*parts: object) -> str:
    """A short deterministic hex digest of a decided value."""
    return hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=8).hexdigest()


def command_json(cmd: Command) -> dict[str, Any]:
    """The contract's ``decision.config`` object of a command."""
    out: dict[str, Any] = {"op": cmd.op}
    if cmd.nodes:
        out["nodes"] = [{"id": n} if p is None else {"id": n, "protocol": p} for n, p in cmd.nodes]
    if cmd.event_horizon is not None:
        out["event_horizon"] = cmd.event_horizon
    return out


def members_json(members: Iterable[tuple[str, int]]) -> list[dict[str, Any]]:
    return [{"id": m, "protocol": p} for m, p in members]


def installed(start: int, event_horizon: int, members: Iterable[tuple[str, int]]) -> dict[str, Any]:
    """The fields of an ``installed`` config report (to forge one)."""
    return {"outcome": "installed", "start": start, "event_horizon": event_horizon,
            "members": members_json(members)}


def refused(reason: str) -> dict[str, Any]:
    """The fields of a ``refused`` config report."""
    return {"outcome": "refused", "reason": reason}


@dataclass
class Node:
    """One replica as the builder plays it."""

    id: str
    protocol: int
    incarnation: int = 0
    seq: int = 0
    executed: int = -1
    decided: int = -1
    cache_size: int | None = None


@dataclass
class History:
    """The events of one group, in the order a test plays them (arrival order by default)."""

    members: Sequence[str] = ("n1", "n2", "n3")
    protocols: Mapping[str, int] = field(default_factory=dict)  # node -> protocol (default NEW)
    event_horizon: int = 10
    rules: Rules = field(default_factory=Rules)  # the truth's rules (XCom's own)
    group: str = "g1"
    start_ms: int = BASE_MS
    cache_size: int | None = None  # reported in every heartbeat when set

    def __post_init__(self) -> None:
        self.t = self.start_ms
        self.truth = ConfigMap(self.rules)
        self.events: list[Event] = []
        self.nodes: dict[str, Node] = {}
        self.live: list[str] = []  # nodes that publish (learn, execute, heartbeat)
        self.commands: dict[int, Command] = {}
        self.outcomes: dict[int, Outcome] = {}
        self.decided = -1
        for m in self.members:
            self.nodes[m] = Node(m, self.protocols.get(m, NEW), cache_size=self.cache_size)
            self.live.append(m)
        boot = Command("boot", tuple((m, self.nodes[m].protocol) for m in self.members),
                       self.event_horizon)
        self.commands[0] = boot
        self.outcomes[0] = self.truth.apply(0, boot)
        self.decided = 0
        for m in self.members:  # every founding member learns, reports and executes the boot
            self._decision(m, 0, 1, self.primary, "config", 0, None, command_json(boot))
            self.execute(m, 0)

    # -- time and raw events -------------------------------------------------------------------
    @property
    def primary(self) -> str:
        return self.members[0]

    def advance(self, ms: int) -> int:
        """Let ``ms`` of group time pass without any event; returns the new time."""
        self.t += ms
        return self.t

    def emit(self, node: str, etype: str, *, ts: int | None = None, **fields: Any) -> Event:
        """Publish one event of ``node`` (at time ``ts``, default now) with its next seq."""
        n = self.nodes[node]
        ev: Event = {"v": 1, "type": etype, "group": self.group, "node": node,
                     "ts_ms": self.t if ts is None else ts, "seq": n.seq,
                     "incarnation": n.incarnation, **fields}
        n.seq += 1
        parsed = parse_event(json.dumps(ev))
        assert not isinstance(parsed, Invalid), (parsed.reason, ev)
        self.events.append(ev)
        return ev

    def lose(self, node: str, count: int = 1) -> None:
        """``count`` events of ``node`` are published but never arrive (their seqs are used)."""
        self.nodes[node].seq += count

    def restart(self, node: str) -> None:
        """The node restarts: a new incarnation, seq from 0 again."""
        n = self.nodes[node]
        n.incarnation += 1
        n.seq = 0

    def join(self, node: str) -> None:
        """An added node starts publishing, with the state a donor gives it: executed up to the
        instance before the first configuration it is a member of (worklog 3.1)."""
        start = next(c.start for c in self.truth.configs if node in c.member_ids)
        n = self.nodes[node]
        n.executed = n.decided = start - 1
        self.live.append(node)

    def leave(self, node: str) -> None:
        """The node stops publishing for good (removed from the group)."""
        self.live.remove(node)

    # -- decisions -----------------------------------------------------------------------------
    def _decision(self, node: str, first: int, count: int, proposer: str, kind: str,
                  window_base: int | None, digest: str | None, config: dict[str, Any] | None,
                  ts: int | None = None) -> Event:
        fields: dict[str, Any] = {"instance": first}
        if count != 1:
            fields["count"] = count
        fields["proposer"] = proposer
        fields["kind"] = kind
        if count == 1:
            fields["digest"] = digest or digest_of(self.group, first, proposer, kind)
        if node == proposer and window_base is not None:
            fields["window_base"] = window_base
        if config is not None:
            fields["config"] = config
        n = self.nodes[node]
        n.decided = max(n.decided, first + count - 1)
        return self.emit(node, "decision", ts=ts, **fields)

    def decide(self, first: int | None = None, count: int = 1, *, proposer: str | None = None,
               kind: str = "app", learners: Iterable[str] | None = None,
               window_base: int | None = AUTO, digest: str | None = None,
               config: dict[str, Any] | None = None, ts: int | None = None) -> dict[str, Event]:
        """Instances ``first..first+count-1`` are decided; each learner publishes a decision event.

        ``first`` defaults to the next instance; ``window_base`` (on the proposer's own event)
        defaults to the proposer's executed frontier, as XCom reserves from it. Returns the
        events by node.
        """
        first = self.decided + 1 if first is None else first
        proposer = proposer or self.primary
        if window_base is AUTO:
            window_base = self.nodes[proposer].executed
        out = {m: self._decision(m, first, count, proposer, kind, window_base, digest, config, ts)
               for m in (self.live if learners is None else learners)}
        self.decided = max(self.decided, first + count - 1)
        return out

    def run_to(self, last: int, *, proposer: str | None = None,
               executors: Iterable[str] | None = None, step_ms: int = 10) -> None:
        """Decide ``app`` runs up to ``last`` the way a correct XCom does: each run within the
        proposer's effective horizon (MySQL's bound, worklog 3.6.3), the ``executors`` (default:
        every live node) executing each run before the next is reserved."""
        proposer = proposer or self.primary
        executors = list(self.live if executors is None else executors)
        while self.decided < last:
            ex = self.nodes[proposer].executed
            hi = min(last, self.truth.as_of(ex).effective_horizon(ex, mysql=True))
            assert hi > self.decided, f"{proposer} cannot reserve past {self.decided}: execute first"
            self.advance(step_ms)
            self.decide(self.decided + 1, hi - self.decided, proposer=proposer)
            for m in executors:
                self.execute(m, hi)

    def command(self, op: str, nodes: Iterable[tuple[str, int | None]] = (),
                event_horizon: int | None = None, **decide: Any) -> int:
        """A config command is decided at the next instance; returns that instance. The truth
        places or refuses it at once (the builder's nodes all execute it the same way)."""
        cmd = Command(op, tuple(nodes), event_horizon)
        c = self.decided + 1
        self.commands[c] = cmd
        self.outcomes[c] = self.truth.apply(c, cmd)
        for node_id, proto in cmd.nodes:
            if op == "add_nodes" and node_id not in self.nodes:
                self.nodes[node_id] = Node(node_id, proto if proto is not None else NEW,
                                           cache_size=self.cache_size)
        self.decide(c, kind="config", config=command_json(cmd), **decide)
        return c

    def set_eh(self, value: int, **decide: Any) -> int:
        return self.command("set_event_horizon", event_horizon=value, **decide)

    def add(self, node: str, protocol: int = NEW, **decide: Any) -> int:
        return self.command("add_nodes", [(node, protocol)], **decide)

    def remove(self, node: str, **decide: Any) -> int:
        return self.command("remove_nodes", [(node, None)], **decide)

    # -- executions and reports ----------------------------------------------------------------
    def report(self, c: int) -> dict[str, Any]:
        """The truthful fields of a config report of the command decided at ``c``."""
        cfg = self.outcomes[c].config
        if cfg is None:
            reason = self.outcomes[c].reason
            assert reason is not None
            return refused(reason)
        return installed(cfg.start, cfg.event_horizon, cfg.members)

    def execute(self, node: str, upto: int, *, reports: Mapping[int, dict[str, Any] | None] | None = None,
                ts: int | None = None) -> Event:
        """``node`` executes up to ``upto``: one config report per command it passes (truthful,
        or the fields in ``reports[c]``; ``None`` there publishes no report), then its execution
        event. Going backwards is allowed: that is the EXECUTION_REGRESSION fault."""
        n = self.nodes[node]
        forged = reports or {}
        for c in sorted(i for i in self.commands if n.executed < i <= upto):
            fields = forged.get(c, AUTO)
            if fields is None:
                continue
            self.emit(node, "config", ts=ts, instance=c, **(self.report(c) if fields is AUTO else fields))
        n.executed = upto
        n.decided = max(n.decided, upto)
        return self.emit(node, "execution", ts=ts, executed=upto)

    def execute_all(self, upto: int, nodes: Iterable[str] | None = None) -> None:
        for m in self.live if nodes is None else nodes:
            self.execute(m, upto)

    # -- heartbeats ----------------------------------------------------------------------------
    def view(self, node: str) -> dict[str, Any]:
        """The node's active configuration as it knows it (the commands it has executed)."""
        e = self.nodes[node].executed
        cfg: Config = self.truth.as_of(e).active(e + 1)
        return {"start": cfg.start, "event_horizon": cfg.event_horizon, "members": members_json(cfg.members)}

    def heartbeat(self, node: str, *, view: dict[str, Any] | None = AUTO, suspects: Sequence[str] = (),
                  cache_size: int | None = AUTO, status: str = "ONLINE", ts: int | None = None) -> Event:
        n = self.nodes[node]
        fields: dict[str, Any] = {"executed": n.executed, "decided": n.decided,
                                  "protocol": n.protocol, "status": status}
        view = self.view(node) if view is AUTO else view
        if view is not None:
            fields["view"] = view
        cache = n.cache_size if cache_size is AUTO else cache_size
        if cache is not None:
            fields["cache_size"] = cache
        fields["suspects"] = list(suspects)
        return self.emit(node, "heartbeat", ts=ts, **fields)

    def heartbeats(self, *, silent: Iterable[str] = (), suspects: Mapping[str, Sequence[str]] | None = None) -> None:
        """Every live node but ``silent`` sends a heartbeat now."""
        quiet = set(silent)
        for m in self.live:
            if m not in quiet:
                self.heartbeat(m, suspects=(suspects or {}).get(m, ()))

    def tick(self, ms: int, *, every: int = 1000, silent: Iterable[str] = (),
             suspects: Mapping[str, Sequence[str]] | None = None) -> None:
        """Let ``ms`` of group time pass, the live nodes but ``silent`` heartbeating every
        ``every`` ms and once more at the end (so the group's clock ends exactly ``ms`` later)."""
        end = self.t + ms
        quiet = tuple(silent)
        while self.t < end:
            left = end - self.t
            # No beat closer than 250 ms to the previous one: the monitor evaluates its timed
            # rules when its clock has moved 250 ms, so every beat of a tick is a judgement.
            self.advance(left if left < every + EVAL_STEP_MS else every)
            self.heartbeats(silent=quiet, suspects=suspects)

    # -- reading it back ----------------------------------------------------------------------
    def find(self, etype: str, node: str, *, first: bool = False, **fields: Any) -> Event:
        """The latest (or ``first``) event of ``node`` of this type whose fields match ``fields``."""
        for ev in self.events if first else reversed(self.events):
            if ev["type"] == etype and ev["node"] == node and all(ev.get(k) == v for k, v in fields.items()):
                return ev
        raise LookupError((etype, node, fields))

    # -- playing it to a monitor ---------------------------------------------------------------
    def run(self, limits: Limits | None = None, **kw: Any) -> Run:
        """Feed the whole history, in order, to a fresh monitor of the group (see :func:`replay`)."""
        return replay(self.events, limits, group=self.group, **kw)


def arrival(events: Sequence[Event], delays: Mapping[str, int]) -> list[Event]:
    """The events in the order they arrive when each node's events are late by ``delays[node]``
    ms of event time (a node's own order is kept: its events are all late by the same amount)."""
    order = sorted(range(len(events)), key=lambda i: (events[i]["ts_ms"] + delays.get(events[i]["node"], 0), i))
    return [events[i] for i in order]


@dataclass
class Run:
    """A monitor fed a history: the alerts it emitted, in order, and the monitor itself."""

    monitor: GroupMonitor
    alerts: list[Alert]

    def of(self, kind: str, status: str | None = FIRING) -> list[Alert]:
        return [a for a in self.alerts if a.kind == kind and (status is None or a.status == status)]

    def one(self, kind: str) -> Alert:
        """The single firing alert of ``kind`` (fails when there are none or several)."""
        found = self.of(kind)
        assert len(found) == 1, (kind, [a.to_dict() for a in self.alerts])
        return found[0]

    @property
    def kinds(self) -> set[str]:
        return {a.kind for a in self.alerts}

    def ids(self) -> list[tuple[str, str, str]]:
        return [(a.kind, a.status, a.alert_id) for a in self.alerts]

    def timer(self, now: int) -> list[Alert]:
        """The outside clock reached ``now`` with no input (GROUP_SILENT's only way to fire)."""
        out = self.monitor.on_timer(now)
        self.alerts.extend(out)
        return out

    def feed(self, events: Iterable[Event]) -> list[Alert]:
        out: list[Alert] = []
        for ev in events:
            out.extend(self.monitor.on_event(ev))
        self.alerts.extend(out)
        return out


def replay(events: Sequence[Event], limits: Limits | None = None, *, group: str | None = None,
           roundtrip: bool = False) -> Run:
    """Feed ``events`` (in this order) to a fresh monitor of ``group`` (default: the first event's).
    With ``roundtrip`` the monitor's state goes through JSON and back after every event, as
    Spark's state store keeps it between micro-batches."""
    mon = GroupMonitor(group or (events[0]["group"] if events else "g1"), limits)
    out: list[Alert] = []
    for ev in events:
        out.extend(mon.on_event(ev))
        if roundtrip:
            mon = GroupMonitor.from_state(json.loads(json.dumps(mon.to_state())), limits)
    return Run(mon, out)


def names(evidence: Mapping[str, Any], ev: Event) -> bool:
    """Does an evidence entry name this event (same node, incarnation, seq and type)?"""
    return all(evidence.get(k) == ev[k] for k in ("type", "node", "incarnation", "seq", "ts_ms"))


def cited(alert: Alert, *events: Event) -> bool:
    """Does the alert's evidence name every one of ``events``?"""
    return all(any(names(e, ev) for e in alert.evidence) for ev in events)
