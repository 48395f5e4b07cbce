"""Shared state of one group's monitor and the helpers every rule family uses to emit alerts.

Time: ``clock`` is the group's event time, the highest ``ts_ms`` of its events that have arrived.
Events of different nodes may arrive out of order by up to ``skew_ms``, so a condition that
compares nodes is judged against the *watermark* ``clock - skew_ms``: by then every event with an
earlier time has arrived. ``ext`` is the outside clock given to ``on_timer`` (the file's or the
stream's time), which only GROUP_SILENT uses: a silent group's own clock stands still.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replimon.core.alerts import FIRING, RESOLVED, Alert, alert_id, ref
from replimon.core.configmap import Command, Config, ConfigMap, Outcome
from replimon.core.limits import Limits

UNKNOWN, COMPLETE, INCOMPLETE = "unknown", "complete", "incomplete"
FIRED_MEMORY = 1024  # violation ids remembered to emit each occurrence once (bounded)
Src = dict[str, Any] | None


@dataclass(slots=True)
class NodeState:
    """What the monitor knows of one node."""

    inc: int = -1  # current incarnation
    seq: int = -1  # last processed seq in it
    prev_inc: int = -1  # the incarnation before (late stragglers of it are still processed)
    prev_seq: int = -1
    exec_inc: int = -1  # last executed reported in the current incarnation (-1: none yet)
    executed: int = -1  # executed frontier
    decided: int = -1
    protocol: int = -1
    status: str = ""
    suspects: tuple[str, ...] = ()
    cache: int = -1
    last_ts: int = -1  # event time of its last event (or when it became a member, if silent)
    last_ev: dict[str, Any] | None = None  # its last event, for NODE_SILENT's evidence
    last_src: Src = None
    held: list[tuple[int, int, dict[str, Any], Src]] = field(default_factory=list)


@dataclass(slots=True)
class CommandRecord:
    """A decided config command: what the rules expect and what the first reporter said."""

    instance: int
    command: Command
    decided_ts: int
    decision: dict[str, Any]  # evidence ref of the decision event
    expected: Outcome | None = None  # None: decided before the map was known
    alt: Outcome | None = None  # the worklog's outcome where MySQL's differs and both are correct
    first: tuple[Any, ...] | None = None  # first report: (installed, start, eh, members)
    first_ref: dict[str, Any] | None = None
    actual: Config | None = None  # what the group installed, when it differs from the rules
    followed: bool = False  # the map follows ``actual`` instead of ``expected``
    replaced: Config | None = None  # the config of the same start this one replaced (newer wins)
    held: tuple[Any, ...] | None = None  # (key, node, event, src): a first report that differs
    # from the rules, waiting for a second node to confirm it (the group) or contradict it (one node)


@dataclass(slots=True)
class CanLeaveCheck:
    """can_leave(c) was decided: did a majority of c's members execute start(c) - 1 first?"""

    start: int
    can_leave: int
    members: tuple[str, ...]
    majority: int
    decided_ts: int
    decision: dict[str, Any]
    satisfied: set[str] = field(default_factory=set)
    closed: set[str] = field(default_factory=set)  # learned can_leave; their answer is final


def members_key(members: Any) -> tuple[tuple[str, int], ...]:
    """Members as an order-free comparable value (nodes may list them in any order)."""
    return tuple(sorted(members))


def report_key(ev: dict[str, Any]) -> tuple[Any, ...]:
    """A config report (or heartbeat view) as a comparable value."""
    if ev.get("outcome", "installed") == "installed":
        return (True, ev["start"], ev["event_horizon"],
                members_key((m["id"], m["protocol"]) for m in ev["members"]))
    return (False, None, None, None)


def config_key(cfg: Config | None) -> tuple[Any, ...]:
    if cfg is None:
        return (False, None, None, None)
    return (True, cfg.start, cfg.event_horizon, members_key(cfg.members))


