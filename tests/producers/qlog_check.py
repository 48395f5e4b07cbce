"""A batch reference checker of quorum-log traces (test helper, not the product's monitor).

It reads a whole trace and names which alert conditions of docs/families.md 3.4 and 3.5 the
history contains, in the simplest way that is right with hindsight: memberships M(l) are known
from the whole trace (so no verdict is held), per-replica rules read each replica's events in
seq order per incarnation, set facts (values per number, per (leg, num), members per
legislature) are judged over the whole trace, and the wedges by a scan in event-time order. It
is how the tests prove that a clean simulator run is clean and that each catalogued fault leaves
the evidence of its own kind and no other. QLOG_RECONFIGURED (info) is not reported.

One reading differs from families.md 3.5 as written, because halon takes and renews the lease
with a same-set Reconf (`Internal.hs` ``proposeLeaseRequest``), so a legislature is installed
every lease renewal: a recover episode is closed by a Reconf to its ``new`` set or by one that
installs another member *set* than its ``old``, not by any new legislature (else a live leader
would close every episode within seconds and QLOG_RECOVER_STUCK could never fire), or by a Reconf
that a majority of its ``old`` acked (the old quorum is back: the recovery is abandoned).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

NO_LEADER_MS, RECOVER_STUCK_MS = 15_000, 60_000


def _maj(n: int) -> int:
    return n // 2 + 1


def _value(ev: dict[str, Any]) -> tuple[Any, ...]:
    return (ev["kind"], ev["digest"], ev.get("new_leg"), frozenset(ev.get("members", ())))


def _group(events: list[dict[str, Any]]) -> set[str]:
    found: set[str] = set()
    installs: dict[int, set[frozenset[str]]] = defaultdict(set)
    executed: dict[int, set[tuple[Any, ...]]] = defaultdict(set)
    passed: dict[tuple[int, int], set[tuple[Any, ...]]] = defaultdict(set)
    for ev in events:
        if ev["type"] == "qlog.heartbeat":
            installs[ev["leg"]].add(frozenset(ev["members"]))
        elif ev["type"] == "qlog.decree" and ev["outcome"] == "executed":
            executed[ev["num"]].add(_value(ev))
            if ev["kind"] == "reconf":
                installs[ev["new_leg"]].add(frozenset(ev["members"]))
        elif ev["type"] == "qlog.passed":
            passed[(ev["leg"], ev["num"])].add(_value(ev))
    if any(len(s) > 1 for d in (installs, executed, passed) for s in d.values()):
        found.add("QLOG_DIVERGENT_DECREE")
    found |= _streams(events, {leg: next(iter(s)) for leg, s in installs.items() if len(s) == 1})
    return found | _wedges(events)


def _streams(events: list[dict[str, Any]], members: dict[int, frozenset[str]]) -> set[str]:
    """The rules that read one replica's own stream, plus the quorum rules (M(l) with hindsight)."""
    found: set[str] = set()
    top_leg: dict[str, int] = {}
    reconfs: dict[str, dict[int, int]] = defaultdict(dict)  # replica -> num -> new_leg executed
    synced: dict[str, list[tuple[frozenset[str], frozenset[str]]]] = defaultdict(list)  # (new, synced_with)
    for ev in sorted(events, key=lambda e: (e["node"], e["incarnation"], e["seq"])):
        node, kind = ev["node"], ev["type"]
        if kind in ("qlog.heartbeat", "qlog.recover"):
            if ev["leg"] < top_leg.get(node, 0):
                found.add("QLOG_LEGISLATURE_REGRESSION")
            top_leg[node] = max(top_leg.get(node, 0), ev["leg"])
        if kind == "qlog.recover" and ev["phase"] == "synced":
            new = frozenset(ev["new"])
            moved = {r["from"]: r["node"] for r in ev["relocated"]}
            old_star = {moved.get(m, m) for m in ev["old"]}
            if 2 * len(old_star & new) < len(ev["old"]):
                found.add("QLOG_RECOVER_UNSAFE")
            synced[node].append((new, frozenset(ev["synced_with"])))
        elif kind == "qlog.decree" and ev["outcome"] == "executed":
            k = ev["num"]
            below = [n for n in reconfs[node] if n < k]
            opened = reconfs[node][max(below)] if below else None
            if opened is not None and "leg" in ev and ev["leg"] < opened:
                found.add("QLOG_OBSOLETE_DECREE_EXECUTED")
            if ev["kind"] == "reconf":
                if opened is not None and ev["new_leg"] <= opened:
                    found.add("QLOG_OBSOLETE_DECREE_EXECUTED")
                reconfs[node][k] = ev["new_leg"]
                done = frozenset(ev["members"])
                synced[node] = [s for s in synced[node] if s[0] != done]
        elif kind == "qlog.passed":
            acked = set(ev["acked"])
            if ev["recovery"]:
                new = frozenset(ev.get("members", ()))
                if not any(s[0] == new and s[1] >= new for s in synced[node]) \
                        or len(acked & new) < _maj(len(new)):
                    found.add("QLOG_RECOVER_UNSYNCED")
                continue
            m = members.get(ev["leg"])
            if m is None or len(acked & m) >= _maj(len(m)):
                continue
            if ev["kind"] == "reconf":
                found.add("QLOG_RECONF_WITHOUT_OLD_QUORUM")
            elif not any(len(acked & s[0]) >= _maj(len(s[0])) for s in synced[node]):
                found.add("QLOG_DECREE_WITHOUT_QUORUM")
    return found


