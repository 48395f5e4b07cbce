"""What the quorum-log rules remember: per replica (``QlogNode``) and per legislature (``Leg``).

A replica's persisted state (docs/families.md 3.1, 3.3) is its legislature and membership (halon
adopts the one with the highest legislature at start) and its log; its reports are
``qlog.decree`` (its watermark passed a decree), ``qlog.passed`` (a round it proposed succeeded),
``qlog.recover`` (a Recover request it serves) and ``qlog.heartbeat``. Lists of ids are kept
sorted where they are sets (quorums are counted over sets, docs/families.md 3.4), and in their
order where the order means something (a membership's head is the preferred leader).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

RECONFS_KEPT = 16  # executed Reconfs remembered per replica (docs/families.md 3.3)
RECOVERS_KEPT = 16  # recover episodes remembered per replica

Members = tuple[str, ...]  # sorted node ids


def members_of(ids: list[str]) -> Members:
    return tuple(sorted(ids))


def majority(n: int) -> int:
    """``expectQuorum`` of halon's ``Quorum.hs``: ``n div 2 + 1``."""
    return n // 2 + 1


def value_of(ev: dict[str, Any]) -> list[Any]:
    """The value a ``qlog.decree`` or ``qlog.passed`` carries, as compared by
    QLOG_DIVERGENT_DECREE: kind, digest, and for a reconf the new legislature and member set."""
    if ev["kind"] == "reconf":
        return ["reconf", ev["digest"], ev["new_leg"], list(members_of(ev["members"]))]
    return ["values", ev["digest"], None, None]


def describe(value: list[Any]) -> str:
    kind, digest, new_leg, members = value
    if kind == "reconf":
        return f"Reconf(legislature {new_leg}, {{{', '.join(members)}}}) digest {digest}"
    return f"values digest {digest}"


@dataclass(slots=True)
class Leg:
    """A legislature as first installed: its ordered members, the event time and evidence."""

    num: int
    members: list[str]  # in the order first reported (the head is the preferred leader)
    ts: int  # event time of its first evidence (the install, for QLOG_NO_LEADER)
    first: dict[str, Any]  # evidence of the first report
    executed: bool = False  # a Reconf opening it was executed (else known from heartbeats only)


@dataclass(slots=True)
class QlogNode:
    """One replica's reports (the field order is the stored shape's)."""

    leg: int = -1  # legislature of its latest report
    max_leg: int = -1  # the highest legislature it ever reported (any incarnation)
    watermark: int = -1  # its latest watermark (next decree to execute)
    leader: str = ""  # the lease holder its latest heartbeat names ("" none)
    status: str = ""  # its latest heartbeat's status token
    hb: bool = False  # it has sent a heartbeat
    ts: int = -1  # the latest event time of its reports
    # its executed Reconfs, [number, new legislature], in number order (the last RECONFS_KEPT)
    reconfs: list[list[int]] = field(default_factory=list)
    # its recover episodes: [sorted new, legislature, synced with all of new, Reconf executed]
    recovers: list[list[Any]] = field(default_factory=list)
    report: dict[str, Any] | None = None  # evidence of its latest report

    def reconf_below(self, k: int) -> list[int] | None:
        """The last Reconf this replica executed at a number below ``k`` (None: none known)."""
        best = None
        for entry in self.reconfs:
            if entry[0] < k and (best is None or entry[0] > best[0]):
                best = entry
        return best

    def recover(self, new: list[str]) -> list[Any] | None:
        for entry in self.recovers:
            if entry[0] == new:
                return entry
        return None
