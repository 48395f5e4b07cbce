"""Event contract v1 (docs/contract.md): models, parser, JSON Schema."""

from replimon.contract.models import (
    ConfigCommand,
    ConfigReport,
    Decision,
    Execution,
    Heartbeat,
    Member,
    NodeRef,
    View,
)
from replimon.contract.parse import (
    AnyEvent,
    Invalid,
    decode_event,
    event_to_dict,
    json_schema,
    parse_event,
)

__all__ = [
    "AnyEvent",
    "ConfigCommand",
    "ConfigReport",
    "Decision",
    "Execution",
    "Heartbeat",
    "Invalid",
    "Member",
    "NodeRef",
    "View",
    "decode_event",
    "event_to_dict",
    "json_schema",
    "parse_event",
]
