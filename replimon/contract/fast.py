"""A fast acceptance check for contract v1 over the decoded JSON object (plain Python, no models).

``accepts(obj)`` answers True only for an object the strict models (``models.py``) accept; for
anything unusual it answers False and the caller asks the models, which give the verdict and the
one-line reason. So the models stay the single definition of the contract (and of the reasons in
the dead letters), and this check only has to be *sound*: never True where the models say no.
``tests/contract/test_decode.py`` checks that over the contract's cases, simulator events and
random mutations, and that every simulator event takes the fast path.

It exists for speed: validating a decoded dict with the models costs several microseconds per
event, about as much as the rest of the monitor; these checks cost about one. Two bounded memos
keep the common case to a few lookups, and neither changes a verdict (each holds only what the
full check has already passed, and is cleared when full): the key lists already seen to fit their
type (``_shapes``: a publisher sends the same keys in the same order every time) and the ids that
already matched the id pattern (``_known_ids``: a fleet names the same groups and nodes over and
over). The hot checks are written out inline rather than through the small helpers below.

Where it is deliberately narrower than the models (False, so the models decide): a free-text
field (``version``, ``reason``, ``gid``) that is not ASCII; anything ``None`` (the models refuse
null). It covers XCom's types, the generations family's (``models_gen.py``), the quorum-log
family's (``models_qlog.py``) and the chain family's (``models_chain.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from replimon.contract.models import CONFIG_OPS, DECISION_KINDS, INT64_MAX, STATUSES
from replimon.contract.models_chain import (
    APPEND_ORIGINS,
    APPEND_OUTCOMES,
    VIEW_OUTCOMES,
    VIEW_REASONS,
    WEDGE_REASONS,
)
from replimon.contract.models_gen import (
    GEN_CAUSES,
    GEN_STATUSES,
    GEN_VIA,
    NODE_STATUSES,
    XACT_MODES,
    XACT_PHASES,
    XACT_ROLES,
)
from replimon.contract.models_qlog import DECREE_KINDS, DECREE_OUTCOMES, RECOVER_PHASES

_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}").fullmatch
_DIGEST = re.compile(r"[0-9a-fA-F]{1,128}").fullmatch

_ENVELOPE = frozenset(("v", "type", "group", "node", "ts_ms", "seq", "incarnation"))
_KEYS = {
    "decision": (_ENVELOPE | {"instance", "proposer", "kind"},
                 frozenset(("count", "digest", "window_base", "config"))),
    "execution": (_ENVELOPE | {"executed"}, frozenset()),
    "heartbeat": (_ENVELOPE | {"executed", "decided", "protocol", "status"},
                  frozenset(("view", "cache_size", "suspects", "version"))),
    "config": (_ENVELOPE | {"instance", "outcome"},
               frozenset(("start", "event_horizon", "members", "reason"))),
    "gen.state": (_ENVELOPE | {"cause", "gen", "donors", "last_online_in", "last_vote", "status"},
                  frozenset(("via", "source", "vote"))),
    "gen.xact": (_ENVELOPE | {"gid", "xgen", "phase", "role"},
                 frozenset(("mode", "at", "prepared_by", "xmembers"))),
    "gen.heartbeat": (_ENVELOPE | {"gen_num", "last_online_in", "last_vote_num", "node_status",
                                   "suspects", "xact_sample"}, frozenset()),
    "qlog.decree": (_ENVELOPE | {"num", "kind", "digest", "outcome"},
                    frozenset(("leg", "new_leg", "members"))),
    "qlog.passed": (_ENVELOPE | {"num", "leg", "ballot", "acceptors", "acked", "kind", "digest",
                                 "recovery"}, frozenset(("new_leg", "members"))),
    "qlog.recover": (_ENVELOPE | {"phase", "leg", "old", "new"},
                     frozenset(("relocated", "synced_with"))),
    "qlog.heartbeat": (_ENVELOPE | {"leg", "members", "watermark", "status", "suspects"},
                       frozenset(("leader",))),
    "chain.view": (_ENVELOPE | {"from_epoch", "epoch", "chain", "pos", "outcome"}, frozenset(("reason",))),
    "chain.wedge": (_ENVELOPE | {"epoch", "reason"}, frozenset(("suspect",))),
    "chain.append": (_ENVELOPE | {"assumed", "epoch", "pos", "count", "origin", "outcome"},
                     frozenset(("digest",))),
    "chain.heartbeat": (_ENVELOPE | {"epoch", "chain", "wedged", "pos", "ttl_ms", "status"},
                        frozenset(("stable",))),
}
_ALLOWED = {t: required | optional for t, (required, optional) in _KEYS.items()}
_KINDS = frozenset(DECISION_KINDS)
_OPS = frozenset(CONFIG_OPS)
_STATUSES = frozenset(STATUSES)
_MEMBER_KEYS = frozenset(("id", "protocol"))
_VIEW_KEYS = frozenset(("start", "event_horizon", "members"))
_COMMAND_KEYS = frozenset(("op", "nodes", "event_horizon"))


# The memos (module docstring): what the full check passed, each bounded (cleared when full).
SHAPES_MAX = 1024  # key lists; a publisher uses a handful per type
KNOWN_IDS_MAX = 1 << 16  # ids; a fleet of thousands of groups of a few nodes each
_shapes: dict[tuple[str, ...], Callable[[dict[str, Any]], bool]] = {}
_known_ids: set[str] = set()


def _nonneg(x: Any) -> bool:
    return type(x) is int and 0 <= x <= INT64_MAX


def _id(x: Any) -> bool:
    """An id (``[A-Za-z0-9._:-]{1,128}``). The hot paths test ``x in _known_ids`` inline first."""
    if type(x) is not str:
        return False
    if x in _known_ids:
        return True
    if _ID(x) is None:
        return False
    if len(_known_ids) >= KNOWN_IDS_MAX:
        _known_ids.clear()
    _known_ids.add(x)
    return True


def _text(x: Any, most: int) -> bool:
    return type(x) is str and 1 <= len(x) <= most and x.isascii()


def _members(x: Any) -> bool:
    """A non-empty list of ``{id, protocol}`` naming no node twice."""
    if type(x) is not list or not x:
        return False
    known = _known_ids
    seen = set()
    for m in x:
        if type(m) is not dict or m.keys() != _MEMBER_KEYS:
            return False
        i, p = m["id"], m["protocol"]
        if not ((type(i) is str and i in known or _id(i)) and type(p) is int and 0 <= p <= INT64_MAX):
            return False
        seen.add(i)
    return len(seen) == len(x)


def _command(c: Any) -> bool:
    if type(c) is not dict or "op" not in c or not c.keys() <= _COMMAND_KEYS:
        return False
    op = c["op"]
    if type(op) is not str or op not in _OPS:
        return False
    if op == "set_event_horizon":
        return "nodes" not in c and "event_horizon" in c and _nonneg(c["event_horizon"])
    if "event_horizon" in c and (op != "boot" or not _nonneg(c["event_horizon"])):
        return False
    nodes = c.get("nodes")
    if type(nodes) is not list or not nodes:
        return False
    need_protocol = op != "remove_nodes"
    seen = set()
    for n in nodes:
        if type(n) is not dict or "id" not in n or not n.keys() <= _MEMBER_KEYS or not _id(n["id"]):
            return False
        if "protocol" in n:
            if not _nonneg(n["protocol"]):
                return False
        elif need_protocol:
            return False
        seen.add(n["id"])
    return len(seen) == len(nodes)


def _decision(e: dict[str, Any]) -> bool:
    instance, count, proposer = e["instance"], e.get("count", 1), e["proposer"]
    if not (type(instance) is int and 0 <= instance <= INT64_MAX and type(count) is int
            and 1 <= count <= INT64_MAX and instance + count - 1 <= INT64_MAX
            and (type(proposer) is str and proposer in _known_ids or _id(proposer))):
        return False
    kind = e["kind"]
    if type(kind) is not str or kind not in _KINDS:
        return False
    if "digest" in e and (count != 1 or type(e["digest"]) is not str or _DIGEST(e["digest"]) is None):
        return False
    if "window_base" in e and (e["node"] != e["proposer"] or not _nonneg(e["window_base"])):
        return False
    if kind == "config":
        return count == 1 and "config" in e and _command(e["config"])
    return "config" not in e


def _execution(e: dict[str, Any]) -> bool:
    x = e["executed"]
    return type(x) is int and 0 <= x <= INT64_MAX


def _heartbeat(e: dict[str, Any]) -> bool:
    executed, decided, protocol = e["executed"], e["decided"], e["protocol"]
    if not (type(executed) is int and type(decided) is int and type(protocol) is int
            and 0 <= executed <= INT64_MAX and 0 <= decided <= INT64_MAX and 0 <= protocol <= INT64_MAX):
        return False
    status = e["status"]
    if type(status) is not str or status not in _STATUSES:
        return False
    if "view" in e:
        v = e["view"]
        if (type(v) is not dict or v.keys() != _VIEW_KEYS or not _nonneg(v["start"])
                or not _nonneg(v["event_horizon"]) or not _members(v["members"])):
            return False
    if "cache_size" in e and not _nonneg(e["cache_size"]):
        return False
    if "suspects" in e:
        s = e["suspects"]
        if type(s) is not list or (s and not all(_id(x) for x in s)):
            return False
    return "version" not in e or _text(e["version"], 64)


def _report(e: dict[str, Any]) -> bool:
    if not _nonneg(e["instance"]):
        return False
    outcome = e["outcome"]
    if outcome == "installed":
        return ("reason" not in e and "start" in e and _nonneg(e["start"]) and "event_horizon" in e
                and _nonneg(e["event_horizon"]) and "members" in e and _members(e["members"]))
    if outcome == "refused":
        return ("start" not in e and "event_horizon" not in e and "members" not in e
                and "reason" in e and _text(e["reason"], 256))
    return False


# ---------------------------------------------------------------- generations (models_gen.py)
_GEN_KEYS = frozenset(("num", "members", "configured"))
_VOTE_KEYS = _GEN_KEYS | {"candidate"}
_AT_KEYS = frozenset(("num", "status"))


def _positive(x: Any) -> bool:
    return type(x) is int and 1 <= x <= INT64_MAX


def _one_of(x: Any, values: tuple[str, ...]) -> bool:
    return type(x) is str and x in values


def _id_set(x: Any, nonempty: bool = False) -> bool:
    """A list of ids naming no node twice."""
    if type(x) is not list:
        return False
    if not x:
        return not nonempty
    known = _known_ids
    for i in x:
        if not (type(i) is str and i in known or _id(i)):
            return False
    return len(set(x)) == len(x)


def _generation(g: Any, keys: frozenset[str] = _GEN_KEYS, full: bool = True) -> bool:
    """``gen`` and ``vote`` (``full``: num >= 1 and non-empty sets) or ``last_vote``."""
    if type(g) is not dict or g.keys() != keys:
        return False
    num_ok = _positive(g["num"]) if full else _nonneg(g["num"])
    return num_ok and _id_set(g["members"], full) and _id_set(g["configured"], full)


def _gen_state(e: dict[str, Any]) -> bool:
    cause = e["cause"]
    if not (_one_of(cause, GEN_CAUSES) and _one_of(e["status"], GEN_STATUSES)
            and _generation(e["gen"]) and _id_set(e["donors"]) and _nonneg(e["last_online_in"])
            and _generation(e["last_vote"], full=False)):
        return False
    if ("via" in e) != (cause == "online") or ("via" in e and not _one_of(e["via"], GEN_VIA)):
        return False
    if "source" in e and (cause != "online" or not _id(e["source"])):
        return False
    if ("vote" in e) != (cause == "vote"):
        return False
    return "vote" not in e or (_generation(e["vote"], _VOTE_KEYS) and _id(e["vote"]["candidate"]))


def _gen_xact(e: dict[str, Any]) -> bool:
    gid, phase, role = e["gid"], e["phase"], e["role"]
    if not (_text(gid, 256) and _positive(e["xgen"]) and _one_of(phase, XACT_PHASES)
            and _one_of(role, XACT_ROLES)):
        return False
    if "mode" in e and (role != "replica" or not _one_of(e["mode"], XACT_MODES)):
        return False
    if "at" in e:
        at = e["at"]
        if (phase != "prepared" or type(at) is not dict or at.keys() != _AT_KEYS
                or not _positive(at["num"]) or not _one_of(at["status"], GEN_STATUSES)):
            return False
    if "prepared_by" in e and (role != "coordinator" or phase != "committed"
                               or not _id_set(e["prepared_by"])):
        return False
    return "xmembers" not in e or (role == "coordinator" and _id_set(e["xmembers"], True))


def _gen_heartbeat(e: dict[str, Any]) -> bool:
    return (_nonneg(e["gen_num"]) and _nonneg(e["last_online_in"]) and _nonneg(e["last_vote_num"])
            and _one_of(e["node_status"], NODE_STATUSES) and _id_set(e["suspects"])
            and _nonneg(e["xact_sample"]))


# ---------------------------------------------------------------- quorum log (models_qlog.py)
_BALLOT_KEYS = frozenset(("n", "proposer"))
_RELOCATION_KEYS = frozenset(("node", "from"))


def _value(e: dict[str, Any]) -> bool:
    """``kind``, ``digest`` and the reconf-only ``new_leg`` and ``members``."""
    kind, digest = e["kind"], e["digest"]
    if not (_one_of(kind, DECREE_KINDS) and type(digest) is str and _DIGEST(digest) is not None):
        return False
    if kind == "reconf":
        return ("new_leg" in e and "members" in e and _nonneg(e["new_leg"])
                and _id_set(e["members"], True))
    return "new_leg" not in e and "members" not in e


def _qlog_decree(e: dict[str, Any]) -> bool:
    outcome = e["outcome"]
    return (_nonneg(e["num"]) and ("leg" not in e or _nonneg(e["leg"])) and _value(e)
            and _one_of(outcome, DECREE_OUTCOMES) and (outcome == "executed" or e["kind"] == "reconf"))


def _qlog_passed(e: dict[str, Any]) -> bool:
    b = e["ballot"]
    return (_nonneg(e["num"]) and _nonneg(e["leg"]) and type(b) is dict and b.keys() == _BALLOT_KEYS
            and _nonneg(b["n"]) and _id(b["proposer"]) and _id_set(e["acceptors"], True)
            and _id_set(e["acked"]) and type(e["recovery"]) is bool and _value(e))


def _qlog_recover(e: dict[str, Any]) -> bool:
    if not (_one_of(e["phase"], RECOVER_PHASES) and _nonneg(e["leg"]) and _id_set(e["old"], True)
            and _id_set(e["new"], True)):
        return False
    if ("synced_with" in e) != (e["phase"] == "synced") or ("synced_with" in e and not _id_set(e["synced_with"])):
        return False
    if "relocated" in e:
        r = e["relocated"]
        if type(r) is not list or not all(type(x) is dict and x.keys() == _RELOCATION_KEYS
                                          and _id(x["node"]) and _id(x["from"]) for x in r):
            return False
        return len({x["node"] for x in r}) == len(r)
    return True


def _qlog_heartbeat(e: dict[str, Any]) -> bool:
    return (_nonneg(e["leg"]) and _id_set(e["members"], True) and _nonneg(e["watermark"])
            and ("leader" not in e or _id(e["leader"])) and _id(e["status"])
            and _id_set(e["suspects"]))


# ---------------------------------------------------------------- chain views (models_chain.py)
_LOGPOS_KEYS = frozenset(("epoch", "pos"))


def _chain_view(e: dict[str, Any]) -> bool:
    outcome = e["outcome"]
    if not (_nonneg(e["from_epoch"]) and _nonneg(e["epoch"]) and _id_set(e["chain"], True)
            and _nonneg(e["pos"]) and _one_of(outcome, VIEW_OUTCOMES)):
        return False
    if outcome == "rejected":
        return "reason" in e and _one_of(e["reason"], VIEW_REASONS)
    return "reason" not in e


def _chain_wedge(e: dict[str, Any]) -> bool:
    return (_nonneg(e["epoch"]) and _one_of(e["reason"], WEDGE_REASONS)
            and ("suspect" not in e or _id(e["suspect"])))


def _chain_append(e: dict[str, Any]) -> bool:
    a, pos, count = e["assumed"], e["pos"], e["count"]
    if not (type(a) is dict and a.keys() == _LOGPOS_KEYS and _nonneg(a["epoch"]) and _nonneg(a["pos"])
            and _nonneg(e["epoch"]) and _nonneg(pos) and _positive(count)
            and pos + count - 1 <= INT64_MAX and _one_of(e["origin"], APPEND_ORIGINS)
            and _one_of(e["outcome"], APPEND_OUTCOMES)):
        return False
    return "digest" not in e or (count == 1 and type(e["digest"]) is str and _DIGEST(e["digest"]) is not None)


def _chain_heartbeat(e: dict[str, Any]) -> bool:
    return (_nonneg(e["epoch"]) and _id_set(e["chain"], True) and type(e["wedged"]) is bool
            and _nonneg(e["pos"]) and ("stable" not in e or _nonneg(e["stable"]))
            and _positive(e["ttl_ms"]) and _id(e["status"]))


_BODY = {"decision": _decision, "execution": _execution,
         "heartbeat": _heartbeat, "config": _report, "gen.state": _gen_state,
         "gen.xact": _gen_xact, "gen.heartbeat": _gen_heartbeat, "qlog.decree": _qlog_decree,
         "qlog.passed": _qlog_passed, "qlog.recover": _qlog_recover,
         "qlog.heartbeat": _qlog_heartbeat, "chain.view": _chain_view, "chain.wedge": _chain_wedge,
         "chain.append": _chain_append, "chain.heartbeat": _chain_heartbeat}


def accepts(obj: Any) -> bool:
    """True only if contract v1's models accept ``obj`` (a decoded JSON value); False means
    "ask the models", not "invalid"."""
    if type(obj) is not dict:
        return False
    t = obj.get("type")
    if type(t) is not str:
        return False
    body = _shapes.get((t, *obj))
    if body is None:
        body = _shape(t, obj)
        if body is None:
            return False
    # The envelope, written out (every event passes here): the types first, so that no
    # comparison can meet a value of another type.
    v, group, node, ts, seq, inc = obj["v"], obj["group"], obj["node"], obj["ts_ms"], obj["seq"], obj["incarnation"]
    if not (type(v) is int and v == 1 and type(ts) is int and type(seq) is int and type(inc) is int
            and 0 <= ts <= INT64_MAX and 0 <= seq <= INT64_MAX and 0 <= inc <= INT64_MAX):
        return False
    known = _known_ids
    if not ((type(group) is str and group in known or _id(group))
            and (type(node) is str and node in known or _id(node))):
        return False
    return bool(body(obj))


def _shape(t: str, obj: dict[str, Any]) -> Callable[[dict[str, Any]], bool] | None:
    """The body check of type ``t`` if ``obj`` has its required keys and no other than its
    optional ones (None: it has not, or ``t`` is no type); a key list that fits is remembered."""
    keys = _KEYS.get(t)
    if keys is None or not keys[0] <= obj.keys() or not obj.keys() <= _ALLOWED[t]:
        return None
    if len(_shapes) >= SHAPES_MAX:
        _shapes.clear()
    body = _shapes[(t, *obj)] = _BODY[t]
    return body
