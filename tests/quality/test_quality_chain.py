"""Data-quality suites of the chain family (docs/quality.md): ``replica.chain.view``,
``replica.chain.wedge``, ``replica.chain.append`` and ``replica.chain.heartbeat``.

The passing data is the chain simulator's trace with every fault of its catalogue (near misses
included) in a group of its own: protocol faults are the monitor's business, not data-quality
failures (a broken CAS is judged against the replica's log head by the rules; the suites check only
what one record says of itself, and the catalogue's faults keep that consistent). Each
expectation's failing data is a clean trace with one mutation, which must fail that expectation
and name the mutated row. A mixed stream leaves XCom's verdicts, and the other families', as they
are alone. The checks themselves are ``tests/support/quality.py``'s, shared with the other
families.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replimon.config import load_settings
from replimon.producers import simulator_chain, simulator_gen, simulator_qlog
from replimon.producers.simulator_chain import CATALOGUE
from replimon.quality.derive import input_frames
from replimon.quality.suites import (
    CHAIN_APPEND,
    CHAIN_HEARTBEATS,
    CHAIN_SUITES,
    CHAIN_VIEW,
    CHAIN_WEDGE,
    GEN_SUITES,
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
    assert_verdicts_unchanged,
    assert_xcom_verdicts_unchanged,
    clock_ahead,
    family_trace,
    records,
    run,
    seq_back,
    set_field,
)

PARAMS = parameters(load_settings(None), NOW_MS)
TOPIC = {"chain.append": "replica.decisions", "chain.heartbeat": "replica.heartbeats",
         "chain.view": "replica.config", "chain.wedge": "replica.config"}
TYPE = {CHAIN_VIEW: "chain.view", CHAIN_WEDGE: "chain.wedge", CHAIN_APPEND: "chain.append",
        CHAIN_HEARTBEATS: "chain.heartbeat"}
FAULTS = sorted(CATALOGUE)  # the near misses too: they make the legal histories closest to a fault


def chain_trace(seconds: int, *faults: str, groups: int = 3, seed: int = 1) -> Events:
    return family_trace(simulator_chain, seconds, *faults, groups=groups, seed=seed)


@pytest.fixture(scope="module")
def clean() -> Events:
    """A clean fleet with a wedge replaced in time, twice in one group (chain.wedge records with a
    suspect, two of one node), a view change answered BadSequence (a rejected chain.view) and a
    resend answered bad_sequence."""
    return chain_trace(40, "chain_wedge_not_replaced_near_miss:ch1@10s", "chain_wedge_not_replaced_near_miss:ch1@25s",
                       "chain_view_not_cas_near_miss:ch2@10s", "chain_append_not_cas_near_miss:ch3@10s",
                       groups=3, seed=2)


def test_every_chain_expectation_passes_on_the_trace_with_every_fault() -> None:
    events = chain_trace(90, *(f"{f}:ch{i + 1}@10s" for i, f in enumerate(FAULTS)), groups=len(FAULTS))
    alerts = assert_every_expectation_passes(events, CHAIN_SUITES, PARAMS, TOPIC)
    assert {CATALOGUE[f].alert for f in FAULTS if CATALOGUE[f].alert} <= {a["kind"] for a in alerts}


def test_a_stale_epoch_write_is_left_to_the_rule() -> None:
    """B, head of the new epoch, accepts the stale head's run of the old epoch, assumed at the old
    head's position and stored after its own entries: its positions do not follow what it assumed,
    but it is CHAIN_STALE_EPOCH_WRITE's (docs/families.md 4.4: CHAIN_APPEND_NOT_CAS is "not a stale
    write"). node_epoch, from the node's earlier records, tells it; the run checks leave it out."""
    events = chain_trace(40, "chain_stale_epoch_write:ch2@10s", groups=3, seed=2)
    frame = input_frames(records(events, TOPIC))[CHAIN_APPEND]
    stale = frame[(frame["outcome"] == "accepted") & (frame["epoch"] < frame["node_epoch"])]
    assert len(stale) and set(stale["group"]) == {"ch2"}
    assert stale["accepted_next"].isna().all() and stale["accepted_epoch"].isna().all()
    assert any(p != a + 1 for p, a in zip(stale["pos"], stale["assumed_pos"], strict=True))
    results = run(input_frames(records(events, TOPIC)), PARAMS)
    assert {k: o.unexpected for k, o in results.items() if not o.success} == {}


