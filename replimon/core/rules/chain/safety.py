"""The chain family's safety rules (docs/families.md 4.4; violations, never resolve) and its
timeline mark.

Judged per replica, in its own seq order (duty 1: a replica takes its seq under the store mutex,
and a run of appends is flushed before the heartbeat that follows it, so its seq order is the
order of its log's changes): CHAIN_EPOCH_REGRESSION, CHAIN_VIEW_NOT_CAS, CHAIN_STALE_EPOCH_WRITE,
CHAIN_APPEND_NOT_CAS, CHAIN_WEDGED_WRITE, CHAIN_ADD_NOT_AT_TAIL. Set facts, judged whichever side
arrives first: CHAIN_VIEW_CONFLICT, CHAIN_TWO_HEADS, CHAIN_LOG_DIVERGENCE. CHAIN_VIEW_INSTALLED
(info) marks the first install of each epoch. A rule that compares a replica with its own
previous state never judges its first report, the first after a restart, nor one after a gap in
its seq (``ChainNode`` then holds nothing to compare with until a report states it again).

"Seed" is the chain notes of docs/sources.md (cstorey/chain-replication-experiment
``doc/NOTES.md``); the code cited is that repository's ``src/store.rs``,
``src/view_management/views.rs``, ``src/view_management/etcd.rs`` and
``src/replica/messages.in.rs``, as docs/families.md section 0 lists them.
"""

from __future__ import annotations

from typing import Any

from replimon.core.rules.base import Context
from replimon.core.rules.chain.nodes import ChainNode, View

EPOCHS_KEPT = 64  # views and client writers remembered (docs/families.md 4.3)
# (epoch, position) -> digest remembered for a minute of group clock, and 1,024 at most: replicas
# report one entry within the chain's propagation time, so a minute is plenty; remembering more made
# a busy group's state grow to ~800 KB (the demo soak, bench/demo_soak.py; docs/rules.md)
DIGEST_KEEP_MS = 60_000
DIGESTS_KEPT = 1024


