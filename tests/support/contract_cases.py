"""The cases of event contract v1: valid records, invalid ones with the field their reason must
name, explicit nulls and junk bytes (``tests/contract/test_contract.py`` runs them through the
parser and the JSON Schema; the parser parity test mutates them)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from replimon.contract import ConfigReport, Decision, Execution, Heartbeat

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "replimon" / "contract" / "event-v1.schema.json"
INT64_MAX = 2**63 - 1
MIB = 1 << 20

# ---------------------------------------------------------------------------------- base records
ENVELOPE = {"v": 1, "group": "g1", "node": "n1", "ts_ms": 1767225600000, "seq": 0, "incarnation": 0}
MEMBERS = [{"id": "n1", "protocol": 9}, {"id": "n2", "protocol": 9}, {"id": "n3", "protocol": 9}]

DECISION = {**ENVELOPE, "type": "decision", "instance": 100, "proposer": "n1", "kind": "app"}
DECISION_CONFIG = {
    **DECISION,
    "kind": "config",
    "config": {"op": "boot", "nodes": copy.deepcopy(MEMBERS), "event_horizon": 10},
}
SET_EH = {**DECISION, "kind": "config", "config": {"op": "set_event_horizon", "event_horizon": 20}}
ADD_NODES = {
    **DECISION,
    "kind": "config",
    "config": {"op": "add_nodes", "nodes": [{"id": "n4", "protocol": 9}]},
}
REMOVE_NODES = {**DECISION, "kind": "config", "config": {"op": "remove_nodes", "nodes": [{"id": "n3"}]}}
EXECUTION = {**ENVELOPE, "type": "execution", "executed": 99}
HEARTBEAT_MIN = {
    **ENVELOPE,
    "type": "heartbeat",
    "executed": 99,
    "decided": 100,
    "protocol": 9,
    "status": "ONLINE",
}
HEARTBEAT = {
    **HEARTBEAT_MIN,
    "view": {"start": 0, "event_horizon": 10, "members": copy.deepcopy(MEMBERS)},
    "cache_size": 50000,
    "suspects": ["n2"],
    "version": "8.0.40",
}
INSTALLED = {
    **ENVELOPE,
    "type": "config",
    "instance": 0,
    "outcome": "installed",
    "start": 0,
    "event_horizon": 10,
    "members": copy.deepcopy(MEMBERS),
}
REFUSED = {
    **ENVELOPE,
    "type": "config",
    "instance": 5,
    "outcome": "refused",
    "reason": "EVENT_HORIZON_INVALID",
}

BASES: dict[str, dict[str, Any]] = {
    "decision": DECISION,
    "decision_config": DECISION_CONFIG,
    "execution": EXECUTION,
    "heartbeat": HEARTBEAT,
    "installed": INSTALLED,
    "refused": REFUSED,
}
MODEL_OF = {"decision": Decision, "execution": Execution, "heartbeat": Heartbeat, "config": ConfigReport}

_DROP = object()


def edit(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A deep copy of ``base`` with changes; keys are dotted paths (``view.members.0.id``).

    A value of ``_DROP`` deletes the key.
    """
    record = copy.deepcopy(base)
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        target: Any = record
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if isinstance(target, list):
            target[int(last)] = value
        elif value is _DROP:
            del target[last]
        else:
            target[last] = value
    return record


def drop(base: dict[str, Any], *paths: str) -> dict[str, Any]:
    return edit(base, **{p: _DROP for p in paths})


@dataclass(frozen=True)
class Case:
    id: str
    record: dict[str, Any]
    field: str | None = None  # None: valid; else a word the reason must contain
    schema: bool = True  # invalid cases: the schema rejects it too (False = PARSER_ONLY)
    schema_bug: str | None = None  # the schema could reject it but does not (a known gap)


def params(cases: list[Case]) -> list[Any]:
    seen: set[str] = set()
    out = []
    for case in cases:
        assert case.id not in seen, f"duplicate case id {case.id}"
        seen.add(case.id)
        out.append(pytest.param(case, id=case.id))
    return out


