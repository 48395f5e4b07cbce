"""``decode_event`` (the pipeline's one parse: JSON once, the fast acceptance check, the models
for the rest) against ``parse_event`` (the strict models on the bytes): the same verdict and the
same reason on every record, and the dict is the JSON object as sent.

The corpus: every case of the contract's tests (valid, invalid, nulls, junk), hand-picked edge
cases of JSON (trailing data, duplicate keys, nesting depth, number spellings, odd strings),
simulator events and seeded mutations of all of these (values swapped, keys dropped or added, bytes
cut or inserted). The fast check must never accept what the models refuse (it may only pass a
record on to them), and it must take every simulator event (else it saves nothing).
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from replimon.contract import Invalid, decode_event, fast, parse_event
from replimon.contract.fast import accepts
from replimon.producers.simulator import SimOptions, Simulator, parse_injection
from tests.support.contract_cases import BASES, INVALID, JUNK, NULLS, VALID, wire

INT64_MAX = 2**63 - 1


# ----------------------------------------------------------------------------------- the corpus
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


def _loads(raw: bytes | None) -> Any:
    """The JSON value of a record as ``decode_event`` sees it (None: not one it reads)."""
    if raw is None or len(raw) > 1 << 20:
        return None
    try:
        return json.loads(raw.decode())
    except (ValueError, RecursionError):
        return None


def test_decode_gives_parse_events_verdict_and_reason(corpus: list[tuple[str, bytes | None]]) -> None:
    wrong = []
    valid = 0
    for case_id, raw in corpus:
        old, new = parse_event(raw), decode_event(raw)
        if isinstance(old, Invalid) or isinstance(new, Invalid):
            if old != new:
                wrong.append((case_id, old, new))
            continue
        valid += 1
        if new != _loads(raw):
            wrong.append((case_id, "not the object as sent", new))
    assert not wrong, wrong[:10]
    assert valid > 3000 and len(corpus) - valid > 3000  # both sides exercised


def test_the_fast_check_never_accepts_what_the_models_refuse(corpus: list[tuple[str, bytes | None]]) -> None:
    unsound = [case_id for case_id, raw in corpus
               if accepts(_loads(raw)) and isinstance(parse_event(raw), Invalid)]
    assert not unsound, unsound[:10]


def test_the_fast_check_takes_every_simulator_event() -> None:
    events: list[dict[str, Any]] = []
    faults = [parse_injection(f) for f in ("eh_out_of_domain:g1@3s", "config_mismatch:g2@4s",
                                           "cache_invariant:g3@5s", "incomplete_history:g2@20s")]
    Simulator(SimOptions(groups=3, nodes=5, seed=2, duration_ms=60_000, restart_every_s=10,
                         reconfig_every_s=5), faults, events.append).run()
    missed = [e for e in events if not accepts(json.loads(json.dumps(e)))]
    assert not missed, missed[:3]
    assert {e["type"] for e in events} == {"decision", "execution", "heartbeat", "config"}


def test_duplicate_keys_last_wins() -> None:
    raw = wire(BASES["execution"])[:-1] + b',"seq":7}'
    assert decode_event(raw)["seq"] == 7  # type: ignore[index]
    assert parse_event(raw).seq == 7  # type: ignore[union-attr]


def test_a_record_only_the_models_accept_comes_back_as_sent() -> None:
    """A free-text field that is not ASCII is left to the models by the fast check."""
    rec = {**BASES["heartbeat"], "version": "8.0.35-é"}
    assert not accepts(rec)
    assert decode_event(wire(rec)) == rec


def _free_text_ascii(obj: Any) -> bool:
    """Whether the free-text fields the fast check leaves to the models when not ASCII are ASCII."""
    return not isinstance(obj, dict) or all(
        not isinstance(obj.get(k), str) or obj[k].isascii() for k in ("version", "reason", "gid"))


def test_the_fast_check_takes_every_record_the_models_take_but_non_ascii_text(
        corpus: list[tuple[str, bytes | None]]) -> None:
    """Not only sound but exact: where it says False, the models refuse too (but for free text
    that is not ASCII, which it leaves to them by design)."""
    missed = [case_id for case_id, raw in corpus
              if not accepts(obj := _loads(raw)) and _free_text_ascii(obj)
              and not isinstance(parse_event(raw), Invalid)]
    assert not missed, missed[:10]


def test_the_memos_change_no_verdict(corpus: list[tuple[str, bytes | None]],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast check's memos (key lists that fit their type, ids that matched the pattern) give
    the verdict of the full check, cold, warm, cleared when full, and hold only what it passed."""
    objs = [_loads(raw) for _, raw in corpus]

    def cold(obj: Any) -> bool:
        fast._shapes.clear()
        fast._known_ids.clear()
        return accepts(obj)

    verdicts = [cold(o) for o in objs]
    fast._shapes.clear()
    fast._known_ids.clear()
    assert [accepts(o) for o in objs] == verdicts  # the memos filling as it goes
    assert [accepts(o) for o in objs] == verdicts  # warm
    assert all(fast._ID(i) for i in fast._known_ids)
    for t, *keys in fast._shapes:
        required, optional = fast._KEYS[t]
        assert required <= set(keys) <= required | optional and len(set(keys)) == len(keys)
    monkeypatch.setattr(fast, "SHAPES_MAX", 3)
    monkeypatch.setattr(fast, "KNOWN_IDS_MAX", 5)
    fast._shapes.clear()
    fast._known_ids.clear()
    assert [accepts(o) for o in objs] == verdicts  # cleared again and again
    assert len(fast._shapes) <= 3 and len(fast._known_ids) <= 5
