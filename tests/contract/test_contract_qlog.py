"""The quorum-log family's events (docs/families.md 3.2) through ``parse_event``: what is
the quorum-log family's own (the cross-field reasons, the worked examples, the enums and topics).
``test_contract_families.py`` runs the cases of ``qlog_cases.py`` through the parser, the JSON
Schema, the fast check and ``decode_event``.

"""

from __future__ import annotations

from replimon.contract import (
    EVENT_FAMILIES,
    EVENT_TOPICS,
    Invalid,
    QlogDecree,
    QlogHeartbeat,
    QlogPassed,
    QlogRecover,
    parse_event,
)
from replimon.contract.models_qlog import DECREE_KINDS, DECREE_OUTCOMES, QLOG_TYPES, RECOVER_PHASES
from tests.contract.qlog_cases import DECREE, PASSED, PASSED_RECONF, SYNCED, WORKED
from tests.support.contract_cases import drop, edit, wire


def test_cross_field_reasons_say_the_rule() -> None:
    assert parse_event(wire(drop(PASSED_RECONF, "members"))) == Invalid(
        "new_leg and members are required iff kind is 'reconf'")
    assert parse_event(wire(edit(DECREE, outcome="skipped"))) == Invalid(
        "outcome 'skipped' is allowed only when kind is 'reconf'")
    assert parse_event(wire(drop(SYNCED, "synced_with"))) == Invalid(
        "synced_with is required iff phase is 'synced'")


def test_worked_examples_parse_in_order() -> None:
    for recs in WORKED.values():
        models = [parse_event(wire(rec)) for rec in recs]
        assert all(isinstance(m, QlogDecree | QlogPassed | QlogRecover | QlogHeartbeat) for m in models)


def test_enums_are_the_tables() -> None:
    fields = {"kind": (QlogPassed, DECREE_KINDS), "outcome": (QlogDecree, DECREE_OUTCOMES),
              "phase": (QlogRecover, RECOVER_PHASES)}
    for name, (model, want) in fields.items():
        assert tuple(model.model_json_schema()["properties"][name]["enum"]) == want, name


def test_families_and_topics_tables() -> None:
    # docs/families.md 1.3: qlog.passed and qlog.decree on replica.decisions, qlog.heartbeat on
    # replica.heartbeats, qlog.recover on replica.config
    assert {t for t, f in EVENT_FAMILIES.items() if f == "qlog"} == set(QLOG_TYPES)
    assert {t: EVENT_TOPICS[t] for t in QLOG_TYPES} == {
        "qlog.decree": "decisions", "qlog.passed": "decisions", "qlog.recover": "config",
        "qlog.heartbeat": "heartbeats"}


def test_unknown_type_reason_lists_the_qlog_types() -> None:
    result = parse_event(wire(edit(PASSED, type="qlog.pass")))
    assert isinstance(result, Invalid)
    assert "qlog.decree, qlog.passed, qlog.recover, qlog.heartbeat" in result.reason
