"""The cases of the generations family's events (docs/families.md 2.2): valid records, including
the worked examples E1-E3 of docs/families.md 2.8 with their near misses, and invalid mutations
with the field their reason must name (``tests/contract/test_contract_gen.py`` runs them through
the parser, the JSON Schema and ``decode_event``)."""

from __future__ import annotations

from typing import Any

from replimon.contract import GenHeartbeat, GenState, GenXact
from tests.support.contract_cases import BAD_IDS, BAD_INTS, Case, drop, edit

ENVELOPE = {"v": 1, "group": "pg1", "node": "A", "ts_ms": 1767225600000, "seq": 0, "incarnation": 0}
ABC = ["A", "B", "C"]


def state(node: str, seq: int, ts: int, cause: str, num: int, donors: list[str], loi: int, lv: int,
          status: str, members: list[str] | None = None, configured: list[str] | None = None,
          **extra: Any) -> dict[str, Any]:
    """A ``gen.state`` as the worked examples write it (``lv``: last_vote.num; last_vote's sets
    are the generation's, as after a switch or a vote for it)."""
    # fresh lists everywhere: deepcopy keeps aliases, and a mutation must touch one field only
    members = list(ABC if members is None else members)
    configured = list(ABC if configured is None else configured)
    vote = extra.pop("last_vote", {"num": lv, "members": list(members),
                                   "configured": list(configured)})
    return {**ENVELOPE, "type": "gen.state", "node": node, "seq": seq, "ts_ms": ts, "cause": cause,
            "gen": {"num": num, "members": members, "configured": configured}, "donors": list(donors),
            "last_online_in": loi, "last_vote": vote, "status": status, **extra}


def heartbeat(node: str, seq: int, ts: int, num: int, loi: int, lv: int, node_status: str,
              suspects: list[str] | None = None) -> dict[str, Any]:
    return {**ENVELOPE, "type": "gen.heartbeat", "node": node, "seq": seq, "ts_ms": ts,
            "gen_num": num, "last_online_in": loi, "last_vote_num": lv, "node_status": node_status,
            "suspects": list(suspects or []), "xact_sample": 16}


def xact(node: str, seq: int, ts: int, gid: str, xgen: int, phase: str, role: str,
         **extra: Any) -> dict[str, Any]:
    return {**ENVELOPE, "type": "gen.xact", "node": node, "seq": seq, "ts_ms": ts, "gid": gid,
            "xgen": xgen, "phase": phase, "role": role, **extra}


SWITCH = state("B", 20, 1000, "switch", 7, ["B"], 7, 7, "ONLINE")
ONLINE = state("C", 16, 1600, "online", 7, ["B"], 7, 7, "ONLINE", via="parallel_safe", source="A")
VOTE = state("A", 6, 1200, "vote", 4, ["B"], 3, 5, "DEAD",
             last_vote={"num": 5, "members": ["A", "B"], "configured": list(ABC)},
             vote={"num": 5, "members": ["A", "B"], "configured": list(ABC), "candidate": "B"})
BUMP = state("A", 7, 1300, "bump", 4, ["B"], 3, 9, "DEAD",
             last_vote={"num": 9, "members": [], "configured": []})
LOAD = state("A", 0, 900, "load", 4, ["B"], 3, 4, "RECOVERY")
PREPARED = xact("B", 3, 1500, "MTM-1-100-7", 7, "prepared", "replica", mode="normal",
                at={"num": 7, "status": "ONLINE"})
COMMITTED = xact("A", 4, 1600, "MTM-1-100-7", 7, "committed", "coordinator",
                 prepared_by=list(ABC), xmembers=list(ABC))
ABORTED = xact("C", 5, 1600, "MTM-1-100-7", 7, "aborted", "resolver")
HEARTBEAT = heartbeat("A", 11, 2500, 7, 6, 7, "recovery", suspects=["C"])

BASES: dict[str, dict[str, Any]] = {
    "switch": SWITCH, "online": ONLINE, "vote": VOTE, "bump": BUMP, "load": LOAD,
    "prepared": PREPARED, "committed": COMMITTED, "aborted": ABORTED, "heartbeat": HEARTBEAT,
}
MODEL_OF = {"gen.state": GenState, "gen.xact": GenXact, "gen.heartbeat": GenHeartbeat}

