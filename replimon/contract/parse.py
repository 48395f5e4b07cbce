"""Turn raw message bytes into an event or a reason; never raise on bad input.

Two entry points, one verdict:

* ``decode_event(raw)``: the event as the plain dict its JSON says (what the monitor takes), or
  :class:`Invalid`. This is the pipeline's one parse: the bytes are decoded once, checked by the
  fast acceptance check (``fast.py``), and only what that check does not vouch for goes through
  the strict models, which decide and word the reason. The dict is exactly the JSON object sent
  (no defaults filled in).
* ``parse_event(raw)``: the typed, frozen model (the models are the contract's definition).

The reason is one line that names the field (``instance: must be >= 0 (got -1)``) so a dead-letter
row tells the integration team what to fix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import TypeAdapter, ValidationError

from replimon.contract.fast import accepts
from replimon.contract.models import (
    EVENT_TYPES,
    ConfigReport,
    Decision,
    Event,
    Execution,
    Heartbeat,
)
from replimon.contract.models_chain import ChainEvent
from replimon.contract.models_gen import GenEvent
from replimon.contract.models_qlog import QlogEvent

AnyEvent = Decision | Execution | Heartbeat | ConfigReport | GenEvent | QlogEvent | ChainEvent

_ADAPTER: TypeAdapter[Any] = TypeAdapter(Event)
# orjson: the one JSON decode of every message (about twice json's speed here, bench/core.py).
# It is strict RFC 8259: what it refuses that json took (NaN, a byte-order mark, lone surrogates,
# numbers beyond 64 bits) goes to the models, which decide and word the reason as before.
_loads = orjson.loads
_MAX_BYTES = 1 << 20
SCHEMA_PATH = Path(__file__).with_name("event-v1.schema.json")  # ships in the wheel


@dataclass(frozen=True, slots=True)
class Invalid:
    """A record that breaks contract v1, with the reason in one line."""

    reason: str


def _describe(err: Any) -> str:
    loc = [str(p) for p in err["loc"]]
    # A discriminated union puts the tag ("decision", ...) first; drop it, the type is known.
    if loc and loc[0] in EVENT_TYPES:
        loc = loc[1:]
    field = ".".join(loc)
    kind = err["type"]
    value = err.get("input")
    if kind == "union_tag_invalid":
        return f"type: must be one of {', '.join(EVENT_TYPES)} (got {value.get('type')!r})"
    if kind == "union_tag_not_found":
        return "type: missing"
    if kind == "missing":
        return f"{field}: missing"
    if kind == "extra_forbidden":
        return f"{field}: unknown field"
    if field == "v" and kind in ("greater_than_equal", "less_than_equal", "literal_error"):
        return f"v: unsupported contract version (got {value!r}, this monitor reads 1)"
    if kind == "value_error":
        msg = str(err["msg"]).removeprefix("Value error, ")
        key, sep, rest = msg.partition(": null is not allowed")
        if sep:  # the no-null check names the key inside the object at `field`
            return f"{field}.{key}{sep}{rest}" if field else f"{key}{sep}{rest}"
        return f"{field}: {msg}" if field else msg
    shown = "" if isinstance(value, dict | list) else f" (got {value!r})"
    return f"{field}: {err['msg']}{shown}" if field else f"{err['msg']}{shown}"


def reason_of(exc: ValidationError) -> str:
    """One line for the first problem of a validation error (and how many more there are)."""
    errs = exc.errors(include_url=False)
    more = f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
    return _describe(errs[0]) + more


def _guard(raw: bytes | str | None) -> Invalid | None:
    """The checks before any JSON: a null value, the size limit, UTF-8."""
    if raw is None:
        return Invalid("empty message (null value)")
    if len(raw) > _MAX_BYTES:
        return Invalid(f"message of {len(raw)} bytes exceeds the 1 MiB limit")
    if isinstance(raw, bytes):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return Invalid(f"not UTF-8: invalid byte at position {exc.start}")
    return None


def decode_event(raw: bytes | str | None) -> dict[str, Any] | Invalid:
    """Decode one message value once: the event's JSON object as a dict, or :class:`Invalid` with
    the same reason ``parse_event`` gives (module docstring)."""
    obj: Any = None
    if raw is not None and len(raw) <= _MAX_BYTES:
        try:
            obj = _loads(raw)
        except (ValueError, RecursionError):  # orjson.JSONDecodeError is a ValueError
            obj = None  # the models word the reason (or the UTF-8 guard does)
        if accepts(obj):
            return obj
    verdict = parse_event(raw)
    if isinstance(verdict, Invalid):
        return verdict
    # The models accept what the fast check did not vouch for: the object as sent, read by json
    # (exact where orjson is not: it reads an integer beyond 64 bits as a float).
    try:
        obj = None if raw is None else json.loads(raw.decode() if isinstance(raw, bytes) else raw)
    except (ValueError, RecursionError):
        obj = None
    return obj if isinstance(obj, dict) else verdict.model_dump(mode="json", exclude_unset=True)


def parse_event(raw: bytes | str | None) -> AnyEvent | Invalid:
    """Parse one message value. Returns the typed event, or :class:`Invalid` with the reason."""
    bad = _guard(raw)
    if bad is not None or raw is None:
        return bad or Invalid("empty message (null value)")
    try:
        return _ADAPTER.validate_json(raw)
    except ValidationError as exc:
        errs = exc.errors(include_url=False)
        if errs and errs[0]["type"] == "json_invalid":
            return Invalid(_json_reason(raw))
        if errs and not errs[0]["loc"] and not isinstance(errs[0].get("input"), dict):
            return Invalid("not a JSON object")
        return Invalid(reason_of(exc))
    except (ValueError, TypeError, RecursionError) as exc:  # pragma: no cover - defensive
        return Invalid(f"unparseable: {type(exc).__name__}")


def _json_reason(raw: bytes | str) -> str:
    try:
        json.loads(raw)
    except json.JSONDecodeError as exc:
        return f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    except (ValueError, RecursionError):
        pass
    return "not JSON"


def event_to_dict(event: AnyEvent) -> dict[str, Any]:
    """The JSON object of an event (defaults and absent optionals left out)."""
    return event.model_dump(mode="json", exclude_none=True)


def _drop_null(node: Any) -> Any:
    """Optional fields are left out, never null (the parser rejects null): say so in the schema."""
    if isinstance(node, dict):
        any_of = node.get("anyOf")
        if isinstance(any_of, list) and {"type": "null"} in any_of and node.get("default", 0) is None:
            rest = [s for s in any_of if s != {"type": "null"}]
            node = {k: v for k, v in node.items() if k not in ("anyOf", "default")}
            node.update(rest[0] if len(rest) == 1 else {"anyOf": rest})
        return {k: _drop_null(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_drop_null(v) for v in node]
    return node


def json_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of contract v1, generated from the models."""
    schema = _drop_null(_ADAPTER.json_schema())
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://replimon.invalid/schemas/event-v1.schema.json",
        "title": "replimon event contract v1",
        "description": "One JSON object per Kafka message on the replica.* topics; Kafka key = group.",
        **schema,
    }


def write_json_schema(path: Path = SCHEMA_PATH) -> Path:
    """Regenerate the checked-in schema file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(json_schema(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path
