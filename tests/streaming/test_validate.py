"""split_events (Spark SQL) against parse_event (pydantic): the same verdict on every record.

The corpus: every case of tests/contract/test_contract.py (valid, invalid, nulls, junk), hand-picked edge
cases for the Spark side (trailing data, duplicate keys, nesting depth, number spellings, repr of
odd strings and floats), simulator events (compact and pretty-printed) and seeded mutations of all
of these (values swapped, keys dropped or added, bytes cut or inserted). Every record goes through
both; the verdicts must agree on all of them, and the reasons must be equal unless the difference
is one of the documented ones (KNOWN below, and the table in replimon.streaming.validate). Run with
``-s`` to see the tally and the throughput figures.
"""

from __future__ import annotations

import copy
import json
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from replimon.contract import Invalid, event_to_dict, parse_event
from replimon.producers.simulator import SimOptions, Simulator, parse_injection
from replimon.streaming import validate
from replimon.streaming.validate import (
    DEAD_COLUMNS,
    DEFAULT_TOPIC_TYPES,
    check_events,
    contract_schema,
    split_events,
)
from tests.support.contract_cases import BASES, INVALID, JUNK, NULLS, VALID, wire

TOPIC_OF = {t: topic for topic, t in DEFAULT_TOPIC_TYPES.items()}
KAFKA_SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"
INT64_MAX = 2**63 - 1


# ----------------------------------------------------------------------------------- the corpus
def _topic_for(raw: bytes | None) -> str:
    """The topic the record's type belongs on (so only the contract decides the verdict)."""
    try:
        kind = json.loads(raw or b"")["type"]
    except (ValueError, TypeError, KeyError, RecursionError):
        return "replica.decisions"
    return TOPIC_OF.get(kind, "replica.decisions") if isinstance(kind, str) else "replica.decisions"


def _execution(**extra: Any) -> dict[str, Any]:
    return {**BASES["execution"], **extra}


