"""A batch reference checker of generations traces (test helper, not the product's monitor).

It reads a whole trace and names which alert conditions of docs/families.md 2.4 and 2.5 the
history contains, in the simplest way that is right with hindsight (the TLA invariants
LastVoteGECurrentGen, EachGenHasDonor, OrderOk and the rules built on them). It is how the tests
prove that a clean simulator run is clean and that each catalogued fault leaves the evidence of its
own kind and no other. Per-node rules read each node's events in seq order per incarnation;
set facts (members, commits, ParallelSafe sources) are judged over the whole trace.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

NO_ONLINE_MS, RECOVERY_STUCK_MS, VOTE_STUCK_MS, SILENT_MS = 15_000, 60_000, 30_000, 5_000
SKEW_MS = 2_000


def _quorum(members: list[str], configured: list[str]) -> bool:
    n = len(configured)
    return len(members) >= n // 2 + 1 or (n == 2 and len(members) == 1)


@dataclass
class _Node:
    last: dict[str, Any] | None = None  # previous report (gen.state or gen.heartbeat)
    top: dict[str, int] = field(default_factory=lambda: {"gen": 0, "vote": 0, "online": 0})
    full_vote: tuple[Any, ...] | None = None


def _numbers(ev: dict[str, Any]) -> dict[str, int]:
    if ev["type"] == "gen.state":
        return {"gen": ev["gen"]["num"], "vote": ev["last_vote"]["num"], "online": ev["last_online_in"]}
    return {"gen": ev["gen_num"], "vote": ev["last_vote_num"], "online": ev["last_online_in"]}


def _group(events: list[dict[str, Any]]) -> set[str]:
    found: set[str] = set()
    registry: dict[int, tuple[frozenset[str], frozenset[str]] | None] = {}
    xmembers: dict[int, frozenset[str]] = {}
    outcomes: dict[str, set[str]] = defaultdict(set)
    committed_gens: set[int] = set()
    online_in: dict[str, set[int]] = defaultdict(set)  # node -> gens it was ONLINE in
    switches: list[tuple[int, int, frozenset[str]]] = []  # (p, n, configured(n)) of donor switches
    ps_sources: list[tuple[str, int]] = []
    nodes: dict[str, _Node] = defaultdict(_Node)
    ordered = sorted(events, key=lambda e: (e["node"], e["incarnation"], e["seq"]))
    for ev in ordered:
        node, kind = nodes[ev["node"]], ev["type"]
        if kind == "gen.xact":
            _xact(ev, found, registry, xmembers, outcomes, committed_gens)
            continue
        nums = _numbers(ev)
        if any(nums[k] < node.top[k] for k in nums):
            found.add("GEN_REGRESSION")
        if nums["vote"] < nums["gen"] or nums["online"] > nums["gen"]:
            found.add("GEN_STATE_INCONSISTENT")
        if kind == "gen.state":
            _state(ev, node, found, registry, online_in, switches, ps_sources)
        if kind == "gen.heartbeat" and ev["node_status"] == "online":
            online_in[ev["node"]].add(ev["gen_num"])
        node.top = {k: max(v, nums[k]) for k, v in node.top.items()}
        node.last = ev
    last_ts: dict[str, int] = {}
    for ev in events:
        last_ts[ev["node"]] = max(last_ts.get(ev["node"], 0), ev["ts_ms"])
    for source, m, ts in ps_sources:
        # held (docs/families.md 2.6): a verdict only when the source's history reaches past
        # the receiver's time plus the skew
        if m not in online_in[source] and last_ts.get(source, 0) > ts + SKEW_MS:
            found.add("GEN_ONLINE_UNRECOVERED")
    for p, n, configured in switches:
        for m in committed_gens:
            reg = registry.get(m)
            if p < m < n and reg is not None and reg[1] == configured and len(configured) != 2:
                found.add("GEN_DONOR_STALE")
    if any(len(o) > 1 for o in outcomes.values()):
        found.add("GEN_XACT_DIVERGENT")
    return found | _wedges(events)


def _state(ev: dict[str, Any], node: _Node, found: set[str], registry: dict[int, Any],
           online_in: dict[str, set[int]], switches: list[Any], ps_sources: list[Any]) -> None:
    gen, status, loi = ev["gen"], ev["status"], ev["last_online_in"]
    member = ev["node"] in gen["members"]
    if not ev["donors"] or (status == "ONLINE") != (loi == gen["num"]) or (
            status == "RECOVERY" and (not member or ev["last_vote"]["num"] != gen["num"])):
        found.add("GEN_STATE_INCONSISTENT")
    key = (frozenset(gen["members"]), frozenset(gen["configured"]))
    if registry.setdefault(gen["num"], key) != key:
        found.add("GEN_MEMBERS_CONFLICT")
    if status == "ONLINE":
        online_in[ev["node"]].add(gen["num"])
    lv = ev["last_vote"]
    if ev["cause"] == "vote":
        vote = ev["vote"]
        granted = (vote["num"], frozenset(vote["members"]), frozenset(vote["configured"]))
        if node.top["vote"] >= vote["num"] and node.full_vote != granted:
            found.add("GEN_VOTE_PROMISE_BROKEN")
    if lv["members"]:
        node.full_vote = (lv["num"], frozenset(lv["members"]), frozenset(lv["configured"]))
    prev = node.last
    same_inc = prev is not None and prev["incarnation"] == ev["incarnation"]
    if ev["cause"] in ("switch", "online") and same_inc and prev is not None \
            and _numbers(prev)["online"] < loi == gen["num"]:
        m = loi
        if lv["num"] > m:
            found.add("GEN_VOTE_PROMISE_BROKEN")
        if not member or not _quorum(gen["members"], gen["configured"]):
            found.add("GEN_ONLINE_INELIGIBLE")
        if ev["cause"] == "switch":
            if ev["node"] not in ev["donors"]:
                found.add("GEN_ONLINE_UNRECOVERED")
            else:  # ONLINE as a donor: GEN_DONOR_STALE's case
                switches.append((_numbers(prev)["online"], m, frozenset(gen["configured"])))
        elif ev["via"] == "parallel_safe" and "source" in ev:
            ps_sources.append((ev["source"], m, ev["ts_ms"]))


def _xact(ev: dict[str, Any], found: set[str], registry: dict[int, Any],
          xmembers: dict[int, frozenset[str]], outcomes: dict[str, set[str]],
          committed_gens: set[int]) -> None:
    xgen = ev["xgen"]
    if "xmembers" in ev:
        members = frozenset(ev["xmembers"])
        reg = registry.get(xgen)
        if xmembers.setdefault(xgen, members) != members or (reg is not None and reg[0] != members):
            found.add("GEN_MEMBERS_CONFLICT")
    if ev["phase"] == "prepared" and "at" in ev:
        at = ev["at"]
        strict = ev["role"] == "coordinator" or ev.get("mode") == "normal"
        if (strict and (at["num"], at["status"]) != (xgen, "ONLINE")) or xgen > at["num"]:
            found.add("GEN_BARRIER_BROKEN")
    if ev["phase"] in ("committed", "aborted"):
        outcomes[ev["gid"]].add(ev["phase"])
    if ev["phase"] == "committed":
        committed_gens.add(xgen)
        if ev["role"] == "coordinator" and "prepared_by" in ev:
            reg = registry.get(xgen)
            members = reg[0] if reg is not None else frozenset(ev.get("xmembers", ()))
            if not members <= set(ev["prepared_by"]):
                found.add("GEN_COMMIT_UNPREPARED")


def _wedges(events: list[dict[str, Any]]) -> set[str]:
    """GEN_NO_ONLINE, GEN_RECOVERY_STUCK, GEN_VOTE_STUCK over event time (a scan in ts order)."""
    found: set[str] = set()
    last_seen: dict[str, int] = {}
    hb: dict[str, str] = {}
    lv: dict[str, int] = {}
    recovering: dict[str, tuple[int, int]] = {}  # node -> (gen, since)
    configured: set[str] = set()
    top_gen = 0
    online_at: int | None = None
    vote_since: tuple[int, int] | None = None
    for ev in sorted(events, key=lambda e: e["ts_ms"]):
        t, n = ev["ts_ms"], ev["node"]
        last_seen[n] = t
        if ev["type"] == "gen.heartbeat":
            hb[n] = ev["node_status"]
            lv[n] = max(lv.get(n, 0), ev["last_vote_num"])
            top_gen = max(top_gen, ev["gen_num"])
        elif ev["type"] == "gen.state":
            configured.update(ev["gen"]["configured"])
            lv[n] = max(lv.get(n, 0), ev["last_vote"]["num"])
            top_gen = max(top_gen, ev["gen"]["num"])
            if ev["status"] == "RECOVERY":
                if recovering.get(n, (None,))[0] != ev["gen"]["num"]:
                    recovering[n] = (ev["gen"]["num"], t)
            else:
                recovering.pop(n, None)
        live = [x for x in configured if t - last_seen.get(x, -SILENT_MS) < SILENT_MS]
        if any(hb.get(x) == "online" for x in live) or online_at is None:
            online_at = t
        elif t - online_at >= NO_ONLINE_MS:
            found.add("GEN_NO_ONLINE")
        if any(t - since >= RECOVERY_STUCK_MS for _, since in recovering.values()):
            found.add("GEN_RECOVERY_STUCK")
        if configured:
            votes = sorted((lv.get(x, 0) for x in configured), reverse=True)
            held = votes[len(configured) // 2]
            if held > top_gen:
                if vote_since is None or vote_since[0] != held:
                    vote_since = (held, t)
                elif t - vote_since[1] >= VOTE_STUCK_MS:
                    found.add("GEN_VOTE_STUCK")
            else:
                vote_since = None
    return found


def check(events: Iterable[dict[str, Any]]) -> dict[str, set[str]]:
    """Alert kinds each group's history contains: {group: {KIND, ...}}."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for ev in events:
        groups[ev["group"]].append(ev)
    return {g: _group(evs) for g, evs in groups.items()}
