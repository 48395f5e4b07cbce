"""Admission: each node's events in their own order; duplicates, holds, EVENTS_LOST, INCOMPLETE_HISTORY.

Events of one node carry ``(incarnation, seq)``, +1 per event (docs/contract.md, "Envelope";
"Bad records, duplicates, gaps"). The four topics are read independently, so one node's events can
arrive out of order across types; admission restores each node's own order before any rule sees
an event, and hands each event on exactly once, in that order, to the ``process`` it was given:

* ``seq`` at or below the last processed one (same incarnation) is a duplicate: ignored;
* ``seq`` beyond the next one is *held* until the missing ones arrive, or until they cannot
  arrive any more (then EVENTS_LOST, and the held events are processed). That is judged in the
  node's own order, not by its clock: the missing events were published before the held one, so
  they are on their way once the input has been read past the held event's *arrival* on every
  partition. Two bounds say so (``expired``): the group's clock has gone ``skew`` past the held
  event's time, or past the group's clock when it came in if that was more than the skew later
  (the input's disorder across partitions is bounded by the skew in the group's time: a node
  whose clock is an hour behind its group-mates cannot make it expire at once, as its own stamp
  alone did; within the skew nothing changes), and, where the driver reports its reads (the live job:
  ``GroupMonitor.reading``, ``read_through``), a micro-batch after the one that brought it has
  ended, every partition read past where the first one stopped (a partition whose writes lag
  the others' is read by then, however far the group's clock moved within the first batch);
  there the skew may also pass in the reads' own time (the batches' processing time), so a group
  that stops publishing right after a loss still has it reported by the batches that follow;
* a node first seen with ``seq > 0`` is held the same way; when it expires before the group's
  boot was seen, the history began before the monitor did: INCOMPLETE_HISTORY (info, once);
* a late event of the previous incarnation is still processed.

EXECUTION_REGRESSION (a node's own frontier going back within an incarnation) is judged by the
protocol family, which knows the frontier, with ``execution_regression`` below (docs/rules.md,
"EVENTS_LOST", "INCOMPLETE_HISTORY", "EXECUTION_REGRESSION").
"""

from __future__ import annotations

from typing import Any

from replimon.core.rules.base import COMPLETE, INCOMPLETE, UNKNOWN, Context, Handler, NodeState, Src


