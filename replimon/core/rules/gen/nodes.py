"""What the generations rules remember: per node (``GenNode``) and per generation (``Gen``).

A node's persisted state (docs/families.md 2.1) is ``current_gen``, ``donors``,
``last_online_in`` and ``last_vote``; its reports are ``gen.state`` (a completed transition) and
``gen.heartbeat``. The rules compare a node with its own earlier reports, so each ``GenNode``
keeps the last report, the highest values ever reported (across incarnations: the state is
fsynced before it is acted on), and whether the node's history is contiguous since its last
report (a rule that compares a node with its previous state never judges across a gap,
docs/families.md 1.4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Members = tuple[str, ...]  # sorted node ids


def members_of(ids: list[str]) -> Members:
    return tuple(sorted(ids))


@dataclass(slots=True)
class Gen:
    """A generation as first reported: ``num -> (members, configured)``, and the first report."""

    num: int
    members: Members
    configured: Members
    first: dict[str, Any]  # evidence of the first report


@dataclass(slots=True)
class GenNode:
    """One node's reports (the field order is the stored shape's)."""

    last_inc: int = -1  # the node's last gen event: incarnation and seq
    last_seq: int = -1
    contiguous: bool = False  # no seq gap since its last state report (and there is one)
    loi: int = -1  # last_online_in of its last state report
    gen: int = -1  # gen.num of its last state report
    status: str = ""  # status in gen of its last gen.state (ONLINE / RECOVERY / DEAD)
    max_gen: int = -1  # the highest gen.num it ever reported
    max_vote: int = -1  # the highest last_vote.num
    max_loi: int = -1  # the highest last_online_in
    vote: list[Any] | None = None  # its last full last_vote: [num, members, configured]
    node_status: str = ""  # its latest heartbeat's node_status
    since: int = -1  # event time its current (gen, status) began (GEN_RECOVERY_STUCK)
    vote_ts: int = -1  # event time of the report that set ``vote``
    epoch: int = 0  # gaps seen in its history (a held verdict needs none since it began)
    ts: int = -1  # the latest event time of its reports
    report: dict[str, Any] | None = field(default=None)  # evidence of its last state report