# ------------------------------------------------------------ the worked examples (2.8), as sent
E1 = [
    SWITCH,
    state("A", 10, 1000, "switch", 7, ["B"], 6, 7, "RECOVERY"),
    state("C", 15, 1010, "switch", 7, ["B"], 5, 7, "RECOVERY"),
    ONLINE,
    heartbeat("A", 11, 2500, 7, 6, 7, "recovery"),
    heartbeat("A", 12, 4200, 7, 6, 7, "recovery"),
]
E1_NEAR_MISS = [*E1[:4], state("A", 11, 1590, "online", 7, ["B"], 7, 7, "ONLINE",
                               via="parallel_safe", source="B")]
E2 = [
    state("A", 5, 1000, "switch", 4, ["B"], 3, 4, "RECOVERY"),
    VOTE,
    state("A", 7, 1300, "online", 4, ["B"], 4, 5, "ONLINE", via="parallel_safe", source="B",
          last_vote={"num": 5, "members": ["A", "B"], "configured": list(ABC)}),
]
E2_NEAR_MISS = [
    state("A", 5, 1000, "switch", 4, ["A"], 4, 4, "ONLINE"),
    edit(VOTE, last_online_in=4, status="ONLINE"),
]
E3 = [
    state("A", 1, 1000, "switch", 8, ["A", "B"], 8, 8, "ONLINE", members=["A", "B"]),
    state("B", 1, 1000, "switch", 8, ["A", "B"], 8, 8, "ONLINE", members=["A", "B"]),
    heartbeat("C", 8, 1100, 8, 7, 8, "disabled"),
    xact("A", 2, 1200, "MTM-1-100-8", 8, "committed", "coordinator", prepared_by=["A", "B"],
         xmembers=["A", "B"]),
    state("C", 9, 5000, "switch", 9, ["C"], 9, 9, "ONLINE"),
]
E3_NEAR_MISS = [
    *E3[:4],
    state("C", 9, 5000, "switch", 9, ["A"], 7, 9, "RECOVERY"),
    state("C", 10, 5400, "online", 9, ["A"], 9, 9, "ONLINE", via="parallel_safe", source="A"),
]
E3_ABORTED = [*E3[:3], drop(edit(E3[3], phase="aborted"), "prepared_by"), E3[4]]
WORKED = {"E1": E1, "E1-near-miss": E1_NEAR_MISS, "E2": E2, "E2-near-miss": E2_NEAR_MISS,
          "E3": E3, "E3-near-miss": E3_NEAR_MISS, "E3-aborted": E3_ABORTED}

# ---------------------------------------------------------------------------------- valid cases
INT_FIELDS = [
    *((b, f) for b in ("switch", "prepared", "heartbeat") for f in ("ts_ms", "seq", "incarnation")),
    ("switch", "gen.num"), ("switch", "last_online_in"), ("switch", "last_vote.num"),
    ("vote", "vote.num"), ("prepared", "xgen"), ("prepared", "at.num"),
    ("heartbeat", "gen_num"), ("heartbeat", "last_online_in"), ("heartbeat", "last_vote_num"),
    ("heartbeat", "xact_sample"),
]
POSITIVE = {"gen.num", "vote.num", "xgen", "at.num"}  # generations are numbered from 1
ID_FIELDS = [("switch", "group"), ("switch", "node"), ("switch", "gen.members.0"),
             ("switch", "gen.configured.0"), ("switch", "donors.0"), ("online", "source"),
             ("vote", "vote.candidate"), ("vote", "last_vote.members.0"),
             ("committed", "prepared_by.0"), ("committed", "xmembers.0"), ("heartbeat", "suspects.0")]