# An optional field is left out, never null: the parser and the schema both reject a null.
NULLS: list[Case] = [
    Case("app-config-null", edit(DECISION, config=None), "config"),
    Case("run-digest-null", edit(DECISION, count=3, digest=None), "digest"),
    Case("set_event_horizon-nodes-null", edit(SET_EH, **{"config.nodes": None}), "nodes"),
    Case("add_nodes-eh-null", edit(ADD_NODES, **{"config.event_horizon": None}), "event_horizon"),
    Case("installed-reason-null", edit(INSTALLED, reason=None), "reason"),
    Case("refused-start-null", edit(REFUSED, start=None), "start"),
    Case("window_base-null", edit(DECISION, window_base=None), "window_base"),
    Case("heartbeat-view-null", edit(HEARTBEAT, view=None), "view"),
    Case("heartbeat-cache-null", edit(HEARTBEAT, cache_size=None), "cache_size"),
    Case("heartbeat-suspects-null", edit(HEARTBEAT, suspects=None), "suspects"),
    Case("heartbeat-version-null", edit(HEARTBEAT, version=None), "version"),
    Case("remove_nodes-protocol-null", edit(REMOVE_NODES, **{"config.nodes.0.protocol": None}), "protocol"),
]

# ---------------------------------------------------------------------------- invalid cases
BAD_INTS = [
    ("negative", -1, True),
    ("float", 1.5, True),
    ("integral-float", 1.0, False),  # PARSER_ONLY: JSON Schema's integer type accepts 1.0
    ("true", True, True),
    ("false", False, True),
    ("string", "5", True),
    ("int64+1", INT64_MAX + 1, True),
    ("list", [1], True),
]
# (base, dotted path) of every integer field; each must be a non-negative int64
INT_FIELDS = [
    *((b, f) for b in ("decision", "execution", "heartbeat", "installed", "refused")
      for f in ("ts_ms", "seq", "incarnation")),
    ("decision", "instance"),
    ("decision", "window_base"),
    ("execution", "executed"),
    ("heartbeat", "executed"),
    ("heartbeat", "decided"),
    ("heartbeat", "protocol"),
    ("heartbeat", "cache_size"),
    ("heartbeat", "view.start"),
    ("heartbeat", "view.event_horizon"),
    ("heartbeat", "view.members.0.protocol"),
    ("installed", "instance"),
    ("installed", "start"),
    ("installed", "event_horizon"),
    ("installed", "members.0.protocol"),
    ("refused", "instance"),
    ("decision_config", "config.nodes.0.protocol"),
    ("decision_config", "config.event_horizon"),
]
_BASES_FOR_INTS = {**BASES, "decision": edit(DECISION, window_base=90)}

BAD_IDS = [
    ("empty", "", True),
    ("129-chars", "a" * 129, True),
    ("space", "a b", True),
    ("slash", "g/1", True),
    ("non-ascii", "gé", True),
    ("trailing-newline", "g1\n", False),  # PARSER_ONLY: python-jsonschema's re.search `$`
    ("number", 5, True),
    ("null", None, True),
]
ID_FIELDS = [
    *((b, f) for b in ("decision", "execution", "heartbeat", "installed", "refused")
      for f in ("group", "node")),
    ("decision", "proposer"),
    ("decision_config", "config.nodes.0.id"),
    ("heartbeat", "view.members.0.id"),
    ("heartbeat", "suspects.0"),
    ("installed", "members.0.id"),
]


def _int_cases(valid: bool) -> list[Case]:
    cases = []
    for base, path in INT_FIELDS:
        rec = _BASES_FOR_INTS[base]
        if valid:
            cases.append(Case(f"{base}-{path}-0", edit(rec, **{path: 0})))
            if not (base == "decision" and path == "instance"):  # instance-max: see VALID
                cases.append(Case(f"{base}-{path}-max", edit(rec, **{path: INT64_MAX})))
            continue
        for label, value, schema in BAD_INTS:
            cases.append(Case(f"{base}-{path}-{label}", edit(rec, **{path: value}), path, schema))
    return cases


