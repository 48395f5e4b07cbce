"""The generations family's events (docs/families.md 2.2; docs/contract.md "Protocol families")
through ``parse_event``: what is the generations family's own (the cross-field reasons, the
worked examples, the enums and topics). ``test_contract_families.py`` runs the cases of
``gen_cases.py`` through the parser, the JSON Schema, the fast check and ``decode_event``.
"""

from __future__ import annotations

import pytest

from replimon.contract import (
    EVENT_FAMILIES,
    EVENT_TOPICS,
    EVENT_TYPES,
    GenHeartbeat,
    GenState,
    GenXact,
    Invalid,
    parse_event,
)
from replimon.contract.models_gen import (
    GEN_CAUSES,
    GEN_STATUSES,
    GEN_TYPES,
    GEN_VIA,
    NODE_STATUSES,
    XACT_MODES,
    XACT_PHASES,
    XACT_ROLES,
)
from replimon.core.rules.family import family_of
from tests.contract.gen_cases import BASES, WORKED
from tests.support.contract_cases import wire


def test_cross_field_reasons_say_the_rule() -> None:
    online = {k: v for k, v in BASES["online"].items() if k != "via"}
    assert parse_event(wire(online)) == Invalid("via is required iff cause is 'online'")
    vote = {k: v for k, v in BASES["vote"].items() if k != "vote"}
    assert parse_event(wire(vote)) == Invalid("vote is required iff cause is 'vote'")
    at = {**BASES["committed"], "at": {"num": 7, "status": "ONLINE"}}
    assert parse_event(wire(at)) == Invalid("at is allowed only when phase is 'prepared'")
    twice = {**BASES["switch"], "gen": {**BASES["switch"]["gen"], "members": ["A", "A"]}}
    assert parse_event(wire(twice)) == Invalid("gen: members lists a node twice")


def test_unknown_type_reason_lists_every_family_type() -> None:
    result = parse_event(wire({**BASES["switch"], "type": "gen.states"}))
    assert isinstance(result, Invalid)
    assert result.reason.startswith("type: must be one of decision, execution, heartbeat, config, "
                                    "gen.state, gen.xact, gen.heartbeat")


@pytest.mark.parametrize("example", sorted(WORKED))
def test_worked_examples_parse_in_order(example: str) -> None:
    models = [parse_event(wire(rec)) for rec in WORKED[example]]
    assert all(isinstance(m, GenState | GenXact | GenHeartbeat) for m in models), models


def test_enums_are_the_tables() -> None:
    fields = {
        "cause": (GenState, GEN_CAUSES), "status": (GenState, GEN_STATUSES), "via": (GenState, GEN_VIA),
        "phase": (GenXact, XACT_PHASES), "role": (GenXact, XACT_ROLES), "mode": (GenXact, XACT_MODES),
        "node_status": (GenHeartbeat, NODE_STATUSES),
    }
    for name, (model, values) in fields.items():
        schema = model.model_json_schema()["properties"][name]
        enum = schema.get("enum") or next(s["enum"] for s in schema["anyOf"] if "enum" in s)
        assert tuple(enum) == values, name


def test_families_and_topics_tables() -> None:
    assert set(EVENT_FAMILIES) == set(EVENT_TYPES) == set(EVENT_TOPICS)
    # the contract's table agrees with the core's rule (the contract may not import the core)
    assert all(family_of(t) == f for t, f in EVENT_FAMILIES.items())
    assert {t for t, f in EVENT_FAMILIES.items() if f == "gen"} == set(GEN_TYPES)
    assert EVENT_TOPICS["gen.state"] == "config" and EVENT_TOPICS["gen.xact"] == "decisions"
    assert EVENT_TOPICS["gen.heartbeat"] == "heartbeats"
