"""One simulated replicated-log group: halon's replicas, Paxos legislatures and leases, tick by tick.

What it models (docs/families.md 3.1; halon's RFC 014 of docs/sources.md; halon's
`replicated-log/src/Control/Distributed/Log/Internal.hs`):

* **Decrees.** One proposer at a time passes decree ``(leg, num)`` in its legislature, proposing
  to its replica list as acceptors; it passes when a majority acks (`Quorum.hs` ``expectQuorum``)
  and is published as ``qlog.passed`` with the ackers. Every live replica then executes the
  decrees at its watermark in number order (``qlog.decree``): a decree of the replica's
  legislature or a newer one is executed; one of an older legislature is unreachable and skipped
  silently ("Skipping decree"); a Reconf is executed only if it opens a newer legislature, else
  ``skipped`` ("Not executing").
* **Leases.** The leader is the head of the replica list while the lease lasts (``getLeader``);
  taking or renewing the lease is itself a ``Reconf(leg + 1, me : others)``
  (``proposeLeaseRequest``), so every renewal opens a legislature with the same member set. The
  leader renews ``renew_ms`` before its lease ends and passes client values meanwhile; when a
  replica sees no leader it asks for the lease after a short random wait.
* **Delayed replicas** neither ack nor learn decrees for a while; one far behind catches up from
  other replicas' logs, executing teleported decrees without a legislature (Note
  [Teleportation]).
* **Restarts**: a new incarnation that keeps its persisted legislature and list ("we adopt the
  membership list with the highest legislature") and re-executes its log from its last snapshot
  (a lower watermark, the same values; the Reconfs are now ``skipped``: none opens a newer
  legislature than the adopted one).
* **Recover** (go/Recover): an operator's request served by a replica of the new membership. Its
  new hosts boot (a relocated one seeded with an old replica's state, a fresh one with the
  server's); once every acceptor of ``new`` is online it syncs (``prl_sync``, ``prl_query``) and
  proposes ``Reconf(leg + 1, new)`` with ``new`` as acceptors (``recovery: true``). Until then
  each attempt fails and the client retries.

Fault scripts (``faults.py``) drive the same machinery through a few hooks that are inert in a
clean run. Every event is published after the change it reports with the replica's next ``seq``
(duty 1 of docs/families.md 1.2). Everything random comes from the group's own seeded
``random.Random`` and every time from the tick clock, so a run is reproducible to the byte.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from replimon.producers.fleet_run import Scripted, Wait
from replimon.producers.simulator_qlog.model import Emit, Entry, Replica, Value, majority

TELEPORT_AFTER = 20  # a delayed replica further behind than this catches up by teleportation
REPLAY_PER_TICK = 10
SNAPSHOT_EVERY = 25
DETECTOR_MS = 5_000  # a replica suspects a peer it has not heard from for this long


@dataclass
class Recovery:
    """A Recover request being served by ``server`` (module docstring)."""

    server: Replica
    old: tuple[str, ...]
    leg: int
    new: tuple[str, ...]
    relocated: list[dict[str, str]]
    retry_ms: int = 10_000
    next_try: int = 0
    sync_partial: bool = False  # a fault: syncs with the acceptors online, not all of them
    extra: dict[str, Any] = field(default_factory=dict)


class QlogGroupSim(Scripted):
    """A group of halon replicas (module docstring)."""

    def __init__(self, name: str, n: int, *, seed: int, tick_ms: int, heartbeat_ms: int,
                 decrees_per_s: float, lease_ms: int, renew_ms: int, restart_every_s: float,
                 delay_every_s: float, base_ms: int, emit: Emit) -> None:
        self.name = name
        self.rng = random.Random(f"replimon-sim-qlog/{seed}/{name}")
        self.tick_ms, self.heartbeat_ms = tick_ms, heartbeat_ms
        self.decrees_per_s = decrees_per_s
        self.lease_ms, self.renew_ms = lease_ms, renew_ms
        self.restart_every_s, self.delay_every_s = restart_every_s, delay_every_s
        self.base_ms = base_ms
        self.emit = emit
        self.t = 0
        self.events = 0
        self.credit = 0.0
        self.quiet = False  # a fault script runs: no background crashes or delays
        self.scripts: list[tuple[Iterator[Wait], Wait]] = []
        self.ledger: dict[int, list[Entry]] = {}  # num -> passed decrees, in pass order
        self._top = 0  # the highest num in the ledger (0: none): `frontier` without a scan
        self.recovery: Recovery | None = None
        # what fault scripts (faults.py) read and set; all inert in a clean run
        self.paused = False  # nobody proposes
        self.lease_blocked_until = 0  # nobody asks for the lease before this
        self.forced: dict[tuple[str, int], Entry] = {}  # (replica, num) -> the entry it executes
        self.next_value: Value | None = None  # the leader's next client value
        self.hb_tamper: dict[str, dict[str, Any]] = {}  # replica -> fields of its next heartbeat
        ids = tuple(f"n{i}" for i in range(1, n + 1))
        self.next_host = n + 1
        self.nodes: dict[str, Replica] = {}
        for i in ids:
            r = Replica(i, clock_offset_ms=self.rng.randint(-40, 40),
                        hb_phase_ms=self.rng.randint(0, heartbeat_ms - 1), leg=1, members=ids, w=1)
            r.next_hb = r.hb_phase_ms
            self.nodes[i] = r
        self.nodes[ids[0]].lease_wait = heartbeat_ms  # the bootstrap leader asks first, once M(1) is published

    # ------------------------------------------------------------------------------ publishing
    def publish(self, r: Replica, type_: str, body: dict[str, Any]) -> None:
        event = {"v": 1, "type": type_, "group": self.name, "node": r.id,
                 "ts_ms": max(0, self.base_ms + self.t + r.clock_offset_ms), "seq": r.seq,
                 "incarnation": r.incarnation, **body}
        r.seq += 1
        self.events += 1
        self.emit(event)

    def heartbeat(self, r: Replica) -> None:
        leader = r.leader(self.t, self.lease_ms)
        status = "recovering" if r.recovering else "delayed" if r.delayed_until is not None else "active"
        body: dict[str, Any] = {"leg": r.leg, "members": list(r.members), "watermark": r.w}
        if leader is not None:
            body["leader"] = leader
        body["status"] = status
        body["suspects"] = [m for m in r.members if m != r.id and self.suspected(m)]
        body.update(self.hb_tamper.pop(r.id, {}))
        self.publish(r, "qlog.heartbeat", body)

    def suspected(self, node: str) -> bool:
        """A failure detector as XCom's: a peer down for ``DETECTOR_MS`` or more."""
        other = self.nodes.get(node)
        return other is None or (other.down_since is not None and self.t - other.down_since >= DETECTOR_MS)

    # -------------------------------------------------------------------------------- decrees
    def frontier(self) -> int:
        """The next free decree number: one past the highest passed."""
        return self._top + 1

    def propose(self, p: Replica, value: Value, *, num: int | None = None,
                acceptors: tuple[str, ...] | None = None, acked: list[str] | None = None,
                recovery: bool = False) -> Entry | None:
        """One round of ``p`` at ``(p.leg, num)``: passes with a majority of the acceptors that
        ack (the live ones, unless a fault names them); published as ``qlog.passed``."""
        num = p.w if num is None else num
        acceptors = p.members if acceptors is None else acceptors
        if acked is None:
            acked = [a for a in acceptors if a in self.nodes and self.nodes[a].live]
            if len(acked) < majority(len(acceptors)):
                return None
        p.ballot += 1
        entry = Entry(p.leg, num, value, p.id, self.t)
        self.ledger.setdefault(num, []).append(entry)
        self._top = max(self._top, num)
        self.publish(p, "qlog.passed", {
            "num": num, "leg": p.leg, "ballot": {"n": p.ballot, "proposer": p.id},
            "acceptors": list(acceptors), "acked": list(acked), **value.to_json(),
            "recovery": recovery})
        return entry

    def pick(self, r: Replica, num: int) -> Entry | None:
        """The decree ``r`` executes at ``num``: the first passed in its legislature or a newer
        one; older ones are unreachable (`Internal.hs`: "Skipping decree")."""
        forced = self.forced.pop((r.id, num), None)
        if forced is not None:
            return forced
        return next((e for e in self.ledger.get(num, ()) if e.leg >= r.leg), None)

    def execute(self, r: Replica, e: Entry, teleported: bool = False) -> None:
        """The execute branch: values are applied; a Reconf opening a newer legislature installs
        its list ("Reconfiguring"), another is ``skipped`` ("Not executing")."""
        v = e.value
        outcome = "executed"
        was_member = r.id in r.members
        if v.kind == "reconf":
            assert v.new_leg is not None
            if v.new_leg > r.leg:
                r.leg, r.members, r.lease_start = v.new_leg, v.members, e.t
            else:
                outcome = "skipped"
        r.executed[e.num] = (e, teleported, outcome)
        r.w = e.num + 1
        if r.w - r.snapshot >= SNAPSHOT_EVERY:
            r.snapshot = r.w
        self.publish_decree(r, e, teleported, outcome)
        if was_member and r.id not in r.members:
            r.retired = True  # removed from the group: the replica stops

    def publish_decree(self, r: Replica, e: Entry, teleported: bool, outcome: str) -> None:
        body: dict[str, Any] = {"num": e.num}
        if not teleported:
            body["leg"] = e.leg
        self.publish(r, "qlog.decree", {**body, **e.value.to_json(), "outcome": outcome})

    def learn(self, r: Replica) -> None:
        """Execute what ``r`` can: its replay first, then the decrees at its watermark."""
        if r.replay_to is not None:
            for _ in range(REPLAY_PER_TICK):
                done = r.executed.get(r.w)
                if r.w >= r.replay_to or done is None:
                    r.replay_to = None
                    break
                entry, teleported, outcome = done
                v = entry.value
                if v.kind == "reconf" and v.new_leg is not None and v.new_leg <= r.leg:
                    outcome = "skipped"  # it opens no newer legislature than the one adopted at start
                self.publish_decree(r, entry, teleported, outcome)
                r.w += 1
            else:
                return
        while r.up:
            e = self.pick(r, r.w)
            if e is None:
                r.teleport = False
                return
            self.execute(r, e, teleported=r.teleport)

    # -------------------------------------------------------------------------------- leases
    def leader(self) -> Replica | None:
        """The replica that holds a lease in its own view and can act on it."""
        for r in self.nodes.values():
            if r.live and r.leader(self.t, self.lease_ms) == r.id:
                return r
        return None

    def caught_up(self, r: Replica) -> bool:
        return r.live and r.w == self.frontier() and r.replay_to is None

    def proposals(self) -> None:
        if self.paused:
            return
        self.credit += self.decrees_per_s * self.tick_ms / 1000
        lead = self.leader()
        if lead is not None and self.caught_up(lead):
            for r in self.nodes.values():
                r.lease_wait = None
            assert lead.lease_start is not None
            if self.t - lead.lease_start >= self.lease_ms - self.renew_ms:
                self.propose(lead, Value.reconf(lead.leg + 1, lead.members))
            elif self.credit >= 1:
                self.credit = min(self.credit - 1, 3.0)
                value, self.next_value = self.next_value, None
                self.propose(lead, value or Value.values(f"{self.name}/{lead.w}/{self.rng.random()}"))
            return
        self.credit = min(self.credit, 3.0)
        if self.t < self.lease_blocked_until:
            return
        for r in sorted(self.nodes.values(), key=lambda x: x.lease_wait or 0):
            if not self.caught_up(r) or r.id not in r.members or r.leader(self.t, self.lease_ms) is not None:
                r.lease_wait = None
                continue
            if r.lease_wait is None:
                r.lease_wait = self.t + self.rng.randint(100, 1_000)
            elif r.lease_wait <= self.t:
                r.lease_wait = None
                self.propose(r, Value.reconf(r.leg + 1, (r.id, *[m for m in r.members if m != r.id])))
                return

    # ------------------------------------------------------------------------------- recover
    def new_host(self) -> Replica:
        """A host that recover spawns (booted by ``boot``)."""
        node = f"n{self.next_host}"
        self.next_host += 1
        r = Replica(node, clock_offset_ms=self.rng.randint(-40, 40),
                    hb_phase_ms=self.rng.randint(0, self.heartbeat_ms - 1), leg=0, members=(),
                    w=1, booted=False)
        self.nodes[node] = r
        return r

    def boot(self, r: Replica, seed_from: Replica) -> None:
        """The host comes up with ``seed_from``'s persisted state (legislature, list, log)."""
        r.booted = True
        r.leg, r.members, r.w = seed_from.leg, seed_from.members, seed_from.w
        r.snapshot = seed_from.snapshot
        r.next_hb = self.t + r.hb_phase_ms

    def start_recovery(self, server: Replica, new: tuple[str, ...], relocated: list[dict[str, str]],
                       **kw: Any) -> Recovery:
        rec = Recovery(server, server.members, server.leg, new, relocated, next_try=self.t, **kw)
        self.recovery = rec
        return rec

    def serve_recovery(self) -> None:
        rec = self.recovery
        if rec is None or self.t < rec.next_try or not rec.server.up:
            return
        s = rec.server
        base = {"leg": s.leg, "old": list(s.members), "new": list(rec.new), "relocated": rec.relocated}
        s.recovering = True
        self.publish(s, "qlog.recover", {"phase": "started", **base})
        online = [m for m in rec.new if self.nodes[m].live]
        if len(online) < len(rec.new) and not (rec.sync_partial and len(online) >= majority(len(rec.new))):
            self.publish(s, "qlog.recover", {"phase": "failed", **base})
            rec.next_try = self.t + rec.retry_ms
            return
        self.publish(s, "qlog.recover", {"phase": "synced", **base, "synced_with": online})
        for m in rec.new:  # prl_query: the new hosts are handed the decrees they miss
            if self.nodes[m].live:
                self.learn(self.nodes[m])
        self.learn(s)
        order = (s.id, *[m for m in rec.new if m != s.id])
        self.propose(s, Value.reconf(s.leg + 1, order), num=self.frontier(), acceptors=rec.new,
                     acked=online, recovery=True)
        s.recovering = False
        self.recovery = None

    # ---------------------------------------------------------------------------- fault scripts

    # ------------------------------------------------------------------------------ the tick
    def members(self) -> tuple[str, ...]:
        """The newest installed list."""
        return max((r for r in self.nodes.values() if r.up or r.down_until is not None),
                   key=lambda r: r.leg).members

    def settled(self) -> bool:
        """A leader, every member up, live and caught up, no recovery under way."""
        ms = self.members()
        lead = self.leader()
        return (lead is not None and self.recovery is None
                and all(self.caught_up(self.nodes[m]) and self.nodes[m].leg == lead.leg for m in ms))

    def crash(self, r: Replica, ms: int | None) -> None:
        """``ms`` None: lost for good."""
        if ms is None:
            r.lost = True
        else:
            r.down_until = self.t + ms
        r.down_since = self.t
        r.delayed_until = r.lease_wait = None
        r.recovering = False

    def restart(self, r: Replica) -> None:
        """A new incarnation: persisted legislature and list, re-executing from its snapshot."""
        r.down_until = r.down_since = None
        r.incarnation += 1
        r.seq = 0
        r.lease_start = None
        r.replay_to, r.w = r.w, r.snapshot
        r.next_hb = self.t  # it says it is back at once

    def disturb(self) -> None:
        """Background crashes and delays, one at a time, only when the group is settled."""
        for r in self.nodes.values():
            if r.down_until is not None and self.t >= r.down_until:
                self.restart(r)
            if r.delayed_until is not None and self.t >= r.delayed_until:
                r.delayed_until = None
                r.teleport = self.frontier() - r.w > TELEPORT_AFTER
        if self.quiet or not self.settled():
            return
        ms = self.members()
        for every, act in ((self.restart_every_s, "crash"), (self.delay_every_s, "delay")):
            if every > 0 and self.rng.random() < self.tick_ms / (every * 1000):
                r = self.nodes[self.rng.choice(ms)]
                if act == "crash":
                    self.crash(r, self.rng.randint(1_000, 3_000))
                else:
                    r.delayed_until = self.t + self.rng.randint(1_000, 8_000)
                return

    def tick(self, t: int) -> None:
        self.t = t
        self._run_scripts()
        self.disturb()
        self.serve_recovery()
        self.proposals()
        for r in self.nodes.values():
            if r.live:
                self.learn(r)
        for r in self.nodes.values():
            if r.up and t >= r.next_hb:
                self.heartbeat(r)
                r.next_hb += self.heartbeat_ms