class Admission:
    """Orders each node's events and hands them on; ``holding`` names nodes with held events."""

    __slots__ = ("ctx", "process", "holding")

    def __init__(self, ctx: Context, process: Handler) -> None:
        self.ctx = ctx
        self.process = process
        self.holding: set[str] = set()  # derived from the nodes' ``held`` (not stored)

    def admit(self, node: str, ev: dict[str, Any], src: Src) -> None:
        ctx = self.ctx
        ns = ctx.nodes.get(node)
        if ns is None:
            ns = ctx.nodes[node] = NodeState()
        inc, seq = ev["incarnation"], ev["seq"]
        if inc == ns.inc:
            if seq == ns.seq + 1:
                ns.seq = seq
                self.process(ns, node, ev, src)
                if ns.held:
                    self._drain(ns, node)
            elif seq <= ns.seq:
                ctx.counts["duplicates"] += 1
            else:
                self._hold(ns, node, ev, src)
        elif inc > ns.inc:
            if seq == 0:
                _new_incarnation(ns, inc)
                self.process(ns, node, ev, src)
                if ns.held:
                    self._drain(ns, node)
            else:
                self._hold(ns, node, ev, src)
        elif inc == ns.prev_inc and seq > ns.prev_seq:
            ns.prev_seq = seq  # a late straggler of the previous incarnation
            self.process(ns, node, ev, src)
        else:
            ctx.counts["duplicates"] += 1

    def _hold(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        key = (ev["incarnation"], ev["seq"])
        if any((h[0], h[1]) == key for h in ns.held):
            self.ctx.counts["duplicates"] += 1
            return
        ctx = self.ctx
        # The group's clock when it came in, if that is more than the skew past its own time (its
        # node's clock is behind, or its partition's writes lag): the hold then counts from there.
        ts = ev["ts_ms"]
        at = ctx.clock if ctx.clock - ts > ctx.limits.skew_ms else ts
        ns.held.append((key[0], key[1], ev, src, at, ctx.batch))
        ns.held.sort(key=lambda h: (h[0], h[1]))
        self.holding.add(node)
        self.ctx.counts["held"] += 1

    def _drain(self, ns: NodeState, node: str) -> None:
        while ns.held:
            inc, seq, ev, src = ns.held[0][:4]
            if (inc == ns.inc and seq <= ns.seq) or inc < ns.inc:
                ns.held.pop(0)
                self.ctx.counts["duplicates"] += 1
                continue
            if inc == ns.inc and seq == ns.seq + 1:
                ns.seq = seq
            elif inc > ns.inc and seq == 0:
                _new_incarnation(ns, inc)
            else:
                break
            ns.held.pop(0)
            self.process(ns, node, ev, src)
        if not ns.held:
            self.holding.discard(node)

    def expired(self, held: tuple[int, int, dict[str, Any], Src, int, int]) -> bool:
        """Whether the events missing before ``held`` cannot arrive any more (module doc): the
        group's watermark passed the group's clock at its arrival, and, where reads are
        reported, a read that began after the one that brought it has ended."""
        ctx = self.ctx
        if held[5] < 0:  # no reads reported (check, replay): the group's time alone
            return held[4] <= ctx.watermark
        # Live, the reads' marks are the batches' processing times: a later read has ended, and
        # either the group's time or the reads' time has gone the skew past its arrival (a group
        # that stops publishing still has its losses reported: its clock no longer moves).
        return ctx.read > held[5] and (held[4] <= ctx.watermark or ctx.read >= held[5] + ctx.limits.skew_ms)

    def deadline(self) -> int | None:
        """Where reads are reported: the read mark at which the first held event of a node can
        be given up on (``expired``; the live job's timers then fire with no input of the group
        needed), or None."""
        ctx = self.ctx
        marks = []
        for node in self.holding:
            ns = ctx.nodes[node]
            if ns.held and ns.held[0][5] >= 0:
                held = ns.held[0]
                marks.append(held[5] + 1 if held[4] <= ctx.watermark else held[5] + max(1, ctx.limits.skew_ms))
        return min(marks) if marks else None

    def expire_held(self, *, flush: bool = False) -> None:
        """Give up waiting for missing events that cannot arrive any more (``expired``;
        ``flush``: end of input, every held event)."""
        for node in sorted(self.holding):
            ns = self.ctx.nodes[node]
            while ns.held and (flush or self.expired(ns.held[0])):
                inc, seq, ev, src = ns.held.pop(0)[:4]
                self._gap(ns, node, inc, seq, ev, src)
                if inc == ns.inc:
                    ns.seq = seq
                else:
                    _new_incarnation(ns, inc)
                    ns.seq = seq
                self.process(ns, node, ev, src)
                self._drain(ns, node)
            if not ns.held:
                self.holding.discard(node)

    def _gap(self, ns: NodeState, node: str, inc: int, seq: int, ev: dict[str, Any], src: Src) -> None:
        ctx = self.ctx
        first_missing = ns.seq + 1 if inc == ns.inc else 0
        if ns.inc < 0 and ctx.history != COMPLETE:
            # The node's first events were published before the monitor's history begins.
            if ctx.history == UNKNOWN:
                ctx.history = INCOMPLETE
                ctx.violation(
                    "INCOMPLETE_HISTORY", "start",
                    f"Group {ctx.group}'s history starts mid-stream (first event of {node} has "
                    f"seq {seq}); state is bootstrapped from heartbeat views and config reports.",
                    ev["ts_ms"], node=node, evidence=[ctx.ref(ev, src)])
            return
        ctx.counts["lost"] += seq - first_missing
        ctx.violation(
            "EVENTS_LOST", (node, inc, first_missing),
            f"{seq - first_missing} event(s) of node {node} (incarnation {inc}, seq "
            f"{first_missing}..{seq - 1}) never arrived.",
            ev["ts_ms"], node=node, evidence=[ctx.ref(ev, src)])


def _new_incarnation(ns: NodeState, inc: int) -> None:
    if ns.inc >= 0:
        ns.prev_inc, ns.prev_seq = ns.inc, ns.seq
    ns.inc, ns.seq, ns.exec_inc = inc, 0, -1


def execution_regression(ctx: Context, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
    """EXECUTION_REGRESSION: ``ev`` reports an executed frontier below the one ``node`` reported
    before in the same incarnation (``ns.exec_inc``); the caller has checked that it is."""
    ctx.violation(
        "EXECUTION_REGRESSION", (node, ev["incarnation"], ev["seq"]),
        f"Node {node}'s executed frontier went back from {ns.exec_inc} to {ev['executed']} "
        f"within incarnation {ev['incarnation']}.",
        ev["ts_ms"], instance=ev["executed"], node=node, evidence=[ctx.ref(ev, src)])
