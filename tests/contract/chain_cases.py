"""The chain family's contract cases (docs/families.md 4.2): base records, the worked examples E6,
E7 and E8 of docs/families.md 4.8, valid records and invalid ones with the field their reason
must name (``test_contract_chain.py`` and ``test_contract_families.py`` run them)."""

from __future__ import annotations

from typing import Any

from replimon.contract import ChainAppend, ChainHeartbeat, ChainView, ChainWedge
from tests.support.contract_cases import Case, bad_id_cases, bad_int_cases, drop, edit

ENV = {"v": 1, "group": "ch1", "node": "B", "ts_ms": 1767225600000, "seq": 0, "incarnation": 0}
BCD = ["B", "C", "D"]


def view(node: str, seq: int, ts: int, from_epoch: int, epoch: int, chain: list[str], pos: int,
         outcome: str = "installed", **extra: Any) -> dict[str, Any]:
    return {**ENV, "type": "chain.view", "node": node, "seq": seq, "ts_ms": ts, "from_epoch": from_epoch,
            "epoch": epoch, "chain": list(chain), "pos": pos, "outcome": outcome, **extra}


def wedge(node: str, seq: int, ts: int, epoch: int, reason: str = "suspect_downstream",
          **extra: Any) -> dict[str, Any]:
    return {**ENV, "type": "chain.wedge", "node": node, "seq": seq, "ts_ms": ts, "epoch": epoch,
            "reason": reason, **extra}


def append(node: str, seq: int, ts: int, assumed: tuple[int, int], epoch: int, pos: int,
           origin: str = "upstream", outcome: str = "accepted", count: int = 1,
           **extra: Any) -> dict[str, Any]:
    return {**ENV, "type": "chain.append", "node": node, "seq": seq, "ts_ms": ts,
            "assumed": {"epoch": assumed[0], "pos": assumed[1]}, "epoch": epoch, "pos": pos,
            "count": count, "origin": origin, "outcome": outcome, **extra}


def heartbeat(node: str, seq: int, ts: int, epoch: int, chain: list[str], pos: int, wedged: bool = False,
              ttl_ms: int = 2000, **extra: Any) -> dict[str, Any]:
    return {**ENV, "type": "chain.heartbeat", "node": node, "seq": seq, "ts_ms": ts, "epoch": epoch,
            "chain": list(chain), "wedged": wedged, "pos": pos, "ttl_ms": ttl_ms, "status": "active",
            **extra}


VIEW = view("B", 41, 1200, 10, 14, BCD, 101)
REJECTED = view("B", 42, 1210, 12, 16, BCD, 102, outcome="rejected", reason="WrongEpoch")
WEDGE = wedge("B", 43, 2000, 14, suspect="C")
APPEND = append("B", 40, 1000, (10, 99), 10, 100, digest="ab12")
RUN = append("C", 30, 1005, (10, 99), 10, 100, count=5)
HEARTBEAT = heartbeat("B", 45, 3000, 14, BCD, 102, wedged=True, stable=101)
BASES = {"view": VIEW, "rejected": REJECTED, "wedge": WEDGE, "append": APPEND, "run": RUN,
         "heartbeat": HEARTBEAT}
MODEL_OF = {"chain.view": ChainView, "chain.wedge": ChainWedge, "chain.append": ChainAppend,
            "chain.heartbeat": ChainHeartbeat}

# ------------------------------------------------------------ the worked examples (4.8), as sent
E6 = [
    append("B", 40, 1000, (10, 99), 10, 100),
    append("C", 30, 1005, (10, 99), 10, 100),
    view("B", 41, 1200, 10, 14, BCD, 101),
    view("C", 31, 1250, 10, 14, BCD, 101),
    append("A", 77, 1300, (10, 100), 10, 101, origin="client"),
    append("B", 42, 1310, (10, 100), 10, 101, outcome="bad_sequence"),
]
E7 = [
    wedge("B", 43, 2000, 14, suspect="C"),
    append("B", 44, 2500, (14, 101), 14, 102),
    heartbeat("B", 45, 3000, 14, BCD, 102, wedged=True),
]
E8 = [
    view("A", 5, 100, 19, 20, ["A", "B", "C"], 50),
    view("B", 5, 110, 19, 20, ["A", "B", "C"], 50),
    append("B", 6, 200, (20, 50), 20, 51, origin="client"),
]
WORKED = {"E6": E6, "E7": E7, "E8": E8}

INT_FIELDS = [
    *((b, f) for b in ("view", "wedge", "append", "heartbeat") for f in ("ts_ms", "seq", "incarnation")),
    ("view", "from_epoch"), ("view", "epoch"), ("view", "pos"), ("wedge", "epoch"),
    ("append", "assumed.epoch"), ("append", "assumed.pos"), ("append", "epoch"), ("append", "pos"),
    ("heartbeat", "epoch"), ("heartbeat", "pos"), ("heartbeat", "stable"), ("heartbeat", "ttl_ms"),
]
ID_FIELDS = [
    ("view", "group"), ("view", "node"), ("view", "chain.0"), ("wedge", "suspect"),
    ("heartbeat", "chain.0"), ("heartbeat", "status"),
]

