"""What XCom's rules keep about a decided config command, and config values as comparable keys.

A config report, a heartbeat view and a configuration of the map are compared as *keys*
``(installed, start, event_horizon, members)`` with members in sorted order: nodes may list
members in any order (docs/contract.md, "config"; docs/rules.md, "How config commands are judged").
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from replimon.core.configmap import Command, Config, Outcome


@dataclass(slots=True)
class CommandRecord:
    """A decided config command: what the rules expect and what the first reporter said."""

    instance: int
    command: Command
    decided_ts: int
    decision: dict[str, Any]  # evidence ref of the decision event
    expected: Outcome | None = None  # None: decided before the map was known
    alt: Outcome | None = None  # the worklog's outcome where MySQL's differs and both are correct
    first: tuple[Any, ...] | None = None  # first report: (installed, start, eh, members)
    first_ref: dict[str, Any] | None = None
    actual: Config | None = None  # what the group installed, when it differs from the rules
    followed: bool = False  # the map follows ``actual`` instead of ``expected``
    replaced: Config | None = None  # the config of the same start this one replaced (newer wins)
    held: tuple[Any, ...] | None = None  # (key, node, event, src): a first report that differs
    # from the rules, waiting for a second node to confirm it (the group) or contradict it (one node)


def members_key(members: Iterable[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    """Members as an order-free comparable value (nodes may list them in any order)."""
    return tuple(sorted(members))


def report_key(ev: dict[str, Any]) -> tuple[Any, ...]:
    """A config report (or heartbeat view) as a comparable value."""
    if ev.get("outcome", "installed") == "installed":
        return (True, ev["start"], ev["event_horizon"],
                members_key((m["id"], m["protocol"]) for m in ev["members"]))
    return (False, None, None, None)


def view_key(view: dict[str, Any]) -> tuple[Any, ...]:
    """A heartbeat's ``view`` (always an installed configuration) as a comparable value."""
    return (True, view["start"], view["event_horizon"],
            members_key((m["id"], m["protocol"]) for m in view["members"]))


def view_matches(view: dict[str, Any], cfg: Config) -> bool:
    """``view_key(view) == config_key(cfg)``, without sorting when the view lists the members in
    the configuration's order, as nodes do (every heartbeat asks)."""
    if view["start"] != cfg.start or view["event_horizon"] != cfg.event_horizon:
        return False
    members = tuple((m["id"], m["protocol"]) for m in view["members"])
    return members == cfg.members or members_key(members) == members_key(cfg.members)


def config_key(cfg: Config | None) -> tuple[Any, ...]:
    """A configuration of the map as a comparable value (None: a refusal)."""
    if cfg is None:
        return (False, None, None, None)
    return (True, cfg.start, cfg.event_horizon, members_key(cfg.members))


def reported_config(key: tuple[Any, ...], members: list[dict[str, Any]], decided_at: int) -> Config:
    """The configuration an installed report or view names (members in the node's order)."""
    return Config(key[1], key[2], tuple((m["id"], m["protocol"]) for m in members), decided_at)


def show(key: tuple[Any, ...]) -> str:
    """A key as alert messages name it."""
    if not key[0]:
        return "a refusal"
    members = ",".join(m for m, _ in key[3])
    return f"start {key[1]}, event horizon {key[2]}, members {members}"


def command_of(cfg: dict[str, Any]) -> Command:
    """The command a decision's ``config`` carries."""
    nodes = tuple((n["id"], n.get("protocol")) for n in cfg.get("nodes", ()))
    return Command(cfg["op"], nodes, cfg.get("event_horizon"))


def describe(cmd: Command) -> str:
    """A command as alert messages name it."""
    if cmd.op == "set_event_horizon":
        return f"set_event_horizon({cmd.event_horizon})"
    return f"{cmd.op}({', '.join(n for n, _ in cmd.nodes)})"


def config_value(cfg: dict[str, Any]) -> str:
    """A decision's ``config`` as one comparable string (DIVERGENT_DECISION compares values)."""
    return json.dumps(cfg, sort_keys=True, separators=(",", ":"))
