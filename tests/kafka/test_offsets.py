"""Offsets in Spark's JSON form (replimon/kafka/offsets.py): deterministic text, and the readers
of it the data-quality sink and the runner use."""

from __future__ import annotations

from replimon.kafka import offsets_from_json, offsets_json, offsets_to_json, offsets_total


def test_offsets_json_is_deterministic() -> None:
    offsets = {("b", 10): 5, ("a", 2): 1, ("b", 2): 7, ("a", 0): 3}
    as_json = offsets_to_json(offsets)
    assert list(as_json) == ["a", "b"]
    assert list(as_json["b"]) == ["2", "10"]  # numeric partition order, string keys
    assert offsets_to_json(dict(reversed(list(offsets.items())))) == as_json
    assert offsets_from_json(as_json) == offsets


def test_offsets_json_takes_text_or_dicts_and_sorts() -> None:
    text = '{"b": {"10": 5, "2": 7}, "a": {"0": 3}}'
    assert offsets_json(text) == {"a": {"0": 3}, "b": {"2": 7, "10": 5}}
    assert list(offsets_json(text)["b"]) == ["2", "10"]
    assert offsets_json({"a": {0: "3"}}) == {"a": {"0": 3}}  # keys and values normalised
    assert offsets_json("") == offsets_json(None) == offsets_json("not json") == {}
    assert offsets_from_json(None) == offsets_from_json({}) == {}


def test_offsets_total_is_the_sum_or_none() -> None:
    assert offsets_total('{"a": {"0": 3, "1": 4}, "b": {"0": 10}}') == 17
    assert offsets_total({"a": {"0": 3}}) == 3
    assert offsets_total(None) is None and offsets_total("") is None
    assert offsets_total("not json") is None  # another source's offset
    assert offsets_total('[1, 2]') is None and offsets_total('{"a": 3}') is None
