"""The simulated chain's records: a log entry, one replica, the view manager's etcd slots.

A replica's store is a log of entries at positions 1, 2, ... (position 0 = empty; docs/families.md
4.1, cstorey/chain-replication-experiment `store.rs`): data entries (here only their digest) and
``ViewChange`` entries carrying the view they install (`messages.in.rs` ``LogEntry::ViewChange``).
Every entry is stamped with an epoch: data with the epoch of the head that accepted it, a view
change with the epoch it installs. A replica tracks ``(epoch, pos)``: the epoch of the last view
it installed and its last log position, the CAS precondition of every append (seed "View manager glue": the offsets of an append become
``(Epoch, LogPos)`` pairs).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Emit = Callable[[dict[str, Any]], None]
"""Where a published event goes (a contract-v1 dict)."""


def digest(tag: str) -> str:
    return hashlib.blake2s(tag.encode(), digest_size=8).hexdigest()


@dataclass(frozen=True)
class Entry:
    """One log entry: ``data`` (a client write, by digest) or ``view`` (a ViewChange installing
    ``chain`` at ``epoch``, CASed from ``from_epoch``); ``hole`` only stands where a faulty store
    skipped an entry (``chain_view_not_cas``; that replica is wiped right after)."""

    epoch: int
    kind: str
    digest: str = ""
    chain: tuple[str, ...] = ()
    from_epoch: int = 0


@dataclass
class Replica:
    """One chain replica: its store (log), its installed view, its wedge; what the simulator needs
    to drive it. A replica whose store is lost never comes back under its id (duty 2 of
    docs/families.md 1.2): a new replica with a new id joins instead, so ``incarnation`` stays 0."""

    id: str
    clock_offset_ms: int
    hb_phase_ms: int
    epoch: int = 0  # the epoch of the view it installed last
    chain: tuple[str, ...] = ()  # that view, head..tail
    log: list[Entry] = field(default_factory=list)
    wedged: int | None = None  # the epoch it wedged, until it installs a higher one
    stable: int | None = None  # the tail's acknowledged position, as acks reached it
    incarnation: int = 0
    seq: int = 0
    next_hb: int = 0
    down_at: int | None = None  # crashed: its store is lost
    gone: bool = False  # replaced by a new replica under a new id: publishes nothing more
    cut_at: int | None = None  # cut off from the view manager: no renewals, hears of no view
    sent: dict[str, int] = field(default_factory=dict)  # successor -> the last position sent it

    @property
    def pos(self) -> int:
        return len(self.log)

    @property
    def up(self) -> bool:
        return self.down_at is None and not self.gone

    def successor(self) -> str | None:
        """The next replica in its own view (None: it is the tail, or not in its view)."""
        if self.id not in self.chain:
            return None
        i = self.chain.index(self.id)
        return self.chain[i + 1] if i + 1 < len(self.chain) else None

    def is_head(self) -> bool:
        """`ChainView::is_head`: first in its installed view (epoch 0 is the default self-view)."""
        return self.epoch > 0 and bool(self.chain) and self.chain[0] == self.id

    def is_wedged(self) -> bool:
        return self.wedged is not None and self.wedged == self.epoch
