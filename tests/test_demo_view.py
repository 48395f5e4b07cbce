"""The demo's live view of the job (``replimon.demo.MonitorView``): alert messages are shown
whole, wrapped to the terminal, and info alerts (events) are never listed as firing; each
family's groups in their own table (a generations group with its generation, members, election
and node statuses; a quorum-log group with its legislature, members and leader, decree frontier,
recoveries and replicas; a chain group with its epoch, chain, wedge and replicas' epoch,
position and lease; XCom's table as it was); the default demo is a fleet of the four families,
and bad fleet flags fail in one line."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from replimon.demo import MonitorView


def _alert(kind: str, severity: str, category: str, message: str, status: str = "firing") -> dict[str, Any]:
    return {"alert_id": kind.lower(), "group": "g1", "kind": kind, "severity": severity,
            "category": category, "status": status, "node": "n1", "instance": 42,
            "message": message}


def test_recent_alerts_wrap_their_whole_message_and_skip_info_events() -> None:
    message = ("proposer n2 decided instance 1234 beyond its event horizon: window base 1200 "
               "+ event horizon 10 = 1210 < 1234; the majority had executed 1199, so the decision "
               "could overwrite an instance a member has not executed yet (END-OF-MESSAGE)")
    view = MonitorView()
    view(SimpleNamespace(dead_letters=[], snapshots=[], alerts=[
        _alert("BEYOND_HORIZON", "critical", "violation", message),
        _alert("INCOMPLETE_HISTORY", "info", "data", "first event was not the boot decision"),
        _alert("CONFIG_INSTALLED", "info", "info", "config installed")]))
    assert [a["kind"] for a in view.alerts] == ["BEYOND_HORIZON"] and list(view.firing) == ["beyond_horizon"]
    console = Console(width=100, record=True, color_system=None)
    console.print(view.recent())
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 100
    # The message column's pieces, read row by row, give the whole message back.
    cells = [line.rsplit("│", 2)[-2].strip() for line in lines if line.count("│") >= 8]
    assert "".join(c for c in cells if c != "message").replace(" ", "") == message.replace(" ", "")
    assert len(cells) > 3  # wrapped over several lines, not cut


# -- the mixed fleet: each family's groups with their own configuration ---------------------------
def _render(table: Any) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(table)
    return console.export_text()


def _rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines() if line.startswith("│")]


XCOM_SNAPSHOT = {"group": "g2", "family": "xcom", "decided": 2013, "executed_majority": 2010,
                 "effective_horizon": 2023, "window_fraction": 0.3, "pending": [{"start": 2100}],
                 "active": {"start": 0, "event_horizon": 10, "members": [{"id": "n1"}, {"id": "n2"}]},
                 "config": {"active": {}, "pending": [], "effective_horizon": 2023, "window_use": 0.3},
                 "config_version": 0, "nodes": {}}
GEN_SNAPSHOT = {"group": "pg1", "family": "gen", "decided": -1, "config_version": 7,
                "config": {"num": 7, "members": ["n1"], "configured": ["n1", "n2", "n3"],
                           "minority": True, "election": 8},
                "nodes": {
                    "n1": {"member": True, "status": "ONLINE", "node_status": "online", "gen": 7,
                           "silent": False},
                    "n2": {"member": True, "status": "RECOVERY", "node_status": "recovery", "gen": 7,
                           "silent": False},
                    "n3": {"member": True, "status": "DEAD", "node_status": "disabled", "gen": 6,
                           "silent": True}}}


QLOG_SNAPSHOT = {"group": "ql1", "family": "qlog", "decided": 510, "config_version": 48,
                 "executed_majority": 508,
                 "config": {"legislature": 48, "passed": 512, "executed": 510,
                            "members": [{"id": "n3", "leader": True}, {"id": "n2", "leader": False},
                                        {"id": "n1", "leader": False}],
                            "recovering": [["n2", 48, ["n2", "n3", "n4"]]]},
                 "nodes": {
                     "n1": {"member": True, "status": "delayed", "legislature": 47, "watermark": 490,
                            "leader": None, "silent": True},
                     "n2": {"member": True, "status": "recovering", "legislature": 48, "watermark": 509,
                            "leader": "n3", "silent": False},
                     "n3": {"member": True, "status": "active", "legislature": 48, "watermark": 511,
                            "leader": "n3", "silent": False},
                     "n4": {"member": False, "status": "active", "legislature": 48, "watermark": 505,
                            "leader": "n3", "silent": False}}}


def test_a_quorum_log_group_shows_its_legislature_leader_frontier_recoveries_and_replicas() -> None:
    view = MonitorView()
    alert = {**_alert("QLOG_NO_LEADER", "critical", "wedge", "no leader"), "group": "ql1"}
    view(SimpleNamespace(dead_letters=[], snapshots=[QLOG_SNAPSHOT, XCOM_SNAPSHOT, GEN_SNAPSHOT], alerts=[alert]))
    tables = view.tables()
    assert [t.title.split(":")[0] for t in tables] == [
        "monitor (Spark job)", "monitor (Spark job), generations", "monitor (Spark job), quorum-log"]
    text = _render(tables[2])
    assert [c.strip() for c in text.splitlines()[2].split("┃")[1:-1]] == [
        "group", "family", "leg", "members", "passed", "executed", "executed (majority)", "recovering",
        "nodes", "firing"]
    rows = _rows(text)
    assert rows[0] == ["ql1", "qlog", "48", "n3 (leader) n2 n1", "512", "510", "508", "n2 leg 48 -> n2 n3 n4",
                       "n1 delayed leg 47 wm 490 silent", "QLOG_NO_LEADER"]
    assert [r[8] for r in rows[1:]] == ["n2 recovering leg 48 wm 509", "n3 active leg 48 wm 511",
                                        "n4 active leg 48 wm 505 not configured"]
    assert "ql1" not in _render(tables[0]) + _render(tables[1])
    # A group before its first legislature: empty cells, not an error.
    early = MonitorView()
    early(SimpleNamespace(dead_letters=[], snapshots=[{"group": "ql2", "family": "qlog", "config": None,
                                                       "executed_majority": None, "nodes": {}}], alerts=[]))
    (only,) = early.tables()
    assert _rows(_render(only)) == [["ql2", "qlog", "", "", "", "", "", "", "", ""]]


CHAIN_SNAPSHOT = {"group": "ch1", "family": "chain", "decided": 120, "config_version": 14,
                  "executed_majority": 118,
                  "config": {"epoch": 14, "chain": ["n2", "n3", "n5"], "head": "n2", "tail": "n5",
                             "wedged": True, "wedged_epoch": 14, "view_changed_ts_ms": 1_700_000_000_000},
                  "nodes": {
                      "n1": {"member": False, "epoch": 9, "pos": 80, "wedged": False,
                             "lease_remaining_ms": -30_000, "silent": False},
                      "n2": {"member": True, "epoch": 14, "pos": 120, "wedged": True,
                             "lease_remaining_ms": 1_500, "silent": False},
                      "n3": {"member": True, "epoch": 14, "pos": 118, "wedged": True,
                             "lease_remaining_ms": 900, "silent": False},
                      "n5": {"member": True, "epoch": 14, "pos": 118, "wedged": False,
                             "lease_remaining_ms": -1_250, "silent": True}}}


def test_a_chain_group_shows_its_epoch_chain_wedge_and_replicas() -> None:
    view = MonitorView()
    alert = {**_alert("CHAIN_WEDGE_NOT_REPLACED", "critical", "wedge", "wedged"), "group": "ch1"}
    view(SimpleNamespace(dead_letters=[], snapshots=[CHAIN_SNAPSHOT, XCOM_SNAPSHOT, QLOG_SNAPSHOT],
                         alerts=[alert]))
    tables = view.tables()
    assert [t.title.split(":")[0] for t in tables] == [
        "monitor (Spark job)", "monitor (Spark job), quorum-log", "monitor (Spark job), chain"]
    text = _render(tables[2])
    assert [c.strip() for c in text.splitlines()[2].split("┃")[1:-1]] == [
        "group", "family", "epoch", "chain", "wedged", "nodes", "firing"]
    rows = _rows(text)
    # The head marked, the wedged epoch, each replica's epoch and position; a member's lease
    # remaining (or how long ago it ran out); a replica out of the chain holds no lease it needs.
    assert rows[0] == ["ch1", "chain", "14", "n2 (head) n3 n5", "wedged 14",
                       "n1 epoch 9 pos 80 not configured", "CHAIN_WEDGE_NOT_REPLACED"]
    assert [r[5] for r in rows[1:]] == ["n2 epoch 14 pos 120 lease 1.5s wedged",
                                        "n3 epoch 14 pos 118 lease 0.9s wedged",
                                        "n5 epoch 14 pos 118 lease expired 1.2s ago silent"]
    assert "ch1" not in _render(tables[0]) + _render(tables[1])
    # Before the first view above epoch 0 and once the wedge is replaced: empty cells.
    early = MonitorView()
    early(SimpleNamespace(dead_letters=[], snapshots=[
        {"group": "ch2", "family": "chain", "config": None, "nodes": {
            "n1": {"member": False, "epoch": 0, "pos": 0, "wedged": False, "lease_remaining_ms": 2_000}}},
        {**CHAIN_SNAPSHOT, "group": "ch3", "config": {**CHAIN_SNAPSHOT["config"], "wedged": False,
                                                      "wedged_epoch": None}, "nodes": {}}], alerts=[]))
    (only,) = early.tables()
    assert _rows(_render(only)) == [["ch2", "chain", "", "", "", "n1 epoch 0 pos 0 not configured", ""],
                                    ["ch3", "chain", "14", "n2 (head) n3 n5", "", "", ""]]


def test_a_generations_group_shows_its_generation_members_election_and_node_statuses() -> None:
    view = MonitorView()
    gen_alert = {**_alert("GEN_NO_ONLINE", "critical", "liveness", "no node online"), "group": "pg1"}
    view(SimpleNamespace(dead_letters=[], snapshots=[XCOM_SNAPSHOT, GEN_SNAPSHOT], alerts=[gen_alert]))
    xcom_table, gen_table = view.tables()
    rows = _rows(_render(gen_table))
    assert rows[0] == ["pg1", "gen", "7", "1/3 minority", "8", "n1 ONLINE (online) gen 7", "GEN_NO_ONLINE"]
    assert [r[5] for r in rows[1:]] == ["n2 RECOVERY (recovery) gen 7", "n3 DEAD (disabled) gen 6 silent"]
    assert "pg1" not in _render(xcom_table)  # each group in its own family's table


def test_the_xcom_table_is_unchanged_beside_generations_groups() -> None:
    alone, mixed = MonitorView(), MonitorView()
    alert = _alert("BEYOND_HORIZON", "critical", "violation", "beyond")
    alone(SimpleNamespace(dead_letters=[], snapshots=[XCOM_SNAPSHOT], alerts=[{**alert, "group": "g2"}]))
    mixed(SimpleNamespace(dead_letters=[], snapshots=[XCOM_SNAPSHOT, GEN_SNAPSHOT, QLOG_SNAPSHOT, CHAIN_SNAPSHOT],
                          alerts=[{**alert, "group": "g2"}]))
    assert [_render(t) for t in alone.tables()] == [_render(alone.table())]
    assert _rows(_render(mixed.tables()[0])) == _rows(_render(alone.table())) == [
        ["g2", "2", "2013", "2010", "10", "2023", "30%", "1", "BEYOND_HORIZON"]]
    # A snapshot without a family (an older job's) is XCom's.
    old = MonitorView()
    old(SimpleNamespace(dead_letters=[], snapshots=[{k: v for k, v in XCOM_SNAPSHOT.items() if k != "family"}],
                        alerts=[]))
    assert len(old.tables()) == 1 and _rows(_render(old.tables()[0]))[0][0] == "g2"


def _demo_defaults() -> dict[str, Any]:
    """The demo command's flag defaults, as ``replimon demo`` with no flag gets them."""
    import typer.main

    from replimon.cli import app

    command = typer.main.get_command(app).commands["demo"]  # type: ignore[attr-defined]
    return {p.name: p.default for p in command.params}