def _wedges(events: list[dict[str, Any]]) -> set[str]:
    """QLOG_NO_LEADER and QLOG_RECOVER_STUCK over event time."""
    found: set[str] = set()
    top, members, since = 0, frozenset[str](), None
    led: int | None = None
    episodes: dict[tuple[str, frozenset[str]], tuple[int, frozenset[str]]] = {}  # -> (start, old)
    for ev in sorted(events, key=lambda e: e["ts_ms"]):
        t = ev["ts_ms"]
        since = t if since is None else since
        installed = None
        if ev["type"] == "qlog.heartbeat":
            installed = (ev["leg"], ev["members"])
        elif ev["type"] == "qlog.decree" and ev["kind"] == "reconf" and ev["outcome"] == "executed":
            installed = (ev["new_leg"], ev["members"])
            episodes = {key: v for key, v in episodes.items()
                        if key[1] != frozenset(ev["members"]) and v[1] == frozenset(ev["members"])}
        if installed is not None and installed[0] > top:
            top, members, since = installed[0], frozenset(installed[1]), t
        if ev["type"] == "qlog.heartbeat" and ev.get("leader") == ev["node"] and ev["node"] in members:
            led = t
        if t - max(since, led or since) >= NO_LEADER_MS:
            found.add("QLOG_NO_LEADER")
        if ev["type"] == "qlog.passed" and ev["kind"] == "reconf" and not ev["recovery"]:
            # the old membership's majority passed a Reconf: quorum is back, the recovery is over
            episodes = {key: v for key, v in episodes.items()
                        if len(v[1] & set(ev["acked"])) < _maj(len(v[1]))}
        if ev["type"] == "qlog.recover" and ev["phase"] == "started":
            episodes.setdefault((ev["node"], frozenset(ev["new"])), (t, frozenset(ev["old"])))
        if any(t - start >= RECOVER_STUCK_MS for start, _ in episodes.values()):
            found.add("QLOG_RECOVER_STUCK")
    return found


def check(events: Iterable[dict[str, Any]]) -> dict[str, set[str]]:
    """Alert kinds each group's history contains: {group: {KIND, ...}}."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for ev in events:
        groups[ev["group"]].append(ev)
    return {g: _group(evs) for g, evs in groups.items()}
