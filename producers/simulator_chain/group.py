"""One simulated chain-replication group: replicas, an etcd-like view manager, tick by tick.

What it models (docs/families.md 4.1; the chain notes of docs/sources.md, cstorey/chain-replication-experiment
`views.rs`, `etcd.rs`, `store.rs`):

* **The view manager** keeps its state in an etcd-like store whose revision grows at every write
  (slot creations, lease renewals, views). Each replica holds a TTL slot (``ttl_ms``, 2 s), renewed
  every TTL/2; the view is the live slots in creation order (`etcd.rs` ``create_in_order``), so a
  new replica joins at the tail. A view is written with the store's revision as its epoch: epochs
  grow strictly, not by 1. A slot that expires, or whose replica a wedged replica reports as
  suspect (the lease is revoked), makes a new view; so does a wedge with nothing to remove (the
  same chain under a higher epoch).
* **The head adopts** a view in which it is head (`views.rs`): ``viewChanged(assumed, next)``,
  accepted iff ``assumed`` is its epoch, writing a ``ViewChange`` entry at ``pos + 1``
  (``chain.view``).
* **Appends** flow down the chain: each replica sends its successor what it lacks, in runs of one
  epoch, with the successor's ``(epoch, pos)`` as the CAS precondition (``chain.append``,
  ``origin: upstream``); a ``ViewChange`` entry is installed by the successor as it is applied. An
  entry goes from the head to the tail within a tick, and the tail's acknowledgement back up
  (``stable``). A successor whose log is not a prefix of the sender's answers ``bad_sequence``.
* **Client writes** are accepted by the head of the current view (``origin: client``), a run per
  tick, while it is not wedged.
* **Wedging.** A replica suspects a neighbour it has not heard from for ``DETECT_MS``. Suspecting
  its downstream, it wedges its epoch and so does every replica upstream of it (reason
  ``command``: the shard is wedged so that the head stops taking writes); the head's successor
  suspecting the head wedges too. A wedged replica rejects data of its epoch (``wedged``). The
  view manager then installs a higher epoch without the suspect. (A replica that suspects an
  upstream that is not the head does not wedge: it would reject the very entries of that epoch
  it must receive from its new upstream before the next view change can pass its CAS.)
* **Crashes** lose the store. The replica never comes back under its id (duty 2): after 1-3 s a
  new replica with a new id boots, with its default epoch-0 self-view, takes a slot, is added at
  the tail and is sent the whole log (every ``ViewChange`` in it is installed as it is applied).
  A replica that finds its slot gone while alive (it was cut off, or wrongly suspected) wipes its
  store and rejoins the same way.
* **Heartbeats** follow each renewal, every second, with ``ttl_ms``.

Fault scripts (``faults.py``) drive the same machinery through hooks that are inert in a clean
run. Every event is published with the replica's next ``seq`` right after the change it reports
(duty 1 of docs/families.md 1.2: a run is published before anything that follows it). Everything
random comes from the group's seeded ``random.Random`` and every time from the tick clock.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from replimon.producers.fleet_run import Scripted, Wait
from replimon.producers.simulator_chain.model import Emit, Entry, Replica, digest

DETECT_MS = 500  # a replica suspects a neighbour it has not heard from for this long
VM_DELAY_MS = (200, 400)  # the view manager acts on a wedge report after this long
REJOIN_MS = (1_000, 3_000)  # a crashed replica's replacement boots this long after its view left it


class ChainGroupSim(Scripted):
    """A group of chain replicas and its view manager (module docstring)."""

    def __init__(self, name: str, n: int, *, seed: int, tick_ms: int, heartbeat_ms: int, ttl_ms: int,
                 writes_per_s: float, crash_every_s: float, base_ms: int, emit: Emit) -> None:
        self.name = name
        self.rng = random.Random(f"replimon-sim-chain/{seed}/{name}")
        self.tick_ms, self.heartbeat_ms, self.ttl_ms = tick_ms, heartbeat_ms, ttl_ms
        self.writes_per_s, self.crash_every_s = writes_per_s, crash_every_s
        self.base_ms = base_ms
        self.emit = emit
        self.t = 0
        self.events = 0
        self.writes = 0
        self.credit = 0.0
        self.quiet = False
        self.scripts: list[tuple[Iterator[Wait], Wait]] = []
        # the view manager's etcd: revision, slots (node -> [order, last renewal]), the view
        self.revision = 0
        self.slots: dict[str, list[float]] = {}
        self.view_epoch = 0
        self.view_chain: tuple[str, ...] = ()
        self.epochs: list[int] = []  # every epoch the view manager wrote
        self.chain_of: dict[int, tuple[str, ...]] = {}  # each of those epochs' chain
        self.wedge_seen: int | None = None  # when the view manager heard of a wedge of its epoch
        self.suspects: set[str] = set()
        self.rejoins: list[tuple[int, str]] = []  # (not before, crashed replica) to replace
        self.nodes: dict[str, Replica] = {}
        self.next_host = 1
        # what fault scripts (faults.py) read and set; all inert in a clean run
        self.paused = False  # no client writes
        self.vm_stalled_until = 0  # the view manager does nothing before this
        self.vm_grace: dict[str, int] = {}  # node -> extra time before its expired slot is acted on
        self.hb_blocked: dict[str, int] = {}  # node -> its heartbeater is blocked until
        self.hb_jitter: dict[str, tuple[int, int]] = {}  # node -> (extra ms per renewal, until)
        self.hb_tamper: dict[str, dict[str, Any]] = {}  # node -> fields of its next heartbeat
        self.suspicion: dict[tuple[str, str], int] = {}  # (replica, neighbour) -> suspected since
        self.stale_writers: set[str] = set()  # nodes a stale client-proxy still writes to
        self.accept_stale: set[str] = set()  # accept data of an epoch below theirs (fault)
        self.accept_wedged: set[str] = set()  # accept data of their wedged epoch (fault)
        self.drop: dict[str, int] = {}  # node -> entries of its next delivery lost on the way
        self.over_hole: set[str] = set()  # install a view change over a lost entry (fault)
        self.resend: dict[str, int] = {}  # node -> its next delivery starts this many entries back
        self.accept_resend: set[str] = set()  # accept that resend, overwriting (fault)
        self.corrupt: set[str] = set()  # store the next single data entry with another digest (fault)
        self.view_tamper: set[str] = set()  # install the next view with itself moved after the head (fault)
        self.hold: dict[str, int] = {}  # node -> receives nothing until
        self.misplace_next = False  # the next new slot is ordered right after the head (fault)
        self.force_view = False  # the view manager writes the same chain under a new epoch
        for _ in range(n):
            self.boot(self.new_host())

    # ------------------------------------------------------------------------------ publishing
    def publish(self, r: Replica, type_: str, body: dict[str, Any]) -> None:
        event = {"v": 1, "type": type_, "group": self.name, "node": r.id,
                 "ts_ms": max(0, self.base_ms + self.t + r.clock_offset_ms), "seq": r.seq,
                 "incarnation": r.incarnation, **body}
        r.seq += 1
        self.events += 1
        self.emit(event)

    def publish_view(self, r: Replica, from_epoch: int, epoch: int, chain: tuple[str, ...], pos: int,
                     reason: str | None = None) -> None:
        body: dict[str, Any] = {"from_epoch": from_epoch, "epoch": epoch, "chain": list(chain), "pos": pos,
                                "outcome": "installed" if reason is None else "rejected"}
        if reason is not None:
            body["reason"] = reason
        self.publish(r, "chain.view", body)

    def publish_run(self, r: Replica, origin: str, assumed: tuple[int, int], run: list[Entry], pos: int,
                    outcome: str = "accepted") -> None:
        body: dict[str, Any] = {"assumed": {"epoch": assumed[0], "pos": assumed[1]}, "epoch": run[0].epoch,
                                "pos": pos, "count": len(run), "origin": origin, "outcome": outcome}
        if len(run) == 1:
            body["digest"] = run[0].digest
        self.publish(r, "chain.append", body)

    def heartbeat(self, r: Replica) -> None:
        body: dict[str, Any] = {"epoch": r.epoch, "chain": list(r.chain), "wedged": r.is_wedged(), "pos": r.pos}
        if r.stable is not None:
            body["stable"] = r.stable
        body["ttl_ms"] = self.ttl_ms
        body["status"] = "active" if r.epoch > 0 and r.id in r.chain else "joining"
        body.update(self.hb_tamper.pop(r.id, {}))
        self.publish(r, "chain.heartbeat", body)

    # --------------------------------------------------------------------------- membership
    def new_host(self) -> Replica:
        node = f"n{self.next_host}"
        self.next_host += 1
        r = Replica(node, clock_offset_ms=self.rng.randint(-40, 40),
                    hb_phase_ms=self.rng.randint(0, self.heartbeat_ms - 1))
        self.nodes[node] = r
        return r

    def boot(self, r: Replica) -> None:
        """An empty replica starts: its default self-view (the seed: "a default containing self"),
        a slot in the view manager's store, a first heartbeat."""
        r.chain = (r.id,)
        self.publish_view(r, 0, 0, r.chain, 0)
        self.revision += 1
        order = float(self.revision)
        if self.misplace_next and self.view_chain:
            self.misplace_next = False
            head = self.slots.get(self.view_chain[0])
            after = [s[0] for k, s in self.slots.items() if k != self.view_chain[0] and head and s[0] > head[0]]
            if head is not None and after:
                order = (head[0] + min(after)) / 2
        self.slots[r.id] = [order, float(self.t)]
        self.heartbeat(r)
        r.next_hb = self.t + r.hb_phase_ms + 1

    def replace(self, r: Replica) -> Replica:
        """``r`` is gone for good; a new empty replica with a new id boots in its place."""
        r.gone = True
        self.slots.pop(r.id, None)
        new = self.new_host()
        self.boot(new)
        return new

    def crash(self, r: Replica) -> None:
        r.down_at = self.t
        self.rejoins.append((self.t + self.rng.randint(*REJOIN_MS), r.id))

    def members(self) -> list[Replica]:
        return [self.nodes[m] for m in self.view_chain]

    def head(self) -> Replica | None:
        return self.nodes[self.view_chain[0]] if self.view_chain else None

    def settled(self) -> bool:
        """The view manager's view installed by every member, all up and caught up, nothing
        wedged, suspected, cut off or waiting to rejoin."""
        live = [r for r in self.nodes.values() if r.up]
        head = self.head()
        return (head is not None and len(live) == len(self.view_chain) and not self.rejoins
                and self.wedge_seen is None and all(
                    r.id in self.view_chain and r.epoch == self.view_epoch and not r.is_wedged()
                    and r.cut_at is None and r.pos == head.pos for r in live))

    # --------------------------------------------------------------------------- view manager
    def view_manager(self) -> None:
        if self.t < self.vm_stalled_until:
            return
        for node, (_, last) in list(self.slots.items()):
            if self.t - last > self.ttl_ms + self.vm_grace.get(node, 0):
                del self.slots[node]  # the lease ran out
        if self.wedge_seen is None and any(r.up and r.wedged == self.view_epoch for r in self.members()):
            self.wedge_seen = self.t + self.rng.randint(*VM_DELAY_MS)
        force = self.force_view or (self.wedge_seen is not None and self.t >= self.wedge_seen)
        self.force_view = False
        if force:
            for s in self.suspects:
                self.slots.pop(s, None)  # a suspect's lease is revoked
            self.suspects.clear()
            self.wedge_seen = None
        chain = tuple(sorted(self.slots, key=lambda k: self.slots[k][0]))
        if chain and (chain != self.view_chain or force):
            self.revision += 1
            self.view_epoch, self.view_chain = self.revision, chain
            self.epochs.append(self.revision)
            self.chain_of[self.revision] = chain
        self.adopt()

    def adopt(self) -> None:
        """The head's view proxy: ``viewChanged(assumed, next, view)`` (`views.rs`: only the head
        stores a view change)."""
        head = self.head()
        if head is None or not head.up or head.cut_at is not None or head.epoch >= self.view_epoch:
            return
        entry = Entry(self.view_epoch, "view", chain=self.view_chain, from_epoch=head.epoch)
        self.install(head, entry)

    def install(self, r: Replica, entry: Entry) -> None:
        chain = entry.chain
        if r.id in self.view_tamper and len(chain) > 2 and r.id in chain and chain.index(r.id) > 1:
            self.view_tamper.discard(r.id)
            chain = (chain[0], r.id, *[m for m in chain[1:] if m != r.id])
        from_epoch = r.epoch
        r.log.append(entry)
        r.epoch, r.chain = entry.epoch, chain
        if r.wedged is not None and r.wedged < r.epoch:
            r.wedged = None
        self.publish_view(r, from_epoch, entry.epoch, chain, r.pos)

    # ------------------------------------------------------------------------------- wedging
    def unreachable_since(self, r: Replica, x: str) -> int | None:
        hooked = self.suspicion.get((r.id, x))
        other = self.nodes.get(x)
        if other is None or other.gone:
            return hooked
        if other.down_at is not None:
            return other.down_at if hooked is None else min(hooked, other.down_at)
        return hooked

    def wedge(self, r: Replica, reason: str, suspect: str | None = None) -> None:
        r.wedged = r.epoch
        body: dict[str, Any] = {"epoch": r.epoch, "reason": reason}
        if suspect is not None:
            body["suspect"] = suspect
        self.publish(r, "chain.wedge", body)

    def detect(self) -> None:
        for r in self.members():
            if not r.up or r.cut_at is not None or r.is_wedged() or r.epoch != self.view_epoch:
                continue
            i = r.chain.index(r.id) if r.id in r.chain else -1
            if i < 0:
                continue
            neighbours = [(r.chain[i + 1], "downstream")] if i + 1 < len(r.chain) else []
            if i == 1:
                neighbours.append((r.chain[0], "upstream"))
            for x, side in neighbours:
                since = self.unreachable_since(r, x)
                if since is None or self.t - since < DETECT_MS:
                    continue
                self.wedge(r, f"suspect_{side}", x)
                self.suspects.add(x)
                if side == "downstream":
                    for u in reversed(r.chain[:i]):
                        up = self.nodes[u]
                        if up.up and up.cut_at is None and not up.is_wedged() and up.epoch == r.epoch:
                            self.wedge(up, "command")
                break

    # -------------------------------------------------------------------------------- appends
    def client_writes(self) -> None:
        self.credit = min(self.credit + self.writes_per_s * self.tick_ms / 1000, 5.0)
        for node in sorted(self.stale_writers):  # a client-proxy that has not seen the newer view
            r = self.nodes[node]
            if r.up and r.is_head() and not r.is_wedged() and r.id != self.view_chain[0] and self.t % 300 == 0:
                self.accept_client(r, 2)
        head = self.head()
        if self.paused or head is None or not head.up or not head.is_head() or head.is_wedged() \
                or head.epoch != self.view_epoch or self.credit < 1:
            return
        k = int(self.credit)
        self.credit -= k
        self.accept_client(head, k)

    def accept_client(self, r: Replica, k: int) -> None:
        run = []
        for _ in range(k):
            self.writes += 1
            run.append(Entry(r.epoch, "data", digest=digest(f"{self.name}/{r.id}/{self.writes}/{self.rng.random()}")))
        assumed = (r.epoch, r.pos)
        r.log.extend(run)
        self.publish_run(r, "client", assumed, run, assumed[1] + 1)

    def forward(self) -> None:
        """Every replica sends its successor what it lacks, head to tail (stale heads first);
        then the tail's acknowledgement goes back up."""
        stale = [r for r in self.nodes.values() if r.up and r.id not in self.view_chain and r.is_head()]
        for r in [*stale, *self.members()]:
            succ = r.successor()
            s = self.nodes.get(succ) if succ else None
            if not r.up or s is None or not s.up or self.t < self.hold.get(s.id, 0):
                continue
            self.deliver(r, s)
        self.acks()

    def deliver(self, r: Replica, s: Replica) -> None:
        prefix = s.pos <= r.pos and (s.pos == 0 or s.log[s.pos - 1] == r.log[s.pos - 1])
        if not prefix:
            self.deliver_stale(r, s)
            return
        if self.resend.get(s.id) and self.deliver_resend(r, s, self.resend[s.id]):
            return
        i = s.pos
        lost = self.drop.get(s.id, 0)
        if lost and i + lost < r.pos and r.log[i + lost].kind == "view" \
                and all(e.kind == "data" for e in r.log[i:i + lost]):
            del self.drop[s.id]
            e = r.log[i + lost]
            if s.id not in self.over_hole:
                self.publish_view(s, s.epoch, e.epoch, e.chain, i + lost + 1, "BadSequence")
                return  # the upstream resets to the successor's position and resends next tick
            self.over_hole.discard(s.id)
            s.log.extend([Entry(0, "hole")] * lost)  # the store writes the view change past the hole
            i += lost
        while i < r.pos:
            e = r.log[i]
            if e.kind == "view":
                self.install(s, e)
                i += 1
                continue
            j = i
            while j < r.pos and r.log[j].kind == "data" and r.log[j].epoch == e.epoch:
                j += 1
            run = r.log[i:j]
            assumed = (s.epoch, s.pos)
            if s.is_wedged() and e.epoch == s.wedged and s.id not in self.accept_wedged:
                self.publish_run(s, "upstream", assumed, run, i + 1, "wedged")
                break
            s.log.extend(run)
            if len(run) == 1 and s.id in self.corrupt:  # the store reports another payload
                self.corrupt.discard(s.id)
                run = [Entry(e.epoch, "data", digest=digest(f"corrupt/{e.digest}"))]
            self.publish_run(s, "upstream", assumed, run, i + 1)
            i = j
        r.sent[s.id] = r.pos

    def deliver_resend(self, r: Replica, s: Replica, back: int) -> bool:
        """The upstream resends from ``back`` entries before the successor's position (a stale
        ``last_sent_pos``): the successor answers ``bad_sequence`` (or, a fault, overwrites)."""
        start = s.pos - back
        if start < 0 or s.pos >= r.pos or not all(
                e.kind == "data" and e.epoch == s.epoch for e in r.log[start:s.pos + 1]):
            return False
        del self.resend[s.id]
        run = r.log[start:r.pos]
        run = run[:next((j for j, e in enumerate(run) if e.kind != "data" or e.epoch != run[0].epoch), len(run))]
        assumed = (s.epoch, start)
        if s.id not in self.accept_resend:
            self.publish_run(s, "upstream", assumed, run, start + 1, "bad_sequence")
            return True  # the upstream resends from the right place next tick
        self.accept_resend.discard(s.id)
        del s.log[start:]
        s.log.extend(run)
        self.publish_run(s, "upstream", assumed, run, start + 1)
        return False

    def deliver_stale(self, r: Replica, s: Replica) -> None:
        """``r``'s log is not ``s``'s: ``r`` sends the entries it added since it last sent, and
        ``s`` answers ``bad_sequence`` (a stale head writing to the head of a newer view)."""
        start = r.sent.get(s.id, r.pos)
        r.sent[s.id] = r.pos
        i = start
        while i < r.pos:
            e = r.log[i]
            j = i + 1
            while j < r.pos and r.log[j].kind == "data" and e.kind == "data" and r.log[j].epoch == e.epoch:
                j += 1
            run = r.log[i:j]
            assumed = (r.log[i - 1].epoch if i else 0, i)
            if e.kind == "data" and s.id in self.accept_stale and e.epoch < s.epoch:
                self.accept_stale.discard(s.id)
                at = s.pos + 1
                s.log.extend(run)
                self.publish_run(s, "upstream", assumed, run, at)
            elif e.kind == "data":
                outcome = "wedged" if s.is_wedged() and e.epoch == s.wedged else "bad_sequence"
                self.publish_run(s, "upstream", assumed, run, i + 1, outcome)
            i = j

    def acks(self) -> None:
        """The tail acknowledges its position; each live link passes it up."""
        chain = self.members()
        ack: int | None = None
        for r in reversed(chain):
            if not r.up or r.epoch != self.view_epoch:
                break
            ack = r.pos if ack is None else min(ack, r.pos)
            r.stable = ack

    # ---------------------------------------------------------------------------- heartbeats
    def renewals(self) -> None:
        for r in list(self.nodes.values()):
            if not r.up or self.t < r.next_hb:
                continue
            extra, until = self.hb_jitter.get(r.id, (0, 0))
            r.next_hb += self.heartbeat_ms + (extra if self.t < until else 0)
            if r.cut_at is not None or self.t < self.hb_blocked.get(r.id, 0):
                continue  # the heartbeater cannot reach the view manager
            slot = self.slots.get(r.id)
            if slot is None:  # its lease is gone: it is out of the chain, and rejoins empty
                self.replace(r)
                continue
            self.revision += 1
            slot[1] = self.t
            self.heartbeat(r)

    def disturb(self) -> None:
        """Replacements of crashed replicas; background crashes, one at a time, only while the
        group is settled."""
        for item in list(self.rejoins):
            due, node = item
            if self.t >= due and node not in self.slots and node not in self.view_chain:
                self.rejoins.remove(item)
                self.replace(self.nodes[node])
        if self.quiet or self.crash_every_s <= 0 or not self.settled():
            return
        if self.rng.random() < self.tick_ms / (self.crash_every_s * 1000):
            self.crash(self.nodes[self.rng.choice(self.view_chain)])

    def tick(self, t: int) -> None:
        self.t = t
        self._run_scripts()
        self.disturb()
        self.detect()
        self.view_manager()
        self.client_writes()
        self.forward()
        self.renewals()
