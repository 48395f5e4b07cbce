"""Event contract v1 (docs/contract.md): every field rule, through ``parse_event`` and the JSON Schema.

Each case is a record (a dict, sent as JSON) and what must happen to it:

* valid records parse to a model and validate against ``replimon/contract/event-v1.schema.json``;
* invalid records return :class:`Invalid` whose reason names the field, and -- when the rule is one
  a JSON Schema can express -- the checked-in schema rejects them too.

Rules the schema cannot express are marked ``PARSER_ONLY`` with the reason; for those cases the test
asserts the schema *accepts* the record, so the list below stays an accurate account of where the
parser is stricter than the schema:

* ``window_base`` only when ``node == proposer`` (compares two values; documented in the schema's
  ``description``);
* duplicate node ids in ``config.nodes``, ``view.members`` and ``members`` (``uniqueItems`` compares
  whole objects, not the ``id`` of each);
* ``instance + count - 1`` must fit in 64 bits (arithmetic);
* an integer-valued float such as ``1.0`` (JSON Schema's ``integer`` type accepts it by definition);
* an id with a trailing newline (the schema's ``$`` is ECMA-262 and rejects it, but Python's
  ``jsonschema`` evaluates patterns with ``re.search``, where ``$`` also matches before a final
  newline).

An explicit ``null`` is never allowed (an optional field is left out): parser and schema agree.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replimon.contract import (
    ConfigReport,
    Decision,
    Execution,
    Heartbeat,
    Invalid,
    event_to_dict,
    json_schema,
    parse_event,
)
from tests.support.contract_cases import (
    BASES,
    DECISION,
    EXECUTION,
    INVALID,
    JUNK,
    MIB,
    MODEL_OF,
    NULLS,
    SCHEMA_FILE,
    SET_EH,
    VALID,
    Case,
    edit,
    params,
    wire,
)


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def names(reason: str, field: str) -> bool:
    """``field`` appears in ``reason`` as a word (``v`` in ``v: ...``, not in ``valid``)."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(field)}(?![A-Za-z0-9_])", reason) is not None



def schema_errors(validator: jsonschema.Draft202012Validator, record: dict[str, Any]) -> list[str]:
    # validate what a consumer would see: the record after a JSON round trip
    return [e.message for e in validator.iter_errors(json.loads(wire(record)))]


# --------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("case", params(VALID))
def test_valid_record_parses(case: Case, validator: jsonschema.Draft202012Validator) -> None:
    event = parse_event(wire(case.record))
    assert not isinstance(event, Invalid), event.reason
    assert isinstance(event, MODEL_OF[case.record["type"]])
    # the same record as str parses the same, and survives a round trip
    assert parse_event(wire(case.record).decode("utf-8")) == event
    assert parse_event(json.dumps(event_to_dict(event))) == event
    errors = schema_errors(validator, case.record)
    if case.schema_bug:
        if not errors:
            pytest.fail(f"schema gap fixed ({case.schema_bug}): drop schema_bug from this case")
        pytest.xfail(case.schema_bug)
    assert errors == []


@pytest.mark.parametrize("case", params(INVALID + NULLS))
def test_invalid_record_is_rejected(case: Case, validator: jsonschema.Draft202012Validator) -> None:
    assert case.field is not None
    result = parse_event(wire(case.record))
    assert isinstance(result, Invalid), f"accepted: {result!r}"
    assert "\n" not in result.reason
    assert names(result.reason, case.field), f"{case.field!r} not named in {result.reason!r}"
    errors = schema_errors(validator, case.record)
    if case.schema_bug:
        if errors:
            pytest.fail(f"schema gap fixed ({case.schema_bug}): drop schema_bug from this case")
        pytest.xfail(case.schema_bug)
    if case.schema:
        assert errors, "the JSON Schema accepts a record the parser rejects"
    else:
        assert errors == [], "PARSER_ONLY rule is now expressed by the schema: update the docstring"


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(True),
        pytest.param(1.0),
    ],
    ids=["true", "1.0"],
)
def test_v_must_be_the_integer_1(value: Any) -> None:
    result = parse_event(wire(edit(EXECUTION, v=value)))
    assert isinstance(result, Invalid) and "v" in result.reason


def test_count_defaults_to_1() -> None:
    event = parse_event(wire(DECISION))
    assert isinstance(event, Decision)
    assert event.count == 1 and event.last == event.instance
    run = parse_event(wire(edit(DECISION, count=5)))
    assert isinstance(run, Decision) and run.last == 104


def test_out_of_domain_event_horizon_is_the_monitors_job() -> None:
    event = parse_event(wire(edit(SET_EH, **{"config.event_horizon": 500})))
    assert isinstance(event, Decision)
    assert event.config is not None and event.config.event_horizon == 500


def test_reason_is_one_line_and_counts_the_rest() -> None:
    result = parse_event(wire(edit(EXECUTION, ts_ms=-1, seq=-1, executed="x")))
    assert isinstance(result, Invalid)
    assert "\n" not in result.reason
    assert result.reason.startswith("ts_ms:")
    assert "(+2 more)" in result.reason


# ------------------------------------------------------------------------ never raise on junk


@pytest.mark.parametrize(("raw", "word"), [pytest.param(r, w, id=i) for i, r, w in JUNK])
def test_junk_returns_invalid(raw: bytes | str | None, word: str) -> None:
    result = parse_event(raw)
    assert isinstance(result, Invalid)
    assert result.reason and "\n" not in result.reason
    assert word in result.reason


def test_exactly_1_mib_is_not_too_big() -> None:
    record = wire(EXECUTION)
    padded = record[:-1] + b" " * (MIB - len(record)) + b"}"
    assert len(padded) == MIB
    assert isinstance(parse_event(padded), Execution)


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4096))
def test_arbitrary_bytes_never_raise(raw: bytes) -> None:
    result = parse_event(raw)
    assert isinstance(result, Invalid | Decision | Execution | Heartbeat | ConfigReport)
    if isinstance(result, Invalid):
        assert result.reason and "\n" not in result.reason


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None, database=None)
@given(base=st.sampled_from(sorted(BASES)), key=st.text(max_size=12), value=JSON_VALUES)
def test_arbitrary_field_values_never_raise(base: str, key: str, value: Any) -> None:
    record = {**BASES[base], key: value}
    result = parse_event(json.dumps(record))
    assert isinstance(result, Invalid | Decision | Execution | Heartbeat | ConfigReport)


# ------------------------------------------------------------------------------------ schema
def test_checked_in_schema_is_up_to_date() -> None:
    expected = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    assert SCHEMA_FILE.read_text(encoding="utf-8") == expected, (
        f"{SCHEMA_FILE} is stale: run `replimon schema --write`"
    )


def test_schema_is_draft_2020_12_and_documents_parser_only_rule() -> None:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    assert "window_base" in schema["$defs"]["Decision"]["description"]
