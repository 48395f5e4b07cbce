"""Every protocol family's contract cases (``gen_cases.py``, ``qlog_cases.py``, ``chain_cases.py``) through
``parse_event``, the checked-in JSON Schema, the fast acceptance check and ``decode_event``, as
``test_contract.py`` runs XCom's.

Valid records parse to their model, round-trip unchanged and validate against the schema; invalid
ones return :class:`Invalid` naming the field, and the schema rejects them too unless the case is
marked PARSER_ONLY (what contract v1 leaves to the parser: an integral float, an id with a
trailing newline, a key unique across a list's items). Every cross-field rule is an ``if``/``then``
clause of the schema, and a node named twice in a set is ``uniqueItems``. The fast check accepts
every valid ASCII record and no invalid one, and agrees with the models over random mutations.
"""

from __future__ import annotations

import json
import random
from types import ModuleType
from typing import Any

import jsonschema
import pytest

from replimon.contract import Invalid, decode_event, event_to_dict, parse_event
from replimon.contract.fast import accepts
from tests.contract import chain_cases, gen_cases, qlog_cases
from tests.contract.test_contract import names
from tests.contract.test_decode import _mutate_record, _serialize
from tests.support.contract_cases import SCHEMA_FILE, Case, params, wire

FAMILIES = {"gen": gen_cases, "qlog": qlog_cases, "chain": chain_cases}
MODEL_OF = {**gen_cases.MODEL_OF, **qlog_cases.MODEL_OF, **chain_cases.MODEL_OF}


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))


def errors(validator: jsonschema.Draft202012Validator, record: dict[str, Any]) -> list[str]:
    return [e.message for e in validator.iter_errors(json.loads(wire(record)))]


@pytest.mark.parametrize("case", params(gen_cases.VALID + qlog_cases.VALID + chain_cases.VALID))
def test_valid_record_parses(case: Case, validator: jsonschema.Draft202012Validator) -> None:
    event = parse_event(wire(case.record))
    assert not isinstance(event, Invalid), event.reason
    assert isinstance(event, MODEL_OF[case.record["type"]])
    assert parse_event(json.dumps(event_to_dict(event))) == event
    assert event_to_dict(event) == case.record  # nothing filled in, nothing lost ("from" too)
    assert decode_event(wire(case.record)) == case.record
    assert errors(validator, case.record) == []


@pytest.mark.parametrize("case", params(gen_cases.INVALID + qlog_cases.INVALID + chain_cases.INVALID))
def test_invalid_record_is_rejected(case: Case, validator: jsonschema.Draft202012Validator) -> None:
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


@pytest.mark.parametrize("cases", FAMILIES.values(), ids=FAMILIES.keys())
def test_fast_check_takes_every_valid_ascii_record_and_no_invalid_one(cases: ModuleType) -> None:
    ascii_valid = [c for c in cases.VALID if json.dumps(c.record, ensure_ascii=False).isascii()]
    missed = [c.id for c in ascii_valid if not accepts(json.loads(wire(c.record)))]
    assert not missed, missed[:5]
    unsound = [c.id for c in cases.INVALID if accepts(json.loads(wire(c.record)))]
    assert not unsound, unsound[:5]


@pytest.mark.parametrize(("cases", "seed"), [(gen_cases, 141), (qlog_cases, 153), (chain_cases, 167)], ids=FAMILIES.keys())
def test_decode_and_parse_agree_on_mutations(cases: ModuleType, seed: int) -> None:
    rng = random.Random(seed)
    bases = [c.record for c in cases.VALID]
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
