"""The simulated group's records: nodes, decided blocks, decided config commands, proposals.

Plain data with no behaviour beyond a few derived properties, shared by every other module of the
simulator (the group's state, consensus, membership, what nodes publish, the fault scripts). The
constants are the XCom facts the model relies on: protocol numbers and versions on either side of
the configurable event horizon (worklog 3.2, `docs/rules.md` "The configuration map": protocol < 5
is an *old* member), XCom's failure-detector delay and the largest group it admits.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from replimon.core.configmap import Command, Outcome

NEW_PROTOCOL = 9  # x_1_8 and later speak a configurable horizon
OLD_PROTOCOL = 4  # before x_1_4 (5): the horizon is fixed at 10
NEW_VERSION = "8.4.3"
OLD_VERSION = "8.0.13"
DETECTOR_MS = 5_000  # XCom suspects a peer after 5 s without hearing from it
MAX_MEMBERS = 7

Emit = Callable[[dict[str, Any]], None]
"""Where a published event goes (a contract-v1 dict)."""


def digest_of(*parts: object) -> str:
    """A short deterministic hex digest of a decided value."""
    return hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=8).hexdigest()


@dataclass
class Block:
    """A run of consecutive decided instances with one proposer and kind."""

    first: int
    count: int
    proposer: str
    kind: str  # app | noop | config
    window_base: int | None
    command: Command | None = None
    digests: dict[str, str] = field(default_factory=dict)  # per-node digest override (fault)

    @property
    def last(self) -> int:
        return self.first + self.count - 1


@dataclass
class DecidedCommand:
    """A config command the simulated group decided at ``instance``, and the outcome every member
    gets executing it (what a correct node reports)."""

    instance: int
    command: Command
    outcome: Outcome


@dataclass
class Proposal:
    """A queued config command; calling it tells whether it has been decided (a script wait)."""

    command: Command
    record: DecidedCommand | None = None

    def __call__(self) -> bool:
        return self.record is not None


@dataclass
class NodeSim:
    """One replica node."""

    id: str
    protocol: int
    speed: float  # instances executed per second
    clock_offset_ms: int
    hb_phase_ms: int
    incarnation: int = 0
    seq: int = 0
    executed: int = 0
    decided: int = 0
    exec_credit: float = 0.0
    running: bool = False  # started (booted, or joined)
    left: bool = False  # removed from the group and gone
    down_until: int | None = None  # crashed, restarts at this time
    unreachable_since: int | None = None  # down or isolated since
    isolated_until: int | None = None  # partitioned away from every peer (still publishing)
    silent_until: int | None = None  # publishes nothing (still working)
    exec_stall_until: int | None = None
    exec_cap: int | None = None  # executor may not pass this instance (fault)
    drop_next: int = 0  # events to lose after taking their seq (fault)
    view_eh_override: int | None = None
    view_override_until: int | None = None
    cache_size: int = 0
    next_hb: int = 0
    last_suspects: tuple[str, ...] = ()
    reported_upto: int = 0  # config commands reported up to this instance (no re-reports)
    status: str = "ONLINE"

    @property
    def old(self) -> bool:
        return self.protocol < 5

    def up(self, t: int) -> bool:
        return self.running and not self.left and self.down_until is None

    def reachable(self, t: int) -> bool:
        return self.up(t) and self.isolated_until is None
