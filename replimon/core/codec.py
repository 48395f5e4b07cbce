"""One group monitor's state as plain JSON values, and back: what Spark's state store keeps.

``dump`` gives a dict of JSON values (no tuples, sets or objects) that later events do not change
(its containers are copies; the events and evidence it names are never modified); ``load``
restores it into a freshly built monitor's parts, which then behave exactly as the saved ones
would have. The shape is versioned (``STATE_VERSION``): checkpoints and Spark state written by any
code of this version must load, so a key, its position or its encoding changes only with a new
version and a migration (docs/streaming.md, "State, timers and time": a new shape of the state
gets a new name). Thresholds are not stored: a restored monitor judges with today's ``Limits``.

The stored shape is flat, one key per piece of state whatever part of the monitor owns it: the
context (clock, nodes, open alerts) and the shared liveness rules here, the protocol family's
keys added by its ``dump``, which also sets the order (XCom's is the order earlier versions
wrote). An XCom group's state has no ``family`` key (the shape every earlier
version wrote); a group of another family stores its name there.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from replimon.core.alerts import Alert
from replimon.core.rules.base import Context, NodeState
from replimon.core.rules.family import XCOM, FamilyRules
from replimon.core.rules.liveness import Liveness

STATE_VERSION = 1


def check_version(d: dict[str, Any]) -> None:
    """Refuse a state this code cannot read."""
    if d.get("v") != STATE_VERSION:
        raise ValueError(f"monitor state version {d.get('v')!r} is not {STATE_VERSION}")


def family_of_state(d: dict[str, Any]) -> str:
    """The family of a saved group state."""
    return str(d.get("family", XCOM))


def dump(ctx: Context, live: Liveness, family: FamilyRules, next_eval: int) -> dict[str, Any]:
    """The state of one group monitor's parts (``next_eval``: its next evaluation time)."""
    out: dict[str, Any] = {
        "v": STATE_VERSION, "group": ctx.group,
        "nodes": {n: _node_out(ns) for n, ns in ctx.nodes.items()},
        "history": ctx.history, "progress_ts": live.progress_ts,
        "clock": ctx.clock, "ext": ctx.ext, "quiet_end": ctx.quiet_end,
        "open": [[k, a.to_dict()] for k, a in ctx.open.items()],
        "fired": list(ctx.fired),
        "lag_since": dict(live.lag_since), "quorum": list(live.quorum),
        "next_eval": next_eval, "counts": dict(ctx.counts), "episodes": dict(live.episodes),
    }
    if family.name != XCOM:
        out["family"] = family.name
    out = live.save(family.dump(out))
    # Where holds need more than the event's own time (``Admission``): an event that came in more
    # than the skew behind the group's clock, or under a reported read (the live job), and the
    # mark of the last read; only then, so a history within the skew saves what it always did.
    holds = {n: marks for n, ns in ctx.nodes.items()
             if (marks := [[h[0], h[1], h[4], h[5]] for h in ns.held if h[4] != h[2]["ts_ms"] or h[5] >= 0])}
    if holds:
        out["holds"] = holds
    if ctx.read >= 0:
        out["read"] = ctx.read
    return out


def load(d: dict[str, Any], ctx: Context, live: Liveness, family: FamilyRules) -> int:
    """Restore ``dump``'s output into freshly built parts; returns the next evaluation time.
    (Derived sets, such as the nodes holding events, are the caller's to rebuild.)"""
    ctx.nodes = {n: _node_in(v) for n, v in d["nodes"].items()}
    ctx.history = d["history"]
    ctx.clock, ctx.ext, ctx.quiet_end = d["clock"], d["ext"], d["quiet_end"]
    ctx.open = {k: Alert.from_dict(a) for k, a in d["open"]}
    ctx.fired = dict.fromkeys(d["fired"])
    ctx.counts = dict(d["counts"])
    ctx.read = d.get("read", -1)
    for n, marks in d.get("holds", {}).items():
        ns = ctx.nodes[n]
        at = {(m[0], m[1]): (m[2], m[3]) for m in marks}
        ns.held = [(h[0], h[1], h[2], h[3], *at.get((h[0], h[1]), (h[4], h[5]))) for h in ns.held]
    live.progress_ts = d["progress_ts"]
    live.lag_since = dict(d["lag_since"])
    live.quorum = (d["quorum"][0], d["quorum"][1])
    live.episodes = dict(d["episodes"])
    live.restore(d)
    family.load(d)
    next_eval: int = d["next_eval"]
    return next_eval


# -- nodes ---------------------------------------------------------------------------------------
_NODE_FIELDS = tuple(f.name for f in fields(NodeState))


def _node_out(ns: NodeState) -> dict[str, Any]:
    # A shallow copy: the values are serialised at once (``dataclasses.asdict`` deep-copied every
    # stored event, most of ``to_state``'s time).
    d = {name: getattr(ns, name) for name in _NODE_FIELDS}
    d["suspects"] = list(ns.suspects)
    d["held"] = [[h[0], h[1], h[2], h[3]] for h in ns.held]
    return d


def _node_in(d: dict[str, Any]) -> NodeState:
    d = dict(d)
    d["suspects"] = tuple(d["suspects"])
    # the arrival clock and read mark as an event held within the skew has them (``holds``)
    d["held"] = [(h[0], h[1], h[2], h[3], h[2]["ts_ms"], -1) for h in d["held"]]
    return NodeState(**d)
