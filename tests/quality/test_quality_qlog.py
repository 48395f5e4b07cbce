"""Data-quality suites of the quorum-log family (docs/quality.md): ``replica.qlog.decree``,
``replica.qlog.passed``, ``replica.qlog.recover`` and ``replica.qlog.heartbeat``.

The passing data is the quorum-log simulator's trace with every fault of its catalogue (near
misses included) in a group of its own: protocol faults are the monitor's business, not
data-quality failures. Each expectation's failing data is a clean trace with one mutation, which
must fail that expectation and name the mutated row. A mixed stream leaves XCom's verdicts as they
are alone. The checks themselves are ``tests/support/quality.py``'s, shared with the other families.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replimon.config import load_settings
from replimon.producers import simulator_qlog
from replimon.producers.simulator_qlog import CATALOGUE
from replimon.quality.suites import (
    QLOG_DECREE,
    QLOG_HEARTBEATS,
    QLOG_PASSED,
    QLOG_RECOVER,
    QLOG_SUITES,
    parameters,
    specs,
)
from tests.support.quality import (
    NOW_MS,
    Events,
    Mutation,
    assert_every_expectation_passes,
    assert_fails_on_mutation,
    assert_validate_names_the_bad_record,
    assert_xcom_verdicts_unchanged,
    clock_ahead,
    family_trace,
    records,
    seq_back,
    set_field,
)

PARAMS = parameters(load_settings(None), NOW_MS)
TOPIC = {"qlog.decree": "replica.decisions", "qlog.passed": "replica.decisions",
         "qlog.heartbeat": "replica.heartbeats", "qlog.recover": "replica.config"}
TYPE = {QLOG_DECREE: "qlog.decree", QLOG_PASSED: "qlog.passed", QLOG_RECOVER: "qlog.recover",
        QLOG_HEARTBEATS: "qlog.heartbeat"}
FAULTS = sorted(CATALOGUE)  # the near misses too: they make the legal histories closest to a fault


def qlog_trace(seconds: int, *faults: str, groups: int = 3, seed: int = 1) -> Events:
    return family_trace(simulator_qlog, seconds, *faults, groups=groups, seed=seed)


@pytest.fixture(scope="module")
def clean() -> Events:
    """A clean fleet with a recovery in one group (the only source of qlog.recover records)."""
    return qlog_trace(40, "qlog_recover_unsafe_near_miss:ql2@10s", groups=3, seed=2)


def test_every_qlog_expectation_passes_on_the_trace_with_every_fault() -> None:
    events = qlog_trace(150, *(f"{f}:ql{i + 1}@10s" for i, f in enumerate(FAULTS)), groups=len(FAULTS))
    alerts = assert_every_expectation_passes(events, QLOG_SUITES, PARAMS, TOPIC)
    assert {CATALOGUE[f].alert for f in FAULTS if CATALOGUE[f].alert} <= {a["kind"] for a in alerts}


# -- failing data -----------------------------------------------------------------------------------
def _acked_stranger(e: dict[str, Any]) -> None:
    e["acked"] = [*e["acked"], "n99"]


def _relocated_stranger(e: dict[str, Any]) -> None:
    e["relocated"] = [*(e.get("relocated") or []), {"node": "n98", "from": e["old"][0]}]


def _synced_stranger(e: dict[str, Any]) -> None:
    e["synced_with"] = [*e["synced_with"], "n97"]


def _reconf_back(e: dict[str, Any]) -> None:
    e["new_leg"] = e["leg"]


# (mutation, whether the mutated record is still contract-valid: the enums and the non-negative
# numbers are the contract's too, so those records only reach a frame from a source that skipped
# parsing)
MUTATIONS: dict[tuple[str, str], tuple[Mutation, bool]] = {
    **{(s, "expect_column_values_to_be_between(ts_ms)"):
       (set_field(TYPE[s], lambda e: e.update(ts_ms=NOW_MS + 24 * 3600 * 1000)), True) for s in QLOG_SUITES},
    **{(s, "expect_column_values_to_be_between(seq_step)"): (seq_back(TYPE[s]), True) for s in QLOG_SUITES},
    (QLOG_DECREE, "expect_column_values_to_be_between(num)"):
        (set_field("qlog.decree", lambda e: e.update(num=-1)), False),
    (QLOG_DECREE, "expect_column_values_to_be_in_set(kind)"):
        (set_field("qlog.decree", lambda e: e.update(kind="noop")), False),
    (QLOG_DECREE, "expect_column_values_to_be_in_set(outcome)"):
        (set_field("qlog.decree", lambda e: e.update(outcome="unreachable")), False),
    (QLOG_DECREE, "expect_column_pair_values_a_to_be_greater_than_b(new_leg,leg)"):
        (set_field("qlog.decree", _reconf_back, lambda e: e["kind"] == "reconf" and "leg" in e), True),
    (QLOG_PASSED, "expect_column_values_to_be_between(ballot_n)"):
        (set_field("qlog.passed", lambda e: e["ballot"].update(n=-3)), False),
    (QLOG_PASSED, "expect_column_values_to_be_in_set(kind)"):
        (set_field("qlog.passed", lambda e: e.update(kind="noop")), False),
    (QLOG_PASSED, "expect_column_values_to_be_between(acked_outside)"):
        (set_field("qlog.passed", _acked_stranger), True),
    (QLOG_PASSED, "expect_column_pair_values_to_be_equal(node,ballot_proposer)"):
        (set_field("qlog.passed", lambda e: e["ballot"].update(proposer="n42")), True),
    (QLOG_PASSED, "expect_column_pair_values_a_to_be_greater_than_b(new_leg,leg)"):
        (set_field("qlog.passed", _reconf_back, lambda e: e["kind"] == "reconf"), True),
    (QLOG_RECOVER, "expect_column_values_to_be_between(leg)"):
        (set_field("qlog.recover", lambda e: e.update(leg=-1)), False),
    (QLOG_RECOVER, "expect_column_values_to_be_in_set(phase)"):
        (set_field("qlog.recover", lambda e: e.update(phase="done")), False),
    (QLOG_RECOVER, "expect_column_values_to_be_between(relocated_outside)"):
        (set_field("qlog.recover", _relocated_stranger), True),
    (QLOG_RECOVER, "expect_column_values_to_be_between(synced_outside)"):
        (set_field("qlog.recover", _synced_stranger, lambda e: e["phase"] == "synced"), True),
    (QLOG_HEARTBEATS, "expect_column_values_to_be_between(clock_offset_ms)"): (clock_ahead("qlog.heartbeat"), True),
    (QLOG_HEARTBEATS, "expect_column_values_to_be_between(watermark)"):
        (set_field("qlog.heartbeat", lambda e: e.update(watermark=-2)), False),
    (QLOG_HEARTBEATS, "expect_column_values_to_be_between(leader_outside)"):
        (set_field("qlog.heartbeat", lambda e: e.update(leader="n77")), True),
}


def test_every_qlog_expectation_has_failing_data() -> None:
    assert set(MUTATIONS) == {(s, spec.name) for s in QLOG_SUITES for spec in specs()[s]}


@pytest.mark.parametrize("key", sorted(MUTATIONS), ids=lambda k: f"{k[0]}:{k[1]}")
def test_qlog_expectation_fails_on_its_mutation(clean: Events, key: tuple[str, str]) -> None:
    mutation, valid = MUTATIONS[key]
    assert_fails_on_mutation(clean, key, mutation, valid, PARAMS, TOPIC)


# -- beside XCom ------------------------------------------------------------------------------------
def test_a_mixed_stream_leaves_xcom_verdicts_as_they_are(clean: Events) -> None:
    assert_xcom_verdicts_unchanged(records(clean, TOPIC), PARAMS)


@pytest.mark.usefixtures("clean_env")
def test_validate_a_mixed_file_names_the_bad_qlog_record(clean: Events, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert_validate_names_the_bad_record(
        clean, tmp_path, capsys, (QLOG_PASSED, "expect_column_values_to_be_between(acked_outside)"),
        lambda e: e["type"] == "qlog.passed" and e["group"] == "ql2",
        lambda e: {**e, "acked": [*e["acked"], "n99"]})
