"""The shared context of one group's rules: its clock, its nodes, and the one way to emit alerts.

Every rule component of a group gets the same ``Context`` when it is built and keeps it; nothing
else is shared between components, which talk to each other through the few methods they expose.

Time (docs/rules.md, "Time"): ``clock`` is the group's event time, the highest ``ts_ms`` of its
events that have arrived. Events of different nodes may arrive out of order by up to ``skew_ms``,
so a condition that compares nodes is judged against the *watermark* ``clock - skew_ms``: by then
every event with an earlier time has arrived. ``ext`` is the outside clock given to ``on_timer``
(the file's or the stream's time), which only GROUP_SILENT and NODE_SILENT use: a silent group's
own clock stands still.

Emission (docs/rules.md, "Alert records"): a one-shot alert (``violation``) is emitted once per
occurrence key; a wedge is opened under a condition key (``fire``) and closed (``resolve``) under
the same ``alert_id``. Ids are ``alert_id(group, kind, key)``, made of facts of the history, so
the same history gives the same ids live or replayed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from replimon.core.alerts import FIRING, RESOLVED, Alert, alert_id, ref
from replimon.core.limits import Limits

UNKNOWN, COMPLETE, INCOMPLETE = "unknown", "complete", "incomplete"
FIRED_MEMORY = 1024  # violation ids remembered to emit each occurrence once (bounded)
Src = dict[str, Any] | None


@dataclass(slots=True)
class NodeState:
    """What the monitor knows of one node (the field order is the stored shape's)."""

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
    # events held for missing ones: (incarnation, seq, event, src, the group clock when it came
    # in, the group's read mark then: ``Admission``)
    held: list[tuple[int, int, dict[str, Any], Src, int, int]] = field(default_factory=list)


# What takes one admitted event: (its node's state, the node, the event, where it was read).
Handler = Callable[[NodeState, str, dict[str, Any], Src], None]


class Context:
    """One group's clock, nodes and alert emission, shared by its rule components.

    ``out`` is the list the current entry point returns; ``now`` the detection time it was given
    (None: the later of the group clock and the outside clock).
    """

    __slots__ = ("group", "limits", "nodes", "history", "clock", "ext", "quiet_end", "open",
                 "fired", "counts", "out", "now", "batch", "batch_clock", "read")

    def __init__(self, group: str, limits: Limits | None = None) -> None:
        self.group = group
        self.limits = limits or Limits()
        self.nodes: dict[str, NodeState] = {}
        self.history = UNKNOWN  # does the group's history start at its boot? (INCOMPLETE_HISTORY)
        self.clock = -1
        self.ext = -1
        self.quiet_end = -1  # end of the last group-wide silence (timers restart there)
        self.open: dict[str, Alert] = {}  # open wedges by condition key
        self.fired: dict[str, None] = {}  # recent violation ids (ordered set)
        self.counts = {"events": 0, "duplicates": 0, "held": 0, "lost": 0}
        self.out: list[Alert] = []
        self.now: int | None = None
        # Where the driver reports its reads (the live job's micro-batches): the mark of the read
        # under way (``GroupMonitor.reading``) and of the last one that ended with every partition
        # of the input read to a common point (``read_through``); -1: not reported (``replimon
        # check``: one file read in order; a replay). Only ``read`` is stored.
        self.batch = -1
        self.batch_clock = -1  # the latest event time of the group's events in that read
        self.read = -1

    @property
    def detected(self) -> int:
        return self.now if self.now is not None else max(self.clock, self.ext)

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
        self.out.append(Alert(aid, self.group, kind, FIRING, event_ts, self.detected, message,
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
        self.out.append(a)

    def resolve(self, cond: str, why: str, event_ts: int,
                evidence: list[dict[str, Any]] | None = None) -> None:
        """Close the wedge open under ``cond``, if any (same id, "Resolved: ``why``").

        ``evidence``: the events that show the condition cleared; without it, the group's latest
        event (the verdict was taken on the history up to it), so a resolution always cites
        what healed, never the firing's evidence again."""
        a = self.open.pop(cond, None)
        if a is None:
            return
        if not evidence:
            evidence = self.latest() or a.evidence
        self.out.append(Alert(a.alert_id, a.group, a.kind, RESOLVED, event_ts, self.detected,
                              f"Resolved: {why}", a.instance, a.node, evidence))

    def latest(self) -> list[dict[str, Any]]:
        """Evidence naming the group's latest event (by event time, then node: the same whatever
        the arrival order), or nothing before the first."""
        best: NodeState | None = None
        key: tuple[int, str] = (-1, "")
        for node, ns in self.nodes.items():
            if ns.last_ev is not None and (ns.last_ts, node) > key:
                best, key = ns, (ns.last_ts, node)
        return [] if best is None else [self.ref(best.last_ev, best.last_src)]

    def heard(self, ts: int) -> int:
        """When an event stamped ``ts`` was heard on the group's clock: its stamp, or the clock
        less the skew when it came in later than that (its node's clock is behind its
        group-mates', or its partition lagged). Where a rule measures how long something has
        lasted from one node's event against the others' (PENDING_CONFIG_STUCK's start, a
        can_leave verdict's window), a slow clock then cannot make it look old; within the skew
        nothing changes."""
        clock = max(self.clock, self.batch_clock) - self.limits.skew_ms
        return ts if ts >= clock else clock

    @staticmethod
    def ref(ev: dict[str, Any], src: Src = None) -> dict[str, Any]:
        """Evidence naming ``ev`` (and where it was read)."""
        return ref(ev, src)
