"""The per-group configuration map of XCom (docs/rules.md, "The configuration map"; worklog 3 in
WL#11512, ``docs/sources.md``).

Pure: no I/O, no clock, no Spark. The simulator uses it to place and refuse config commands the way
MySQL's ``xcom_base.cc`` does; the monitor rebuilds the same map from decided commands and checks
what nodes report against it.

Terms:

* a *configuration* is ``{start, event_horizon, members}``; the map holds them in start order;
* the *active* configuration of instance ``i`` is the one with the largest ``start <= i``;
  configurations with ``start > i`` are *pending* at ``i``;
* a config command decided at instance ``c`` is validated and placed when it is executed, against
  the LATEST configuration (pending included) because commands are state-machine commands executed
  in instance order on every member (worklog 3.2.3).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

DEFAULT_EVENT_HORIZON = 10
EVENT_HORIZON_MIN = 10
EVENT_HORIZON_MAX = 200
MIN_PROTOCOL_FOR_EH = 5  # x_1_4: the first XCom protocol that knows a configurable horizon

EVENT_HORIZON_INVALID = "EVENT_HORIZON_INVALID"
EVENT_HORIZON_UNCHANGEABLE = "EVENT_HORIZON_UNCHANGEABLE"
OLD_MEMBER_CUSTOM_EH = "OLD_MEMBER_CUSTOM_EH"


@dataclass(frozen=True, slots=True)
class Rules:
    """Rule parameters (the configurable parts of the map's rules; docs/rules.md, "Thresholds")."""

    eh_min: int = EVENT_HORIZON_MIN
    eh_max: int = EVENT_HORIZON_MAX
    default_eh: int = DEFAULT_EVENT_HORIZON
    min_protocol_for_eh: int = MIN_PROTOCOL_FOR_EH
    # The worklog (3.6.1) lets a group with old members "change" the horizon to the default 10;
    # MySQL's code refuses it. Both leave the horizon at 10 (docs/rules.md, "The configuration map").
    allow_default_eh_with_old_members: bool = False

    @classmethod
    def from_thresholds(cls, th: Any) -> Rules:
        """From ``Settings.thresholds`` (duck-typed: this module imports no config machinery)."""
        return cls(eh_min=th.event_horizon_min, eh_max=th.event_horizon_max,
                   default_eh=th.default_event_horizon, min_protocol_for_eh=th.min_protocol_for_eh)


@dataclass(frozen=True, slots=True)
class Config:
    """One configuration: where it starts, its event horizon, its members (id -> protocol)."""

    start: int
    event_horizon: int
    members: tuple[tuple[str, int], ...]
    decided_at: int  # instance of the command that made it (the boot command for the first)
    # Derived from ``members`` once (every evaluation asks for them; a Config never changes).
    member_ids: tuple[str, ...] = field(init=False, repr=False, compare=False)
    majority: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "member_ids", tuple(m for m, _ in self.members))
        object.__setattr__(self, "majority", len(self.members) // 2 + 1)

    @property
    def can_leave(self) -> int:
        """Instance that, when decided, proves start - 1 was executed by a majority (worklog 3.6.3)."""
        return self.start + self.event_horizon

    def has_old_member(self, rules: Rules) -> bool:
        return any(p < rules.min_protocol_for_eh for _, p in self.members)


@dataclass(frozen=True, slots=True)
class Command:
    """A decided config command (contract ``decision.config``)."""

    op: str  # boot | add_nodes | remove_nodes | set_event_horizon
    nodes: tuple[tuple[str, int | None], ...] = ()
    event_horizon: int | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """What executing a command does: the installed config, or the refusal reason."""

    instance: int
    config: Config | None
    reason: str | None = None

    @property
    def installed(self) -> bool:
        return self.config is not None


def _dedupe(members: Iterable[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    """Members in order, each node once (adding a present node changes nothing)."""
    seen: dict[str, int] = {}
    for node, proto in members:
        seen.setdefault(node, proto)
    return tuple(seen.items())


@dataclass(slots=True)
class ConfigMap:
    """The configurations of one group, in start order, with the rules that grow it."""

    rules: Rules = field(default_factory=Rules)
    configs: list[Config] = field(default_factory=list)

    # -- queries -------------------------------------------------------------------------------
    def latest(self) -> Config:
        return self.configs[-1]

    def active(self, instance: int) -> Config:
        """The configuration with the largest start <= instance (the first one before any)."""
        found = self.configs[0]
        for cfg in self.configs:
            if cfg.start > instance:
                break
            found = cfg
        return found

    def pending(self, instance: int) -> list[Config]:
        return [c for c in self.configs if c.start > instance]

    def _latest_eh_change_pending(self, instance: int) -> Config | None:
        """R of docs/rules.md ("The configuration map"): the LATEST pending config whose horizon
        differs from its predecessor's."""
        found = None
        for prev, cfg in zip(self.configs, self.configs[1:], strict=False):
            if cfg.start > instance and cfg.event_horizon != prev.event_horizon:
                found = cfg
        return found

    def _first_eh_change_pending(self, executed: int) -> Config | None:
        """F of docs/rules.md ("The configuration map"): the FIRST pending config whose horizon
        differs from the active one."""
        active = self.active(executed + 1)
        for cfg in self.configs:
            if cfg.start > executed + 1 and cfg.event_horizon != active.event_horizon:
                return cfg
        return None

    def effective_horizon(self, executed: int, *, mysql: bool = False) -> int:
        """Highest instance a node whose last executed instance is ``executed`` may decide.

        Worklog 3.6.3 (``too_far``): ``e + eh(active)``, capped while an event-horizon change is
        pending at ``start(F) - 1 + eh(F)``. With ``mysql=True`` the cap is MySQL's, one lower
        (its code never admits ``start(F) - 1 + eh(F)`` itself): the simulator proposes within
        that, so the monitor's worklog bound never flags it. "Active" is the configuration of the
        next instance to execute, as XCom's ``executed_msg`` is.
        """
        bound = executed + self.active(executed + 1).event_horizon
        first = self._first_eh_change_pending(executed)
        if first is not None:
            cap = first.start - 1 + first.event_horizon - (1 if mysql else 0)
            bound = min(bound, cap)
        return bound

    def active_known(self, instance: int, known_upto: int) -> Config | None:
        """``as_of(known_upto).active(instance)`` without building a map (hot path of the monitor)."""
        found = None
        for cfg in self.configs:
            if cfg.decided_at > known_upto:
                continue
            if cfg.start > instance and found is not None:
                break
            found = cfg
        return found

    def horizon_as_of(self, executed: int, *, mysql: bool = False) -> int | None:
        """``as_of(executed).effective_horizon(executed)`` without building a map: the bound a node
        that has executed up to ``executed`` computes from the commands it has executed."""
        pos = executed + 1
        active = None
        for cfg in self.configs:
            if cfg.decided_at > executed:
                continue
            if cfg.start > pos and active is not None:
                break
            active = cfg
        if active is None:
            return None
        bound = executed + active.event_horizon
        for cfg in self.configs:
            if cfg.decided_at <= executed and cfg.start > pos and cfg.event_horizon != active.event_horizon:
                return min(bound, cfg.start - 1 + cfg.event_horizon - (1 if mysql else 0))
        return bound

    def as_of(self, executed: int) -> ConfigMap:
        """The map as a node that has executed up to ``executed`` knows it."""
        return ConfigMap(self.rules, [c for c in self.configs if c.decided_at <= executed])

    # -- growth --------------------------------------------------------------------------------
    def boot(self, instance: int, members: Iterable[tuple[str, int]], event_horizon: int | None = None) -> Outcome:
        eh = self.rules.default_eh if event_horizon is None else event_horizon
        cfg = Config(start=instance, event_horizon=eh, members=_dedupe(members), decided_at=instance)
        self.configs = [cfg]
        return Outcome(instance, cfg)

    def decide(self, instance: int, command: Command) -> Outcome:
        """Outcome of executing ``command`` decided at ``instance`` (does not change the map)."""
        if command.op == "boot":
            members = [(n, p if p is not None else 0) for n, p in command.nodes]
            eh = self.rules.default_eh if command.event_horizon is None else command.event_horizon
            return Outcome(instance, Config(instance, eh, _dedupe(members), instance))
        latest = self.latest()
        rules = self.rules
        if command.op == "set_event_horizon":
            new_eh = command.event_horizon
            assert new_eh is not None
            eh = new_eh
            # Worklog requirement 2.7 / MySQL: the horizon must lie in the domain.
            if not rules.eh_min <= eh <= rules.eh_max:
                return Outcome(instance, None, EVENT_HORIZON_INVALID)
            # Worklog 3.2.2: no horizon change while any member (of the latest config) is old.
            if latest.has_old_member(rules) and not (
                rules.allow_default_eh_with_old_members and eh == rules.default_eh
            ):
                return Outcome(instance, None, EVENT_HORIZON_UNCHANGEABLE)
            new = replace(latest, event_horizon=eh)
        elif command.op == "add_nodes":
            # Worklog 3.2.1: an old node joins only while the latest horizon is the default.
            if latest.event_horizon != rules.default_eh and any(
                (p if p is not None else 0) < rules.min_protocol_for_eh for _, p in command.nodes
            ):
                return Outcome(instance, None, OLD_MEMBER_CUSTOM_EH)
            added = [(n, p if p is not None else 0) for n, p in command.nodes]
            new = replace(latest, members=_dedupe([*latest.members, *added]))
        elif command.op == "remove_nodes":
            gone = {n for n, _ in command.nodes}
            new = replace(latest, members=tuple(m for m in latest.members if m[0] not in gone))
        else:
            raise ValueError(f"unknown config op {command.op!r}")
        return Outcome(instance, replace(new, start=self.start_for(instance), decided_at=instance))

    def start_for(self, instance: int) -> int:
        """Where a command executed at ``instance`` takes effect (worklog 3.5, 3.6.1)."""
        after = self._latest_eh_change_pending(instance)
        if after is not None:
            return after.start + after.event_horizon + 1
        return instance + self.active(instance).event_horizon + 1

    def install(self, config: Config) -> None:
        """Add ``config``; one with the same start is replaced (the newer wins, as in MySQL)."""
        kept = [c for c in self.configs if c.start != config.start]
        kept.append(config)
        kept.sort(key=lambda c: c.start)
        self.configs = kept

    def apply(self, instance: int, command: Command) -> Outcome:
        """Execute ``command``: decide its outcome and install the config when accepted."""
        outcome = self.decide(instance, command)
        if outcome.config is not None:
            if command.op == "boot":
                self.configs = [outcome.config]
            else:
                self.install(outcome.config)
        return outcome

    def prune(self, min_executed: int, keep: int = 4) -> None:
        """Drop configs no node can need: superseded before ``min_executed`` (MySQL keeps >= 4)."""
        while len(self.configs) > keep and self.configs[1].start <= min_executed:
            self.configs.pop(0)