def _id_cases(valid: bool) -> list[Case]:
    cases = []
    for base, path in ID_FIELDS:
        rec = BASES[base]
        if valid:
            cases.append(Case(f"{base}-{path}-128", edit(rec, **{path: "x" * 128})))
            continue
        for label, value, schema in BAD_IDS:
            cases.append(Case(f"{base}-{path}-{label}", edit(rec, **{path: value}), path, schema))
    return cases


def _missing_cases() -> list[Case]:
    required = {
        "decision": ("v", "type", "group", "node", "ts_ms", "seq", "incarnation", "instance",
                     "proposer", "kind"),
        "decision_config": ("config.op",),
        "execution": ("v", "group", "node", "ts_ms", "seq", "incarnation", "executed"),
        "heartbeat": ("v", "group", "node", "ts_ms", "seq", "incarnation", "executed", "decided",
                      "protocol", "status", "view.start", "view.event_horizon", "view.members",
                      "view.members.0.id", "view.members.0.protocol"),
        "installed": ("v", "group", "node", "ts_ms", "seq", "incarnation", "instance", "outcome",
                      "members.0.id", "members.0.protocol"),
        "refused": ("instance", "outcome"),
    }
    cases = []
    for base, paths in required.items():
        for path in paths:
            # the reason names the last path element (a list index is not a field)
            cases.append(Case(f"{base}-missing-{path}", drop(BASES[base], path),
                              path.split(".")[-1]))
    return cases


def _unknown_field_cases() -> list[Case]:
    where = [
        *((b, "") for b in ("decision", "execution", "heartbeat", "installed", "refused")),
        ("decision_config", "config."),
        ("decision_config", "config.nodes.0."),
        ("heartbeat", "view."),
        ("heartbeat", "view.members.0."),
        ("installed", "members.0."),
    ]
    return [
        Case(f"{base}-{prefix}unknown-field", edit(BASES[base], **{prefix + "colour": "red"}),
             "colour")
        for base, prefix in where
    ]


# ---------------------------------------------------------------------------------- valid cases
VALID: list[Case] = [
    *(Case(f"base-{name}", rec) for name, rec in BASES.items()),
    Case("heartbeat-minimal", HEARTBEAT_MIN),
    Case("set_event_horizon", SET_EH),
    Case("add_nodes", ADD_NODES),
    Case("remove_nodes-without-protocol", REMOVE_NODES),
    Case("remove_nodes-with-protocol", edit(REMOVE_NODES, **{"config.nodes.0.protocol": 3})),
    Case("boot-without-event_horizon", drop(DECISION_CONFIG, "config.event_horizon")),
    # envelope
    Case("group-128-chars", edit(EXECUTION, group="a" * 128)),
    Case("node-128-chars", edit(EXECUTION, node="b" * 128)),
    Case("group-full-charset", edit(EXECUTION, group="AZaz09._:-")),
    Case("group-1-char", edit(EXECUTION, group="g")),
    Case("kind-noop", edit(DECISION, kind="noop")),
    # decision
    Case("count-explicit-1", edit(DECISION, count=1)),
    Case("count-run", edit(DECISION, count=50)),
    Case("count-max-from-0", edit(DECISION, instance=0, count=INT64_MAX)),
    Case("instance-max", edit(DECISION, instance=INT64_MAX)),
    Case("instance-0", edit(DECISION, instance=0)),
    Case("digest-hex-lower", edit(DECISION, digest="0123456789abcdef")),
    Case("digest-hex-upper", edit(DECISION, digest="DEADBEEF")),
    Case("digest-count-1", edit(DECISION, count=1, digest="ab")),
    Case("window_base-node-is-proposer", edit(DECISION, window_base=90)),
    Case("window_base-0", edit(DECISION, window_base=0)),
    Case("proposer-other-node", edit(DECISION, proposer="n2")),
    Case("config-decision-count-1-explicit", edit(DECISION_CONFIG, count=1)),
    Case("config-decision-digest", edit(DECISION_CONFIG, digest="ff")),
    # an out-of-domain horizon is well-formed: the monitor alerts on it (EH_OUT_OF_DOMAIN)
    Case("set_event_horizon-500", edit(SET_EH, **{"config.event_horizon": 500})),
    Case("set_event_horizon-0", edit(SET_EH, **{"config.event_horizon": 0})),
    Case("add_nodes-old-protocol", edit(ADD_NODES, **{"config.nodes.0.protocol": 1})),
    # execution
    Case("executed-0", edit(EXECUTION, executed=0)),
    Case("executed-max", edit(EXECUTION, executed=INT64_MAX)),
    # heartbeat
    *(Case(f"status-{s}", edit(HEARTBEAT, status=s))
      for s in ("ONLINE", "RECOVERING", "OFFLINE", "ERROR", "UNREACHABLE")),
    Case("view-eh-500", edit(HEARTBEAT, **{"view.event_horizon": 500})),
    Case("view-one-member", edit(HEARTBEAT, **{"view.members": [{"id": "n1", "protocol": 0}]})),
    Case("suspects-empty", edit(HEARTBEAT, suspects=[])),
    Case("suspects-many", edit(HEARTBEAT, suspects=["n2", "n3"])),
    Case("version-1-char", edit(HEARTBEAT, version="8")),
    Case("version-64-chars", edit(HEARTBEAT, version="v" * 64)),
    Case("version-free-text", edit(HEARTBEAT, version="8.0.40 (GPL) é")),
    Case("cache_size-0", edit(HEARTBEAT, cache_size=0)),
    # config report
    *(Case(f"refused-{r}", edit(REFUSED, reason=r))
      for r in ("EVENT_HORIZON_INVALID", "EVENT_HORIZON_UNCHANGEABLE", "OLD_MEMBER_CUSTOM_EH")),
    Case("refused-free-text", edit(REFUSED, reason="node n4 said no: protocol too old (x_1_3)")),
    Case("installed-eh-500", edit(INSTALLED, event_horizon=500)),
    *_int_cases(valid=True),
    *_id_cases(valid=True),
]

