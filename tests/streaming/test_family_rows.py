"""A group of any family beside XCom makes the PostgreSQL sink's rows as an XCom group's does
(docs/postgres.md, "Tables"): its family, its configuration as JSON, the configuration's version
(generation number, legislature, epoch), each node's family fields, and XCom's flattened columns
NULL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from replimon.core import Monitor
from replimon.store.rows import group_row as _group_row
from replimon.store.rows import node_rows as _node_rows
from replimon.store.rows import node_series_rows as _node_series_rows
from replimon.store.rows import series_row as _series_row
from replimon.store.rows import series_values
from tests.core import test_chain_simulated, test_gen_simulated, test_qlog_simulated

# family -> (its simulated events, its first group, the node fields beyond every family's, the
# config_version its snapshot's config gives, its members)
FAMILIES: dict[str, tuple[Callable[[], list[dict[str, Any]]], str, set[str], Callable[[dict[str, Any]], int],
                          Callable[[dict[str, Any]], list[Any]]]] = {
    "gen": (lambda: test_gen_simulated.sim_events(None), "pg1",
            {"gen", "node_status", "last_online_in", "last_vote"}, lambda c: c["num"], lambda c: c["members"]),
    "qlog": (lambda: test_qlog_simulated.sim_events(None), "ql1",
             {"executed", "legislature", "watermark", "leader"}, lambda c: c["legislature"],
             lambda c: c["members"]),
    "chain": (lambda: test_chain_simulated.sim_events(None), "ch1",
              {"executed", "epoch", "pos", "stable", "wedged", "wedged_epoch", "lease_remaining_ms"},
              lambda c: c["epoch"], lambda c: c["chain"]),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_snapshot_of_the_family_makes_every_row(family: str) -> None:
    events, group, fields, version, members = FAMILIES[family]
    mon = Monitor()
    mon.run(events())
    snap = mon.groups[group].snapshot()
    row = _group_row(snap, "run", 1)
    assert row[1] == group and row[6:10] == (None, None, None, None)  # no XCom active map, no pending
    assert row[14] == family and row[15].obj == snap["config"] and version(snap["config"]) >= 1
    assert row[-2].obj["family"] == family
    nodes = list(_node_rows(snap, "run", 1))
    assert [n[2] for n in nodes] == sorted(snap["nodes"]) and all(n[3] for n in nodes)
    assert [set(n[-2].obj) for n in nodes] == [fields] * len(nodes)
    series = _series_row(snap, "run")
    assert series is not None and series[-1] == snap["config_version"] == version(snap["config"])
    assert series[3:] == tuple(series_values(snap).values())
    assert series_values(snap)["members"] == len(members(snap["config"])) > 0  # the current configuration's
    assert len(list(_node_series_rows(snap, "run"))) == len(snap["nodes"])


def test_a_quorum_log_node_keeps_its_legislature_watermark_and_leader() -> None:
    """The qlog node fields docs/families.md 5.2 names land in node_state.family_state, the
    executed frontier in its column too; the group's decided frontier and executed_majority in
    theirs (the quorum-log family has both)."""
    mon = Monitor()
    mon.run(test_qlog_simulated.sim_events(None))
    snap = mon.groups["ql1"].snapshot()
    leader = next(m["id"] for m in snap["config"]["members"] if m["leader"])
    row = _group_row(snap, "run", 1)
    assert row[5] == snap["decided"] >= 0 and row[11] == snap["executed_majority"] is not None
    for n in _node_rows(snap, "run", 1):
        x = snap["nodes"][n[2]]
        assert n[4] == x["executed"] and n[-2].obj["legislature"] == snap["config"]["legislature"]
        assert n[-2].obj["leader"] == leader and n[-2].obj["watermark"] == x["watermark"]


def test_a_chain_node_keeps_its_epoch_position_wedge_and_lease() -> None:
    """The chain node fields docs/families.md 5.2 names land in node_state.family_state (epoch,
    pos, stable, wedged, lease remaining), the log position as the executed frontier too; the
    group's decided frontier is the head's position, config_version the epoch."""
    mon = Monitor()
    mon.run(test_chain_simulated.sim_events(None))
    snap = mon.groups["ch1"].snapshot()
    config = snap["config"]
    row = _group_row(snap, "run", 1)
    assert row[5] == snap["decided"] == snap["nodes"][config["head"]]["executed"] > 0
    assert row[11] == snap["executed_majority"] is not None and row[15].obj["chain"] == config["chain"]
    series = _series_row(snap, "run")
    assert series is not None and series[-1] == config["epoch"] and series_values(snap)["members"] == len(config["chain"])
    members = [n for n in _node_rows(snap, "run", 1) if n[3]]
    assert sorted(n[2] for n in members) == sorted(config["chain"])
    for n in members:
        x = snap["nodes"][n[2]]
        assert n[4] == x["executed"] == n[-2].obj["pos"]
        assert n[-2].obj["epoch"] == config["epoch"] and n[-2].obj["wedged"] is False
        assert n[-2].obj["lease_remaining_ms"] == x["lease_remaining_ms"] is not None
