"""The simulated generations group's records: a generation, and one node's persisted state.

A generation is ``(num, members, configured)`` (docs/families.md 2.1). A node persists
``current_gen``, ``donors``, ``last_online_in`` and ``last_vote``; its status in ``current_gen``
is derived from them as mtm derives it (`state.c` ``MtmGetCurrentStatusInGen``; TLA ``Status``):
ONLINE iff ``last_online_in == current_gen.num``, else RECOVERY iff it is a member, the
generation has a quorum and ``last_vote.num == current_gen.num``, else DEAD. Deriving it (never
storing it) is what keeps the simulator's statuses consistent with its numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Emit = Callable[[dict[str, Any]], None]
"""Where a published event goes (a contract-v1 dict)."""


@dataclass(frozen=True)
class Gen:
    """A generation, or a ``last_vote`` (whose sets are empty after a bump)."""

    num: int
    members: tuple[str, ...]
    configured: tuple[str, ...]

    @property
    def quorum(self) -> bool:
        """A majority of ``configured``, or the 2-node referee case (`state.h`; `multimaster.c`
        ``Quorum``)."""
        n = len(self.configured)
        return len(self.members) >= n // 2 + 1 or (n == 2 and len(self.members) == 1)

    def to_json(self) -> dict[str, Any]:
        return {"num": self.num, "members": list(self.members), "configured": list(self.configured)}


def majority(n: int) -> int:
    return n // 2 + 1


@dataclass
class GenNode:
    """One mtm node: its persisted generation state, and what the simulator needs to drive it."""

    id: str
    clock_offset_ms: int
    hb_phase_ms: int
    gen: Gen
    donors: tuple[str, ...]
    last_online_in: int
    last_vote: Gen
    incarnation: int = 0
    seq: int = 0
    next_hb: int = 0
    down_until: int | None = None  # crashed; restarts (and loads its state) at this time
    isolated_until: int | None = None  # cut off from every peer (still publishing)
    campaign_at: int | None = None  # wants a new generation; may campaign from this time
    recovery_from: str | None = None  # RECOVERY: the donor streaming to it
    recovery_done: int | None = None  # ... and when that stream reaches ParallelSafe
    xid: int = 0

    @property
    def status(self) -> str:
        if self.last_online_in == self.gen.num:
            return "ONLINE"
        if self.id in self.gen.members and self.gen.quorum and self.last_vote.num == self.gen.num:
            return "RECOVERY"
        return "DEAD"

    @property
    def up(self) -> bool:
        return self.down_until is None

    @property
    def reachable(self) -> bool:
        return self.down_until is None and self.isolated_until is None
