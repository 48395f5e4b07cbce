"""One simulated Postgres multimaster group: mtm's generations, tick by tick.

What it models (docs/families.md 2.1; the multimaster note of docs/sources.md, seed "The voting
procedure", "Generation switching procedure", "Walreceiver", "Liveness."):

* **Voting.** A node that can never be online in its current generation (DEAD), or that is ONLINE
  while the nodes it can reach miss a member, campaigns after a short random delay
  (``CampaignMyself``): it proposes ``current_gen.members & clique + me`` numbered
  ``last_vote.num + 1`` and votes for it itself. Each reachable configured node answers as
  ``HandleGenVoteRequest`` does: the same proposal again is a silent re-grant, a number not above
  its ``last_vote`` is VoteGenNumTooLow (the campaigner then bumps its ``last_vote``,
  ``CampaignTour``), a proposal adding a node other than the candidate is refused, anything else is
  granted. With a majority of ``configured`` the donors are the voters with the highest
  ``last_online_in`` (kept to the proposal's members; with none, the campaign is dropped).
* **Switching** (``MtmConsiderGenSwitch``): the campaigner and every node it reaches take the new
  generation; nodes also learn a higher generation from any peer they reach. A donor member of a
  quorum generation whose ``last_vote`` is not above it goes ONLINE, another member RECOVERY,
  anyone else DEAD.
* **Recovery** to ParallelSafe: a RECOVERY node streams from a donor ONLINE in its generation and,
  a few seconds later, applies PS<n> and goes ONLINE (``MtmHandleParallelSafe``).
* **Transactions**: an ONLINE coordinator stamps an xact with its generation; it commits only
  when every member of that generation is reachable and ONLINE in it (PREPARED acks from all
  members, `commit.c`), else it aborts. Only the gids with ``crc32(gid) % xact_sample == 0`` are
  published (``gen.xact``), by every node that took part.
* **Heartbeats** every ``heartbeat_ms``; node restarts (a new incarnation that loads its state).

Fault scripts (``faults.py``) drive the same machinery through a few hooks that are inert in a
clean run: a report tampered with, a node that goes ONLINE anyway, the donors of a campaign, a
campaign won and held back, a blocked recovery stream, paused or faulty transactions.

Every event is published after the change it reports, with the node's next ``seq`` (duty 1 of
docs/families.md 1.2), so a node's seq order is the order of its state changes. Everything random
comes from the group's own seeded ``random.Random`` and every time from the tick clock, so a run
is reproducible to the byte.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from replimon.producers.fleet_run import Scripted, Wait
from replimon.producers.simulator_gen.model import Emit, Gen, GenNode, majority

NODE_STATUS = {"ONLINE": "online", "RECOVERY": "recovery", "DEAD": "disabled"}


class GenGroupSim(Scripted):
    """A group of configured mtm nodes (module docstring)."""

    def __init__(self, name: str, n: int, *, seed: int, tick_ms: int, heartbeat_ms: int,
                 xacts_per_s: float, xact_sample: int, restart_every_s: float, base_ms: int,
                 emit: Emit) -> None:
        self.name = name
        self.rng = random.Random(f"replimon-sim-gen/{seed}/{name}")
        self.tick_ms = tick_ms
        self.heartbeat_ms = heartbeat_ms
        self.xacts_per_s = xacts_per_s
        self.xact_sample = xact_sample
        self.restart_every_s = restart_every_s
        self.base_ms = base_ms
        self.emit = emit
        self.t = 0
        self.events = 0
        self.xact_credit = 0.0
        self.quiet = False  # a fault script runs: no background restarts
        self.scripts: list[tuple[Iterator[Wait], Wait]] = []
        self.referee: str | None = None
        # what fault scripts (faults.py) read and set; all inert in a clean run
        self.elected: dict[int, tuple[Gen, tuple[str, ...]]] = {}  # num -> (gen, first donors)
        self.xacts_paused = False
        self.stream_blocked_until = 0  # no recovery stream reaches ParallelSafe before this
        self.tamper: dict[str, Callable[[dict[str, Any]], dict[str, Any] | None]] = {}
        self.donors_override: tuple[str, ...] | None = None  # the next campaign's donors
        self.online_anyway: str | None = None  # this node goes ONLINE at its next switch
        self.held: tuple[GenNode, Gen, tuple[str, ...]] | None = None  # a campaign won, untold
        ids = tuple(f"n{i}" for i in range(1, n + 1))
        self.configured = ids
        first = Gen(1, ids, ids)  # seed "The voting procedure": generation 1 holds every node
        self.nodes: dict[str, GenNode] = {
            i: GenNode(i, clock_offset_ms=self.rng.randint(-40, 40),
                       hb_phase_ms=self.rng.randint(0, heartbeat_ms - 1), gen=first, donors=ids,
                       last_online_in=1, last_vote=first)
            for i in ids
        }
        self.elected[1] = (first, ids)
        for node in self.nodes.values():
            node.next_hb = node.hb_phase_ms
            self.publish_state(node, "load")

    # ------------------------------------------------------------------------------ publishing
    def publish(self, node: GenNode, type_: str, body: dict[str, Any]) -> None:
        event = {"v": 1, "type": type_, "group": self.name, "node": node.id,
                 "ts_ms": max(0, self.base_ms + self.t + node.clock_offset_ms), "seq": node.seq,
                 "incarnation": node.incarnation, **body}
        node.seq += 1
        self.events += 1
        if type_ == "gen.state" and node.id in self.tamper:
            changed = self.tamper[node.id](event)  # None: not the event the fault waits for
            if changed is not None:
                del self.tamper[node.id]
                event = changed
        self.emit(event)

    def publish_state(self, node: GenNode, cause: str, *, state: GenNode | None = None,
                      **extra: Any) -> None:
        """A ``gen.state`` of ``node`` reporting its state (or ``state``: a fault's stale copy)."""
        s = state or node
        self.publish(node, "gen.state", {
            "cause": cause, "gen": s.gen.to_json(), "donors": list(s.donors),
            "last_online_in": s.last_online_in, "last_vote": s.last_vote.to_json(),
            "status": s.status, **extra})

    def restart(self, node: GenNode, state: GenNode | None = None) -> None:
        """The node comes back as a new incarnation and loads its persisted state."""
        node.down_until = None
        node.incarnation += 1
        node.seq = 0
        node.next_hb = self.t + node.hb_phase_ms % self.heartbeat_ms
        self.publish_state(node, "load", state=state)

    def heartbeat(self, node: GenNode) -> None:
        status = NODE_STATUS[node.status] if self.has_quorum(node) else "isolated"
        suspects = [i for i in self.configured if i != node.id and not self.connected(node, self.nodes[i])]
        self.publish(node, "gen.heartbeat", {
            "gen_num": node.gen.num, "last_online_in": node.last_online_in,
            "last_vote_num": node.last_vote.num, "node_status": status, "suspects": suspects,
            "xact_sample": self.xact_sample})

    # ---------------------------------------------------------------------------- connectivity
    def connected(self, a: GenNode, b: GenNode) -> bool:
        return a is b or (a.reachable and b.reachable)

    def clique(self, node: GenNode) -> set[str]:
        return {i for i, other in self.nodes.items() if self.connected(node, other)} if node.up else set()

    def referee_vote(self, node: GenNode) -> int:
        """A 2-node cluster's referee grants its vote to one side while the other is unreachable
        (`state.h`: referee generations), the first that asks."""
        return 1 if len(self.configured) == 2 and self.referee == node.id else 0

    def has_quorum(self, node: GenNode) -> bool:
        return len(self.clique(node)) + self.referee_vote(node) >= majority(len(self.configured))

    def update_referee(self) -> None:
        if len(self.configured) != 2:
            return
        reachable = [i for i in self.configured if self.nodes[i].reachable]
        if len(reachable) == 2:
            self.referee = None
        elif self.referee not in reachable:
            self.referee = reachable[0] if reachable else None

    # -------------------------------------------------------------------------------- protocol
    def consider_switch(self, node: GenNode, gen: Gen, donors: tuple[str, ...]) -> None:
        """``MtmConsiderGenSwitch``: take a higher generation; ONLINE at once only as a donor."""
        if node.gen.num >= gen.num:
            return
        if node.last_vote.num < gen.num:
            node.last_vote = gen
        node.gen, node.donors = gen, donors
        node.recovery_from = node.recovery_done = None
        self.elected.setdefault(gen.num, (gen, donors))
        eligible = node.id in gen.members and gen.quorum and node.last_vote.num <= gen.num
        anyway = self.online_anyway == node.id  # a fault: ONLINE without being an eligible donor
        if anyway:
            self.online_anyway = None
        if anyway or (eligible and node.id in donors):
            node.last_online_in = gen.num  # writes ParallelSafe<gen> first, then persists
        self.publish_state(node, "switch")

    def handle_vote_request(self, voter: GenNode, proposal: Gen, candidate: str) -> int | None | str:
        """``HandleGenVoteRequest``: the voter's ``last_online_in`` when granted (or re-granted),
        ``"low"`` for VoteGenNumTooLow, None when refused."""
        if voter.last_vote == proposal:
            return voter.last_online_in  # already granted exactly this: nothing changes
        if proposal.num <= voter.last_vote.num:
            return "low"
        # seed "Liveness.": a voter accepts no new member other than the candidate itself
        if not set(proposal.members) - set(voter.gen.members) <= {candidate}:
            return None
        voter.last_vote = proposal
        self.publish_state(voter, "vote", vote={**proposal.to_json(), "candidate": candidate})
        return voter.last_online_in

    def wants_new_gen(self, node: GenNode) -> bool:
        if not node.reachable or not self.has_quorum(node):
            return False
        if node.status == "DEAD":
            return True
        return node.status == "ONLINE" and not set(node.gen.members) <= self.clique(node)

    def campaign(self, c: GenNode, members: tuple[str, ...] | None = None,
                 hold: bool = False) -> Gen | None:
        """``CampaignMyself`` then ``CampaignTour``, answered at once by every reachable node.
        Fault scripts may name the members, or ``hold`` the result (votes granted, nobody told);
        returns the generation won, if any."""
        clique = self.clique(c)
        if members is None:
            members = tuple(i for i in self.configured
                            if i == c.id or (i in clique and i in c.gen.members))
        proposal = Gen(c.last_vote.num + 1, members, self.configured)
        c.last_vote = proposal
        self.publish_state(c, "vote", vote={**proposal.to_json(), "candidate": c.id})
        votes = {c.id: c.last_online_in}
        too_low = 0
        for i in sorted(clique - {c.id}):
            voter = self.nodes[i]
            answer = self.handle_vote_request(voter, proposal, c.id)
            if answer == "low":
                too_low = max(too_low, voter.last_vote.num)
            elif isinstance(answer, int):
                votes[i] = answer
        if too_low:  # VoteGenNumTooLow: raise last_vote to the number refused with, retry later
            if too_low >= c.last_vote.num:
                c.last_vote = Gen(too_low, (), ())
                self.publish_state(c, "bump")
            return None
        if len(votes) + self.referee_vote(c) < majority(len(self.configured)):
            return None
        top = max(votes.values())
        donors = tuple(i for i in members if votes.get(i) == top)
        if self.donors_override is not None:
            donors, self.donors_override = self.donors_override, None
        if not donors:
            return None  # the most recent voter is not a member: let it campaign for itself
        if hold:
            self.held = (c, proposal, donors)
        else:
            self.announce(c, proposal, donors)
        return proposal

    def announce(self, c: GenNode, gen: Gen, donors: tuple[str, ...]) -> None:
        """CurrentGenIs: the campaigner and every node it reaches consider the new generation."""
        for i in [c.id, *sorted(self.clique(c) - {c.id})]:
            self.consider_switch(self.nodes[i], gen, donors)

    def learn(self, node: GenNode) -> None:
        """A node hears of a higher generation from a peer it reaches (CurrentGenIs, PREPARE,
        START_REPLICATION in the seed's list) and considers switching to it."""
        peers = [self.nodes[i] for i in sorted(self.clique(node) - {node.id})]
        if peers:
            best = max(peers, key=lambda p: p.gen.num)
            if best.gen.num > node.gen.num:
                self.consider_switch(node, best.gen, best.donors)

    def recover(self, node: GenNode) -> None:
        """RECOVERY: stream from an ONLINE donor of the generation until ParallelSafe<n>."""
        if node.status != "RECOVERY":
            node.recovery_from = node.recovery_done = None
            return
        source = self.nodes.get(node.recovery_from or "")
        if source is None or not self.connected(node, source) or source.gen.num != node.gen.num \
                or source.status != "ONLINE":
            node.recovery_from = node.recovery_done = None
            for d in node.donors:
                donor = self.nodes[d]
                if d != node.id and self.connected(node, donor) and donor.gen.num == node.gen.num \
                        and donor.status == "ONLINE":
                    node.recovery_from = d
                    node.recovery_done = self.t + self.rng.randint(1_000, 4_000)
                    break
            return
        if node.recovery_done is not None and self.t >= max(node.recovery_done, self.stream_blocked_until):
            node.last_online_in = node.gen.num
            node.recovery_from = node.recovery_done = None
            self.publish_state(node, "online", via="parallel_safe", source=source.id)

    # ------------------------------------------------------------------------------ xacts
    def xact(self, coord: GenNode, sampled: bool = False, abort: bool = False,
             fault: str | None = None) -> str:
        """One two-phase transaction coordinated by an ONLINE node (module docstring); fault
        scripts may ask for a published one (``sampled``), an abort before precommit, or a fault:
        ``divergent`` (a replica aborts what the coordinator commits), ``unprepared`` (the commit
        lists one member less in ``prepared_by``). Returns the gid."""
        gen = coord.gen
        while True:
            coord.xid += 1
            gid = f"MTM-{coord.id.lstrip('n')}-{coord.xid}-{gen.num}"
            if not sampled or zlib.crc32(gid.encode()) % max(self.xact_sample, 1) == 0:
                break
        at = {"num": gen.num, "status": "ONLINE"}
        ready = [self.nodes[i] for i in gen.members if i != coord.id
                 and self.connected(coord, self.nodes[i]) and self.nodes[i].gen.num == gen.num
                 and self.nodes[i].status == "ONLINE"]
        commit = len(ready) == len(gen.members) - 1 and not abort
        if not self.xact_sample or zlib.crc32(gid.encode()) % self.xact_sample:
            return gid  # not sampled: the transaction happens, nobody publishes it
        base = {"gid": gid, "xgen": gen.num}
        self.publish(coord, "gen.xact", {**base, "phase": "prepared", "role": "coordinator",
                                         "at": at, "xmembers": list(gen.members)})
        for r in ready:
            self.publish(r, "gen.xact", {**base, "phase": "prepared", "role": "replica",
                                         "mode": "normal", "at": at})
        if commit:
            acks = [i for i in gen.members if not (fault == "unprepared" and i == gen.members[-1])]
            self.publish(coord, "gen.xact", {**base, "phase": "committed", "role": "coordinator",
                                             "prepared_by": acks, "xmembers": list(gen.members)})
        else:
            self.publish(coord, "gen.xact", {**base, "phase": "aborted", "role": "coordinator",
                                             "xmembers": list(gen.members)})
        outcome = "committed" if commit else "aborted"
        for r in ready:
            wrong = fault == "divergent" and r is ready[-1]
            self.publish(r, "gen.xact", {**base, "phase": "aborted" if wrong else outcome,
                                         "role": "replica", "mode": "normal"})
        return gid

    # ---------------------------------------------------------------------------- fault scripts

    # ------------------------------------------------------------------------------- the tick
    def settled(self) -> bool:
        """Every node up and ONLINE in one generation (when a background restart may happen)."""
        nums = {n.gen.num for n in self.nodes.values()}
        return len(nums) == 1 and all(n.up and n.status == "ONLINE" for n in self.nodes.values())

    def restarts(self, t: int) -> None:
        for node in self.nodes.values():
            if node.down_until is not None and t >= node.down_until:
                self.restart(node)
        every = self.restart_every_s * 1000
        if not self.quiet and every > 0 and self.settled() \
                and self.rng.random() < self.tick_ms / every:
            self.crash(self.nodes[self.rng.choice(self.configured)], self.rng.randint(1_000, 3_000))

    def crash(self, node: GenNode, ms: int) -> None:
        node.down_until = self.t + ms
        node.campaign_at = None
        node.recovery_from = node.recovery_done = None

    def tick(self, t: int) -> None:
        self.t = t
        self._run_scripts()
        self.restarts(t)
        for node in self.nodes.values():
            if node.isolated_until is not None and t >= node.isolated_until:
                node.isolated_until = None
        self.update_referee()
        for i in self.configured:
            if self.nodes[i].up:
                self.learn(self.nodes[i])
        for i in self.configured:
            if self.nodes[i].up:
                self.recover(self.nodes[i])
        self.campaigns(t)
        self.xacts()
        for i in self.configured:
            node = self.nodes[i]
            if node.up and t >= node.next_hb:
                self.heartbeat(node)
                node.next_hb += self.heartbeat_ms

    def campaigns(self, t: int) -> None:
        ready = []
        for i in self.configured:
            node = self.nodes[i]
            if not self.wants_new_gen(node):
                node.campaign_at = None
            elif node.campaign_at is None:
                node.campaign_at = t + self.rng.randint(300, 1_500)
            elif node.campaign_at <= t:
                ready.append(node)
        if ready:  # one campaign at a time: the others hear of its result first
            c = min(ready, key=lambda n: (n.campaign_at, n.id))
            c.campaign_at = None
            self.campaign(c)

    def xacts(self) -> None:
        self.xact_credit += self.xacts_per_s * self.tick_ms / 1000
        while self.xact_credit >= 1:
            self.xact_credit -= 1
            online = [n for i, n in self.nodes.items() if n.reachable and n.status == "ONLINE"]
            if online and not self.xacts_paused:
                self.xact(self.rng.choice(online))
