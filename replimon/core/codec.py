"""One group monitor's state as plain JSON values, and back: what Spark's state store keeps.

``dump`` gives a dict of JSON values (no tuples, sets or objects) that later events do not change
(its containers are copies; the events and evidence it names are never modified); ``load``
restores it into a freshly built monitor's parts, which then behave exactly as the saved ones
would have. The shape
is versioned (``STATE_VERSION``): checkpoints and Spark state written by any code of this version
must load, so a key, its position or its encoding changes only with a new version and a migration
(docs/streaming.md, "State, timers and time": a new shape of the state gets a new name).
Thresholds are not stored: a restored monitor judges with today's ``Limits``.

The stored shape is flat, one key per piece of state whatever part of the monitor owns it:
the context (clock, nodes, open alerts), the shared liveness rules, and XCom's rules.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from replimon.core.alerts import Alert
from replimon.core.configmap import Command, Config, Outcome
from replimon.core.rules.base import Context, NodeState
from replimon.core.rules.liveness import Liveness
from replimon.core.rules.xcom.decisions import CanLeaveCheck
from replimon.core.rules.xcom.family import XComRules
from replimon.core.rules.xcom.records import CommandRecord

STATE_VERSION = 1


def check_version(d: dict[str, Any]) -> None:
    """Refuse a state this code cannot read."""
    if d.get("v") != STATE_VERSION:
        raise ValueError(f"monitor state version {d.get('v')!r} is not {STATE_VERSION}")


def dump(ctx: Context, live: Liveness, x: XComRules, next_eval: int) -> dict[str, Any]:
    """The state of one group monitor's parts (``next_eval``: its next evaluation time)."""
    cfg, dec = x.config, x.decisions
    return {
        "v": STATE_VERSION, "group": ctx.group,
        "configs": [_cfg_out(c) for c in x.cmap.configs],
        "nodes": {n: _node_out(ns) for n, ns in ctx.nodes.items()},
        "history": ctx.history, "trusted": cfg.trusted, "boot_instance": cfg.boot_instance,
        "records": [_rec_out(r) for r in cfg.records.values()], "cmd_floor": cfg.cmd_floor,
        "pending_since": [[k, v] for k, v in cfg.pending_since.items()],
        "decided": x.decided, "decided_ts": x.decided_ts, "progress_ts": live.progress_ts,
        "exec_adv_ts": x.exec_adv_ts, "clock": ctx.clock, "ext": ctx.ext,
        "quiet_end": ctx.quiet_end,
        "singles": [[k, list(v[0]), v[1], v[2]] for k, v in dec.singles.items()],
        "runs": [[k, v[0], v[1]] for k, v in dec.runs.items()],
        "ahead": [[k, *v] for k, v in x.ahead.items()],
        "special": [[k, *v] for k, v in dec.special.items()],
        "checks": [_check_out(c) for c in dec.checks],
        "open": [[k, a.to_dict()] for k, a in ctx.open.items()],
        "fired": list(ctx.fired),
        "reach_ts": x.reach_ts, "lag_since": dict(live.lag_since), "quorum": list(live.quorum),
        "next_eval": next_eval, "counts": dict(ctx.counts), "member_set": sorted(x.member_set),
        "episodes": dict(live.episodes),
    }


def load(d: dict[str, Any], ctx: Context, live: Liveness, x: XComRules) -> int:
    """Restore ``dump``'s output into freshly built parts; returns the next evaluation time.
    (Derived sets, such as the nodes holding events, are the caller's to rebuild.)"""
    cfg, dec = x.config, x.decisions
    x.cmap.configs = [Config(c[0], c[1], tuple((m, p) for m, p in c[2]), c[3]) for c in d["configs"]]
    ctx.nodes = {n: _node_in(v) for n, v in d["nodes"].items()}
    ctx.history, cfg.trusted, cfg.boot_instance = d["history"], d["trusted"], d["boot_instance"]
    cfg.records = {r["instance"]: _rec_in(r) for r in d["records"]}
    cfg.cmd_floor = d["cmd_floor"]
    cfg.pending_since = {k: v for k, v in d["pending_since"]}
    cfg.held_reports = {c for c, r in cfg.records.items() if r.held is not None}
    x.decided, x.decided_ts, x.exec_adv_ts, x.reach_ts = (
        d["decided"], d["decided_ts"], d["exec_adv_ts"], d["reach_ts"])
    x.ahead = {k: (last, node, ev, src) for k, last, node, ev, src in d["ahead"]}
    x.member_set = set(d["member_set"])
    dec.singles = {k: (tuple(v), ev, src) for k, v, ev, src in d["singles"]}
    dec.runs = {k: (last, kind) for k, last, kind in d["runs"]}
    dec.special = {k: (kind, ev, src) for k, kind, ev, src in d["special"]}
    dec.checks = [_check_in(c) for c in d["checks"]]
    ctx.clock, ctx.ext, ctx.quiet_end = d["clock"], d["ext"], d["quiet_end"]
    ctx.open = {k: Alert.from_dict(a) for k, a in d["open"]}
    ctx.fired = dict.fromkeys(d["fired"])
    ctx.counts = dict(d["counts"])
    live.progress_ts = d["progress_ts"]
    live.lag_since = dict(d["lag_since"])
    live.quorum = (d["quorum"][0], d["quorum"][1])
    live.episodes = dict(d["episodes"])
    next_eval: int = d["next_eval"]
    return next_eval


