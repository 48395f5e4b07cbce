"""A batch reference checker of chain-replication traces (test helper, not the product's monitor).

It reads a whole trace and names which alert conditions of docs/families.md 4.4 and 4.5 the
history contains, in the simplest way that is right with hindsight: the per-replica rules read
each replica's events in seq order per incarnation (a replica's first event, and its first
heartbeat after a seq gap, set its tracked state without being judged), the set facts (chains,
positions and digests per epoch, client writers per epoch) are judged over the whole trace, and
the wedges and leases by a scan in event-time order on ``now - skew``. It is how the tests prove
that a clean simulator run is clean and that each catalogued fault leaves the evidence of its own
kind and no other. CHAIN_VIEW_INSTALLED (info) is reported only with ``info=True``.

Readings (docs/simulator.md says why):

* Digests are compared per log entry, ``(epoch, pos)`` (the seed's ``(Epoch, LogPos)``), so a
  stale head's own never-acked entries at positions the next view reuses are not divergence.
* A replica's tracked epoch is the epoch of the view it installed last; an accepted stale append
  (CHAIN_STALE_EPOCH_WRITE) does not lower it.
* CHAIN_ADD_NOT_AT_TAIL compares a view with the replica's previous view of epoch > 0: the
  default epoch-0 self-view is no view (4.4 "Epoch 0 is excluded"), else every replica but the
  head would be "added before" the head at bootstrap.
* CHAIN_TWO_HEADS judges an epoch against the chains installed for it; an epoch nobody reports
  installing is not judged.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

SKEW_MS, WEDGE_MS, VIEW_STALE_MS = 2_000, 10_000, 10_000


@dataclass
class _Replica:
    epoch: int = 0
    pos: int = 0
    known: bool = False
    top: int = 0  # the highest epoch reported, this incarnation
    wedged: int | None = None
    chain: tuple[str, ...] | None = None  # the view it installed last


@dataclass
class _Facts:
    found: set[str] = field(default_factory=set)
    chains: dict[int, set[tuple[str, ...]]] = field(default_factory=lambda: defaultdict(set))
    first_chain: dict[int, tuple[str, ...]] = field(default_factory=dict)
    places: dict[int, set[tuple[int, int]]] = field(default_factory=lambda: defaultdict(set))
    digests: dict[tuple[int, int], set[str]] = field(default_factory=lambda: defaultdict(set))
    writers: dict[int, set[str]] = field(default_factory=lambda: defaultdict(set))


def _streams(events: list[dict[str, Any]], facts: _Facts) -> None:
    """The rules that read one replica in seq order (4.6: no clocks)."""
    found = facts.found
    last: dict[tuple[str, int], int] = {}
    state: dict[tuple[str, int], _Replica] = defaultdict(_Replica)
    for ev in sorted(events, key=lambda e: (e["node"], e["incarnation"], e["seq"])):
        key = (ev["node"], ev["incarnation"])
        r = state[key]
        if key in last and ev["seq"] != last[key] + 1:
            r.known = False  # a gap: not judged until a heartbeat re-synchronises it
        last[key] = ev["seq"]
        kind = ev["type"]
        if kind == "chain.heartbeat":
            if ev["epoch"] < r.top:
                found.add("CHAIN_EPOCH_REGRESSION")
            r.top = max(r.top, ev["epoch"])
            if not r.known:
                r.epoch, r.pos, r.known = ev["epoch"], ev["pos"], True
        elif kind == "chain.view" and ev["outcome"] == "installed":
            chain = tuple(ev["chain"])
            if ev["epoch"] < r.top:
                found.add("CHAIN_EPOCH_REGRESSION")
            if r.known and (ev["from_epoch"] != r.epoch or ev["epoch"] <= ev["from_epoch"] or ev["pos"] != r.pos + 1):
                found.add("CHAIN_VIEW_NOT_CAS")
            if r.chain is not None and r.epoch > 0:
                new = [m for m in chain if m not in r.chain]
                kept = [i for i, m in enumerate(chain) if m in r.chain]
                if new and kept and min(chain.index(m) for m in new) < max(kept):
                    found.add("CHAIN_ADD_NOT_AT_TAIL")
            if ev["epoch"] > 0:
                facts.chains[ev["epoch"]].add(chain)
                facts.first_chain.setdefault(ev["epoch"], chain)
                facts.places[ev["epoch"]].add((ev["pos"], ev["from_epoch"]))
            r.top = max(r.top, ev["epoch"])
            r.epoch, r.pos, r.known, r.chain = ev["epoch"], ev["pos"], True, chain
            if r.wedged is not None and ev["epoch"] > r.wedged:
                r.wedged = None
        elif kind == "chain.wedge":
            r.wedged = ev["epoch"]
        elif kind == "chain.append" and ev["outcome"] == "accepted":
            assumed = (ev["assumed"]["epoch"], ev["assumed"]["pos"])
            if ev["origin"] == "client":
                facts.writers[ev["epoch"]].add(ev["node"])
            if r.known and ev["epoch"] < r.epoch:
                found.add("CHAIN_STALE_EPOCH_WRITE")
            elif r.known and (assumed != (r.epoch, r.pos) or ev["pos"] != assumed[1] + 1
                              or ev["epoch"] != assumed[0]):
                found.add("CHAIN_APPEND_NOT_CAS")
            if r.wedged is not None and ev["epoch"] == r.wedged:
                found.add("CHAIN_WEDGED_WRITE")
            if "digest" in ev:
                facts.digests[(ev["epoch"], ev["pos"])].add(ev["digest"])
            end = ev["pos"] + ev["count"] - 1
            r.epoch = max(r.epoch, ev["epoch"]) if r.known else ev["epoch"]
            r.pos, r.known = end, True


def _sets(facts: _Facts) -> None:
    """Set facts, order-free (4.6)."""
    found = facts.found
    if any(len(c) > 1 for c in facts.chains.values()):
        found.add("CHAIN_VIEW_CONFLICT")
    if any(len(p) > 1 for p in facts.places.values()) or any(len(d) > 1 for d in facts.digests.values()):
        found.add("CHAIN_LOG_DIVERGENCE")
    for epoch, nodes in facts.writers.items():
        heads = {c[0] for c in facts.chains.get(epoch, ())}
        if epoch > 0 and heads and (len(nodes) > 1 or not nodes <= heads):
            found.add("CHAIN_TWO_HEADS")


def _liveness(events: list[dict[str, Any]], end: int | None) -> set[str]:
    """CHAIN_WEDGE_NOT_REPLACED, CHAIN_LEASE_EXPIRED, CHAIN_VIEW_STALE in event time, on
    ``now - skew``; ``end``: an outside clock after the last event (4.5: the wedge also fires
    with no input)."""
    found: set[str] = set()
    top, members = 0, ()
    wedges: dict[int, int] = {}  # epoch -> first wedge time
    renewed: dict[str, tuple[int, int]] = {}  # node -> (last renewal, ttl_ms)

    def evaluate(now: int) -> None:
        if any(now - SKEW_MS - w >= WEDGE_MS for w in wedges.values()):
            found.add("CHAIN_WEDGE_NOT_REPLACED")
        for m in members:
            if m in renewed:
                r, ttl = renewed[m]
                if now - SKEW_MS - r > ttl:
                    found.add("CHAIN_LEASE_EXPIRED")
                if now - SKEW_MS - (r + ttl) >= VIEW_STALE_MS:
                    found.add("CHAIN_VIEW_STALE")

    for ev in sorted(events, key=lambda e: e["ts_ms"]):
        t = ev["ts_ms"]
        evaluate(t)
        if ev["type"] == "chain.view" and ev["outcome"] == "installed":
            if ev["epoch"] > top:
                top, members = ev["epoch"], tuple(ev["chain"])
            wedges = {e: w for e, w in wedges.items() if e >= ev["epoch"]}
        elif ev["type"] == "chain.wedge" and ev["epoch"] >= top:
            wedges.setdefault(ev["epoch"], t)
        elif ev["type"] == "chain.heartbeat":
            renewed[ev["node"]] = (t, ev["ttl_ms"])
    if end is not None:
        evaluate(end)
    return found


def _group(events: list[dict[str, Any]], info: bool, end: int | None) -> set[str]:
    facts = _Facts()
    _streams(events, facts)
    _sets(facts)
    found = facts.found | _liveness(events, end)
    if info and facts.chains:
        found.add("CHAIN_VIEW_INSTALLED")
    return found


def check(events: Iterable[dict[str, Any]], *, info: bool = False, end: int | None = None) -> dict[str, set[str]]:
    """Alert kinds each group's history contains: {group: {KIND, ...}}; ``end``: evaluate the
    wedges and leases once more at this outside time."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for ev in events:
        groups[ev["group"]].append(ev)
    return {g: _group(evs, info, end) for g, evs in groups.items()}
