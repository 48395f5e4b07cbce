"""Clocks far off: which event times the monitor trusts, and CLOCK_SKEW (docs/operations.md, "Clocks").

A replica stamps its events with its own clock. A clock far ahead (more than ``clock_skew_ms``,
``thresholds.clock_skew_s``) must not drive any timer: not its group's (its heartbeat would keep
itself alive forever and make every other member look silent), not the outside clock that fires
other groups' GROUP_SILENT, not a replay's watermark. What this module guarantees:

* ``judge``: an event time is *skewed* when it is more than the bound ahead of a reference: live,
  the micro-batch's processing time; ``replimon check`` (``Fleet`` below), the latest trusted time
  of every *other* node read so far.
* A skewed event still reaches its group's rules, stamped with the reference time instead of its
  own (``restamp``): a wrong clock does not make a decision wrong, and safety rules judge instance
  numbers, not times (docs/contract.md, "Envelope"). For the silence rules it arrived at the
  reference time: a node that keeps publishing is alive, but its stamp pushes nobody's deadline.
* ``report``: CLOCK_SKEW (a data alert) once per node and incarnation, on the group's own
  once-only memory, evidence the event as stamped. Histories without a skewed event are fed
  exactly as before (same alert ids, same states).
* ``trusted_latest``: the latest event time of each group in a batch, leaving out the events
  skewed against the batch's other nodes (what a replay's watermark is built from).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from replimon.core.alerts import Alert, ref
from replimon.core.group import GroupMonitor
from replimon.core.rules.base import Src

KIND = "CLOCK_SKEW"
# ``Fleet``: the events held while their node's time is unconfirmed (no other node heard yet, or
# the node jumped ahead of every other): past this many, they are decided without another node.
PENDING_MAX = 1000


def judge(ts: int, reference: int | None, bound: int) -> bool:
    """Whether ``ts`` is more than ``bound`` ahead of ``reference`` (None: nothing to judge by)."""
    return reference is not None and reference >= 0 and ts - reference > bound


def restamp(ev: dict[str, Any], reference: int) -> dict[str, Any]:
    """A copy of ``ev`` stamped at ``reference`` (the event itself is left untouched: it is the
    CLOCK_SKEW evidence, and a Kafka record is never rewritten)."""
    out = dict(ev)
    out["ts_ms"] = reference
    return out


def report(gm: GroupMonitor, ev: dict[str, Any], src: Src, reference: int, now: int | None = None) -> list[Alert]:
    """CLOCK_SKEW for ``ev``'s node in ``gm``, once per (node, incarnation); ``now``: the detection
    time to stamp (default: the group's clocks)."""
    ctx = gm.ctx
    out: list[Alert] = []
    ctx.out, ctx.now = out, now
    node = ev["node"]
    ahead = ev["ts_ms"] - reference
    ctx.violation(
        KIND, (node, ev["incarnation"]),
        f"Node {node}'s clock is {_span(ahead)} ahead of the monitor's (event stamped {ev['ts_ms']}, "
        f"reference {reference}); its events are taken at the reference time and kept out of the "
        f"silence timers.",
        reference, node=node, evidence=[ref(ev, src)])
    return out


def _span(ms: int) -> str:
    s = ms // 1000
    if s >= 2 * 86_400:
        return f"{s // 86_400} days"
    if s >= 7_200:
        return f"{s // 3600} h"
    return f"{s} s"


def trusted_latest(events: Iterable[dict[str, Any]], bound: int) -> dict[str, int]:
    """Group -> its latest event time among ``events`` that are not more than ``bound`` ahead of
    the latest time of every other node among them (one node alone is trusted: nothing to judge
    it by)."""
    evs = list(events)
    best: dict[tuple[str, str], int] = {}
    for e in evs:
        key = (e["group"], e["node"])
        if e["ts_ms"] > best.get(key, -1):
            best[key] = e["ts_ms"]
    top = sorted(best.items(), key=lambda kv: kv[1], reverse=True)[:2]
    out: dict[str, int] = {}
    for e in evs:
        key = (e["group"], e["node"])
        others = [t for k, t in top if k != key]
        if others and e["ts_ms"] - others[0] > bound:
            continue
        if e["ts_ms"] > out.get(e["group"], -1):
            out[e["group"]] = e["ts_ms"]
    return out


class Reference:
    """The latest trusted event time of each node read so far, and the best of every other node's
    (the two highest are kept: a node's own time is never its reference)."""

    __slots__ = ("latest", "top")

    def __init__(self) -> None:
        self.latest: dict[tuple[str, str], int] = {}
        self.top: list[tuple[int, tuple[str, str]]] = []  # the two highest (time, node)

    def others(self, key: tuple[str, str]) -> int | None:
        for t, k in self.top:
            if k != key:
                return t
        return None

    def note(self, key: tuple[str, str], ts: int) -> None:
        latest = self.latest
        if ts <= latest.get(key, -1):
            return
        latest[key] = ts
        # The two highest times of distinct nodes, updated in place: this runs for nearly every
        # event, and ``others`` only needs the highest time of a node other than its caller (any
        # order among equal times gives the same answer).
        top = self.top
        if top and top[0][1] == key:
            top[0] = (ts, key)
        elif len(top) > 1 and top[1][1] == key:
            top[1] = (ts, key)
            if ts > top[0][0]:
                top.reverse()
        elif not top or ts > top[0][0]:
            self.top = [(ts, key), *top[:1]]
        elif len(top) < 2 or ts > top[1][0]:
            self.top = [top[0], (ts, key)]


def screen(gm: GroupMonitor, items: list[Any], bound: int, now: int | None) -> tuple[list[Any], list[Alert]]:
    """The job's side: ``items`` (topic, partition, offset, event) of one group in one batch, with
    the skewed events restamped, and the CLOCK_SKEW alerts. ``now``: live, the batch's processing
    time, the reference; None (a replay): the reference of an event is the latest time of the
    group's other nodes, in its state and in this batch (a group's only node is trusted)."""
    top: dict[str, int] = {n: ns.last_ts for n, ns in gm.ctx.nodes.items() if ns.last_ts >= 0}
    for it in items:
        node, ts = it[3]["node"], it[3]["ts_ms"]
        if ts > top.get(node, -1) and (now is None or not judge(ts, now, bound)):
            top[node] = ts
    best = sorted(((t, n) for n, t in top.items()), reverse=True)[:2]
    kept: list[Any] = []
    alerts: list[Alert] = []
    for it in items:
        e = it[3]
        other = next((t for t, n in best if n != e["node"]), None)
        reference = now if now is not None else other
        if reference is not None and judge(e["ts_ms"], reference, bound):
            src = {"topic": it[0], "partition": it[1], "offset": it[2]}
            alerts += report(gm, e, src, reference, now)
            # Live, stamped at the batch's time, or at the other nodes' latest if that is earlier
            # (the batch is read behind the wall clock): a restamped node must not lead the
            # others, or they would look silent when the group stops.
            at = reference if now is None or other is None else min(now, other)
            it = (it[0], it[1], it[2], restamp(e, at))
        kept.append(it)
    return kept, alerts
