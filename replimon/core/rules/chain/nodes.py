"""What the chain rules remember: per replica (``ChainNode``) and per view (``View``).

A replica's state (docs/families.md 4.1, 4.3) is its view ``(epoch, chain)`` and its log, whose
head is ``(epoch, pos)``: the CAS precondition of the seed's ``AppendLogEntry`` (``store.rs``
``append_entry`` compares the log head with ``assumed``; ``messages.in.rs`` ``LogPos`` counts from
``LogPos::zero()``, the first entry is at 1). The monitor tracks each replica's head from its own
reports in seq order (duty 1: a replica takes its seq under the store mutex), re-synchronised
from the next report that states it after a gap in its seq or a restart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class View:
    """One epoch's view as first reported: its chain (head..tail), and, once a replica installed
    it, the position and the epoch it was CASed from (the ``ViewChange`` entry's place in the
    log). ``ts`` is the event time of the first evidence, ``first`` that evidence."""

    epoch: int
    chain: list[str]
    ts: int
    first: dict[str, Any]
    pos: int = -1  # -1: known from heartbeats only
    from_epoch: int = -1
    installed: dict[str, Any] | None = None  # evidence of the first install


@dataclass(slots=True)
class ChainNode:
    """One replica's reports (the field order is the stored shape's)."""

    inc: int = -1  # incarnation the tracked state belongs to
    seq: int = -1  # seq of its last report in that incarnation (a gap: seq jumps)
    epoch: int = -1  # tracked epoch of its view (-1: not known, nothing judged against it)
    pos: int = -1  # tracked log head position
    chain: list[str] = field(default_factory=list)  # its view's chain (head..tail)
    wedged: int = -1  # the epoch it wedged in this incarnation and has not left (-1: none)
    flagged: bool = False  # its latest heartbeat says wedged
    stable: int = -1  # the tail's acknowledged position, as its latest heartbeat knows it
    renewed: int = -1  # event time of its latest lease renewal (chain.heartbeat)
    ttl: int = -1  # that renewal's TTL in ms
    ts: int = -1  # the latest event time of its reports
    report: dict[str, Any] | None = None  # evidence of its latest report
    lease: dict[str, Any] | None = None  # evidence of its latest renewal (the lease wedges' evidence)

    @property
    def known(self) -> bool:
        return self.epoch >= 0 and self.pos >= 0
