"""The decode stage (streaming/decode.py) without Spark: every family's types on the topics that
carry them by role, misplaced types as dead letters, and a clock far ahead kept out of a group's
watermark time."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from replimon.config import Settings
from replimon.producers.simulator import SimOptions, Simulator
from replimon.producers.simulator_gen import SimOptions as GenOptions
from replimon.producers.simulator_gen import Simulator as GenSimulator
from replimon.streaming.decode import decode_batches
from replimon.streaming.rows import DEAD_KEY, pack, unpack
from replimon.streaming.sources.kafka.markers import truncation
from replimon.streaming.sources.kafka.schema import ARROW_SCHEMA

TOPICS = Settings().kafka.topics


def records(events: list[tuple[str, dict[str, Any]]], keys: list[bytes | None] | None = None) -> pa.RecordBatch:
    """The source's Arrow batch of these events, keyed by group (or by ``keys``)."""
    n = len(events)
    keys = keys if keys is not None else [str(e.get("group", "")).encode() for _, e in events]
    return pa.RecordBatch.from_arrays([
        pa.array(keys, pa.binary()), pa.array([json.dumps(e).encode() for _, e in events], pa.binary()),
        pa.array([t for t, _ in events]), pa.array([0] * n, pa.int32()), pa.array(list(range(n)), pa.int64()),
        pa.array([0] * n, pa.timestamp("us", tz="UTC")), pa.array([0] * n, pa.int32())], schema=ARROW_SCHEMA)


def decoded(events: list[tuple[str, dict[str, Any]]], bound: int = 0,
            keys: list[bytes | None] | None = None) -> list[dict[str, Any]]:
    run = decode_batches(TOPICS.input_families, 4, clock=False, bound=bound)
    return [row for out in run(iter([records(events, keys)])) for row in out.to_pylist()]


def test_a_record_without_its_groups_key_is_a_dead_letter() -> None:
    """No key, or another group's: a dead letter with the reason (the record may have reached
    another partition than its group's); the same event keyed by its group is an event."""
    xcom, _ = sample()
    ev = next(e for e in xcom if e["type"] == "heartbeat")
    topic = TOPICS.for_event_type("heartbeat")
    rows = decoded([(topic, ev)] * 3, keys=[None, b"g2", b"g1"])
    (dead,) = [r for r in rows if r["group"] == DEAD_KEY]
    reasons = [letter[4] for letter in unpack(dead["items"])]
    assert reasons == ["key: the record has no key; the contract keys every record by its group ('g1')",
                       "key: the record's key 'g2' is not its group 'g1' (the contract keys records by group)"]
    assert [len(unpack(r["items"])) for r in rows if r["group"] == "g1"] == [1]


def sample() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    xcom: list[dict[str, Any]] = []
    Simulator(SimOptions(groups=1, duration_ms=3_000, seed=1), [], xcom.append).run()
    gen: list[dict[str, Any]] = []
    GenSimulator(GenOptions(groups=1, nodes=3, duration_ms=3_000, seed=1), [], gen.append).run()
    return xcom, gen


def test_every_familys_types_ride_the_topic_of_their_role() -> None:
    xcom, gen = sample()
    events = [(TOPICS.for_event_type(e["type"]), e) for e in xcom + gen]
    assert {e["type"] for _, e in events} >= {"decision", "heartbeat", "gen.state", "gen.heartbeat", "gen.xact"}
    rows = decoded(events)
    assert DEAD_KEY not in {r["group"] for r in rows}
    assert {r["group"] for r in rows} == {"g1", "pg1"}
    assert sum(len(unpack(r["items"])) for r in rows) == len(events)


def test_a_type_on_the_wrong_topic_is_a_dead_letter_with_the_topics_types() -> None:
    _, gen = sample()
    state = next(e for e in gen if e["type"] == "gen.state")
    (dead,) = [r for r in decoded([(TOPICS.heartbeats, state)]) if r["group"] == DEAD_KEY]
    (letter,) = unpack(dead["items"])
    assert letter[4] == (f"type: 'gen.state' does not belong on topic '{TOPICS.heartbeats}' "
                         "(it carries chain.heartbeat or gen.heartbeat or heartbeat or qlog.heartbeat events)")


def test_a_clock_far_ahead_does_not_move_its_groups_time() -> None:
    xcom, _ = sample()
    ahead = {**xcom[-1], "node": "n3", "seq": 10_000, "ts_ms": xcom[-1]["ts_ms"] + 10 * 365 * 86_400_000}
    events = [(TOPICS.for_event_type(e["type"]), e) for e in [*xcom, ahead]]
    top = max(e["ts_ms"] for e in xcom)
    assert [r["event_ms"] for r in decoded(events, bound=300_000)] == [top]
    assert [r["event_ms"] for r in decoded(events)] == [ahead["ts_ms"]]  # without the bound


def test_packed_rows_unpack_to_exactly_the_values_packed() -> None:
    """``pack``/``unpack`` give the processor the decode stage's values as they were: tuples stay
    tuples, dicts keep their key order, raw bytes, None and 64-bit integers come back as such."""
    xcom, gen = sample()
    values: list[Any] = [
        [(TOPICS.for_event_type(e["type"]), 0, i, e) for i, e in enumerate(xcom + gen)],
        [(TOPICS.decisions, 1, 2, b'{"v":\xff', "not UTF-8: invalid byte at position 5", None),
         (TOPICS.heartbeats, 0, 3, None, "empty message (null value)", 1767225600000)],
        truncation(TOPICS.decisions, 2, 10, 40),
        2**63 - 1,
        # what only the models accept comes as json reads it: any text, a lone surrogate too
        [(TOPICS.heartbeats, 0, 1, {**xcom[-1], "version": "8.0 é \ud800 \U0001f600", "n": 10**40})],
    ]
    for value in values:
        back = unpack(pack(value))
        assert back == value and repr(back) == repr(value)