# -- configurations, nodes, command records, can_leave checks ------------------------------------
def _cfg_out(c: Config | None) -> list[Any] | None:
    if c is None:
        return None
    return [c.start, c.event_horizon, [[m, p] for m, p in c.members], c.decided_at]


def _cfg_in(x: list[Any] | None) -> Config | None:
    if x is None:
        return None
    return Config(x[0], x[1], tuple((m, p) for m, p in x[2]), x[3])


_NODE_FIELDS = tuple(f.name for f in fields(NodeState))


def _node_out(ns: NodeState) -> dict[str, Any]:
    # A shallow copy: the values are serialised at once (``dataclasses.asdict`` deep-copied every
    # stored event, most of ``to_state``'s time).
    d = {name: getattr(ns, name) for name in _NODE_FIELDS}
    d["suspects"] = list(ns.suspects)
    d["held"] = [[i, s, ev, src] for i, s, ev, src in ns.held]
    return d


def _node_in(d: dict[str, Any]) -> NodeState:
    d = dict(d)
    d["suspects"] = tuple(d["suspects"])
    d["held"] = [(i, s, ev, src) for i, s, ev, src in d["held"]]
    return NodeState(**d)


def _outcome_out(o: Outcome | None) -> list[Any] | None:
    return None if o is None else [o.instance, _cfg_out(o.config), o.reason]


def _outcome_in(x: list[Any] | None) -> Outcome | None:
    return None if x is None else Outcome(x[0], _cfg_in(x[1]), x[2])


def _key_out(k: tuple[Any, ...] | None) -> list[Any] | None:
    if k is None:
        return None
    return [k[0], k[1], k[2], None if k[3] is None else [list(m) for m in k[3]]]


def _key_in(x: list[Any] | None) -> tuple[Any, ...] | None:
    if x is None:
        return None
    return (x[0], x[1], x[2], None if x[3] is None else tuple((m, p) for m, p in x[3]))


def _rec_out(r: CommandRecord) -> dict[str, Any]:
    return {
        "instance": r.instance,
        "command": [r.command.op, [[n, p] for n, p in r.command.nodes], r.command.event_horizon],
        "decided_ts": r.decided_ts, "decision": r.decision,
        "expected": _outcome_out(r.expected), "alt": _outcome_out(r.alt),
        "first": _key_out(r.first), "first_ref": r.first_ref,
        "actual": _cfg_out(r.actual), "followed": r.followed, "replaced": _cfg_out(r.replaced),
        "held": None if r.held is None else [_key_out(r.held[0]), r.held[1], r.held[2], r.held[3]],
    }


def _rec_in(d: dict[str, Any]) -> CommandRecord:
    op, nodes, eh = d["command"]
    return CommandRecord(
        d["instance"], Command(op, tuple((n, p) for n, p in nodes), eh), d["decided_ts"],
        d["decision"], _outcome_in(d["expected"]), _outcome_in(d["alt"]), _key_in(d["first"]),
        d["first_ref"], _cfg_in(d["actual"]), d["followed"], _cfg_in(d["replaced"]),
        None if d["held"] is None else (_key_in(d["held"][0]), d["held"][1], d["held"][2], d["held"][3]))


def _check_out(c: CanLeaveCheck) -> dict[str, Any]:
    return {"start": c.start, "can_leave": c.can_leave, "members": list(c.members),
            "majority": c.majority, "decided_ts": c.decided_ts, "decision": c.decision,
            "satisfied": sorted(c.satisfied), "closed": sorted(c.closed)}


def _check_in(d: dict[str, Any]) -> CanLeaveCheck:
    return CanLeaveCheck(d["start"], d["can_leave"], tuple(d["members"]), d["majority"],
                         d["decided_ts"], d["decision"], set(d["satisfied"]), set(d["closed"]))