class ChainSafety:
    """The group's views, client writers and digests, and the rules over them."""

    __slots__ = ("ctx", "views", "writers", "digests")

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.views: dict[int, View] = {}  # epoch (> 0) -> its view as first reported
        self.writers: dict[int, dict[str, dict[str, Any]]] = {}  # epoch -> client writer -> evidence
        self.digests: dict[tuple[int, int], list[Any]] = {}  # (epoch, pos) -> [digest, evidence]

    @property
    def current(self) -> View | None:
        """E and C(E): the highest epoch installed (or reported by a replica's heartbeat)."""
        return self.views[max(self.views)] if self.views else None

    # -- set facts --------------------------------------------------------------------------------
    def view(self, epoch: int, chain: list[str], ev: dict[str, Any], here: dict[str, Any]) -> View | None:
        """A replica reports view ``(epoch, chain)`` (an install or a heartbeat): the registry and
        CHAIN_VIEW_CONFLICT. Epoch 0 is every replica's bootstrap default, a view of itself alone
        (seed "View changes"): never registered, never compared."""
        if epoch <= 0:
            return None
        known = self.views.get(epoch)
        if known is None:
            if len(self.views) >= EPOCHS_KEPT and epoch < min(self.views):
                return None  # older than anything remembered: nothing left to compare it with
            known = self.views[epoch] = View(epoch, list(chain), ev["ts_ms"], here)
            if len(self.views) > EPOCHS_KEPT:
                del self.views[min(self.views)]
            for node, evidence in list(self.writers.get(epoch, {}).items()):
                self._head(epoch, node, evidence, ev["ts_ms"])
        elif ev["ts_ms"] < known.ts:
            known.ts = ev["ts_ms"]  # the view's earliest report, whatever the arrival order
        if known.chain != chain:
            # Seed "Wedging": every configuration change is stamped with the external sequencer's
            # version (etcd's modified index), so one epoch is one view. views.rs: only the head stores the
            # view change, and every other replica applies that same ViewChange entry.
            self.ctx.violation(
                "CHAIN_VIEW_CONFLICT", ("epoch", epoch),
                f"Epoch {epoch} is reported by {ev['node']} with chain {' > '.join(chain)}, but "
                f"was reported before with {' > '.join(known.chain)}: one epoch has one view.",
                ev["ts_ms"], instance=epoch, node=ev["node"], evidence=[known.first, here])
        return known

    def installed(self, known: View, ev: dict[str, Any], here: dict[str, Any]) -> None:
        """A replica installed ``known``'s epoch at ``ev['pos']`` from ``ev['from_epoch']``:
        CHAIN_LOG_DIVERGENCE between installs, CHAIN_VIEW_INSTALLED on the first."""
        pos, from_epoch, epoch = ev["pos"], ev["from_epoch"], known.epoch
        if known.installed is None:
            known.installed, known.pos, known.from_epoch = here, pos, from_epoch
            # The timeline (seed "View manager glue": the new view supplanting the old).
            self.ctx.violation(
                "CHAIN_VIEW_INSTALLED", ("epoch", epoch),
                f"Epoch {epoch} installed by {ev['node']}: chain {' > '.join(known.chain)} (head "
                f"{known.chain[0]}, tail {known.chain[-1]}), from epoch {from_epoch} at position {pos}.",
                ev["ts_ms"], instance=epoch, node=ev["node"], evidence=[here])
            return
        if known.pos != pos or known.from_epoch != from_epoch:
            # Seed: the head writes the view "as a ViewChange log entry" and sends it down the
            # chain with AppendLogEntry's CAS; messages.in.rs ``LogEntry::ViewChange``: every
            # replica holds the one entry, at one position, after the one previous epoch.
            self.ctx.violation(
                "CHAIN_LOG_DIVERGENCE", ("epoch", epoch),
                f"{ev['node']} installed epoch {epoch} at position {pos} from epoch {from_epoch}, "
                f"but {known.installed['node']} installed it at position {known.pos} from epoch "
                f"{known.from_epoch}: the view change is one log entry, replicated by CAS.",
                ev["ts_ms"], instance=epoch, node=ev["node"], evidence=[known.installed, here])

    def client_write(self, node: str, epoch: int, ev: dict[str, Any], here: dict[str, Any]) -> None:
        """``node`` accepted client writes in ``epoch``: CHAIN_TWO_HEADS."""
        if epoch <= 0:
            return
        writers = self.writers.get(epoch)
        if writers is None:
            if len(self.writers) >= EPOCHS_KEPT and epoch < min(self.writers):
                return
            writers = self.writers[epoch] = {}
            if len(self.writers) > EPOCHS_KEPT:
                del self.writers[min(self.writers)]
        if node in writers:
            return
        writers[node] = here
        self._head(epoch, node, here, ev["ts_ms"])

    def _head(self, epoch: int, node: str, here: dict[str, Any], ts: int) -> None:
        # Seed: the head adopts a view in which it is head, and the client-proxy "forwards
        # writes ... to the head"; messages.in.rs ``ChainView::is_head``; views.rs (only the head
        # stores a view change). A stale head writing in its own older epoch is legal (its writes
        # cannot pass the next replica's CAS): the rule is scoped to one epoch.
        view, writers = self.views.get(epoch), self.writers.get(epoch, {})
        others = sorted(n for n in writers if n != node)
        if view is not None and view.chain[0] != node:
            why = f"{node} is not the head of its chain {' > '.join(view.chain)}"
            evidence = [view.first, here]
        elif others:
            why = f"{node} and {', '.join(others)} both did"
            evidence = [writers[others[0]], here]
        else:
            return
        self.ctx.violation(
            "CHAIN_TWO_HEADS", ("epoch", epoch),
            f"Client writes were accepted in epoch {epoch} by {node}, but {why}: one epoch has one "
            "head.", ts, instance=epoch, node=node, evidence=evidence)

    def digest(self, ev: dict[str, Any], here: dict[str, Any]) -> None:
        """An accepted single append with a digest: CHAIN_LOG_DIVERGENCE at its position. Compared
        within one epoch: a stale head's own entries in its old epoch may differ from the new
        chain's at the same position, legally (docs/rules.md, the chain family's readings)."""
        key = (ev["epoch"], ev["pos"])
        digests = self.digests
        known = digests.get(key)
        if known is None:
            digests[key] = [ev["digest"], here]
            # the oldest first (the dict's order, kept by the saved state)
            horizon = self.ctx.clock - DIGEST_KEEP_MS
            while digests:
                oldest = next(iter(digests))
                if len(digests) <= DIGESTS_KEPT and digests[oldest][1]["ts_ms"] >= horizon:
                    break
                del digests[oldest]
            return
        if known[0] != ev["digest"]:
            # Seed "View manager glue": entries flow down the chain by AppendLogEntry's CAS; store.rs
            # ``append_entry``: an entry is written only at the next position after the CAS, so
            # every replica's entry at (epoch, pos) is the head's.
            self.ctx.violation(
                "CHAIN_LOG_DIVERGENCE", ("pos", ev["pos"]),
                f"{ev['node']} accepted digest {ev['digest']} at position {ev['pos']} of epoch "
                f"{ev['epoch']}, but {known[1]['node']} accepted {known[0]} there: the replicas' "
                "logs diverge.", ev["ts_ms"], instance=ev["pos"], node=ev["node"], evidence=[known[1], here])

    # -- per replica ------------------------------------------------------------------------------
    def regression(self, cn: ChainNode, node: str, epoch: int, ev: dict[str, Any], here: dict[str, Any]) -> None:
        """CHAIN_EPOCH_REGRESSION: an install or heartbeat of ``node`` below its tracked epoch."""
        # Seed ``viewChanged``: ``next_epoch <= self.current_epoch`` -> WrongEpoch; the epoch of a
        # replica only grows by that CAS (views.rs writes each view by ``append_entry``'s CAS, the
        # store never rewrites an entry below its head: store.rs).
        if 0 <= epoch < cn.epoch:
            self.ctx.violation(
                "CHAIN_EPOCH_REGRESSION", (node, ev["incarnation"], epoch),
                f"{node} reports epoch {epoch}, lower than the {cn.epoch} it was in "
                f"(incarnation {ev['incarnation']}): a replica's epoch only grows by a view-change CAS.",
                ev["ts_ms"], instance=epoch, node=node,
                evidence=[e for e in (cn.report, here) if e is not None])

    def view_cas(self, cn: ChainNode, node: str, ev: dict[str, Any], here: dict[str, Any]) -> None:
        """CHAIN_VIEW_NOT_CAS: an installed view that is not a CAS from the replica's (epoch, pos)."""
        # Seed ``viewChanged`` (under "View manager glue"): WrongEpoch unless the assumed epoch is
        # the current one and the next epoch is above it; the ViewChange entry then takes the
        # next log position. A view change is a compare-and-set from the previous view to the
        # next; views.rs ``append_entry(curr, curr.next(), ViewChange)``.
        epoch, from_epoch, pos = ev["epoch"], ev["from_epoch"], ev["pos"]
        if epoch == from_epoch == 0:
            # The bootstrap default, a view of the replica alone (seed "View changes"), reported as
            # a view at epoch 0: not a change, so not a CAS (docs/rules.md, "The chain family").
            return
        why = []
        if epoch <= from_epoch:
            why.append(f"epoch {epoch} is not above the epoch {from_epoch} it is CASed from")
        if cn.known and from_epoch != cn.epoch:
            why.append(f"it CASes from epoch {from_epoch} but the replica was in {cn.epoch}")
        if cn.known and pos != cn.pos + 1:
            why.append(f"it is written at position {pos}, not at {cn.pos + 1} after the log head")
        if why:
            self.ctx.violation(
                "CHAIN_VIEW_NOT_CAS", (node, epoch),
                f"{node} installed epoch {epoch} though {'; '.join(why)}.",
                ev["ts_ms"], instance=epoch, node=node,
                evidence=[e for e in (cn.report, here) if e is not None])

    def add_at_tail(self, cn: ChainNode, node: str, ev: dict[str, Any], here: dict[str, Any]) -> None:
        """CHAIN_ADD_NOT_AT_TAIL: the view ``node`` installs puts a newcomer before a survivor of
        the view it was in (not judged from the epoch-0 bootstrap view)."""
        # Seed "Integration with passive CM": a node joins a chain only at its tail; etcd.rs orders members by ``create_in_order`` (a new slot sorts last).
        # Survivors may be reordered (a re-created slot moves a survivor to the tail): not judged.
        if cn.epoch <= 0 or not cn.chain:
            return
        old, new = set(cn.chain), ev["chain"]
        last_survivor = max((i for i, n in enumerate(new) if n in old), default=-1)
        early = [n for n in new[:last_survivor] if n not in old]
        if early:
            self.ctx.violation(
                "CHAIN_ADD_NOT_AT_TAIL", ("epoch", ev["epoch"]),
                f"{node} installed epoch {ev['epoch']} with chain {' > '.join(new)} after "
                f"{' > '.join(cn.chain)} (epoch {cn.epoch}): {', '.join(early)} "
                f"{'is' if len(early) == 1 else 'are'} new but placed before "
                f"{new[last_survivor]}; new nodes go to the tail.",
                ev["ts_ms"], instance=ev["epoch"], node=node,
                evidence=[e for e in (cn.report, here) if e is not None])

    def append(self, cn: ChainNode, node: str, ev: dict[str, Any], here: dict[str, Any]) -> None:
        """An accepted run of data entries: CHAIN_STALE_EPOCH_WRITE, CHAIN_APPEND_NOT_CAS and
        CHAIN_WEDGED_WRITE, against the replica's tracked state."""
        ctx = self.ctx
        epoch, pos, assumed = ev["epoch"], ev["pos"], ev["assumed"]
        if cn.known and epoch < cn.epoch:
            # Seed "Integration with passive CM": the replication protocol carries an epoch so that
            # a client-proxy that missed a view change cannot write to a former head; "View
            # manager glue": ``(Epoch, LogPos)`` offsets with the CAS, in place of
            # messages.in.rs ``AppendLogEntry``'s ``LogPos`` offsets (store.rs compares them).
            ctx.violation(
                "CHAIN_STALE_EPOCH_WRITE", (node, epoch, pos),
                f"{node} accepted data of epoch {epoch} at position {pos} though it was already in "
                f"epoch {cn.epoch}: a write of an older epoch must fail the (epoch, position) CAS.",
                ev["ts_ms"], instance=pos, node=node, evidence=[e for e in (cn.report, here) if e is not None])
        else:
            # Seed: AppendLogEntry(assumed, next) "with essentially the same CAS semantics", data
            # keeping its epoch (E' = E); store.rs ``append_entry``: ``current_head != assumed``
            # -> BadSequence, else the entry goes at ``next`` = the head's next position.
            why = []
            if cn.known and (assumed["epoch"], assumed["pos"]) != (cn.epoch, cn.pos):
                why.append(f"it assumed ({assumed['epoch']}, {assumed['pos']}) but the log head was "
                           f"({cn.epoch}, {cn.pos})")
            if pos != assumed["pos"] + 1:
                why.append(f"position {pos} does not follow the assumed {assumed['pos']}")
            if epoch != assumed["epoch"]:
                why.append(f"data of epoch {epoch} follows an entry of epoch {assumed['epoch']}")
            if why:
                ctx.violation(
                    "CHAIN_APPEND_NOT_CAS", (node, pos),
                    f"{node} accepted data at position {pos} though {'; '.join(why)}.",
                    ev["ts_ms"], instance=pos, node=node,
                    evidence=[e for e in (cn.report, here) if e is not None])
        if cn.wedged >= 0 and epoch == cn.wedged:
            # Seed "Wedging": a suspected failure marks the current view wedged, and every message
            # of that epoch then fails; the paper's §4.7 as the seed reports it: a wedged shard
            # takes no new client request. The code has no wedging
            # (store.rs, replica: positions only), so the seed is the only source.
            ctx.violation(
                "CHAIN_WEDGED_WRITE", (node, epoch),
                f"{node} accepted data of epoch {epoch} at position {pos} after it wedged epoch "
                f"{epoch} and before installing a newer one: messages of a wedged epoch fail as wedged.",
                ev["ts_ms"], instance=epoch, node=node, evidence=[e for e in (cn.report, here) if e is not None])