VALID: list[Case] = [
    *(Case(f"chain-base-{name}", rec) for name, rec in BASES.items()),
    *(Case(f"chain-{name}-{i}", rec) for name, recs in WORKED.items() for i, rec in enumerate(recs)),
    Case("chain-view-rejected-wedged", edit(REJECTED, reason="Wedged")),
    Case("chain-view-rejected-bad-sequence", edit(REJECTED, reason="BadSequence")),
    Case("chain-view-not-cas", edit(VIEW, from_epoch=16)),  # CHAIN_VIEW_NOT_CAS's
    Case("chain-view-epoch-0", view("D", 0, 0, 0, 0, ["D"], 0)),
    Case("chain-wedge-no-suspect", drop(WEDGE, "suspect")),
    Case("chain-wedge-command", edit(WEDGE, reason="command")),
    Case("chain-wedge-upstream", edit(WEDGE, reason="suspect_upstream")),
    *(Case(f"chain-append-{o}", edit(APPEND, outcome=o)) for o in ("bad_sequence", "wedged", "wrong_epoch")),
    Case("chain-append-client", edit(APPEND, origin="client")),
    Case("chain-append-no-digest", drop(APPEND, "digest")),
    Case("chain-append-digest-upper", edit(APPEND, digest="ABCDEF0123")),
    Case("chain-append-not-cas", edit(APPEND, assumed={"epoch": 10, "pos": 50})),  # the rules'
    Case("chain-heartbeat-no-stable", drop(HEARTBEAT, "stable")),
    Case("chain-heartbeat-single", heartbeat("A", 0, 0, 0, ["A"], 0)),
    *(Case(f"chain-{b}-{p}-max", edit(BASES[b], **{p: 2**63 - 1})) for b, p in INT_FIELDS),
    *(Case(f"chain-{b}-{p}-128", edit(BASES[b], **{p: "x" * 128})) for b, p in ID_FIELDS),
]


def _ints() -> list[Case]:
    return [*bad_int_cases("chain", BASES, INT_FIELDS),
            *(Case(f"chain-{b}-{p}-zero", edit(BASES[b], **{p: 0}), p) for b, p in (("run", "count"),
                                                                                   ("heartbeat", "ttl_ms")))]


def _ids() -> list[Case]:
    return bad_id_cases("chain", BASES, ID_FIELDS)


REQUIRED = {
    "view": ("from_epoch", "epoch", "chain", "pos", "outcome"),
    "wedge": ("epoch", "reason"),
    "append": ("assumed", "assumed.epoch", "assumed.pos", "epoch", "pos", "count", "origin", "outcome"),
    "heartbeat": ("epoch", "chain", "wedged", "pos", "ttl_ms", "status"),
}

INVALID: list[Case] = [
    *_ints(),
    *_ids(),
    *(Case(f"chain-{base}-missing-{path}", drop(BASES[base], path), path.split(".")[-1])
      for base, paths in REQUIRED.items() for path in paths),
    *(Case(f"chain-{base}-unknown-{prefix}", edit(BASES[base], **{prefix + "colour": "red"}), "colour")
      for base, prefix in [("view", ""), ("wedge", ""), ("append", ""), ("append", "assumed."),
                           ("heartbeat", "")]),
    Case("chain-type-unknown", edit(VIEW, type="chain.views"), "type"),
    Case("chain-type-other-shape", edit(VIEW, type="chain.heartbeat"), "wedged"),
    Case("chain-outcome-unknown", edit(VIEW, outcome="refused"), "outcome"),
    Case("chain-view-reason-unknown", edit(REJECTED, reason="Stale"), "reason"),
    Case("chain-installed-with-reason", edit(VIEW, reason="WrongEpoch"), "reason"),
    Case("chain-rejected-without-reason", drop(REJECTED, "reason"), "reason"),
    Case("chain-wedge-reason-unknown", edit(WEDGE, reason="bored"), "reason"),
    Case("chain-origin-unknown", edit(APPEND, origin="proxy"), "origin"),
    Case("chain-append-outcome-unknown", edit(APPEND, outcome="rejected"), "outcome"),
    Case("chain-digest-with-run", edit(RUN, digest="ab"), "digest"),
    Case("chain-digest-not-hex", edit(APPEND, digest="xyz"), "digest"),
    Case("chain-digest-empty", edit(APPEND, digest=""), "digest"),
    Case("chain-wedged-not-bool", edit(HEARTBEAT, wedged=1), "wedged"),
    Case("chain-chain-empty", edit(VIEW, chain=[]), "chain"),
    Case("chain-chain-twice", edit(VIEW, chain=["B", "C", "B"]), "chain"),
    Case("chain-heartbeat-chain-twice", edit(HEARTBEAT, chain=["B", "B"]), "chain"),
    Case("chain-assumed-not-object", edit(APPEND, assumed=[10, 99]), "assumed"),
    # PARSER_ONLY: JSON Schema cannot add two fields
    Case("chain-run-overflows", edit(RUN, pos=2**63 - 1, count=2), "overflows", schema=False),
    Case("chain-null-reason", edit(VIEW, reason=None), "reason"),
    Case("chain-null-suspect", edit(WEDGE, suspect=None), "suspect"),
    Case("chain-null-stable", edit(HEARTBEAT, stable=None), "stable"),
    Case("chain-null-digest", edit(APPEND, digest=None), "digest"),
]
