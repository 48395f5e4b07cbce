"""XCom's values in a group monitor's saved state, as plain JSON values, and back (the encoders
``XComRules.dump`` and ``load`` use).

The keys sit flat beside the shared ones in the group's state (``replimon.core.codec``): the
stored shape of an XCom group is the one every earlier version wrote, so Spark state and
checkpoints load unchanged (a group of another family also stores ``family``).
"""

from __future__ import annotations

from typing import Any

from replimon.core.configmap import Command, Config, Outcome
from replimon.core.rules.xcom.decisions import CanLeaveCheck
from replimon.core.rules.xcom.records import CommandRecord


# -- configurations, command records, can_leave checks -------------------------------------------
def cfg_out(c: Config | None) -> list[Any] | None:
    if c is None:
        return None
    return [c.start, c.event_horizon, [[m, p] for m, p in c.members], c.decided_at]


def cfg_in(x: list[Any] | None) -> Config | None:
    if x is None:
        return None
    return Config(x[0], x[1], tuple((m, p) for m, p in x[2]), x[3])


def _outcome_out(o: Outcome | None) -> list[Any] | None:
    return None if o is None else [o.instance, cfg_out(o.config), o.reason]


def _outcome_in(x: list[Any] | None) -> Outcome | None:
    return None if x is None else Outcome(x[0], cfg_in(x[1]), x[2])


def _key_out(k: tuple[Any, ...] | None) -> list[Any] | None:
    if k is None:
        return None
    return [k[0], k[1], k[2], None if k[3] is None else [list(m) for m in k[3]]]


def _key_in(x: list[Any] | None) -> tuple[Any, ...] | None:
    if x is None:
        return None
    return (x[0], x[1], x[2], None if x[3] is None else tuple((m, p) for m, p in x[3]))


def rec_out(r: CommandRecord) -> dict[str, Any]:
    return {
        "instance": r.instance,
        "command": [r.command.op, [[n, p] for n, p in r.command.nodes], r.command.event_horizon],
        "decided_ts": r.decided_ts, "decision": r.decision,
        "expected": _outcome_out(r.expected), "alt": _outcome_out(r.alt),
        "first": _key_out(r.first), "first_ref": r.first_ref,
        "actual": cfg_out(r.actual), "followed": r.followed, "replaced": cfg_out(r.replaced),
        "held": None if r.held is None else [_key_out(r.held[0]), r.held[1], r.held[2], r.held[3]],
    }


def rec_in(d: dict[str, Any]) -> CommandRecord:
    op, nodes, eh = d["command"]
    return CommandRecord(
        d["instance"], Command(op, tuple((n, p) for n, p in nodes), eh), d["decided_ts"],
        d["decision"], _outcome_in(d["expected"]), _outcome_in(d["alt"]), _key_in(d["first"]),
        d["first_ref"], cfg_in(d["actual"]), d["followed"], cfg_in(d["replaced"]),
        None if d["held"] is None else (_key_in(d["held"][0]), d["held"][1], d["held"][2], d["held"][3]))


def check_out(c: CanLeaveCheck) -> dict[str, Any]:
    return {"start": c.start, "can_leave": c.can_leave, "members": list(c.members),
            "majority": c.majority, "decided_ts": c.decided_ts, "decision": c.decision,
            "satisfied": sorted(c.satisfied), "closed": sorted(c.closed)}


def check_in(d: dict[str, Any]) -> CanLeaveCheck:
    return CanLeaveCheck(d["start"], d["can_leave"], tuple(d["members"]), d["majority"],
                         d["decided_ts"], d["decision"], set(d["satisfied"]), set(d["closed"]))
