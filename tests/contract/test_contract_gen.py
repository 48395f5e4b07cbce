"""The generations family's events (docs/families.md 2.2; docs/contract.md "Protocol families")
through ``parse_event``, the checked-in JSON Schema and ``decode_event``.

As for XCom (``test_contract.py``): valid records parse to their model and validate against the
schema; invalid ones return :class:`Invalid` naming the field, and the schema rejects them too
unless the case is marked PARSER_ONLY (here only what contract v1 already leaves to the parser:
an integral float and an id with a trailing newline). Every cross-field rule of the gen types is
an ``if``/``then`` clause of the schema, and a node named twice in a set is ``uniqueItems``.
"""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest

from replimon.contract import (
    EVENT_FAMILIES,
    EVENT_TOPICS,
    EVENT_TYPES,
    GenHeartbeat,
    GenState,
    GenXact,
    Invalid,
    decode_event,
    event_to_dict,
    parse_event,
)
from replimon.contract.fast import accepts
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
from tests.contract.gen_cases import BASES, INVALID, MODEL_OF, VALID, WORKED
from tests.contract.test_contract import names
from tests.contract.test_decode import _mutate_record, _serialize
from tests.support.contract_cases import SCHEMA_FILE, Case, params, wire


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))


def errors(validator: jsonschema.Draft202012Validator, record: dict[str, Any]) -> list[str]:
    return [e.message for e in validator.iter_errors(json.loads(wire(record)))]


@pytest.mark.parametrize("case", params(VALID))
def test_valid_gen_record_parses(case: Case, validator: jsonschema.Draft202012Validator) -> None:
    event = parse_event(wire(case.record))
    assert not isinstance(event, Invalid), event.reason
    assert isinstance(event, MODEL_OF[case.record["type"]])
    assert parse_event(json.dumps(event_to_dict(event))) == event
    assert event_to_dict(event) == case.record  # nothing filled in, nothing lost
    assert decode_event(wire(case.record)) == case.record
    assert errors(validator, case.record) == []


@pytest.mark.parametrize("case", params(INVALID))
def test_invalid_gen_record_is_rejected(case: Case, validator: jsonschema.Draft202012Validator) -> None:
    assert case.field is not None
    result = parse_event(wire(case.record))
    assert isinstance(result, Invalid), f"accepted: {result!r}"
    assert "\n" not in result.reason
    assert names(result.reason, case.field), f"{case.field!r} not named in {result.reason!r}"
    assert decode_event(wire(case.record)) == result
    if case.schema:
        assert errors(validator, case.record), "the JSON Schema accepts a record the parser rejects"
    else:
        assert errors(validator, case.record) == [], "PARSER_ONLY rule is now in the schema"


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


def test_fast_check_takes_every_valid_ascii_gen_record_and_no_invalid_one() -> None:
    ascii_valid = [c for c in VALID if json.dumps(c.record, ensure_ascii=False).isascii()]
    missed = [c.id for c in ascii_valid if not accepts(json.loads(wire(c.record)))]
    assert not missed, missed[:5]
    unsound = [c.id for c in INVALID if accepts(json.loads(wire(c.record)))]
    assert not unsound, unsound[:5]


def test_decode_and_parse_agree_on_gen_mutations() -> None:
    rng = random.Random(141)
    bases = [c.record for c in VALID]
    wrong, valid, n = [], 0, 6000
    for i in range(n):
        raw = _serialize(rng, _mutate_record(rng, rng.choice(bases)))
        old, new = parse_event(raw), decode_event(raw)
        if accepts(json.loads(raw)) and isinstance(old, Invalid):
            wrong.append((i, "fast check unsound", old))
        if isinstance(old, Invalid) or isinstance(new, Invalid):
            if old != new:
                wrong.append((i, old, new))
            continue
        valid += 1
        if new != json.loads(raw):
            wrong.append((i, "not the object as sent", new))
    assert not wrong, wrong[:5]
    assert 300 < valid < n - 300  # both verdicts exercised