def test_the_default_demo_is_a_four_family_fleet_whose_faults_each_fire_within_two_minutes() -> None:
    from replimon.config import load_settings
    from replimon.core import Monitor
    from replimon.core.limits import Limits
    from replimon.demo import plan_demo

    d = _demo_defaults()
    settings = load_settings(None)
    plan = plan_demo(settings, families=d["families"], groups=d["groups"], gen_groups=d["gen_groups"],
                     qlog_groups=d["qlog_groups"], chain_groups=d["chain_groups"], nodes=d["nodes"],
                     duration=d["duration"], inject=d["inject"])
    assert plan.choice.families == ("xcom", "gen", "qlog", "chain")
    fleet = plan.fleet(settings, 1_700_000_000_000)
    assert fleet.group_names == [f"g{i}" for i in range(1, 7)] + [
        "pg1", "pg2", "pg3", "ql1", "ql2", "ql3", "ch1", "ch2", "ch3"]
    family_faults = {p: [i for i in plan.injections if i.group.startswith(p)] for p in ("pg", "ql", "ch")}
    assert [len(f) for f in family_faults.values()] == [2, 2, 2] and all(i.at_ms <= 90_000 for i in plan.injections)
    assert [fleet_table.title.split(",")[0] for fleet_table in fleet.tables()] == [
        "replimon demo fleet (XCom)", "replimon demo fleet (generations)", "replimon demo fleet (quorum-log)",
        "replimon demo fleet (chain)"]
    # Through the monitor, every default fault raises its alert in its group by 110 s, and the
    # families do not meet (no FAMILY_CONFLICT, nothing on the clean groups).
    monitor = Monitor(Limits.from_settings(settings))
    raised: set[tuple[str, str]] = set()
    fleet.attach(lambda e: raised.update((a.group, a.kind) for a in monitor.process(dict(e), {})
                                         if a.severity != "info"))
    while fleet.t < 110_000:
        fleet.step()
    from replimon.producers.simulator import CATALOGUE as XCOM
    from replimon.producers.simulator_chain import CATALOGUE as CHAIN
    from replimon.producers.simulator_gen import CATALOGUE as GEN
    from replimon.producers.simulator_qlog import CATALOGUE as QLOG

    catalogue = {"g": XCOM, "pg": GEN, "ql": QLOG, "ch": CHAIN}
    want = {(i.group, catalogue[i.group.rstrip("0123456789")][i.fault].alert) for i in plan.injections}
    assert {k for _, k in want} >= {"QLOG_DIVERGENT_DECREE", "QLOG_NO_LEADER", "GEN_REGRESSION",
                                    "CHAIN_STALE_EPOCH_WRITE", "CHAIN_WEDGE_NOT_REPLACED"}
    assert want <= raised
    assert {g for g, _ in raised} <= {i.group for i in plan.injections}
    assert [monitor.groups[g].snapshot()["family"] for g in ("g1", "pg3", "ql3", "ch3")] == [
        "xcom", "gen", "qlog", "chain"]