class GroupState:
    """The state of one group's monitor (rule families are mixins over it)."""

    def __init__(self, group: str, limits: Limits | None = None) -> None:
        self.group = group
        self.limits = limits or Limits()
        self.rules = self.limits.rules
        self.cmap = ConfigMap(self.rules)
        self.nodes: dict[str, NodeState] = {}
        self.history = UNKNOWN
        self.trusted = False  # the map is known to match the group (boot seen, or confirmed)
        self.boot_instance = -1
        self.records: dict[int, CommandRecord] = {}
        self.held_reports: set[int] = set()  # commands with a held first report
        self.cmd_floor = -1  # commands at or below were settled and forgotten
        self.pending_since: dict[int, int] = {}  # config start -> event time it became known
        self.decided = -1  # contiguous decided frontier: every decision up to it has been seen
        self.ahead: dict[int, tuple[int, str, dict[str, Any], Src]] = {}  # runs seen past a gap
        self.decided_ts = -1
        self.progress_ts = -1  # last advance of the decided or of any executed frontier
        self.exec_adv_ts = -1  # last advance of any node's executed frontier
        self.clock = -1
        self.ext = -1
        self.quiet_end = -1  # end of the last group-wide silence (timers restart there)
        self.singles: dict[int, tuple[Any, ...]] = {}  # instance -> (value, evidence ref)
        self.runs: dict[int, tuple[int, str]] = {}  # app runs: first -> (last, kind)
        self.special: dict[int, tuple[Any, ...]] = {}  # noop/config instance -> (kind, event, src)
        self.checks: list[CanLeaveCheck] = []
        self.open: dict[str, Alert] = {}  # open wedges by condition key
        self.fired: dict[str, None] = {}  # recent violation ids (ordered set)
        self.reach_ts = -1  # decisions at the horizon since (HORIZON_WEDGE)
        self.lag_since: dict[str, int] = {}
        self.quorum = ("ok", -1)
        self.episodes: dict[str, int] = {}  # occurrences so far of conditions keyed by ordinal
        self.member_set: set[str] = set()  # members of the active configuration (last evaluation)
        self.holding: set[str] = set()  # nodes with held (out-of-order) events
        self.next_eval = -1
        self.counts = {"events": 0, "duplicates": 0, "held": 0, "lost": 0}
        self._out: list[Alert] = []
        self._now: int | None = None

    # -- emitting --------------------------------------------------------------------------------
    @property
    def detected(self) -> int:
        return self._now if self._now is not None else max(self.clock, self.ext)

    @property
    def watermark(self) -> int:
        return self.clock - self.limits.skew_ms

    def violation(self, kind: str, key: object, message: str, event_ts: int, *,
                  instance: int | None = None, node: str | None = None,
                  evidence: list[dict[str, Any]] | None = None) -> None:
        """Emit a one-shot alert (violations, data and info kinds) once per occurrence key."""
        aid = alert_id(self.group, kind, key)
        if aid in self.fired:
            return
        self.fired[aid] = None
        if len(self.fired) > FIRED_MEMORY:
            del self.fired[next(iter(self.fired))]
        self._out.append(Alert(aid, self.group, kind, FIRING, event_ts, self.detected, message,
                               instance, node, evidence or []))

    def fire(self, cond: str, kind: str, key: object, message: str, event_ts: int, *,
             instance: int | None = None, node: str | None = None,
             evidence: list[dict[str, Any]] | None = None) -> None:
        """Open a wedge under condition key ``cond`` (one open alert per condition)."""
        if cond in self.open:
            return
        a = Alert(alert_id(self.group, kind, key), self.group, kind, FIRING, event_ts,
                  self.detected, message, instance, node, evidence or [])
        self.open[cond] = a
        self._out.append(a)

    def resolve(self, cond: str, why: str, event_ts: int,
                evidence: list[dict[str, Any]] | None = None) -> None:
        a = self.open.pop(cond, None)
        if a is None:
            return
        self._out.append(Alert(a.alert_id, a.group, a.kind, RESOLVED, event_ts, self.detected,
                               f"Resolved: {why}", a.instance, a.node, evidence or a.evidence))

    @staticmethod
    def ref(ev: dict[str, Any], src: Src = None) -> dict[str, Any]:
        return ref(ev, src)
