"""XCom's configuration-map rules: the map rebuilt from decided commands, reports and views judged.

docs/rules.md, "The configuration map" (worklog 3.2, 3.3, 3.5, 3.6) and "How config commands are
judged". The monitor rebuilds the map from the decided config commands, each placed or refused the
moment its decision is first seen, in instance order (a node publishes what it learns in order, so
every earlier command has been seen). That is the same map every member builds by executing the
commands (worklog 3.2.3: state-machine commands, validated against the latest configuration).
Config reports and heartbeat views are then checked against it:

* a report that agrees with the rules settles the command. A first report that differs is held
  until a second node reports: if it agrees with the first (or nobody contradicts it within
  ``node_silent``), the GROUP broke the rules: an install the rules refuse is named by the rule
  (EH_OUT_OF_DOMAIN, EH_CHANGE_WITH_OLD_MEMBER, OLD_MEMBER_JOIN_CUSTOM_EH), any other difference
  is CONFIG_MISMATCH, and the map then FOLLOWS what the group installed (later commands are
  re-placed, configs they had replaced come back: docs/rules.md, "How the map follows the group
  after a violation"), so one bad command does not cascade into alerts on every later one; if the
  second agrees with the rules, the first node alone is wrong;
* a report that differs from the settled one is CONFIG_DISAGREEMENT (nodes disagree);
* a heartbeat view that differs from the configuration the map gives for that node's position
  (the commands it has executed, the instance after its executed one) is CONFIG_DISAGREEMENT;
* set_event_horizon(default) with an old member: MySQL refuses it, the worklog installs it; both
  leave the horizon at the default, so both are accepted (docs/rules.md, "EH_CHANGE_WITH_OLD_MEMBER");
* CACHE_INVARIANT (worklog 3.3): members' cache_size must exceed eh * |members| of the latest config;
* PENDING_CONFIG_STUCK: a configuration pending (start beyond the decided frontier) for
  ``pending_config_stuck`` since its command was decided.

A group first seen mid-stream is bootstrapped from a heartbeat view or an installed report. Until
one of its commands' first report agrees with the map the monitor predicted (``trusted``), reports
and views are learned instead of judged: configurations decided before the monitor started may be
missing, and judging against them would raise false alerts (docs/rules.md, "Bootstrapped
histories and the trusted gate").
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from replimon.core.configmap import (
    EVENT_HORIZON_INVALID,
    EVENT_HORIZON_UNCHANGEABLE,
    OLD_MEMBER_CUSTOM_EH,
    Config,
    ConfigMap,
    Outcome,
)
from replimon.core.rules.base import COMPLETE, INCOMPLETE, Context, NodeState, Src
from replimon.core.rules.xcom.records import (
    CommandRecord,
    command_of,
    config_key,
    describe,
    members_key,
    report_key,
    reported_config,
    show,
    view_key,
    view_matches,
)

RULE_KIND = {
    EVENT_HORIZON_INVALID: "EH_OUT_OF_DOMAIN",
    EVENT_HORIZON_UNCHANGEABLE: "EH_CHANGE_WITH_OLD_MEMBER",
    OLD_MEMBER_CUSTOM_EH: "OLD_MEMBER_JOIN_CUSTOM_EH",
}


class ConfigRules:
    """The map's growth and the judging of config reports, views and caches, for one group.

    Queries the other XCom rules use: ``cmap`` (the map itself, shared), ``trusted``,
    ``held_reports`` (commands whose first report awaits a second opinion).
    """

    __slots__ = ("ctx", "rules", "cmap", "trusted", "boot_instance", "records", "held_reports",
                 "cmd_floor", "pending_since")

    def __init__(self, ctx: Context, cmap: ConfigMap) -> None:
        self.ctx = ctx
        self.rules = ctx.limits.rules
        self.cmap = cmap
        self.trusted = False  # the map is known to match the group (boot seen, or confirmed)
        self.boot_instance = -1
        self.records: dict[int, CommandRecord] = {}
        self.held_reports: set[int] = set()  # commands with a held first report (not stored)
        self.cmd_floor = -1  # commands at or below were settled and forgotten
        self.pending_since: dict[int, int] = {}  # config start -> event time it became known

    # -- decisions of config commands ------------------------------------------------------------
    def on_boot(self, first: int, cfg: dict[str, Any], ev: dict[str, Any], src: Src) -> None:
        if self.cmap.configs:
            return
        ctx = self.ctx
        members = [(n["id"], n.get("protocol", 0)) for n in cfg["nodes"]]
        self.cmap.boot(first, members, cfg.get("event_horizon"))
        eh = self.cmap.configs[0].event_horizon
        if not self._in_domain(eh):
            ctx.violation(
                "EH_OUT_OF_DOMAIN", ("boot", first),
                f"Group {ctx.group} booted with event horizon {eh}, outside "
                f"[{self.rules.eh_min}, {self.rules.eh_max}].",
                ev["ts_ms"], instance=first, node=ev["node"], evidence=[ctx.ref(ev, src)])
        self.boot_instance = first
        self.trusted = True
        if ctx.history != INCOMPLETE:
            ctx.history = COMPLETE

    def on_command(self, c: int, cfg: dict[str, Any], ev: dict[str, Any], src: Src) -> None:
        if c in self.records or c <= self.boot_instance or c <= self.cmd_floor:
            return
        rec = CommandRecord(c, command_of(cfg), self.ctx.heard(ev["ts_ms"]), self.ctx.ref(ev, src))
        late = bool(self.records) and c < next(reversed(self.records))
        self.records[c] = rec
        if late:
            self.records = dict(sorted(self.records.items()))
            self._rebuild(c)
            return
        if self.cmap.configs:
            self._place(rec)

    def _place(self, rec: CommandRecord) -> None:
        """Decide ``rec`` against the map and install its config (rules' view, or the group's)."""
        rec.expected = self.cmap.decide(rec.instance, rec.command)
        rec.alt = None
        cmd = rec.command
        if (cmd.op == "set_event_horizon" and rec.expected.reason == EVENT_HORIZON_UNCHANGEABLE
                and cmd.event_horizon == self.rules.default_eh):
            worklog = replace(self.rules, allow_default_eh_with_old_members=True)
            rec.alt = ConfigMap(worklog, self.cmap.configs).decide(rec.instance, cmd)
        cfg = rec.actual if rec.followed else rec.expected.config
        rec.replaced = None
        if cfg is not None:
            rec.replaced = next((x for x in self.cmap.configs if x.start == cfg.start), None)
            self.cmap.install(cfg)
            self.pending_since.setdefault(cfg.start, rec.decided_ts)

    def _rebuild(self, c: int) -> None:
        """Re-place every command from instance ``c`` on (after the map followed the group)."""
        keep = [x for x in self.cmap.configs if x.decided_at < c]
        # Configs that commands from c on had replaced (same start, newer wins) come back.
        keep += [r.replaced for i, r in self.records.items()
                 if i >= c and r.replaced is not None and r.replaced.decided_at < c]
        self.cmap.configs = sorted(keep, key=lambda x: x.start)
        for inst, rec in self.records.items():
            if inst >= c:
                if self.cmap.configs:
                    self._place(rec)
                elif rec.followed and rec.actual is not None:
                    self.cmap.install(rec.actual)

    # -- config reports --------------------------------------------------------------------------
    def on_report(self, ns: NodeState, node: str, ev: dict[str, Any], src: Src) -> None:
        """A config report (``ns``: the reporter's state, unused: reports are judged by content)."""
        c = ev["instance"]
        got = report_key(ev)
        rec = self.records.get(c)
        if rec is None:
            if got[0] and c != self.boot_instance:
                self._learn(reported_config(got, ev["members"], c))
            elif got[0] and self.cmap.configs and self.cmap.configs[0].decided_at == c:
                self.check_cache(self.cmap.configs[0], ev, src)
            return
        if rec.first is not None:
            if got != rec.first:
                self._disagree(rec, node, got, ev, src)
            return
        if rec.held is None:
            others = self._other_reporters(node)
            if rec.expected is None or not self.trusted or self._as_ruled(rec, got) or not others:
                rec.first, rec.first_ref = got, self.ctx.ref(ev, src)
                self._judge(rec, got, node, ev, src)
            else:
                # One node says the rules were not followed: wait for a second node to tell
                # whether the group did so (a violation, the map follows) or this node alone
                # (CONFIG_DISAGREEMENT, the map stays).
                rec.held = (got, node, ev, src)
                self.held_reports.add(c)
            return
        if node == rec.held[1]:
            return
        self._settle_report(rec, second=(got, node, ev, src))

    def _other_reporters(self, node: str) -> list[str]:
        """Nodes besides ``node`` that may still report a command: members of a configuration in
        the map (removed ones execute until they leave) that published recently and not OFFLINE."""
        ctx = self.ctx
        recent = ctx.clock - ctx.limits.node_silent_ms
        in_map = {m for cfg in self.cmap.configs for m in cfg.member_ids}
        return [m for m, ns in ctx.nodes.items()
                if m != node and m in in_map and ns.last_ts >= recent and ns.status != "OFFLINE"]

    @staticmethod
    def _as_ruled(rec: CommandRecord, got: tuple[Any, ...]) -> bool:
        exp = rec.expected
        return (exp is not None and config_key(exp.config) == got) or (
            rec.alt is not None and config_key(rec.alt.config) == got)

    def _settle_report(self, rec: CommandRecord, second: tuple[Any, ...] | None = None) -> None:
        """Judge a held report: confirmed by ``second`` (or unopposed when it timed out), or
        contradicted by a ``second`` that agrees with the rules."""
        assert rec.held is not None
        h_got, h_node, h_ev, h_src = rec.held
        rec.held = None
        self.held_reports.discard(rec.instance)
        if second is not None and second[0] != h_got and self._as_ruled(rec, second[0]):
            got, node, ev, src = second
            rec.first, rec.first_ref = got, self.ctx.ref(ev, src)
            self._judge(rec, got, node, ev, src)
            self._disagree(rec, h_node, h_got, h_ev, h_src)
            return
        rec.first, rec.first_ref = h_got, self.ctx.ref(h_ev, h_src)
        self._judge(rec, h_got, h_node, h_ev, h_src)
        if second is not None and second[0] != h_got:
            self._disagree(rec, second[1], second[0], second[2], second[3])

    def settle_held_reports(self, *, final: bool = False) -> None:
        """Held reports nobody confirmed or contradicted within the node-silence time: the
        reporting node is taken for the group (``final``: end of input, every one)."""
        limit = self.ctx.watermark - self.ctx.limits.node_silent_ms
        for c in sorted(self.held_reports):
            rec = self.records.get(c)
            if rec is None or rec.held is None:
                self.held_reports.discard(c)
            elif final or rec.held[2]["ts_ms"] <= limit:
                self._settle_report(rec)

    def _disagree(self, rec: CommandRecord, node: str, got: tuple[Any, ...], ev: dict[str, Any], src: Src) -> None:
        c = rec.instance
        self.ctx.violation(
            "CONFIG_DISAGREEMENT", ("report", c, node),
            f"Node {node} reports {show(got)} for the command at instance {c}; "
            f"{rec.first_ref['node'] if rec.first_ref else 'another node'} reported "
            f"{show(rec.first or got)}.",
            ev["ts_ms"], instance=c, node=node,
            evidence=[rec.decision, rec.first_ref or {}, self.ctx.ref(ev, src)])

    def _judge(self, rec: CommandRecord, got: tuple[Any, ...], node: str, ev: dict[str, Any], src: Src) -> None:
        c, cmd = rec.instance, rec.command
        installed = got[0]
        actual = reported_config(got, ev["members"], c) if installed else None
        exp = rec.expected
        evidence = [rec.decision, rec.first_ref or {}]
        if exp is None:  # decided before the map was known: follow the group
            self._follow(rec, actual)
            return
        matches = config_key(exp.config) == got
        alt = rec.alt
        alt_matches = alt is not None and config_key(alt.config) == got
        if matches or alt_matches:
            if not self.trusted:
                self.trusted = True  # the map predicted what the group did: it can be judged now
            if alt_matches and not matches:
                self._follow(rec, actual)
            self._info(rec, got, exp if matches or alt is None else alt, node, ev)
        elif not self.trusted:
            if installed and cmd.op == "set_event_horizon" and not self._in_domain(got[2]):
                self._rule_violation("EH_OUT_OF_DOMAIN", rec, node, got, ev, evidence)
            self._follow(rec, actual)
        else:
            if installed and exp.config is None and not (alt is not None and alt.config is not None):
                kind = RULE_KIND.get(exp.reason or "", "CONFIG_MISMATCH")
            else:
                kind = "CONFIG_MISMATCH"
            self._rule_violation(kind, rec, node, got, ev, evidence)
            self._follow(rec, actual)
        if actual is not None:
            self.check_cache(actual, ev, src)

    def _in_domain(self, eh: int) -> bool:
        return self.rules.eh_min <= eh <= self.rules.eh_max

    def _rule_violation(self, kind: str, rec: CommandRecord, node: str, got: tuple[Any, ...],
                        ev: dict[str, Any], evidence: list[dict[str, Any]]) -> None:
        exp = rec.expected
        rules = self.rules
        want = "refuse it" if exp is None or exp.config is None else f"install {show(config_key(exp.config))}"
        reason = f" ({exp.reason})" if exp is not None and exp.reason else ""
        why = {
            "EH_OUT_OF_DOMAIN": f"the event horizon must lie in [{rules.eh_min}, {rules.eh_max}]",
            "EH_CHANGE_WITH_OLD_MEMBER": "the latest configuration has a member with protocol "
            f"< {rules.min_protocol_for_eh}, so the event horizon cannot change",
            "OLD_MEMBER_JOIN_CUSTOM_EH": "an old node may join only while the latest event horizon "
            f"is {rules.default_eh}",
            "CONFIG_MISMATCH": f"the rules {want}{reason}",
        }[kind]
        self.ctx.violation(
            kind, ("command", rec.instance),
            f"Node {node} reports {show(got)} for {describe(rec.command)} decided at instance "
            f"{rec.instance}, but {why}.",
            ev["ts_ms"], instance=rec.instance, node=node, evidence=evidence)

    def _info(self, rec: CommandRecord, got: tuple[Any, ...], outcome: Outcome, node: str, ev: dict[str, Any]) -> None:
        evidence = [rec.decision, rec.first_ref or {}]
        if got[0]:
            self.ctx.violation(
                "CONFIG_INSTALLED", ("command", rec.instance),
                f"{describe(rec.command)} decided at instance {rec.instance} installed "
                f"{show(got)}.",
                ev["ts_ms"], instance=rec.instance, node=node, evidence=evidence)
        else:
            reason = outcome.reason or ev.get("reason") or "refused"
            self.ctx.violation(
                "RECONFIG_REFUSED", ("command", rec.instance),
                f"{describe(rec.command)} decided at instance {rec.instance} was refused: {reason}.",
                ev["ts_ms"], instance=rec.instance, node=node, evidence=evidence)

    def _follow(self, rec: CommandRecord, actual: Config | None) -> None:
        want = rec.actual if rec.followed else (rec.expected.config if rec.expected else None)
        rec.actual, rec.followed = actual, True
        if config_key(want) != config_key(actual) or rec.expected is None:
            self._rebuild(rec.instance)

    def _learn(self, cfg: Config) -> None:
        """Install a configuration the group runs but the monitor could not derive."""
        if not self.cmap.configs:
            self.cmap.configs = [cfg]
            return
        if any(config_key(x) == config_key(cfg) for x in self.cmap.configs):
            return
        if self.trusted and self.ctx.history == COMPLETE:
            return
        self.cmap.install(cfg)
        self.pending_since.setdefault(cfg.start, self.ctx.clock)

    # -- heartbeats ------------------------------------------------------------------------------
    def check_view(self, node: str, ev: dict[str, Any], view: dict[str, Any], src: Src, decided: int) -> None:
        """A heartbeat's view against the map's configuration for the node's position
        (``decided``: the group's contiguous decided frontier)."""
        ctx = self.ctx
        if not self.cmap.configs:
            if ctx.history != COMPLETE:
                self._learn(reported_config(view_key(view), view["members"], -1))
            return
        e = ev["executed"]
        if e > decided or (self.held_reports and e >= min(self.held_reports)):
            # The node executed decisions the monitor has not seen yet (they are on their way from
            # other nodes, within the skew), or a command it executed awaits a second report:
            # this view cannot be judged yet; its next one will be.
            return
        expect = self.cmap.active_known(e + 1, e)
        if expect is None or self.cmap.configs[0].start > e + 1:
            return
        if view_matches(view, expect):
            return
        got = view_key(view)
        known = any(x.start == got[1] for x in self.cmap.configs)
        if not self.trusted or (ctx.history != COMPLETE and not known):
            if not known:
                self._learn(reported_config(got, view["members"], -1))
            return
        ctx.violation(
            "CONFIG_DISAGREEMENT", ("view", node, got),
            f"Node {node}'s view ({show(got)}) disagrees with the map's configuration for "
            f"instance {e + 1} ({show(config_key(expect))}).",
            ev["ts_ms"], instance=e + 1, node=node, evidence=[ctx.ref(ev, src)])

    def check_cache(self, cfg: Config, ev: dict[str, Any], src: Src) -> None:
        """CACHE_INVARIANT of ``cfg`` with the smallest cache its members reported."""
        nodes = self.ctx.nodes
        caches = [(nodes[m].cache, m) for m in cfg.member_ids if m in nodes and nodes[m].cache >= 0]
        if not caches:
            return
        cache, node = min(caches)
        need = cfg.event_horizon * len(cfg.members)
        if cache > need:
            return
        self.ctx.violation(
            "CACHE_INVARIANT", ("config", cfg.start, cfg.event_horizon, members_key(cfg.members)),
            f"Configuration starting at {cfg.start} needs cache_size > event horizon {cfg.event_horizon}"
            f" x {len(cfg.members)} members = {need}; node {node} reports {cache}.",
            ev["ts_ms"], instance=cfg.start, node=node, evidence=[self.ctx.ref(ev, src)])

    # -- evaluation ------------------------------------------------------------------------------
    def pending_stuck(self, decided: int) -> None:
        """PENDING_CONFIG_STUCK of every configuration starting beyond ``decided``."""
        ctx = self.ctx
        wm = ctx.watermark
        for cfg in self.cmap.configs:
            if cfg.start <= decided:
                continue
            cond = f"pending:{cfg.start}"
            since = max(self.pending_since.setdefault(cfg.start, ctx.clock), ctx.quiet_end)
            if wm - since >= ctx.limits.pending_config_stuck_ms:
                ctx.fire(
                    cond, "PENDING_CONFIG_STUCK", ("start", cfg.start),
                    f"The configuration starting at {cfg.start} (decided at {cfg.decided_at}) has "
                    f"been pending for {(wm - since) // 1000} s; the group has decided up to "
                    f"{decided}.", since, instance=cfg.start)
        for cond in [c for c in ctx.open if c.startswith("pending:")]:
            start = int(cond[8:])
            if start <= decided or all(x.start != start for x in self.cmap.configs):
                ctx.resolve(cond, f"the configuration starting at {start} has started "
                            f"(decided {decided}).", ctx.clock)

    def prune(self, floor: int) -> None:
        """Forget commands and configurations every live member has executed past."""
        self.cmd_floor = max(self.cmd_floor, floor)
        while self.records:  # a command whose report waits for a second opinion stays
            k = next(iter(self.records))
            if k > floor or self.records[k].held is not None:
                break
            del self.records[k]
        self.cmap.prune(floor)
        starts = {c.start for c in self.cmap.configs}
        for s in [s for s in self.pending_since if s not in starts]:
            del self.pending_since[s]