# -- failing data -----------------------------------------------------------------------------------
def _twice(e: dict[str, Any]) -> None:
    e["chain"] = [*e["chain"], e["chain"][0]]


def _installed_back(e: dict[str, Any]) -> None:
    e["epoch"] = e["from_epoch"]


def _installed(e: dict[str, Any]) -> bool:
    return e["outcome"] == "installed" and e["epoch"] > 0


def _accepted(e: dict[str, Any]) -> bool:
    return e["outcome"] == "accepted"


def _skip_one(e: dict[str, Any]) -> None:
    e["pos"] = e["assumed"]["pos"] + 2


def _epoch_jump(e: dict[str, Any]) -> None:
    e["epoch"] = e["assumed"]["epoch"] + 1


# (mutation, whether the mutated record is still contract-valid: the enums, the non-negative and
# positive numbers and a chain naming each node once are the contract's too, so those records only
# reach a frame from a source that skipped parsing)
MUTATIONS: dict[tuple[str, str], tuple[Mutation, bool]] = {
    **{(s, "expect_column_values_to_be_between(ts_ms)"):
       (set_field(TYPE[s], lambda e: e.update(ts_ms=NOW_MS + 24 * 3600 * 1000)), True) for s in CHAIN_SUITES},
    **{(s, "expect_column_values_to_be_between(seq_step)"): (seq_back(TYPE[s]), True) for s in CHAIN_SUITES},
    (CHAIN_VIEW, "expect_column_values_to_be_between(from_epoch)"):
        (set_field("chain.view", lambda e: e.update(from_epoch=-1)), False),
    (CHAIN_VIEW, "expect_column_values_to_be_between(epoch)"):
        (set_field("chain.view", lambda e: e.update(epoch=-1)), False),
    (CHAIN_VIEW, "expect_column_values_to_be_between(pos)"):
        (set_field("chain.view", lambda e: e.update(pos=-1)), False),
    (CHAIN_VIEW, "expect_column_values_to_be_in_set(outcome)"):
        (set_field("chain.view", lambda e: e.update(outcome="applied")), False),
    (CHAIN_VIEW, "expect_column_values_to_be_in_set(reason)"):
        (set_field("chain.view", lambda e: e.update(reason="Timeout"), lambda e: e["outcome"] == "rejected"), False),
    (CHAIN_VIEW, "expect_column_values_to_be_between(chain_repeats)"):
        (set_field("chain.view", _twice), False),
    (CHAIN_VIEW, "expect_column_pair_values_a_to_be_greater_than_b(epoch,cas_from_epoch)"):
        (set_field("chain.view", _installed_back, _installed), True),
    (CHAIN_WEDGE, "expect_column_values_to_be_between(epoch)"):
        (set_field("chain.wedge", lambda e: e.update(epoch=-1)), False),
    (CHAIN_WEDGE, "expect_column_values_to_be_in_set(reason)"):
        (set_field("chain.wedge", lambda e: e.update(reason="timeout")), False),
    (CHAIN_WEDGE, "expect_column_values_to_be_between(suspect_self)"):
        (set_field("chain.wedge", lambda e: e.update(suspect=e["node"])), True),
    (CHAIN_APPEND, "expect_column_values_to_be_between(assumed_epoch)"):
        (set_field("chain.append", lambda e: e["assumed"].update(epoch=-1)), False),
    (CHAIN_APPEND, "expect_column_values_to_be_between(assumed_pos)"):
        (set_field("chain.append", lambda e: e["assumed"].update(pos=-1)), False),
    (CHAIN_APPEND, "expect_column_values_to_be_between(epoch)"):
        (set_field("chain.append", lambda e: e.update(epoch=-1)), False),
    (CHAIN_APPEND, "expect_column_values_to_be_between(pos)"):
        (set_field("chain.append", lambda e: e.update(pos=-1)), False),
    (CHAIN_APPEND, "expect_column_values_to_be_between(count)"):
        (set_field("chain.append", lambda e: e.update(count=0)), False),
    (CHAIN_APPEND, "expect_column_values_to_be_in_set(origin)"):
        (set_field("chain.append", lambda e: e.update(origin="proxy")), False),
    (CHAIN_APPEND, "expect_column_values_to_be_in_set(outcome)"):
        (set_field("chain.append", lambda e: e.update(outcome="lost")), False),
    (CHAIN_APPEND, "expect_column_pair_values_to_be_equal(pos,accepted_next)"):
        (set_field("chain.append", _skip_one, _accepted), True),
    (CHAIN_APPEND, "expect_column_pair_values_to_be_equal(epoch,accepted_epoch)"):
        (set_field("chain.append", _epoch_jump, _accepted), True),
    (CHAIN_HEARTBEATS, "expect_column_values_to_be_between(clock_offset_ms)"):
        (clock_ahead("chain.heartbeat"), True),
    (CHAIN_HEARTBEATS, "expect_column_values_to_be_between(epoch)"):
        (set_field("chain.heartbeat", lambda e: e.update(epoch=-1)), False),
    (CHAIN_HEARTBEATS, "expect_column_values_to_be_between(pos)"):
        (set_field("chain.heartbeat", lambda e: e.update(pos=-1)), False),
    (CHAIN_HEARTBEATS, "expect_column_values_to_be_between(stable)"):
        (set_field("chain.heartbeat", lambda e: e.update(stable=-1)), False),
    (CHAIN_HEARTBEATS, "expect_column_values_to_be_between(ttl_ms)"):
        (set_field("chain.heartbeat", lambda e: e.update(ttl_ms=0)), False),
    (CHAIN_HEARTBEATS, "expect_column_values_to_be_between(chain_repeats)"):
        (set_field("chain.heartbeat", _twice), False),
}


