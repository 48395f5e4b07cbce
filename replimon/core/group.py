"""The monitor of one group (``GroupMonitor``): pure, no I/O, no clock.

Shape (bytewax's ``StatefulLogic``): ``on_event(event) -> alerts``, ``on_timer(now) -> alerts``,
``next_timer() -> when``, ``flush() -> alerts`` at the end of input, and ``snapshot()`` for where
the group stands; ``to_state()``/``from_state()`` turn the whole state into plain JSON values and
back (``replimon.core.codec``), which is what Spark's state store keeps. Events are contract-v1
dicts as ``replimon.contract.decode_event`` returns them (the monitor trusts their shape, not
their content; docs/contract.md).

Event time drives everything: the group's own clock for rules that compare its nodes, the outside
clock given to ``on_timer`` for GROUP_SILENT (the only rule that must fire with no input at all)
and NODE_SILENT (docs/rules.md, "Time").

An event's path: ``Admission`` puts each node's events in order (holds, duplicates, EVENTS_LOST);
each admitted event ends a silence (``Liveness.heard``) and goes to the protocol family's rules
(``FamilyRules.handlers``: one per event type). Every ``EVAL_STEP_MS`` of group clock, and at every ``on_timer``, an
evaluation gives the verdicts that needed more input and the wedges that need time to pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from replimon.core.alerts import Alert
from replimon.core.codec import check_version, dump, family_of_state, load
from replimon.core.limits import Limits
from replimon.core.rules.admission import Admission
from replimon.core.rules.base import Context, Handler, NodeState, Src
from replimon.core.rules.chain.family import CHAIN, ChainRules
from replimon.core.rules.family import XCOM, FamilyRules, family_of
from replimon.core.rules.gen.family import GEN, GenRules
from replimon.core.rules.liveness import Liveness
from replimon.core.rules.qlog.family import QLOG, QlogRules
from replimon.core.rules.xcom.family import XComRules

# An evaluation runs when the group clock has moved this much since the last one (and at every
# on_timer), so the per-event path stays cheap (docs/rules.md, "Time").
EVAL_STEP_MS = 250

# The protocol families the monitor knows, by name (``rules/family.py``).
FAMILIES: dict[str, Callable[[Context, Liveness], FamilyRules]] = {
    XCOM: XComRules, GEN: GenRules, QLOG: QlogRules, CHAIN: ChainRules}


class GroupMonitor:
    """Every rule of docs/rules.md for one group.

    Its parts, each given the group's ``ctx`` once: ``admission`` (each node's order),
    ``live`` (the liveness rules every family shares), ``family`` (the protocol family's rules,
    ``family`` names it: ``FAMILIES``).
    """

    __slots__ = ("ctx", "admission", "live", "family", "next_eval", "adopt")

    def __init__(self, group: str, limits: Limits | None = None, family: str | None = None) -> None:
        """``family``: the group's protocol family (pinned by configuration or known from its first
        event); None: the family of the first event it is given (XCom until then)."""
        self.ctx = Context(group, limits)
        self.adopt = family is None
        self._build(family or XCOM)
        self.next_eval = -1

    def _build(self, family: str) -> None:
        make = FAMILIES.get(family)
        if make is None:
            raise ValueError(f"unknown protocol family {family!r} (known: {', '.join(FAMILIES)})")
        self.live = Liveness(self.ctx)
        self.family: FamilyRules = make(self.ctx, self.live)
        self.admission = Admission(self.ctx, _processor(self.ctx, self.live, self.family))

    @property
    def group(self) -> str:
        return self.ctx.group

    @property
    def limits(self) -> Limits:
        return self.ctx.limits

    @property
    def clock(self) -> int:
        """The group's event-time clock: the highest ``ts_ms`` of its events that arrived."""
        return self.ctx.clock

    @property
    def counts(self) -> dict[str, int]:
        """Events seen, duplicates ignored, events held and events lost."""
        return self.ctx.counts

    @property
    def open(self) -> dict[str, Alert]:
        """The open wedges, by condition key."""
        return self.ctx.open

    # -- entry points ----------------------------------------------------------------------------
    def on_event(self, ev: dict[str, Any], src: Src = None, now: int | None = None) -> list[Alert]:
        """Take one event (arrival order); return the alerts it raises or resolves.

        ``src`` (topic/partition/offset, or file/line) goes into evidence; ``now`` is the detection
        time to stamp (default: event time).
        """
        ctx = self.ctx
        out: list[Alert] = []
        ctx.out, ctx.now = out, now
        ts = ev["ts_ms"]
        if self.adopt:
            self.adopt = False
            if family_of(ev["type"]) != self.family.name:
                self._build(family_of(ev["type"]))
        if ev["type"] not in self.family.types:
            self._conflict(ev, src)
            return out
        ctx.counts["events"] += 1
        if ts > ctx.clock:
            if ctx.clock >= 0 and ts - ctx.clock > ctx.limits.node_silent_ms:
                ctx.quiet_end = ts
            ctx.clock = ts
        self.admission.admit(ev["node"], ev, src)
        if ctx.clock >= self.next_eval:
            self._evaluate()
        return out

    def belongs(self, event_type: str) -> bool:
        """Whether an event of ``event_type`` is of this group's family (else FAMILY_CONFLICT)."""
        return self.adopt or event_type in self.family.types

    def _conflict(self, ev: dict[str, Any], src: Src) -> None:
        """FAMILY_CONFLICT: an event of another family than the group's. It is not processed
        (the caller sends it to the dead letters: ``conflict_reason``); the alert is raised once
        per group and other family (docs/rules.md, "FAMILY_CONFLICT")."""
        other = family_of(ev["type"])
        self.ctx.violation(
            "FAMILY_CONFLICT", ("family", other),
            f"{ev['node']} published a {ev['type']} event to group {self.ctx.group}, which is a "
            f"{self.family.name} group: {conflict_reason(self.ctx.group, self.family.name)}; its "
            f"{other} events are sent to the dead letters.",
            ev["ts_ms"], node=ev["node"], evidence=[self.ctx.ref(ev, src)])

    def on_timer(self, now: int) -> list[Alert]:
        """The outside clock reached ``now`` (event-time scale): fire what is due."""
        ctx = self.ctx
        out: list[Alert] = []
        ctx.out, ctx.now = out, None
        if now > ctx.ext:
            ctx.ext = now
        if ctx.clock >= 0:
            self._evaluate()  # settles what needs no more input (e.g. a fully answered can_leave)
            members = self.family.members()
            if members is not None:
                self.live.node_silence(max(now, ctx.clock), members)
        self.live.group_silence(now)
        return out

    def next_timer(self) -> int | None:
        """When ``on_timer`` next has something to do (outside clock), or None."""
        ctx = self.ctx
        if ctx.clock < 0:
            return None
        members = self.family.members()
        node = None if members is None else self.live.silence_deadline(members)
        wedge = self.family.deadline()
        if wedge is not None and (node is None or wedge < node):
            node = wedge
        if self.admission.holding and ctx.read >= 0:
            held = self.admission.deadline()
            if held is not None and (node is None or held < node):
                node = held
        if "group_silent" in ctx.open:
            return node
        group = ctx.clock + ctx.limits.group_silent_ms + ctx.limits.skew_ms
        return group if node is None else min(group, node)

    def reading(self, mark: int, latest: int = -1) -> None:
        """The driver begins a read of its input with ``mark`` (increasing: the live job's batch
        time) that brings this group's events up to event time ``latest``. Events that arrive now
        and wait for earlier ones of their node wait at least until a later read ended
        (``read_through``), and all of them were heard at ``latest`` at the earliest (whatever
        order the driver feeds them in: ``Context.heard``). Not called: holds follow the group's
        clock alone."""
        self.ctx.batch = mark
        self.ctx.batch_clock = latest

    def read_through(self, mark: int) -> list[Alert]:
        """The read ``mark`` ended with every partition of the input read to a common point (the
        live job: at the end of each micro-batch, each of which reads every partition to where it
        stood when the batch was planned, or all of them to one record time when capped:
        docs/kafka-source.md): fire what the missing events' hold was waiting for
        (``Admission``, EVENTS_LOST)."""
        ctx = self.ctx
        out: list[Alert] = []
        if mark <= ctx.read:
            return out
        ctx.read = mark
        if self.admission.holding:
            ctx.out, ctx.now = out, mark  # the live job's mark is its batch time
            self.admission.expire_held()
        return out

    def flush(self) -> list[Alert]:
        """End of input: nothing held back can be completed any more; process it."""
        ctx = self.ctx
        out: list[Alert] = []
        ctx.out, ctx.now = out, None
        if self.admission.holding:
            self.admission.expire_held(flush=True)
        self.family.flush()
        return out

    # -- per evaluation ---------------------------------------------------------------------------
    def _evaluate(self) -> None:
        ctx = self.ctx
        self.next_eval = ctx.clock + EVAL_STEP_MS
        if self.admission.holding:
            self.admission.expire_held()
        family = self.family
        family.settle()
        members = family.members()
        if members is None:
            return
        live = self.live
        live.node_silence(ctx.clock, members)
        live.departed(members)
        quorum = family.quorum_set()
        if quorum is not None:
            live.check_quorum(*quorum, family.suspicions)
        family.evaluate()

    # -- reading the state ------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Where the group stands: for the state topic, tables and live views (docs/postgres.md)."""
        ctx, family = self.ctx, self.family
        out: dict[str, Any] = {
            "group": ctx.group, "history": ctx.history, "trusted": family.trusted,
            "clock_ms": ctx.clock, "decided": family.decided,
            "open_alerts": sorted(a.kind + (f":{a.node}" if a.node else "") for a in ctx.open.values()),
            "counts": dict(ctx.counts),
        }
        out.update(family.snapshot())
        return out

    def to_state(self) -> dict[str, Any]:
        """The whole state as JSON-able values (Spark keeps it; ``from_state`` restores it)."""
        return dump(self.ctx, self.live, self.family, self.next_eval)

    @classmethod
    def from_state(cls, d: dict[str, Any], limits: Limits | None = None) -> GroupMonitor:
        """The monitor ``to_state`` saved (``limits``: today's thresholds, not stored)."""
        check_version(d)
        m = cls(d["group"], limits, family_of_state(d))
        m.next_eval = load(d, m.ctx, m.live, m.family)
        m.admission.holding = {n for n, ns in m.ctx.nodes.items() if ns.held}
        return m


def conflict_reason(group: str, family: str) -> str:
    """The dead letter's reason for an event of another family than its group's."""
    return f"family conflict: group {group} is {family}"


def _processor(ctx: Context, live: Liveness, family: FamilyRules) -> Handler:
    """What admission does with each admitted event, in its node's order: note it on the node,
    end the silences it ends, hand it to the family's rules. (A closure over the parts, not a
    method of the monitor: the monitor is then freed by reference counting alone, without a
    cycle through its admission, which matters when Spark builds one per group and batch.)"""
    heard, note = live.heard, live.note
    handlers, other = family.handlers()
    handler = handlers.get

    def process(ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        newer = ev["ts_ms"] > ns.last_ts
        if newer:
            ns.last_ts = ev["ts_ms"]
        note(node, ns.last_ts)  # NODE_SILENT's time a node was heard (liveness.py)
        ns.last_ev, ns.last_src = ev, src
        if ctx.open:
            heard(node, newer, ev, src)
        handler(ev["type"], other)(ns, node, ev, src)

    return process
