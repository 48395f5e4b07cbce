"""The chain family's events (docs/families.md 4.2) through ``parse_event``: what is the chain
family's own (the cross-field reasons, the worked examples, the enums and topics).
``test_contract_families.py`` runs the cases of ``chain_cases.py`` through the parser, the JSON
Schema, the fast check and ``decode_event``.
"""

from __future__ import annotations

from replimon.contract import (
    EVENT_FAMILIES,
    EVENT_TOPICS,
    ChainAppend,
    ChainHeartbeat,
    ChainView,
    ChainWedge,
    Invalid,
    parse_event,
)
from replimon.contract.models_chain import (
    APPEND_ORIGINS,
    APPEND_OUTCOMES,
    CHAIN_TYPES,
    VIEW_OUTCOMES,
    VIEW_REASONS,
    WEDGE_REASONS,
)
from tests.contract.chain_cases import APPEND, REJECTED, RUN, VIEW, WORKED
from tests.support.contract_cases import drop, edit, wire


def test_cross_field_reasons_say_the_rule() -> None:
    assert parse_event(wire(drop(REJECTED, "reason"))) == Invalid("reason is required iff outcome is 'rejected'")
    assert parse_event(wire(edit(VIEW, reason="Wedged"))) == Invalid("reason is required iff outcome is 'rejected'")
    assert parse_event(wire(edit(RUN, digest="ab"))) == Invalid("digest is allowed only when count is 1")
    assert parse_event(wire(edit(VIEW, chain=["B", "C", "B"]))) == Invalid("chain lists a node twice")


def test_an_accepted_append_run_knows_its_last_position() -> None:
    run = parse_event(wire(RUN))
    assert isinstance(run, ChainAppend) and (run.pos, run.last) == (100, 104)
    assert isinstance(parse_event(wire(APPEND)), ChainAppend)


def test_worked_examples_parse_in_order() -> None:
    for recs in WORKED.values():
        models = [parse_event(wire(rec)) for rec in recs]
        assert all(isinstance(m, ChainView | ChainWedge | ChainAppend | ChainHeartbeat) for m in models), models


def test_enums_are_the_tables() -> None:
    fields = {"outcome": (ChainView, VIEW_OUTCOMES), "reason": (ChainWedge, WEDGE_REASONS),
              "origin": (ChainAppend, APPEND_ORIGINS)}
    for name, (model, want) in fields.items():
        assert tuple(model.model_json_schema()["properties"][name]["enum"]) == want, name
    props = ChainAppend.model_json_schema()["properties"]
    assert tuple(props["outcome"]["enum"]) == APPEND_OUTCOMES
    assert VIEW_REASONS == ("WrongEpoch", "Wedged", "BadSequence")


def test_families_and_topics_tables() -> None:
    # docs/families.md 1.3: chain.append on replica.decisions, chain.heartbeat on replica.heartbeats,
    # chain.view and chain.wedge on replica.config
    assert {t for t, f in EVENT_FAMILIES.items() if f == "chain"} == set(CHAIN_TYPES)
    assert {t: EVENT_TOPICS[t] for t in CHAIN_TYPES} == {
        "chain.append": "decisions", "chain.heartbeat": "heartbeats", "chain.view": "config",
        "chain.wedge": "config"}


def test_unknown_type_reason_lists_the_chain_types() -> None:
    result = parse_event(wire(edit(VIEW, type="chain.views")))
    assert isinstance(result, Invalid)
    assert "chain.view, chain.wedge, chain.append, chain.heartbeat" in result.reason