INVALID: list[Case] = [
    # ---- envelope
    Case("v-0", edit(EXECUTION, v=0), "v"),
    Case("v-2", edit(EXECUTION, v=2), "v"),
    Case("v-string", edit(EXECUTION, v="1"), "v"),
    Case("v-null", edit(EXECUTION, v=None), "v"),
    Case("type-unknown", edit(EXECUTION, type="executions"), "type"),
    Case("type-case", edit(EXECUTION, type="Execution"), "type"),
    Case("type-number", edit(EXECUTION, type=1), "type"),
    Case("type-null", edit(EXECUTION, type=None), "type"),
    Case("type-missing", drop(EXECUTION, "type"), "type"),
    Case("type-other-shape", edit(EXECUTION, type="heartbeat"), "decided"),
    *_int_cases(valid=False),
    *_id_cases(valid=False),
    *_missing_cases(),
    *_unknown_field_cases(),
    # ---- decision
    Case("count-0", edit(DECISION, count=0), "count"),
    Case("count-null", edit(DECISION, count=None), "count"),
    Case("count-int64+1", edit(DECISION, instance=0, count=INT64_MAX + 1), "count"),
    Case("count-true", edit(DECISION, count=True), "count"),
    Case("instance+count-overflows", edit(DECISION, instance=INT64_MAX, count=2), "count", False),
    Case("kind-unknown", edit(DECISION, kind="data"), "kind"),
    Case("kind-case", edit(DECISION, kind="APP"), "kind"),
    Case("kind-null", edit(DECISION, kind=None), "kind"),
    Case("digest-not-hex", edit(DECISION, digest="xyz"), "digest"),
    Case("digest-empty", edit(DECISION, digest=""), "digest"),
    Case("digest-0x", edit(DECISION, digest="0xab"), "digest"),
    Case("digest-number", edit(DECISION, digest=12), "digest"),
    Case("digest-with-count-2", edit(DECISION, count=2, digest="ab"), "digest"),
    Case("window_base-node-not-proposer", edit(DECISION, proposer="n2", window_base=5),
         "window_base", False),
    Case("config-without-kind-config", edit(DECISION, config=DECISION_CONFIG["config"]), "config"),
    Case("noop-with-config", edit(DECISION_CONFIG, kind="noop"), "config"),
    Case("kind-config-without-config", drop(DECISION_CONFIG, "config"), "config"),
    Case("kind-config-config-null", edit(DECISION_CONFIG, config=None), "config"),
    Case("config-decision-count-2", edit(DECISION_CONFIG, count=2), "count"),
    Case("config-not-object", edit(DECISION_CONFIG, config="boot"), "config"),
    Case("op-unknown", edit(DECISION_CONFIG, **{"config.op": "reboot"}), "op"),
    Case("op-null", edit(DECISION_CONFIG, **{"config.op": None}), "op"),
    Case("set_event_horizon-without-eh", drop(SET_EH, "config.event_horizon"), "event_horizon"),
    Case("set_event_horizon-with-nodes", edit(SET_EH, **{"config.nodes": [{"id": "n4"}]}), "nodes"),
    Case("set_event_horizon-with-empty-nodes", edit(SET_EH, **{"config.nodes": []}), "nodes"),
    *(Case(f"{op}-without-nodes", drop(edit(base, **{"config.op": op}), "config.nodes"), "nodes")
      for op, base in [("boot", DECISION_CONFIG), ("add_nodes", ADD_NODES),
                       ("remove_nodes", REMOVE_NODES)]),
    *(Case(f"{op}-empty-nodes", edit(base, **{"config.nodes": []}), "nodes")
      for op, base in [("boot", DECISION_CONFIG), ("add_nodes", ADD_NODES),
                       ("remove_nodes", REMOVE_NODES)]),
    *(Case(f"{op}-nodes-null", edit(base, **{"config.nodes": None}), "nodes")
      for op, base in [("boot", DECISION_CONFIG), ("add_nodes", ADD_NODES),
                       ("remove_nodes", REMOVE_NODES)]),
    Case("add_nodes-with-eh", edit(ADD_NODES, **{"config.event_horizon": 10}), "event_horizon"),
    Case("remove_nodes-with-eh", edit(REMOVE_NODES, **{"config.event_horizon": 10}),
         "event_horizon"),
    Case("boot-node-without-protocol", drop(DECISION_CONFIG, "config.nodes.1.protocol"),
         "protocol"),
    Case("add_nodes-node-without-protocol", drop(ADD_NODES, "config.nodes.0.protocol"),
         "protocol"),
    Case("boot-duplicate-node", edit(DECISION_CONFIG, **{"config.nodes.1.id": "n1"}), "nodes",
         False),
    Case("add_nodes-duplicate-node",
         edit(ADD_NODES, **{"config.nodes": [{"id": "n4", "protocol": 9}] * 2}), "nodes", False),
    Case("remove_nodes-duplicate-node", edit(REMOVE_NODES, **{"config.nodes": [{"id": "n3"}] * 2}),
         "nodes", False),
    Case("nodes-not-list", edit(DECISION_CONFIG, **{"config.nodes": {"id": "n1"}}), "nodes"),
    Case("node-not-object", edit(DECISION_CONFIG, **{"config.nodes.0": "n1"}), "nodes"),
    # ---- heartbeat
    *(Case(f"status-{label}", edit(HEARTBEAT, status=value), "status")
      for label, value in [("lower", "online"), ("unknown", "DEAD"), ("empty", ""),
                           ("null", None), ("number", 1)]),
    Case("view-not-object", edit(HEARTBEAT, view=[0, 10]), "view"),
    Case("view-members-empty", edit(HEARTBEAT, **{"view.members": []}), "members"),
    Case("view-members-duplicate", edit(HEARTBEAT, **{"view.members.1.id": "n1"}), "members",
         False),
    Case("view-members-not-list", edit(HEARTBEAT, **{"view.members": "n1"}), "members"),
    Case("suspects-not-list", edit(HEARTBEAT, suspects="n2"), "suspects"),
    Case("version-empty", edit(HEARTBEAT, version=""), "version"),
    Case("version-65-chars", edit(HEARTBEAT, version="v" * 65), "version"),
    Case("version-number", edit(HEARTBEAT, version=8), "version"),
    # ---- config report
    Case("outcome-unknown", edit(REFUSED, outcome="rejected"), "outcome"),
    Case("outcome-case", edit(REFUSED, outcome="REFUSED"), "outcome"),
    Case("outcome-null", edit(REFUSED, outcome=None), "outcome"),
    *(Case(f"installed-missing-{f}", drop(INSTALLED, f), f)
      for f in ("start", "event_horizon", "members")),
    Case("installed-with-reason", edit(INSTALLED, reason="EVENT_HORIZON_INVALID"), "reason"),
    Case("installed-members-empty", edit(INSTALLED, members=[]), "members"),
    Case("installed-members-duplicate", edit(INSTALLED, **{"members.2.id": "n1"}), "members",
         False),
    Case("refused-without-reason", drop(REFUSED, "reason"), "reason"),
    Case("refused-reason-null", edit(REFUSED, reason=None), "reason"),
    Case("set_event_horizon-eh-null", edit(SET_EH, **{"config.event_horizon": None}),
         "event_horizon"),
    *(Case(f"installed-{f}-null", edit(INSTALLED, **{f: None}), f)
      for f in ("start", "event_horizon", "members")),
    Case("refused-reason-empty", edit(REFUSED, reason=""), "reason"),
    Case("refused-reason-number", edit(REFUSED, reason=3), "reason"),
    *(Case(f"refused-with-{f}", edit(REFUSED, **{f: v}), f)
      for f, v in [("start", 0), ("event_horizon", 10), ("members", MEMBERS)]),
]


