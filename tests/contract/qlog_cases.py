"""The quorum-log family's contract cases (docs/families.md 3.2): base records, the worked
examples E4 and E5 of docs/families.md 3.8, valid records and invalid ones with the field their
reason must name (``test_contract_qlog.py`` and ``test_contract_families.py`` run them)."""

from __future__ import annotations

from typing import Any

from replimon.contract import QlogDecree, QlogHeartbeat, QlogPassed, QlogRecover
from tests.support.contract_cases import Case, bad_id_cases, bad_int_cases, drop, edit

ENV = {"v": 1, "group": "ql1", "node": "A", "ts_ms": 1767225600000, "seq": 0, "incarnation": 0}
ABCDE = ["A", "B", "C", "D", "E"]
CDE = ["C", "D", "E"]


def passed(node: str, seq: int, ts: int, num: int, leg: int, acceptors: list[str], acked: list[str],
           recovery: bool = False, **value: Any) -> dict[str, Any]:
    value = value or {"kind": "values", "digest": "aa"}
    return {**ENV, "type": "qlog.passed", "node": node, "seq": seq, "ts_ms": ts, "num": num,
            "leg": leg, "ballot": {"n": 1, "proposer": node}, "acceptors": list(acceptors),
            "acked": list(acked), "recovery": recovery, **value}


def decree(node: str, seq: int, ts: int, num: int, leg: int | None, outcome: str = "executed",
           **value: Any) -> dict[str, Any]:
    value = value or {"kind": "values", "digest": "aa"}
    extra = {} if leg is None else {"leg": leg}
    return {**ENV, "type": "qlog.decree", "node": node, "seq": seq, "ts_ms": ts, "num": num,
            **extra, "outcome": outcome, **value}


def recover(node: str, seq: int, ts: int, phase: str, leg: int, old: list[str], new: list[str],
            **extra: Any) -> dict[str, Any]:
    return {**ENV, "type": "qlog.recover", "node": node, "seq": seq, "ts_ms": ts, "phase": phase,
            "leg": leg, "old": list(old), "new": list(new), **extra}


def heartbeat(node: str, seq: int, ts: int, leg: int, members: list[str], watermark: int,
              **extra: Any) -> dict[str, Any]:
    return {**ENV, "type": "qlog.heartbeat", "node": node, "seq": seq, "ts_ms": ts, "leg": leg,
            "members": list(members), "watermark": watermark, "status": "ok", "suspects": [], **extra}


def rc(new_leg: int, members: list[str], d: str = "4c") -> dict[str, Any]:
    return {"kind": "reconf", "digest": d, "new_leg": new_leg, "members": list(members)}


PASSED = passed("A", 1, 1000, 36, 3, ABCDE, ["A", "B", "C"])
PASSED_RECONF = passed("D", 1, 2000, 36, 3, CDE, ["D", "E"], **rc(4, CDE))
DECREE = decree("B", 2, 1010, 36, 3)
DECREE_RECONF = decree("D", 2, 2010, 36, 3, **rc(4, CDE))
SYNCED = recover("C", 2, 2500, "synced", 5, ["A", "B", "C", "D"], ["C", "D", "X"],
                 relocated=[{"node": "X", "from": "A"}], synced_with=["C", "D", "X"])
STARTED = recover("C", 1, 2000, "started", 5, ["A", "B", "C", "D"], ["C", "D", "X"])
HEARTBEAT = heartbeat("C", 0, 1000, 5, ["A", "B", "C", "D"], 90, leader="A", suspects=["B"])
BASES = {"passed": PASSED, "passed_reconf": PASSED_RECONF, "decree": DECREE,
         "decree_reconf": DECREE_RECONF, "synced": SYNCED, "started": STARTED, "heartbeat": HEARTBEAT}
MODEL_OF = {"qlog.decree": QlogDecree, "qlog.passed": QlogPassed, "qlog.recover": QlogRecover,
            "qlog.heartbeat": QlogHeartbeat}