VALID: list[Case] = [
    *(Case(f"gen-base-{name}", rec) for name, rec in BASES.items()),
    *(Case(f"gen-{name}-{i}", rec) for name, recs in WORKED.items() for i, rec in enumerate(recs)),
    *(Case(f"gen-status-{s}", edit(SWITCH, status=s)) for s in ("ONLINE", "RECOVERY", "DEAD")),
    Case("gen-online-via-prepare", edit(ONLINE, via="prepare")),
    Case("gen-online-without-source", drop(ONLINE, "source")),
    Case("gen-self-vote", edit(VOTE, **{"vote.candidate": "A"})),
    # unsafe but well-formed: the rules' business (GEN_STATE_INCONSISTENT, ...)
    Case("gen-empty-donors", edit(SWITCH, donors=[])),
    Case("gen-last-vote-below-gen", edit(SWITCH, **{"last_vote.num": 3})),
    Case("gen-online-not-current", edit(SWITCH, last_online_in=2)),
    Case("gen-minority", edit(SWITCH, **{"gen.members": ["C"]})),
    Case("gen-donor-not-member", edit(SWITCH, donors=["D"])),
    Case("gen-xact-coordinator-prepared", xact("A", 1, 1, "MTM-1-5-7", 7, "prepared",
                                               "coordinator", at={"num": 7, "status": "ONLINE"},
                                               xmembers=list(ABC))),
    Case("gen-xact-replica-recovery", edit(PREPARED, mode="recovery",
                                           **{"at.status": "RECOVERY", "at.num": 9})),
    Case("gen-xact-without-optionals", xact("B", 1, 1, "x", 1, "prepared", "replica")),
    Case("gen-xact-prepared-by-empty", edit(COMMITTED, prepared_by=[])),
    Case("gen-xact-gid-free-text", edit(ABORTED, gid="user 2pc é" + "x" * 200)),
    *(Case(f"gen-node-status-{s}", edit(HEARTBEAT, node_status=s))
      for s in ("online", "recovery", "catchup", "disabled", "isolated")),
    Case("gen-heartbeat-gen-0", edit(HEARTBEAT, gen_num=0)),
    *(Case(f"gen-{b}-{p}-max", edit(BASES[b], **{p: 2**63 - 1})) for b, p in INT_FIELDS),
    *(Case(f"gen-{b}-{p}-128", edit(BASES[b], **{p: "x" * 128})) for b, p in ID_FIELDS),
]

# -------------------------------------------------------------------------------- invalid cases


def _ints() -> list[Case]:
    cases = []
    for base, path in INT_FIELDS:
        for label, value, schema in BAD_INTS:
            cases.append(Case(f"gen-{base}-{path}-{label}", edit(BASES[base], **{path: value}),
                              path.split(".")[-1], schema))
        if path in POSITIVE:
            cases.append(Case(f"gen-{base}-{path}-0", edit(BASES[base], **{path: 0}), path.split(".")[-1]))
    return cases


def _ids() -> list[Case]:
    return [Case(f"gen-{base}-{path}-{label}", edit(BASES[base], **{path: value}),
                 path.split(".")[-2] if path[-1].isdigit() else path, schema)
            for base, path in ID_FIELDS for label, value, schema in BAD_IDS]


REQUIRED = {
    "switch": ("cause", "gen", "gen.num", "gen.members", "gen.configured", "donors",
               "last_online_in", "last_vote", "last_vote.num", "last_vote.members", "status"),
    "vote": ("vote.candidate", "vote.num", "vote.members"),
    "prepared": ("gid", "xgen", "phase", "role", "at.num", "at.status"),
    "heartbeat": ("gen_num", "last_online_in", "last_vote_num", "node_status", "suspects",
                  "xact_sample"),
}

