"""Data rules: per-node ordering, duplicates, EVENTS_LOST, INCOMPLETE_HISTORY, EXECUTION_REGRESSION.

Events of one node carry ``(incarnation, seq)``, +1 per event (SPEC section 3). The four topics
are read independently, so one node's events can arrive out of order across types; the monitor
restores each node's own order before any rule sees an event:

* ``seq`` at or below the last processed one (same incarnation) is a duplicate: ignored;
* ``seq`` beyond the next one is *held* until the missing ones arrive, or until the watermark
  passes the held event's time (then they cannot arrive any more: EVENTS_LOST, and the held
  events are processed);
* a node first seen with ``seq > 0`` is held the same way; when it expires before the group's
  boot was seen, the history began before the monitor did: INCOMPLETE_HISTORY (info, once).
"""

from __future__ import annotations

from typing import Any

from replimon.core.rules.base import COMPLETE, INCOMPLETE, UNKNOWN, GroupState, NodeState, Src


class DataRules(GroupState):
    def _admit(self, node: str, ev: dict[str, Any], src: Src) -> None:
        ns = self.nodes.get(node)
        if ns is None:
            ns = self.nodes[node] = NodeState()
        inc, seq = ev["incarnation"], ev["seq"]
        if inc == ns.inc:
            if seq == ns.seq + 1:
                ns.seq = seq
                self._process(ns, node, ev, src)
                if ns.held:
                    self._drain(ns, node)
            elif seq <= ns.seq:
                self.counts["duplicates"] += 1
            else:
                self._hold(ns, node, ev, src)
        elif inc > ns.inc:
            if seq == 0:
                self._new_incarnation(ns, inc)
                self._process(ns, node, ev, src)
                if ns.held:
                    self._drain(ns, node)
            else:
                self._hold(ns, node, ev, src)
        elif inc == ns.prev_inc and seq > ns.prev_seq:
            ns.prev_seq = seq  # a late straggler of the previous incarnation
            self._process(ns, node, ev, src)
        else:
            self.counts["duplicates"] += 1

    @staticmethod
    def _new_incarnation(ns: NodeState, inc: int) -> None:
        if ns.inc >= 0:
            ns.prev_inc, ns.prev_seq = ns.inc, ns.seq
        ns.inc, ns.seq, ns.exec_inc = inc, 0, -1

    def _hold(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        key = (ev["incarnation"], ev["seq"])
        if any((i, s) == key for i, s, _, _ in ns.held):
            self.counts["duplicates"] += 1
            return
        ns.held.append((key[0], key[1], ev, src))
        ns.held.sort(key=lambda h: (h[0], h[1]))
        self.holding.add(node)
        self.counts["held"] += 1

    def _drain(self, ns: NodeState, node: str) -> None:
        while ns.held:
            inc, seq, ev, src = ns.held[0]
            if (inc == ns.inc and seq <= ns.seq) or inc < ns.inc:
                ns.held.pop(0)
                self.counts["duplicates"] += 1
                continue
            if inc == ns.inc and seq == ns.seq + 1:
                ns.seq = seq
            elif inc > ns.inc and seq == 0:
                self._new_incarnation(ns, inc)
            else:
                break
            ns.held.pop(0)
            self._process(ns, node, ev, src)
        if not ns.held:
            self.holding.discard(node)

    def _expire_held(self, *, flush: bool = False) -> None:
        """Give up waiting for missing events once the watermark passed the held ones."""
        wm = self.watermark
        for node in sorted(self.holding):
            ns = self.nodes[node]
            while ns.held and (flush or ns.held[0][2]["ts_ms"] <= wm):
                inc, seq, ev, src = ns.held.pop(0)
                self._gap(ns, node, inc, seq, ev, src)
                if inc == ns.inc:
                    ns.seq = seq
                else:
                    self._new_incarnation(ns, inc)
                    ns.seq = seq
                self._process(ns, node, ev, src)
                self._drain(ns, node)
            if not ns.held:
                self.holding.discard(node)

    def _gap(self, ns: NodeState, node: str, inc: int, seq: int, ev: dict[str, Any], src: Src) -> None:
        first_missing = ns.seq + 1 if inc == ns.inc else 0
        if ns.inc < 0 and self.history != COMPLETE:
            # The node's first events were published before the monitor's history begins.
            if self.history == UNKNOWN:
                self.history = INCOMPLETE
                self.violation(
                    "INCOMPLETE_HISTORY", "start",
                    f"Group {self.group}'s history starts mid-stream (first event of {node} has "
                    f"seq {seq}); state is bootstrapped from heartbeat views and config reports.",
                    ev["ts_ms"], node=node, evidence=[self.ref(ev, src)])
            return
        self.counts["lost"] += seq - first_missing
        self.violation(
            "EVENTS_LOST", (node, inc, first_missing),
            f"{seq - first_missing} event(s) of node {node} (incarnation {inc}, seq "
            f"{first_missing}..{seq - 1}) never arrived.",
            ev["ts_ms"], node=node, evidence=[self.ref(ev, src)])

    def _regression(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        self.violation(
            "EXECUTION_REGRESSION", (node, ev["incarnation"], ev["seq"]),
            f"Node {node}'s executed frontier went back from {ns.exec_inc} to {ev['executed']} "
            f"within incarnation {ev['incarnation']}.",
            ev["ts_ms"], instance=ev["executed"], node=node, evidence=[self.ref(ev, src)])

    def _process(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        raise NotImplementedError