# ------------------------------------------------------------ the worked examples (3.8), as sent
E4 = [
    PASSED,
    *(decree(n, 2, 1010, 36, 3) for n in "ABC"),
    PASSED_RECONF,
    DECREE_RECONF,
    decree("E", 2, 2010, 36, 3, **rc(4, CDE)),
]
E5 = [
    heartbeat("C", 0, 1000, 5, ["A", "B", "C", "D"], 90),
    edit(STARTED, relocated=[{"node": "X", "from": "A"}]),
    SYNCED,
    passed("C", 3, 2600, 90, 5, ["C", "D", "X"], ["C", "X"], recovery=True, **rc(6, ["C", "D", "X"])),
    *(decree(n, 4, 2700, 90, None, **rc(6, ["C", "D", "X"])) for n in "CDX"),
]
WORKED = {"E4": E4, "E5": E5}

INT_FIELDS = [
    *((b, f) for b in ("passed", "decree", "synced", "heartbeat") for f in ("ts_ms", "seq", "incarnation")),
    ("passed", "num"), ("passed", "leg"), ("passed", "ballot.n"), ("passed_reconf", "new_leg"),
    ("decree", "num"), ("decree", "leg"), ("decree_reconf", "new_leg"), ("synced", "leg"),
    ("heartbeat", "leg"), ("heartbeat", "watermark"),
]
ID_FIELDS = [
    ("passed", "group"), ("passed", "node"), ("passed", "ballot.proposer"), ("passed", "acceptors.0"),
    ("passed", "acked.0"), ("passed_reconf", "members.0"), ("decree_reconf", "members.0"),
    ("synced", "old.0"), ("synced", "new.0"), ("synced", "relocated.0.node"),
    ("synced", "relocated.0.from"), ("synced", "synced_with.0"), ("heartbeat", "members.0"),
    ("heartbeat", "leader"), ("heartbeat", "status"), ("heartbeat", "suspects.0"),
]

VALID: list[Case] = [
    *(Case(f"qlog-base-{name}", rec) for name, rec in BASES.items()),
    *(Case(f"qlog-{name}-{i}", rec) for name, recs in WORKED.items() for i, rec in enumerate(recs)),
    Case("qlog-decree-teleported", drop(DECREE, "leg")),
    Case("qlog-decree-reconf-skipped", edit(DECREE_RECONF, outcome="skipped")),
    Case("qlog-passed-recovery", edit(PASSED_RECONF, recovery=True)),
    Case("qlog-passed-acked-empty", edit(PASSED, acked=[])),
    Case("qlog-passed-acked-outside", edit(PASSED, acked=["X"])),  # the rules' business
    Case("qlog-recover-failed", recover("C", 3, 3000, "failed", 5, ["A"], ["C"])),
    Case("qlog-recover-relocated-empty", edit(STARTED, relocated=[])),
    Case("qlog-recover-synced-with-empty", edit(SYNCED, synced_with=[])),
    Case("qlog-recover-unsafe", edit(SYNCED, new=["C", "X", "Y"])),  # QLOG_RECOVER_UNSAFE's
    Case("qlog-heartbeat-no-leader", drop(HEARTBEAT, "leader")),
    Case("qlog-heartbeat-leg-0", edit(HEARTBEAT, leg=0)),
    Case("qlog-digest-upper", edit(PASSED, digest="ABCDEF0123")),
    *(Case(f"qlog-{b}-{p}-max", edit(BASES[b], **{p: 2**63 - 1})) for b, p in INT_FIELDS),
    *(Case(f"qlog-{b}-{p}-128", edit(BASES[b], **{p: "x" * 128})) for b, p in ID_FIELDS),
]


def _ints() -> list[Case]:
    return bad_int_cases("qlog", BASES, INT_FIELDS)


def _ids() -> list[Case]:
    return bad_id_cases("qlog", BASES, ID_FIELDS)


