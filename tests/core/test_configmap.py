"""The configuration-map rules against the seed's worked examples and MySQL's vectors
(docs/rules.md, "The configuration map")."""

from __future__ import annotations

from dataclasses import replace

from replimon.core.configmap import (
    EVENT_HORIZON_INVALID,
    EVENT_HORIZON_UNCHANGEABLE,
    OLD_MEMBER_CUSTOM_EH,
    Command,
    ConfigMap,
    Rules,
)
from replimon.core.rules.xcom.records import config_key, view_key, view_matches

NEW, OLD = 9, 4


def group(eh: int = 10, rules: Rules | None = None, members=(("n1", NEW), ("n2", NEW), ("n3", NEW))) -> ConfigMap:
    cmap = ConfigMap(rules or Rules())
    cmap.boot(0, members, eh)
    return cmap


def set_eh(value: int) -> Command:
    return Command("set_event_horizon", event_horizon=value)


def test_seed_abcd_map_linearises_concurrent_horizon_changes() -> None:
    # Worklog 3.5: a/b/c/d with starts 0, 52, 1053, 1055 (domain relaxed: 1000 and 1 are outside).
    cmap = group(rules=Rules(eh_min=1, eh_max=1000))
    starts = [cmap.apply(c, set_eh(eh)).config.start for c, eh in ((41, 1000), (42, 1), (43, 100))]
    assert starts == [52, 1053, 1055]
    assert [(c.start, c.event_horizon) for c in cmap.configs] == [(0, 10), (52, 1000), (1053, 1), (1055, 100)]


def test_seed_too_far_stops_at_53_and_moves_on_at_52() -> None:
    # Worklog 3.6.3: eh 10 -> 2 at 41, remove n at 42: start 55, can_leave 57.
    cmap = group(rules=Rules(eh_min=1), members=(("n", NEW), ("a", NEW), ("b", NEW)))
    assert cmap.apply(41, set_eh(2)).config.start == 52
    removed = cmap.apply(42, Command("remove_nodes", (("n", None),))).config
    assert (removed.start, removed.can_leave) == (55, 57)
    assert [cmap.effective_horizon(e) for e in (47, 50, 51, 52, 55)] == [53, 53, 53, 54, 57]
    # MySQL's bound is one stricter while the change is pending, equal once it is active.
    assert [cmap.effective_horizon(e, mysql=True) for e in (47, 51, 52)] == [52, 53, 54]
    assert cmap.effective_horizon(40) == 50  # min(40 + 10, 52 - 1 + 2)
    assert cmap.as_of(40).effective_horizon(40) == 50


def test_mysql_vectors_set_eh_then_add_share_start_newer_wins() -> None:
    cmap = group()
    assert cmap.apply(41, set_eh(20)).config.start == 52
    assert cmap.apply(42, Command("add_nodes", (("X", NEW),))).config.start == 73
    third = cmap.apply(43, Command("add_nodes", (("Y", NEW),))).config
    assert third.start == 73
    assert [c.start for c in cmap.configs] == [0, 52, 73]
    assert cmap.latest().member_ids == ("n1", "n2", "n3", "X", "Y")


def test_lowering_100_to_10_caps_the_horizon_while_pending() -> None:
    cmap = group(eh=100)
    assert cmap.apply(41, set_eh(10)).config.start == 142
    assert cmap.effective_horizon(60) == 151  # min(60 + 100, 142 - 1 + 10)
    assert cmap.effective_horizon(60, mysql=True) == 150
    assert cmap.effective_horizon(141) == 151  # 142 active for the next instance: 141 + 10


def test_old_member_join_refused_on_custom_eh_accepted_with_pending_change_back() -> None:
    custom = group(eh=20)
    assert custom.apply(41, Command("add_nodes", (("old", OLD),))).reason == OLD_MEMBER_CUSTOM_EH
    # A pending change back to 10 makes the LATEST horizon 10: the add is accepted.
    back = group(eh=100)
    back.apply(41, set_eh(10))
    assert back.apply(42, Command("add_nodes", (("old", OLD),))).installed
    # A new node may always be added.
    assert group(eh=20).apply(41, Command("add_nodes", (("new", NEW),))).installed


def test_refusals_domain_and_old_members() -> None:
    assert group().apply(41, set_eh(201)).reason == EVENT_HORIZON_INVALID
    assert group().apply(41, set_eh(9)).reason == EVENT_HORIZON_INVALID
    assert group().apply(41, set_eh(200)).installed
    mixed = group(members=(("n1", NEW), ("n2", OLD), ("n3", NEW)))
    assert mixed.apply(41, set_eh(20)).reason == EVENT_HORIZON_UNCHANGEABLE
    # Setting the default with an old member: MySQL refuses, the worklog allows; both keep 10.
    assert mixed.apply(42, set_eh(10)).reason == EVENT_HORIZON_UNCHANGEABLE
    lenient = group(rules=Rules(allow_default_eh_with_old_members=True), members=mixed.latest().members)
    assert lenient.apply(42, set_eh(10)).config.event_horizon == 10
    # An old member in a PENDING config already blocks a horizon change (latest config rule).
    pending_old = group()
    pending_old.apply(41, Command("add_nodes", (("old", OLD),)))
    assert pending_old.apply(42, set_eh(30)).reason == EVENT_HORIZON_UNCHANGEABLE


def test_refusal_does_not_change_the_map_and_prune_keeps_four() -> None:
    cmap = group()
    cmap.apply(41, set_eh(500))
    assert len(cmap.configs) == 1
    for i in range(10):
        cmap.apply(100 * (i + 1), set_eh(20 + i))
    cmap.prune(10_000)
    assert len(cmap.configs) == 4
    assert cmap.active(10_000).event_horizon == 29


def test_a_configs_derived_fields_follow_its_members() -> None:
    """``member_ids`` and ``majority`` are computed once, also for a copy with other members, and
    take no part in equality."""
    cmap = group()
    cfg = cmap.latest()
    assert cfg.member_ids == ("n1", "n2", "n3") and cfg.majority == 2
    two = replace(cfg, members=(("n1", NEW), ("n2", NEW)))
    assert two.member_ids == ("n1", "n2") and two.majority == 2
    assert replace(two, members=cfg.members) == cfg


def test_view_matches_is_view_key_against_config_key() -> None:
    """The heartbeat view check's shortcut gives what comparing the sorted keys gives."""
    cfg = group().latest()
    views = [{"start": s, "event_horizon": eh, "members": [{"id": i, "protocol": p} for i, p in ms]}
             for s in (0, 1) for eh in (10, 11)
             for ms in (cfg.members, cfg.members[::-1], cfg.members[:2], (*cfg.members, ("n1", NEW)),
                        (("n1", NEW), ("n2", OLD), ("n3", NEW)), (("n3", NEW), ("n1", NEW), ("n2", NEW)))]
    for view in views:
        assert view_matches(view, cfg) == (view_key(view) == config_key(cfg)), view
    assert sum(view_matches(v, cfg) for v in views) == 3  # start 0, horizon 10, the same members
