"""Data-quality suites of the generations family (docs/quality.md): ``replica.gen.state``,
``replica.gen.xact`` and ``replica.gen.heartbeat``.

The passing data is the generations simulator's trace with every fault of its catalogue in a
group of its own (protocol faults are the monitor's business, not data-quality failures); each
expectation's failing data is a clean trace with one mutation, which must fail that expectation
and name the mutated row. A mixed stream leaves XCom's verdicts as they are alone, and the
sampler keeps the gen records each topic carries.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from replimon.config import load_settings
from replimon.producers import simulator_gen
from replimon.producers.simulator_gen import CATALOGUE
from replimon.quality.derive import SUITE_OF_TYPE, input_frames
from replimon.quality.suites import (
    GEN_HEARTBEATS,
    GEN_STATE,
    GEN_SUITES,
    GEN_XACT,
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
TOPIC = {"gen.state": "replica.config", "gen.xact": "replica.decisions", "gen.heartbeat": "replica.heartbeats"}
TYPE = {GEN_STATE: "gen.state", GEN_XACT: "gen.xact", GEN_HEARTBEATS: "gen.heartbeat"}
FAULTS = sorted(name for name, spec in CATALOGUE.items() if spec.alert)


def gen_trace(seconds: int, *faults: str, groups: int = 3, seed: int = 1) -> Events:
    return family_trace(simulator_gen, seconds, *faults, groups=groups, seed=seed)


@pytest.fixture(scope="module")
def every_fault() -> Events:
    """Every generations fault of the catalogue, each in a group of its own, 150 s."""
    return gen_trace(150, *(f"{f}:pg{i + 1}@10s" for i, f in enumerate(FAULTS)), groups=len(FAULTS))


@pytest.fixture(scope="module")
def clean() -> Events:
    return gen_trace(40, groups=3, seed=2)


def test_every_gen_expectation_passes_on_the_trace_with_every_fault(every_fault: Events) -> None:
    alerts = assert_every_expectation_passes(every_fault, GEN_SUITES, PARAMS, TOPIC)
    assert {CATALOGUE[f].alert for f in FAULTS} <= {a["kind"] for a in alerts}


# -- failing data -----------------------------------------------------------------------------------
def future(type_: str) -> Mutation:
    return set_field(type_, lambda e: e.update(ts_ms=NOW_MS + 24 * 3600 * 1000))


def _stranger(e: dict[str, Any]) -> None:
    e["gen"]["members"] = [*e["gen"]["members"][1:], "n9"]  # n9 is not configured


# (mutation, whether the mutated record is still contract-valid: the status and role sets are
# the contract's too, so those records only reach a frame from a source that skipped parsing)
MUTATIONS: dict[tuple[str, str], tuple[Mutation, bool]] = {
    **{(s, "expect_column_values_to_be_between(ts_ms)"): (future(TYPE[s]), True) for s in GEN_SUITES},
    **{(s, "expect_column_values_to_be_between(seq_step)"): (seq_back(TYPE[s]), True) for s in GEN_SUITES},
    (GEN_STATE, "expect_column_pair_values_a_to_be_greater_than_b(gen_num,last_online_in)"):
        (set_field("gen.state", lambda e: e.update(last_online_in=e["gen"]["num"] + 1)), True),
    (GEN_STATE, "expect_column_values_to_be_in_set(status)"):
        (set_field("gen.state", lambda e: e.update(status="ACTIVE")), False),
    (GEN_STATE, "expect_column_values_to_be_between(members_outside)"): (set_field("gen.state", _stranger), True),
    (GEN_XACT, "expect_column_values_to_be_in_set(phase)"):
        (set_field("gen.xact", lambda e: e.update(phase="rolled_back")), False),
    (GEN_XACT, "expect_column_values_to_be_in_set(role)"):
        (set_field("gen.xact", lambda e: e.update(role="observer")), False),
    (GEN_HEARTBEATS, "expect_column_values_to_be_between(clock_offset_ms)"): (clock_ahead("gen.heartbeat"), True),
    (GEN_HEARTBEATS, "expect_column_pair_values_a_to_be_greater_than_b(gen_num,last_online_in)"):
        (set_field("gen.heartbeat", lambda e: e.update(last_online_in=e["gen_num"] + 2),
              lambda e: e["gen_num"] > 0), True),
    (GEN_HEARTBEATS, "expect_column_values_to_be_in_set(node_status)"):
        (set_field("gen.heartbeat", lambda e: e.update(node_status="ONLINE")), False),
}


def test_every_gen_expectation_has_failing_data() -> None:
    assert set(MUTATIONS) == {(s, spec.name) for s in GEN_SUITES for spec in specs()[s]}


@pytest.mark.parametrize("key", sorted(MUTATIONS), ids=lambda k: f"{k[0]}:{k[1]}")
def test_gen_expectation_fails_on_its_mutation(clean: Events, key: tuple[str, str]) -> None:
    mutation, valid = MUTATIONS[key]
    assert_fails_on_mutation(clean, key, mutation, valid, PARAMS, TOPIC)


# -- beside XCom ------------------------------------------------------------------------------------
def test_a_mixed_stream_leaves_xcom_verdicts_as_they_are(clean: Events) -> None:
    assert_xcom_verdicts_unchanged(records(clean, TOPIC), PARAMS)


@pytest.mark.usefixtures("clean_env")
def test_validate_a_mixed_file_names_the_bad_gen_record(clean: Events, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert_validate_names_the_bad_record(
        clean, tmp_path, capsys,
        (GEN_STATE, "expect_column_pair_values_a_to_be_greater_than_b(gen_num,last_online_in)"),
        lambda e: e["type"] == "gen.state" and e["group"] == "pg2",
        lambda e: {**e, "last_online_in": e["gen"]["num"] + 1})


# -- the sampler ------------------------------------------------------------------------------------
@pytest.mark.broker
def test_the_sampler_keeps_gen_records_and_drops_a_misplaced_one(broker: Any, topic_prefix: str,
                                                                tmp_path: Path) -> None:
    from replimon.kafka import KafkaClient
    from replimon.quality.records import read_sample
    from tests.support import publish, settings_for, simulate

    settings = settings_for(broker, SimpleNamespace(dsn=""), topic_prefix, tmp_path)
    xcom, gen = simulate(5, groups=2, seed=5), gen_trace(5, groups=2, seed=5)
    state = next(e for e in gen if e["type"] == "gen.state")
    publish(settings, [*xcom, *gen], [("heartbeats", json.dumps(state).encode())])  # on the wrong topic
    types = settings.kafka.topics.input_families
    with KafkaClient({"bootstrap.servers": broker.bootstrap_servers}) as client:
        _, _, ends = client.snapshot(list(types))
    spans = {tp: (0, end) for tp, end in ends.items() if end > 0}
    sample = read_sample(broker.bootstrap_servers, spans, types, limit=10**6, salt=1)
    assert sample.invalid == 1 and sample.complete
    got = sorted(r.event["type"] for r in sample.records)
    assert got == sorted(e["type"] for e in [*xcom, *gen])
    assert set(input_frames(sample.records)) == {SUITE_OF_TYPE[e["type"]] for e in [*xcom, *gen]}