def test_a_plans_rates_set_each_familys_rate_option_and_the_others_keep_the_settings() -> None:
    """``plan_demo(rates=...)`` (``bench/demo_soak.py``'s rate mode) sets a family's rate option
    per group; a family it does not name runs at the settings' (or its simulator's) default."""
    from replimon.config import load_settings
    from replimon.demo import plan_demo

    settings = load_settings(None)
    plan = plan_demo(settings, families="xcom,gen,chain", groups=2, gen_groups=1, chain_groups=1, nodes=3,
                     duration="30s", inject=[], rates={"xcom": 0.5, "gen": 1.5})
    sims = plan.fleet(settings, 1_700_000_000_000).sims
    assert sims["xcom"].options.decisions_per_s == 0.5 and sims["gen"].options.xacts_per_s == 1.5
    default = plan_demo(settings, families="chain", groups=1, gen_groups=1, chain_groups=1, nodes=3,
                        duration="30s", inject=[]).fleet(settings, 0).sims["chain"]
    assert sims["chain"].options.writes_per_s == default.options.writes_per_s


@pytest.mark.parametrize(("args", "message"), [
    (["--families", "xcom,paxos"],
     "replimon: demo: --families: unknown family 'paxos' (families are xcom, gen, qlog, chain)"),
    (["--families", ","], "replimon: demo: --families: name at least one of xcom, gen, qlog, chain"),
    (["--families", "xcom,qlog", "--inject", "chain_wedge_not_replaced:ch1@10s"],
     "replimon: demo: --inject chain_wedge_not_replaced: a chain fault, and chain is not in --families"),
    (["--chain-groups", "2", "--inject", "chain_stale_epoch_write:ch3@10s"],
     "replimon: demo: fault chain_stale_epoch_write: no group 'ch3' (groups are ch1, ch2)"),
    (["--families", "xcom,chain", "--nodes", "2"],
     "replimon: demo: a chain group needs at least 3 replicas, and a fleet 1 group"),
    (["--families", "xcom,gen", "--inject", "qlog_no_leader:ql1@10s"],
     "replimon: demo: --inject qlog_no_leader: a quorum-log fault, and qlog is not in --families"),
    (["--families", "qlog", "--inject", "beyond_horizon:g1@10s"],
     "replimon: demo: --inject beyond_horizon: an XCom fault, and xcom is not in --families"),
    (["--qlog-groups", "1", "--inject", "qlog_no_leader:ql2@10s"],
     "replimon: demo: fault qlog_no_leader: no group 'ql2' (groups are ql1)"),
    (["--families", "xcom,qlog", "--nodes", "2"],
     "replimon: demo: a quorum-log group needs at least 3 replicas, and a fleet 1 group"),
    (["--families", "xcom", "--inject", "gen_regression:pg1@10s"],
     "replimon: demo: --inject gen_regression: a generations fault, and gen is not in --families"),
    (["--gen-groups", "2", "--inject", "gen_regression:pg3@10s"],
     "replimon: demo: fault gen_regression: no group 'pg3' (groups are pg1, pg2)"),
    (["--duration", "20s", "--inject", "gen_no_online:pg2@30s"],
     "replimon: demo: --inject gen_no_online:pg2@30s is at or after the end of the run (--duration 20s): "
     "it would never be injected"),
])
def test_bad_fleet_flags_fail_in_one_line_before_anything_starts(args: list[str], message: str) -> None:
    from typer.testing import CliRunner

    from replimon.cli import app

    result = CliRunner().invoke(app, ["demo", *args])
    assert result.exit_code == 2, result.output
    assert result.output.strip().replace("\n", " ") == message
