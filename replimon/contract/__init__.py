"""Event contract v1 (SPEC section 3): models, parser, JSON Schema."""

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
from replimon.contract.parse import AnyEvent, Invalid, event_to_dict, json_schema, parse_event

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
    "event_to_dict",
    "json_schema",
    "parse_event",
]