def test_every_chain_expectation_has_failing_data() -> None:
    assert set(MUTATIONS) == {(s, spec.name) for s in CHAIN_SUITES for spec in specs()[s]}


@pytest.mark.parametrize("key", sorted(MUTATIONS), ids=lambda k: f"{k[0]}:{k[1]}")
def test_chain_expectation_fails_on_its_mutation(clean: Events, key: tuple[str, str]) -> None:
    mutation, valid = MUTATIONS[key]
    assert_fails_on_mutation(clean, key, mutation, valid, PARAMS, TOPIC)


def test_the_bootstrap_self_view_is_not_judged(clean: Events) -> None:
    """The epoch-0 self-view each boot reports (epoch 0 from 0) is no CAS: it is in the trace and
    epoch > from_epoch leaves it out."""
    boots = [e for e in clean if e["type"] == "chain.view" and e["epoch"] == e["from_epoch"] == 0]
    assert boots
    frame = input_frames(records(clean, TOPIC))[CHAIN_VIEW]
    key = (CHAIN_VIEW, "expect_column_pair_values_a_to_be_greater_than_b(epoch,cas_from_epoch)")
    assert run({CHAIN_VIEW: frame}, PARAMS)[key].success


# -- beside XCom and the other families -----------------------------------------------------------------
def test_a_mixed_stream_leaves_xcom_verdicts_as_they_are(clean: Events) -> None:
    assert_xcom_verdicts_unchanged(records(clean, TOPIC), PARAMS)


def test_a_mixed_stream_leaves_the_other_families_verdicts_as_they_are(clean: Events) -> None:
    """The generations and quorum-log suites say the same of their traces alone and with a chain
    trace after them on the same topics."""
    from tests.quality.test_quality_gen import TOPIC as GEN_TOPIC
    from tests.quality.test_quality_qlog import TOPIC as QLOG_TOPIC

    others = [*family_trace(simulator_gen, 20, groups=2, seed=3),
              *family_trace(simulator_qlog, 40, "qlog_recover_unsafe_near_miss:ql2@10s", groups=2, seed=2)]
    assert_verdicts_unchanged(records(others, {**GEN_TOPIC, **QLOG_TOPIC}), records(clean, TOPIC), PARAMS,
                              GEN_SUITES + QLOG_SUITES)


@pytest.mark.usefixtures("clean_env")
def test_validate_a_mixed_file_names_the_bad_chain_record(clean: Events, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert_validate_names_the_bad_record(
        clean, tmp_path, capsys, (CHAIN_APPEND, "expect_column_pair_values_to_be_equal(pos,accepted_next)"),
        lambda e: e["type"] == "chain.append" and e["group"] == "ch2" and e["outcome"] == "accepted",
        lambda e: {**e, "pos": e["assumed"]["pos"] + 2})