INVALID: list[Case] = [
    *_ints(),
    *_ids(),
    *(Case(f"gen-{base}-missing-{path}", drop(BASES[base], path), path.split(".")[-1])
      for base, paths in REQUIRED.items() for path in paths),
    *(Case(f"gen-{base}-unknown-{prefix}", edit(BASES[base], **{prefix + "colour": "red"}), "colour")
      for base, prefix in [("switch", ""), ("switch", "gen."), ("switch", "last_vote."),
                           ("vote", "vote."), ("prepared", ""), ("prepared", "at."),
                           ("heartbeat", "")]),
    Case("gen-type-unknown", edit(SWITCH, type="gen.states"), "type"),
    Case("gen-type-family-only", edit(SWITCH, type="gen"), "type"),
    Case("gen-type-other-shape", edit(SWITCH, type="gen.heartbeat"), "gen_num"),
    # gen.state
    Case("gen-cause-unknown", edit(SWITCH, cause="elect"), "cause"),
    Case("gen-cause-case", edit(SWITCH, cause="SWITCH"), "cause"),
    Case("gen-status-disabled", edit(SWITCH, status="DISABLED"), "status"),
    Case("gen-status-lower", edit(SWITCH, status="online"), "status"),
    Case("gen-online-without-via", drop(ONLINE, "via"), "via"),
    Case("gen-switch-with-via", edit(SWITCH, via="parallel_safe"), "via"),
    Case("gen-switch-with-source", edit(SWITCH, source="A"), "source"),
    Case("gen-via-unknown", edit(ONLINE, via="ps"), "via"),
    Case("gen-vote-without-vote", drop(VOTE, "vote"), "vote"),
    Case("gen-switch-with-vote", edit(SWITCH, vote=VOTE["vote"]), "vote"),
    Case("gen-bump-with-vote", edit(BUMP, vote=VOTE["vote"]), "vote"),
    Case("gen-members-empty", edit(SWITCH, **{"gen.members": []}), "members"),
    Case("gen-configured-empty", edit(SWITCH, **{"gen.configured": []}), "configured"),
    Case("gen-members-twice", edit(SWITCH, **{"gen.members": ["A", "A"]}), "members"),
    Case("gen-configured-twice", edit(SWITCH, **{"gen.configured": ["A", "B", "B"]}), "configured"),
    Case("gen-donors-twice", edit(SWITCH, donors=["B", "B"]), "donors"),
    Case("gen-last-vote-members-twice", edit(SWITCH, **{"last_vote.members": ["B", "B"]}), "members"),
    Case("gen-vote-members-empty", edit(VOTE, **{"vote.members": []}), "members"),
    Case("gen-gen-not-object", edit(SWITCH, gen=7), "gen"),
    Case("gen-donors-not-list", edit(SWITCH, donors="B"), "donors"),
    *(Case(f"gen-null-{f}", edit(ONLINE, **{f: None}), f) for f in ("via", "source")),
    Case("gen-null-vote", edit(VOTE, vote=None), "vote"),
    # gen.xact
    Case("gen-phase-unknown", edit(PREPARED, phase="precommitted"), "phase"),
    Case("gen-role-unknown", edit(PREPARED, role="worker"), "role"),
    Case("gen-mode-unknown", edit(PREPARED, mode="parallel"), "mode"),
    Case("gen-at-status-unknown", edit(PREPARED, **{"at.status": "online"}), "status"),
    Case("gen-at-on-committed", edit(COMMITTED, at={"num": 7, "status": "ONLINE"}), "at"),
    Case("gen-mode-on-coordinator", edit(COMMITTED, mode="normal"), "mode"),
    Case("gen-mode-on-resolver", edit(ABORTED, mode="recovery"), "mode"),
    Case("gen-prepared-by-on-replica", edit(PREPARED, prepared_by=["A"]), "prepared_by"),
    Case("gen-prepared-by-on-aborted", edit(COMMITTED, phase="aborted"), "prepared_by"),
    Case("gen-xmembers-on-replica", edit(PREPARED, xmembers=list(ABC)), "xmembers"),
    Case("gen-xmembers-empty", edit(COMMITTED, xmembers=[]), "xmembers"),
    Case("gen-prepared-by-twice", edit(COMMITTED, prepared_by=["A", "A"]), "prepared_by"),
    Case("gen-gid-empty", edit(PREPARED, gid=""), "gid"),
    Case("gen-gid-257", edit(PREPARED, gid="x" * 257), "gid"),
    Case("gen-gid-number", edit(PREPARED, gid=5), "gid"),
    Case("gen-null-at", edit(PREPARED, at=None), "at"),
    # gen.heartbeat
    Case("gen-node-status-upper", edit(HEARTBEAT, node_status="ONLINE"), "node_status"),
    Case("gen-node-status-unknown", edit(HEARTBEAT, node_status="dead"), "node_status"),
    Case("gen-suspects-twice", edit(HEARTBEAT, suspects=["C", "C"]), "suspects"),
    Case("gen-suspects-null", edit(HEARTBEAT, suspects=None), "suspects"),
]