def _edge_cases() -> list[tuple[str, bytes | None]]:
    ex = wire(BASES["execution"])
    deep_ok = b'{"type":"execution","x":' + b"[" * 200 + b"]" * 200 + b"}"
    deep_bad = b'{"type":"execution","x":' + b"[" * 201 + b"]" * 201 + b"}"
    cases: list[tuple[str, bytes | None]] = [
        ("trailing-brace", ex + b"}"),
        ("trailing-bracket", ex + b"]"),
        ("trailing-comma-value", ex + b", 1"),
        ("trailing-whitespace", ex + b" \r\n\t"),
        ("leading-whitespace", b"\n \t" + ex),
        ("bom", b"\xef\xbb\xbf" + ex),
        ("duplicate-key-last-valid", ex[:-1] + b',"seq":5}'),
        ("duplicate-key-last-invalid", ex[:-1] + b',"seq":-5}'),
        ("duplicate-type", ex[:-1] + b',"type":"decision"}'),
        ("nan", ex[:-1] + b',"x":NaN}'),
        ("infinity-in-int", wire(_execution()).replace(b'"seq": 0', b'"seq": Infinity')),
        ("depth-200", deep_ok),
        ("depth-201", deep_bad),
        ("depth-deep-string", b'{"x":' + b'{"a":' * 200 + b'"s"' + b"}" * 200 + b"}"),
        ("leading-zero", wire(_execution()).replace(b'"seq": 0', b'"seq": 01')),
        ("exponent-int", wire(_execution()).replace(b'"seq": 0', b'"seq": 1e2')),
        ("big-exponent", wire(_execution()).replace(b'"seq": 0', b'"seq": 1e400')),
        ("int64+1", wire(_execution(seq=INT64_MAX + 1))),
        ("int64-min-1", wire(_execution(seq=-(2**63) - 1))),
        ("int-39-digits", wire(_execution(seq=10**38))),
        ("int-39-digits-negative", wire(_execution(seq=-(10**38)))),
        ("int-39-digits-in-string-field", wire(_execution(group=10**40))),
        ("float-integral-beyond-int64", wire(_execution(seq=9223372036854775808.0))),
        ("float-integral-beyond-int64-text", wire(_execution()).replace(b'"seq": 0', b'"seq": 9223372036854775808.0')),
        ("float-negative-zero", wire(_execution(seq=-0.0))),
        ("float-negative-zero-exp", wire(_execution()).replace(b'"seq": 0', b'"seq": -0e5')),
        ("float-negative-zero-in-type", wire(_execution(type=-0.0))),
        ("float-0.0001", wire(_execution(seq=0.0001))),
        ("float-1e-05", wire(_execution(seq=1e-05))),
        ("float-1e16", wire(_execution(seq=1e16))),
        ("float-123.25", wire(_execution(seq=123.25))),
        ("float-17-digits", wire(_execution(seq=0.1 + 0.2))),
        ("float-negative", wire(_execution(seq=-2.5))),
        ("str-quote", wire(_execution(group="it's"))),
        ("str-both-quotes", wire(_execution(group="it's \"q\""))),
        ("str-backslash", wire(_execution(group="a\\b"))),
        ("str-controls", wire(_execution(group="\x00\x1f\x7f\x85\xa0\u2028\u200b"))),
        ("str-astral", wire(_execution(group="g\U0001f600"))),
        ("str-unicode-14", wire(_execution(group="g\U0001fae0"))),
        ("number-1001-digits", wire(_execution()).replace(b'"seq": 0', b'"seq": ' + b"1" * 1001)),
        ("str-escaped-ascii", json.dumps(_execution(group="gé\U0001f600")).encode()),
        ("type-list", wire(_execution(type=["execution", 1]))),
        ("type-object", wire(_execution(type={"a": 1}))),
        ("type-float", wire(_execution(type=1.5))),
        ("type-bool", wire(_execution(type=True))),
        ("two-unknown-keys", wire({"zz": 1, **BASES["execution"], "aa": 2})),
        ("two-nulls", wire({**BASES["execution"], "zz": None, "aa": None})),
        ("nested-two-unknown", wire({**BASES["heartbeat"], "view": {**BASES["heartbeat"]["view"], "zz": 1, "aa": 2}})),
        ("member-two-nulls", wire({**BASES["installed"], "members": [{"id": "n1", "protocol": 9, "zz": None, "aa": None}]})),
        ("key-with-newline", wire({**BASES["execution"], "a\nb": 1})),
        ("null-in-suspects", wire({**BASES["heartbeat"], "suspects": ["n2", None]})),
        ("null-member", wire({**BASES["installed"], "members": [None]})),
        ("member-null-protocol-second", wire({**BASES["installed"], "members": [
            {"id": "n1", "protocol": 9}, {"id": "n2", "protocol": None}]})),
        ("mixed-members", wire({**BASES["installed"], "members": [{"id": "n1", "protocol": 9}, 5]})),
        ("reason-with-null-word", wire({**BASES["refused"], "reason": "null pointer"})),
        ("empty-object-value", wire({**BASES["heartbeat"], "view": {}})),
        ("huge-array", wire({**BASES["heartbeat"], "suspects": ["n1"] * 5000})),
        ("valid-utf8-replacement-char", wire(_execution(group="\ufffd")) + b"\xff"),
        ("genuine-fffd-then-bad", b'{"a":"\xef\xbf\xbd\xef\xbf\xbd", "b": "\xc3"}'),
        ("overlong", b'{"a":"\xc0\x80"}'),
        ("surrogate-bytes", b'{"a":"\xed\xa0\x80"}'),
        ("lone-surrogate-escape", b'{"a":"\\ud800"}'),
        ("pair-escape", wire(_execution()).replace(b'"g1"', b'"g\\ud83d\\ude00"')),
        ("null-value", None),
    ]
    return cases


def _simulator_events(n: int = 3000) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    faults = [parse_injection(f) for f in ("eh_out_of_domain:g1@3s", "config_mismatch:g2@4s",
                                           "beyond_horizon:g3@5s")]
    Simulator(SimOptions(groups=3, nodes=3, seed=11, duration_ms=40_000), faults, events.append).run()
    rng = random.Random(5)
    return rng.sample(events, min(n, len(events)))


