"""Kafka offsets as Spark writes them: ``{"topic": {"partition": next_offset}}``.

This is the one form offsets take between replimon's parts: Spark's offset log (both Kafka
sources use it), the replay's ``replay_runs`` row and checkpoint records, the data-quality sink's
batch ranges, the runner's consumer lag. Partition keys are strings and topics and partitions are
written in sorted order (numeric for partitions), so the same offsets always give the same JSON.
In Python the offsets are ``{(topic, partition): offset}`` (`TP` keys).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

TP = tuple[str, int]  # a topic-partition
OffsetsJson = dict[str, dict[str, int]]  # {"topic": {"partition": offset}}


def offsets_to_json(offsets: Mapping[TP, int]) -> OffsetsJson:
    """``{(topic, p): offset}`` -> ``{"topic": {"p": offset}}``, topics and partitions sorted."""
    out: OffsetsJson = {}
    for topic, part in sorted(offsets):
        out.setdefault(topic, {})[str(part)] = int(offsets[(topic, part)])
    return out


def offsets_from_json(value: Mapping[str, Mapping[str, Any]] | None) -> dict[TP, int]:
    """``{"topic": {"p": offset}}`` -> ``{(topic, p): offset}``; nothing (None, {}) -> {}."""
    if not value:
        return {}
    return {(topic, int(p)): int(off) for topic, parts in value.items() for p, off in parts.items()}


def offsets_json(value: str | Mapping[str, Mapping[str, Any]] | None) -> OffsetsJson:
    """Offsets given as JSON text or as a dict (what Spark's offset log and progress hold), in
    the sorted form; text that is not a JSON object, or nothing, is ``{}``."""
    if isinstance(value, str):
        value = json.loads(value) if value.strip().startswith("{") else {}
    return offsets_to_json(offsets_from_json(value))


def offsets_total(value: str | Mapping[str, Mapping[str, Any]] | None) -> int | None:
    """The sum of the offsets' positions (a query's progress in records); None for anything
    that is not offsets in this form (another source's offset, text that is not JSON)."""
    if not value:
        return None
    try:
        parsed = json.loads(value) if isinstance(value, str) else value
        return sum(int(off) for parts in parsed.values() for off in parts.values())
    except (ValueError, TypeError, AttributeError):
        return None
