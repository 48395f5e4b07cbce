"""Event contract v1 (docs/contract.md): models, parser, JSON Schema; XCom's types and the
generations family's (``gen.*``, docs/families.md section 2) and the quorum-log family's
(``qlog.*``, section 3) and the chain family's (``chain.*``, section 4)."""

from replimon.contract.models import (
    EVENT_FAMILIES,
    EVENT_TOPICS,
    EVENT_TYPES,
    ConfigCommand,
    ConfigReport,
    Decision,
    Execution,
    Heartbeat,
    Member,
    NodeRef,
    View,
)
from replimon.contract.models_chain import (
    ChainAppend,
    ChainHeartbeat,
    ChainView,
    ChainWedge,
    LogPos,
)
from replimon.contract.models_gen import (
    Generation,
    GenHeartbeat,
    GenState,
    GenXact,
    GrantedVote,
    LastVote,
    XactAt,
)
from replimon.contract.models_qlog import (
    Ballot,
    QlogDecree,
    QlogHeartbeat,
    QlogPassed,
    QlogRecover,
    Relocation,
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
    "EVENT_FAMILIES",
    "EVENT_TOPICS",
    "EVENT_TYPES",
    "AnyEvent",
    "Ballot",
    "ChainAppend",
    "ChainHeartbeat",
    "ChainView",
    "ChainWedge",
    "ConfigCommand",
    "ConfigReport",
    "Decision",
    "Execution",
    "GenHeartbeat",
    "GenState",
    "GenXact",
    "Generation",
    "GrantedVote",
    "Heartbeat",
    "LastVote",
    "Invalid",
    "LogPos",
    "Member",
    "NodeRef",
    "QlogDecree",
    "QlogHeartbeat",
    "QlogPassed",
    "QlogRecover",
    "Relocation",
    "View",
    "XactAt",
    "decode_event",
    "event_to_dict",
    "json_schema",
    "parse_event",
]