# ------------------------------------------------------------------------------------ mutations
PALETTE: list[Any] = [
    None, True, False, 0, -1, 1, 2, 9, 1.0, 1.5, -0.0, 0.0001, 1e16, 2.5e-7, INT64_MAX, INT64_MAX + 1,
    -(2**63), 10**40, "", "x", "5", "g1\n", "gé", "a b", "n1", "n2", "ONLINE", "online", "app", "noop",
    "config", "boot", "add_nodes", "remove_nodes", "set_event_horizon", "installed", "refused",
    "decision", "execution", "heartbeat", "x" * 129, "v" * 65, "ab", "DEADBEEF", "it's", 'say "hi"',
    "\x00\x7f", "\U0001f600", "\u2028", [], [1], ["n1"], ["n1", "n1"], [None], {}, {"id": "n1"},
    {"id": "n1", "protocol": 9}, [{"id": "n1", "protocol": 9}], [{"id": "n1"}],
    [{"id": "n1", "protocol": 9}, {"id": "n1", "protocol": 9}],
    {"op": "boot", "nodes": [{"id": "n1", "protocol": 9}]}, {"op": "set_event_horizon", "event_horizon": 5},
    {"start": 0, "event_horizon": 10, "members": [{"id": "n1", "protocol": 9}]},
]
KEYS = ["v", "type", "group", "node", "ts_ms", "seq", "incarnation", "instance", "count", "proposer",
        "kind", "digest", "window_base", "config", "executed", "decided", "protocol", "status", "view",
        "cache_size", "suspects", "version", "outcome", "start", "event_horizon", "members", "reason",
        "op", "nodes", "id", "colour", "zz", "aa"]


def _containers(node: Any) -> list[Any]:
    out = [node]
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else []
    for child in children:
        if isinstance(child, dict | list):
            out.extend(_containers(child))
    return out


def _mutate_record(rng: random.Random, record: dict[str, Any]) -> dict[str, Any]:
    rec = copy.deepcopy(record)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        target = rng.choice(_containers(rec))
        op = rng.random()
        if isinstance(target, list):
            if target and op < 0.5:
                target[rng.randrange(len(target))] = copy.deepcopy(rng.choice(PALETTE))
            elif target and op < 0.7:
                del target[rng.randrange(len(target))]
            else:
                target.append(copy.deepcopy(rng.choice(target) if target else rng.choice(PALETTE)))
        elif op < 0.45 and target:
            target[rng.choice(list(target))] = copy.deepcopy(rng.choice(PALETTE))
        elif op < 0.7 and target:
            del target[rng.choice(list(target))]
        else:
            target[rng.choice(KEYS)] = copy.deepcopy(rng.choice(PALETTE))
    return rec