# ------------------------------------------------------------------------------------- helpers


def wire(record: dict[str, Any]) -> bytes:
    return json.dumps(record, ensure_ascii=False).encode("utf-8")


JUNK = [
    ("none", None, "null"),
    ("empty-bytes", b"", "JSON"),
    ("empty-str", "", "JSON"),
    ("not-utf8", b"\xff\xfe{}", "UTF-8"),
    ("not-utf8-in-string", b'{"v": 1, "group": "g\xc3\x28"}', "UTF-8"),
    ("truncated-json", b'{"v": 1, "type": "execution"', "JSON"),
    ("single-quotes", b"{'v': 1}", "JSON"),
    ("trailing-garbage", wire(EXECUTION) + b"}", "JSON"),
    ("two-objects", wire(EXECUTION) + b"\n" + wire(EXECUTION), "JSON"),
    ("nan", b'{"v": NaN}', ""),
    ("deep-nesting", b"[" * 100_000, ""),
    ("array", b"[]", "object"),
    ("array-of-record", b"[" + wire(EXECUTION) + b"]", "object"),
    ("string", b'"execution"', "object"),
    ("number", b"1", "object"),
    ("json-null", b"null", "object"),
    ("json-true", b"true", "object"),
    ("empty-object", b"{}", "type"),
    ("oversized-bytes", b" " * MIB + wire(EXECUTION), "1 MiB"),
    ("oversized-str", " " * MIB + wire(EXECUTION).decode(), "1 MiB"),
    ("lone-surrogate-str", '{"v": 1, "group": "\ud800"}', ""),
]


def bad_int_cases(family: str, bases: dict[str, dict[str, Any]], fields: list[tuple[str, str]]) -> list[Case]:
    """Every bad integer of ``BAD_INTS`` in each ``(base, dotted path)`` of a family's records."""
    return [Case(f"{family}-{base}-{path}-{label}", edit(bases[base], **{path: value}),
                 path.split(".")[-1], schema)
            for base, path in fields for label, value, schema in BAD_INTS]


def bad_id_cases(family: str, bases: dict[str, dict[str, Any]], fields: list[tuple[str, str]]) -> list[Case]:
    """Every bad id of ``BAD_IDS`` in each ``(base, dotted path)``; a list item's reason names
    the list."""
    cases = []
    for base, path in fields:
        parts = path.split(".")
        field = parts[-2] if parts[-1].isdigit() else parts[-1]
        cases += [Case(f"{family}-{base}-{path}-{label}", edit(bases[base], **{path: value}), field, schema)
                  for label, value, schema in BAD_IDS]
    return cases
