"""The simulated replicated log's records: a decree's value, a passed decree, one replica.

A value is what Paxos agrees on at one decree number (docs/families.md 3.1; `Internal.hs`
``Value = Values [a] | Reconf LegislatureId [NodeId]``): client values (here only their digest),
or a ``Reconf`` opening a new legislature with an ordered replica list whose head is the leader.
A passed decree is ``(leg, num)`` with its value (`Consensus.hs` ``DecreeId``). A replica keeps
what halon's replica loop keeps: its legislature and replica list (persisted), its watermark (the
next decree number to execute), the start of the lease it believes in, and what it executed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Emit = Callable[[dict[str, Any]], None]
"""Where a published event goes (a contract-v1 dict)."""


def majority(n: int) -> int:
    """`Quorum.hs` ``expectQuorum``: ``n div 2 + 1``."""
    return n // 2 + 1


def _digest(payload: Any) -> str:
    return hashlib.blake2s(json.dumps(payload, separators=(",", ":")).encode(), digest_size=8).hexdigest()


@dataclass(frozen=True)
class Value:
    """An agreed value: ``values`` (a batch of client requests, by digest) or ``reconf``."""

    kind: str
    digest: str
    new_leg: int | None = None
    members: tuple[str, ...] = ()

    @classmethod
    def values(cls, tag: str) -> Value:
        return cls("values", _digest(["values", tag]))

    @classmethod
    def reconf(cls, new_leg: int, members: tuple[str, ...]) -> Value:
        """The digest is of the canonical ``(new_leg, members)``, members in order (docs/families.md
        3.2)."""
        return cls("reconf", _digest([new_leg, list(members)]), new_leg, tuple(members))

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"kind": self.kind, "digest": self.digest}
        if self.kind == "reconf":
            body.update(new_leg=self.new_leg, members=list(self.members))
        return body


@dataclass(frozen=True)
class Entry:
    """A passed decree: Paxos instance ``(leg, num)``, its value, who proposed it and when."""

    leg: int
    num: int
    value: Value
    proposer: str
    t: int


@dataclass
class Replica:
    """One replica (and its acceptor): persisted legislature, list and log; what the simulator
    needs to drive it."""

    id: str
    clock_offset_ms: int
    hb_phase_ms: int
    leg: int
    members: tuple[str, ...]
    w: int  # watermark: the next decree number to execute
    lease_start: int | None = None  # pass time of the Reconf that made members[0] the leader
    incarnation: int = 0
    seq: int = 0
    next_hb: int = 0
    ballot: int = 0
    booted: bool = True  # False: a host that recover spawns, not up yet
    down_until: int | None = None  # crashed; restarts (a new incarnation) at this time
    down_since: int | None = None  # when it crashed (what its peers' failure detectors see)
    lost: bool = False  # crashed for good (its disk may seed a relocated replica)
    retired: bool = False  # removed from the membership by a Reconf it executed: stops
    delayed_until: int | None = None  # slow: neither acks nor learns decrees until then
    teleport: bool = False  # catching up from other replicas' logs (Note [Teleportation])
    replay_to: int | None = None  # after a restart: re-executing its log from the snapshot
    lease_wait: int | None = None  # no leader in its view: asks for the lease at this time
    recovering: bool = False  # serving a Recover request
    executed: dict[int, tuple[Entry, bool, str]] = field(default_factory=dict)  # num -> (entry, teleported, outcome)
    snapshot: int = 1

    @property
    def up(self) -> bool:
        return self.booted and self.down_until is None and not self.lost and not self.retired

    @property
    def live(self) -> bool:
        """Up and not delayed: it acks proposals and learns decrees."""
        return self.up and self.delayed_until is None

    def leader(self, t: int, lease_ms: int) -> str | None:
        """`Internal.hs` ``getLeader``: the head of the replica list while the lease lasts (other
        replicas allow for clock drift: a tenth longer)."""
        if self.lease_start is None or not self.members:
            return None
        period = lease_ms if self.members[0] == self.id else lease_ms * 11 // 10
        return self.members[0] if t - self.lease_start < period else None