def _serialize(rng: random.Random, record: dict[str, Any]) -> bytes:
    style = rng.random()
    if style < 0.4:
        text = json.dumps(record, ensure_ascii=False)
    elif style < 0.6:
        text = json.dumps(record, separators=(",", ":"), ensure_ascii=False)
    elif style < 0.75:
        text = json.dumps(record)  # \\u escapes
    elif style < 0.85:
        text = json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False)
    else:
        items = list(record.items())
        rng.shuffle(items)
        text = json.dumps(dict(items), ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")


def _mutate_bytes(rng: random.Random, raw: bytes) -> bytes:
    pos = rng.randrange(len(raw) + 1)
    op = rng.random()
    if op < 0.2:
        return raw[:pos]
    if op < 0.45:
        return raw[:pos] + bytes([rng.choice(b'{}[],:" \\x0-.eE\xff\xc3')]) + raw[pos:]
    if op < 0.65:
        return raw[:pos] + raw[pos + 1:]
    if op < 0.8:
        return raw + rng.choice([b"}", b" ", b"\n", b"x", b",", b"]", b"{}", b"\x00"])
    return raw[:pos] + rng.choice([b" ", b"\n", b"\t", b"null", b"true", b'""', b"1"]) + raw[pos:]


def _fuzz(bases: list[dict[str, Any]], n: int, seed: int = 20261122) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        record = _mutate_record(rng, rng.choice(bases))
        raw = _serialize(rng, record)
        if rng.random() < 0.15:
            raw = _mutate_bytes(rng, raw)
        out.append((f"fuzz-{i}", raw))
    return out


# -------------------------------------------------------------------- known reason differences
def _escaped(reason: str) -> str:
    return reason.replace("\n", "\\n").replace("\r", "\\r")


# label -> (python reason, spark reason, raw) -> bool; the table in the module docstring
KNOWN: dict[str, Callable[[str, str, bytes | None], bool]] = {
    # Python's json module says where; Spark's parser gives no position
    "json-detail": lambda py, sp, raw: py.startswith("not JSON") and sp == "not JSON",
    # jiter reads NaN/Infinity (then a field or the type is wrong); parse_json refuses them
    "nan-infinity": lambda py, sp, raw: sp == "not JSON" and raw is not None
    and re.search(rb"NaN|Infinity", raw) is not None,
    # dead-letter reasons are one line; parse_event leaves a newline of a key as it is
    "one-line": lambda py, sp, raw: py != sp and sp == _escaped(py),
    # Jackson refuses numbers longer than 1000 characters; jiter reads up to 4300 digits
    "long-number": lambda py, sp, raw: sp == "not JSON" and raw is not None
    and re.search(rb"\d{1001}", raw) is not None,
    # Java 17 knows Unicode 13, Python 3.11 Unicode 14: a newer character is escaped in the repr
    "unicode-version": lambda py, sp, raw: re.sub(
        r"\\U([0-9a-f]{8})|\\u([0-9a-f]{4})", lambda m: chr(int(m.group(1) or m.group(2), 16)), sp) == py,
    # repr of a list/dict given as the event type is approximated
    "type-container": lambda py, sp, raw: py.startswith("type: must be one of")
    and sp.startswith("type: must be one of") and ("[" in py or "{" in py),
}


def _classify(py: str, sp: str, raw: bytes | None) -> str | None:
    for label, matches in KNOWN.items():
        if matches(py, sp, raw):
            return label
    return None


# ------------------------------------------------------------------------------------- helpers
def _frame(spark: Any, values: Sequence[bytes | None], topics: Sequence[str] | None = None) -> DataFrame:
    topics = topics or [_topic_for(v) for v in values]
    rows = [(None, v, t, 0, i, None) for i, (v, t) in enumerate(zip(values, topics, strict=True))]
    return spark.createDataFrame(rows, KAFKA_SCHEMA)


def _python_reason(raw: bytes | None) -> str | None:
    result = parse_event(raw)
    return result.reason if isinstance(result, Invalid) else None


@pytest.fixture(scope="module")
def corpus() -> list[tuple[str, bytes | None]]:
    cases: list[tuple[str, bytes | None]] = [(c.id, wire(c.record)) for c in VALID + INVALID + NULLS]
    for name, raw, _ in JUNK:
        if isinstance(raw, str):
            try:
                raw = raw.encode("utf-8")
            except UnicodeEncodeError:
                continue  # a lone surrogate in a str: no bytes can carry it
        cases.append((f"junk-{name}", raw))
    cases += _edge_cases()
    sim = _simulator_events()
    rng = random.Random(3)
    cases += [(f"sim-{i}", _serialize(rng, e)) for i, e in enumerate(sim)]
    bases = [c.record for c in VALID] + sim[:300]
    cases += _fuzz(bases, 4000)
    return cases


@pytest.fixture(scope="module")
def checked(spark: Any, corpus: list[tuple[str, bytes | None]]) -> list[Any]:
    rows = check_events(_frame(spark, [raw for _, raw in corpus])).orderBy("offset").collect()
    assert [r["offset"] for r in rows] == list(range(len(corpus)))
    return rows


# --------------------------------------------------------------------------------------- tests
def test_verdicts_agree_and_reasons_match_or_are_known(corpus: list[tuple[str, bytes | None]],
                                                       checked: list[Any]) -> None:
    verdicts: list[str] = []
    unexplained: list[str] = []
    tally: Counter[str] = Counter()
    for (case_id, raw), row in zip(corpus, checked, strict=True):
        py, sp = _python_reason(raw), row["error"]
        if (py is None) != (sp is None):
            verdicts.append(f"{case_id}: parse_event={py!r} split_events={sp!r}")
            continue
        if py == sp:
            tally["same verdict, same reason" if py is not None else "valid in both"] += 1
            continue
        assert py is not None and sp is not None
        label = _classify(py, sp, raw)
        tally[f"known difference: {label}" if label else "UNEXPLAINED"] += 1
        if label is None:
            unexplained.append(f"{case_id}: parse_event={py!r} split_events={sp!r}")
        assert "\n" not in sp and "\r" not in sp
    print(f"\nparity over {len(corpus)} records:")
    for key, count in sorted(tally.items()):
        print(f"  {count:6d}  {key}")
    assert not verdicts, "verdicts differ:\n" + "\n".join(verdicts[:30])
    assert not unexplained, "reasons differ:\n" + "\n".join(unexplained[:30])


def test_the_corpus_exercises_both_sides(corpus: list[tuple[str, bytes | None]], checked: list[Any]) -> None:
    valid = sum(1 for row in checked if row["error"] is None)
    assert 3000 < valid < len(corpus) - 3000, valid  # plenty of each, so agreement means something
    kinds = Counter(row["error"].split(":")[0] for row in checked if row["error"])
    assert len(kinds) > 40, kinds


def _plain(value: Any) -> Any:
    """A Row as the dict event_to_dict gives: nested Rows as dicts, absent (NULL) fields left out."""
    if hasattr(value, "asDict"):
        value = value.asDict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def test_typed_columns_equal_the_parsed_events(corpus: list[tuple[str, bytes | None]],
                                               checked: list[Any]) -> None:
    fields = contract_schema().fieldNames()
    compared = 0
    for (case_id, raw), row in zip(corpus, checked, strict=True):
        if row["error"] is None:
            expected = event_to_dict(parse_event(raw))  # type: ignore[arg-type]
            assert _plain({f: row[f] for f in fields}) == expected, case_id
            compared += 1
    assert compared > 3000


def test_the_fast_path_takes_every_simulator_event_and_no_invalid_one(
        spark: Any, corpus: list[tuple[str, bytes | None]], checked: list[Any]) -> None:
    """The cheap proof of validity must cover real traffic (else throughput drops) and must never
    accept a record parse_event rejects (else the verdicts above could not agree)."""
    frame = _frame(spark, [raw for _, raw in corpus])
    s = F.col("value").cast("string")
    wrapped = F.try_parse_json(F.concat(F.lit("["), s, F.lit("\n,0]")))  # as check_events parses
    single = F.try_variant_get(wrapped, "$[1]", "variant").isNotNull() & F.try_variant_get(
        wrapped, "$[2]", "variant").isNull()
    doc, typed = F.when(single, F.try_variant_get(wrapped, "$[0]", "variant")), F.from_json(s, contract_schema())
    guards = (F.octet_length("value") <= validate.MAX_BYTES) & F.is_valid_utf8(s)
    fast = guards & doc.isNotNull() & validate._fast_valid(doc, s, typed, typed["type"])
    flags = [bool(r["fast"]) for r in frame.select("offset", fast.alias("fast")).orderBy("offset").collect()]
    for (case_id, _raw), row, is_fast in zip(corpus, checked, flags, strict=True):
        if case_id.startswith("sim-"):
            assert is_fast, case_id
        if is_fast:
            assert row["error"] is None, (case_id, row["error"])


def test_split_events_routes_by_verdict_and_topic(spark: Any) -> None:
    hb, ex = wire(BASES["heartbeat"]), wire(BASES["execution"])
    values = [hb, hb, ex, b"{", ex]
    topics = ["replica.heartbeats", "replica.decisions", "replica.executions", "replica.config", "other"]
    valid, dead = split_events(_frame(spark, values, topics))
    assert dead.columns == list(DEAD_COLUMNS)
    assert valid.columns == [*contract_schema().fieldNames(), "topic", "partition", "offset"]
    dead_rows = {r["offset"]: r for r in dead.collect()}
    assert sorted(r["offset"] for r in valid.collect()) == [0, 2]
    assert dead_rows[1]["reason"] == ("type: 'heartbeat' does not belong on topic 'replica.decisions' "
                                      "(it carries decision events)")
    assert dead_rows[3]["reason"] == "not JSON"  # a broken record: the contract speaks first
    assert dead_rows[3]["value"] == b"{" and dead_rows[3]["topic"] == "replica.config"
    assert dead_rows[4]["reason"].startswith("topic: 'other' is not an input topic")
    unchecked, none_dead = split_events(_frame(spark, values[:3], topics[:3]), topic_types=None)
    assert unchecked.count() == 3 and none_dead.count() == 0
    with pytest.raises(ValueError, match="unknown event types"):
        split_events(_frame(spark, [ex]), topic_types={"t": "executions"})


def test_duplicate_keys_last_wins_unless_refused(spark: Any) -> None:
    conf = "spark.sql.variant.allowDuplicateKeys"
    before = spark.conf.get(conf, None)
    raw = wire(BASES["execution"])[:-1] + b', "seq": 7}'
    valid, _ = split_events(_frame(spark, [raw]))
    assert [r["seq"] for r in valid.collect()] == [7]
    assert parse_event(raw).seq == 7  # type: ignore[union-attr]
    _, dead = split_events(_frame(spark, [raw]), allow_duplicate_keys=False)
    assert [r["reason"] for r in dead.collect()] == ["not JSON"]
    assert spark.conf.get(conf, None) == before  # the flag is set only while the plan is built


def test_throughput_against_parse_event(spark: Any, tmp_path: Path) -> None:
    events: list[dict[str, Any]] = []
    Simulator(SimOptions(groups=16, nodes=3, seed=1, duration_ms=160_000), [], events.append).run()
    events = events[:200_000]
    raws = [json.dumps(e, separators=(",", ":")).encode() for e in events]
    assert len(raws) == 200_000

    started = time.perf_counter()
    python_invalid = sum(isinstance(parse_event(r), Invalid) for r in raws)
    python_rate = len(raws) / (time.perf_counter() - started)

    path = tmp_path / "kafka.parquet"
    pq.write_table(pa.table({
        "key": [e["group"].encode() for e in events],
        "value": raws,
        "topic": [TOPIC_OF[e["type"]] for e in events],
        "partition": pa.array([0] * len(events), pa.int32()),
        "offset": pa.array(range(len(events)), pa.int64()),
        "timestamp": pa.array([e["ts_ms"] * 1000 for e in events], pa.timestamp("us", tz="UTC")),
    }), path)
    source = spark.read.parquet(str(path)).repartition(2).cache()
    assert source.count() == len(raws)

    started = time.perf_counter()
    frame = check_events(source)
    built = time.perf_counter() - started

    def one_run() -> tuple[float, dict[bool, int]]:
        started = time.perf_counter()
        counts = {r["ok"]: r["n"] for r in frame.groupBy(F.col("error").isNull().alias("ok")).agg(
            F.count(F.lit(1)).alias("n")).collect()}
        return time.perf_counter() - started, counts

    cold, counts = one_run()  # what the brief asks for: one run, planning and compiling included
    warm, _ = one_run()  # the same query again: code compiled, JIT warm
    source.unpersist()
    print(f"\nthroughput on {len(raws):,} simulator events ({spark.sparkContext.master}):")
    print(f"  parse_event, one core:                 {python_rate:>9,.0f} records/s")
    print(f"  split_events, one run (cold, planning + codegen + run): {len(raws) / cold:>9,.0f} records/s "
          f"({cold:.2f} s; building the plan took {built:.2f} s more)")
    print(f"  split_events, the same query again (warm):              {len(raws) / warm:>9,.0f} records/s "
          f"({warm:.2f} s)")
    assert python_invalid == 0 and counts == {True: len(raws)}
    assert len(raws) / cold > 1_000


@pytest.mark.slow
def test_split_events_on_a_stream(spark: Any, tmp_path: Path) -> None:
    """A streaming source (parquet files standing in for Kafka): same results, and the duplicate
    keys flag, captured when the plan is analysed, holds in every micro-batch."""
    ex = wire(BASES["execution"])
    values = [ex, ex[:-1] + b', "seq": 3}', b"{"]
    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({
        "key": pa.array([None] * 3, pa.binary()), "value": values, "topic": ["replica.executions"] * 3,
        "partition": pa.array([0] * 3, pa.int32()), "offset": pa.array(range(3), pa.int64()),
        "timestamp": pa.array([0] * 3, pa.timestamp("us", tz="UTC")),
    }), tmp_path / "in" / "batch.parquet")
    stream = spark.readStream.schema(KAFKA_SCHEMA).parquet(str(tmp_path / "in"))
    query = (check_events(stream).select("offset", "seq", "error").writeStream.format("memory")
             .queryName("validate_stream").trigger(availableNow=True).start())
    query.awaitTermination()
    rows = {r["offset"]: r for r in spark.sql("select * from validate_stream").collect()}
    assert (rows[0]["seq"], rows[1]["seq"], rows[2]["error"]) == (0, 3, "not JSON")