REQUIRED = {
    "passed": ("num", "leg", "ballot", "ballot.n", "ballot.proposer", "acceptors", "acked", "kind",
               "digest", "recovery"),
    "decree": ("num", "kind", "digest", "outcome"),
    "synced": ("phase", "leg", "old", "new", "relocated.0.node", "relocated.0.from"),
    "heartbeat": ("leg", "members", "watermark", "status", "suspects"),
}

INVALID: list[Case] = [
    *_ints(),
    *_ids(),
    *(Case(f"qlog-{base}-missing-{path}", drop(BASES[base], path), path.split(".")[-1])
      for base, paths in REQUIRED.items() for path in paths),
    *(Case(f"qlog-{base}-unknown-{prefix}", edit(BASES[base], **{prefix + "colour": "red"}), "colour")
      for base, prefix in [("passed", ""), ("passed", "ballot."), ("decree", ""), ("synced", ""),
                           ("synced", "relocated.0."), ("heartbeat", "")]),
    Case("qlog-type-unknown", edit(PASSED, type="qlog.pass"), "type"),
    Case("qlog-type-other-shape", edit(PASSED, type="qlog.heartbeat"), "members"),
    Case("qlog-kind-unknown", edit(PASSED, kind="noop"), "kind"),
    Case("qlog-outcome-unknown", edit(DECREE, outcome="unreachable"), "outcome"),
    Case("qlog-phase-unknown", edit(STARTED, phase="done"), "phase"),
    Case("qlog-digest-not-hex", edit(PASSED, digest="xyz"), "digest"),
    Case("qlog-digest-empty", edit(DECREE, digest=""), "digest"),
    Case("qlog-recovery-not-bool", edit(PASSED, recovery=1), "recovery"),
    Case("qlog-values-with-new-leg", edit(PASSED, new_leg=4), "new_leg"),
    Case("qlog-values-with-members", edit(DECREE, members=["A"]), "members"),
    Case("qlog-reconf-without-members", drop(PASSED_RECONF, "members"), "members"),
    Case("qlog-reconf-without-new-leg", drop(DECREE_RECONF, "new_leg"), "new_leg"),
    Case("qlog-values-skipped", edit(DECREE, outcome="skipped"), "skipped"),
    Case("qlog-acceptors-empty", edit(PASSED, acceptors=[]), "acceptors"),
    Case("qlog-acceptors-twice", edit(PASSED, acceptors=["A", "A"]), "acceptors"),
    Case("qlog-acked-twice", edit(PASSED, acked=["A", "A"]), "acked"),
    Case("qlog-members-empty", edit(HEARTBEAT, members=[]), "members"),
    Case("qlog-members-twice", edit(DECREE_RECONF, members=["C", "C"]), "members"),
    Case("qlog-old-empty", edit(SYNCED, old=[]), "old"),
    Case("qlog-new-twice", edit(SYNCED, new=["C", "C"]), "new"),
    Case("qlog-suspects-twice", edit(HEARTBEAT, suspects=["B", "B"]), "suspects"),
    Case("qlog-synced-without-synced-with", drop(SYNCED, "synced_with"), "synced_with"),
    Case("qlog-started-with-synced-with", edit(STARTED, synced_with=["C"]), "synced_with"),
    # PARSER_ONLY: JSON Schema cannot say that one key is unique across the items of a list
    Case("qlog-relocated-twice", edit(SYNCED, relocated=[{"node": "X", "from": "A"},
                                                         {"node": "X", "from": "B"}]), "relocated",
         schema=False),
    Case("qlog-relocated-not-list", edit(SYNCED, relocated={"X": "A"}), "relocated"),
    Case("qlog-ballot-not-object", edit(PASSED, ballot=3), "ballot"),
    Case("qlog-null-leg", edit(DECREE, leg=None), "leg"),
    Case("qlog-null-leader", edit(HEARTBEAT, leader=None), "leader"),
]
