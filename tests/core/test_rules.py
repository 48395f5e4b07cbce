"""The monitor's rules (docs/rules.md): one hand-made history per alert kind, and its near miss.

Each firing history is a correct group (``tests/support/histories.py`` plays it truthfully) plus the one
fault the kind is about; each near miss is the closest correct history and must raise nothing of
that kind. Timed rules are judged against the watermark (group clock - skew) whenever the group's
clock has moved 250 ms, so thresholds are placed to the millisecond: ``threshold + skew`` fires,
one millisecond less does not. The seed's worked examples (worklog 3.5 and 3.6.3) and MySQL's
vectors are replayed through the whole monitor at the end.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from replimon.core import Monitor
from replimon.core.alerts import FIELDS, FIRING, KINDS, RESOLVED, VIOLATIONS, WEDGES, Alert
from replimon.core.configmap import (
    EVENT_HORIZON_INVALID,
    EVENT_HORIZON_UNCHANGEABLE,
    OLD_MEMBER_CUSTOM_EH,
    Rules,
)
from replimon.core.limits import Limits
from tests.support.histories import (
    OLD,
    History,
    Run,
    arrival,
    cited,
    installed,
    refused,
    replay,
)

SKEW = Limits().skew_ms
TOO_FAR = Rules(eh_min=1)  # worklog 3.6.3 lowers the horizon to 2, below MySQL's domain
ABCD = Rules(eh_min=1, eh_max=1000)  # worklog 3.5 uses horizons 1000 and 1
MIXED = {"n3": OLD}


def started(**kw: object) -> History:
    """A correct group of n1..n3 that decided and executed 1..20; then 500 ms pass."""
    h = History(**kw)  # type: ignore[arg-type]
    h.run_to(20)
    h.advance(500)
    return h


def check(alert: Alert, kind: str, *, instance: int | None = None, node: str | None = None,
          cites: tuple[dict[str, object], ...] = ()) -> None:
    """The fields docs/rules.md ("Alert records") requires of one firing alert of ``kind``."""
    severity, category = KINDS[kind]
    assert tuple(alert.to_dict()) == FIELDS
    assert (alert.group, alert.kind, alert.severity, alert.category, alert.status) == (
        "g1", kind, severity, category, FIRING)
    assert (alert.instance, alert.node) == (instance, node)
    assert alert.message and alert.detected_ts_ms >= alert.event_ts_ms
    assert cited(alert, *cites), alert.evidence


def violations(run: Run) -> list[str]:
    return [a.kind for a in run.alerts if a.kind in VIOLATIONS]


def execute_all(h: History, upto: int, forged: dict[str, object] | None, c: int) -> None:
    """Every live node executes to ``upto`` and reports ``forged`` for the command at ``c``."""
    for m in h.live:
        h.execute(m, upto, reports={c: forged} if forged is not None else None)


# =============================================================================================
# Configuration map: EH_OUT_OF_DOMAIN, EH_CHANGE_WITH_OLD_MEMBER, OLD_MEMBER_JOIN_CUSTOM_EH,
# CONFIG_MISMATCH, CONFIG_DISAGREEMENT, CACHE_INVARIANT, RECONFIG_REFUSED, CONFIG_INSTALLED
# =============================================================================================
def out_of_domain() -> History:
    """set_eh(5) must be refused (EVENT_HORIZON_INVALID); every node installs it."""
    h = started()
    c = h.set_eh(5)
    assert h.outcomes[c].reason == EVENT_HORIZON_INVALID
    execute_all(h, c, installed(c + 11, 5, h.truth.latest().members), c)
    return h


def test_eh_out_of_domain() -> None:
    h = out_of_domain()
    run = h.run()
    check(run.one("EH_OUT_OF_DOMAIN"), "EH_OUT_OF_DOMAIN", instance=21, node="n1",
          cites=(h.find("decision", "n1", instance=21), h.find("config", "n1", instance=21)))
    assert violations(run) == ["EH_OUT_OF_DOMAIN"]  # n2 and n3 agree with n1: no disagreement


@pytest.mark.parametrize("value", [9, 201, 500])
def test_near_miss_out_of_domain_refused_is_only_info(value: int) -> None:
    h = started()
    c = h.set_eh(value)
    h.execute_all(c)
    run = h.run()
    assert violations(run) == []
    check(run.one("RECONFIG_REFUSED"), "RECONFIG_REFUSED", instance=c, node="n1")


@pytest.mark.parametrize("value", [10, 200])
def test_near_miss_domain_bounds_install(value: int) -> None:
    h = started()
    c = h.set_eh(value)
    h.execute_all(c)
    h.run_to(c + 12)
    h.tick(500)
    run = h.run()
    assert violations(run) == []
    assert run.one("CONFIG_INSTALLED").instance == c


def eh_change_with_old_member() -> History:
    """n3 speaks protocol 4: set_eh(20) must be refused (worklog 3.2.2); every node installs it."""
    h = started(protocols=MIXED)
    c = h.set_eh(20)
    assert h.outcomes[c].reason == EVENT_HORIZON_UNCHANGEABLE
    execute_all(h, c, installed(c + 11, 20, h.truth.latest().members), c)
    return h


def test_eh_change_with_old_member() -> None:
    h = eh_change_with_old_member()
    run = h.run()
    check(run.one("EH_CHANGE_WITH_OLD_MEMBER"), "EH_CHANGE_WITH_OLD_MEMBER", instance=21, node="n1",
          cites=(h.find("decision", "n1", instance=21), h.find("config", "n1", instance=21)))
    assert violations(run) == ["EH_CHANGE_WITH_OLD_MEMBER"]


@pytest.mark.parametrize("worklog", [False, True], ids=["mysql-refuses", "worklog-installs"])
def test_near_miss_default_eh_with_old_member_refused_or_installed(worklog: bool) -> None:
    # docs/rules.md, "EH_CHANGE_WITH_OLD_MEMBER": set_event_horizon(10) with an old member: MySQL refuses it, the worklog
    # installs it; the horizon stays 10 either way, so neither outcome may raise an alert, and
    # the map must follow the group so that later commands and views are judged right.
    h = started(protocols=MIXED, rules=Rules(allow_default_eh_with_old_members=worklog))
    c = h.set_eh(10)
    assert h.outcomes[c].installed is worklog
    h.execute_all(c)
    h.run_to(c + 15)  # past c + 11, where the worklog's configuration starts
    c2 = h.add("n4")
    h.execute_all(c2)
    h.tick(2000)
    run = h.run()
    assert violations(run) == []
    if worklog:
        assert [a.instance for a in run.of("CONFIG_INSTALLED")] == [c, c2]
    else:
        assert run.one("RECONFIG_REFUSED").instance == c
        assert EVENT_HORIZON_UNCHANGEABLE in run.one("RECONFIG_REFUSED").message
        assert run.one("CONFIG_INSTALLED").instance == c2


def test_eh_change_with_an_old_member_still_pending() -> None:
    # The LATEST configuration decides (worklog 3.2.3): an old node added at 21 (start 32) already
    # forbids a horizon change decided at 22, before it is even a member.
    h = started()
    h.add("old", OLD)
    c = h.set_eh(20)
    assert h.outcomes[c].reason == EVENT_HORIZON_UNCHANGEABLE
    execute_all(h, c, installed(c + 11, 20, h.truth.latest().members), c)
    run = h.run()
    check(run.one("EH_CHANGE_WITH_OLD_MEMBER"), "EH_CHANGE_WITH_OLD_MEMBER", instance=c, node="n1")


def test_near_miss_eh_change_once_the_old_member_is_removed_pending() -> None:
    h = started(protocols=MIXED)
    h.remove("n3")  # pending: the latest configuration has no old member any more
    c = h.set_eh(20)
    assert h.outcomes[c].installed
    h.execute_all(c)
    run = h.run()
    assert violations(run) == [] and run.of("CONFIG_INSTALLED")[-1].instance == c


def old_member_join_custom_eh() -> History:
    """The group runs eh 20: adding a protocol-4 node must be refused (worklog 3.2.1)."""
    h = started(event_horizon=20)
    c = h.add("old", OLD)
    assert h.outcomes[c].reason == OLD_MEMBER_CUSTOM_EH
    execute_all(h, c, installed(c + 21, 20, [*h.truth.latest().members, ("old", OLD)]), c)
    return h


def test_old_member_join_custom_eh() -> None:
    h = old_member_join_custom_eh()
    run = h.run()
    check(run.one("OLD_MEMBER_JOIN_CUSTOM_EH"), "OLD_MEMBER_JOIN_CUSTOM_EH", instance=21, node="n1",
          cites=(h.find("decision", "n1", instance=21), h.find("config", "n1", instance=21)))
    assert violations(run) == ["OLD_MEMBER_JOIN_CUSTOM_EH"]


def test_near_miss_old_member_join_after_a_pending_change_back_to_10() -> None:
    # The LATEST configuration (pending included) decides: once eh 100 -> 10 is pending, an old
    # node may join; a new node may always join.
    h = started(event_horizon=100)
    c1 = h.set_eh(10)
    c2 = h.add("old", OLD)
    c3 = h.add("new")
    assert all(h.outcomes[c].installed for c in (c1, c2, c3))
    h.execute_all(c3)
    h.tick(500)
    run = h.run()
    assert violations(run) == []
    assert [a.instance for a in run.of("CONFIG_INSTALLED")] == [c1, c2, c3]


def mismatch() -> History:
    """add(n4) at 21 starts at 32; every node reports 33."""
    h = started()
    c = h.add("n4")
    execute_all(h, c, {**h.report(c), "start": c + 12}, c)
    return h


def test_config_mismatch_wrong_start() -> None:
    h = mismatch()
    c = 21
    run = h.run()
    check(run.one("CONFIG_MISMATCH"), "CONFIG_MISMATCH", instance=c, node="n1",
          cites=(h.find("decision", "n1", instance=c), h.find("config", "n1", instance=c)))
    assert violations(run) == ["CONFIG_MISMATCH"]


@pytest.mark.parametrize("forge", ["refused", "members"])
def test_config_mismatch_outcome_or_members(forge: str) -> None:
    h = started()
    c = h.add("n4")
    cfg = h.outcomes[c].config
    assert cfg is not None
    wrong = refused(OLD_MEMBER_CUSTOM_EH) if forge == "refused" else installed(cfg.start, 10, cfg.members[:3])
    execute_all(h, c, wrong, c)
    run = h.run()
    check(run.one("CONFIG_MISMATCH"), "CONFIG_MISMATCH", instance=c, node="n1")
    assert violations(run) == ["CONFIG_MISMATCH"]


def test_near_miss_config_report_members_in_any_order() -> None:
    h = started()
    c = h.add("n4")
    cfg = h.outcomes[c].config
    assert cfg is not None
    execute_all(h, c, installed(cfg.start, 10, reversed(cfg.members)), c)
    run = h.run()
    assert violations(run) == []
    check(run.one("CONFIG_INSTALLED"), "CONFIG_INSTALLED", instance=c, node="n1",
          cites=(h.find("decision", "n1", instance=c), h.find("config", "n1", instance=c)))


def report_disagreement() -> History:
    """n1 and n3 report the truth for add(n4); n2 reports another start."""
    h = started()
    c = h.add("n4")
    h.execute("n1", c)
    h.execute("n2", c, reports={c: {**h.report(c), "start": c + 12}})
    h.execute("n3", c)
    return h


def test_config_disagreement_reports() -> None:
    h = report_disagreement()
    run = h.run()
    check(run.one("CONFIG_DISAGREEMENT"), "CONFIG_DISAGREEMENT", instance=21, node="n2",
          cites=(h.find("decision", "n1", instance=21), h.find("config", "n1", instance=21),
                 h.find("config", "n2", instance=21)))
    assert violations(run) == ["CONFIG_DISAGREEMENT"]


def test_near_miss_reports_agree_in_any_arrival_order() -> None:
    h = started()
    c = h.add("n4")
    for m in ("n3", "n1", "n2"):
        h.advance(300)
        h.execute(m, c)
    h.tick(3000)
    run = replay(arrival(h.events, {"n3": SKEW - 100}))
    assert violations(run) == []
    assert run.one("CONFIG_INSTALLED").node == "n1"  # n3's report arrives last: n1's is first


def view_disagreement() -> History:
    """n2's heartbeats claim event horizon 20 where the map says 10 (three beats in a row)."""
    h = started()
    h.tick(1000)
    for _ in range(3):
        h.advance(1000)
        h.heartbeat("n1")
        h.heartbeat("n2", view={**h.view("n2"), "event_horizon": 20})
        h.heartbeat("n3")
    return h


def test_config_disagreement_heartbeat_view() -> None:
    h = view_disagreement()
    run = h.run()
    first_bad = h.find("heartbeat", "n2", first=True, view={**h.view("n2"), "event_horizon": 20})
    # One alert for the three identical wrong views: one occurrence, emitted once.
    check(run.one("CONFIG_DISAGREEMENT"), "CONFIG_DISAGREEMENT", instance=21, node="n2", cites=(first_bad,))
    assert violations(run) == ["CONFIG_DISAGREEMENT"]


def test_near_miss_views_follow_the_map_and_offline_views_are_not_judged() -> None:
    h = started()
    c = h.add("n4")  # start c + 11
    h.execute("n1", c)
    h.heartbeat("n1")  # executed the add, its config still pending: the old view is right
    assert h.view("n1")["start"] == 0
    h.run_to(c + 15)
    h.heartbeats()
    assert h.view("n1")["start"] == c + 11  # and now the new one is
    h.advance(300)
    h.heartbeat("n2", view={**h.view("n2"), "event_horizon": 20}, status="OFFLINE")
    h.tick(1000)
    run = h.run()
    assert violations(run) == [] and run.one("CONFIG_INSTALLED").instance == c


def cache_invariant_report() -> History:
    """Members report cache 50; set_eh(20) installs eh 20 x 3 members = 60 >= 50 (worklog 3.3)."""
    h = started(cache_size=50)
    h.tick(1000)
    c = h.set_eh(20)
    h.execute_all(c)
    return h


def test_cache_invariant_on_install() -> None:
    h = cache_invariant_report()
    run = h.run()
    check(run.one("CACHE_INVARIANT"), "CACHE_INVARIANT", instance=32, node="n1",
          cites=(h.find("config", "n1", instance=21),))
    assert violations(run) == ["CACHE_INVARIANT"]
    assert "60" in run.one("CACHE_INVARIANT").message


@pytest.mark.parametrize(("cache", "fires"), [(30, True), (31, False)])
def test_cache_invariant_on_heartbeat_is_strict(cache: int, fires: bool) -> None:
    # cache_size > eh * |members| = 10 * 3: exactly 30 breaks it, 31 is fine.
    h = started(cache_size=cache)
    h.tick(3000)
    run = h.run()
    if fires:
        check(run.one("CACHE_INVARIANT"), "CACHE_INVARIANT", instance=0, node="n1",
              cites=(h.find("heartbeat", "n1", first=True),))
    else:
        assert violations(run) == []


def test_near_miss_cache_large_enough_for_the_new_horizon() -> None:
    h = started(cache_size=61)
    h.tick(1000)
    c = h.set_eh(20)
    h.execute_all(c)
    assert violations(h.run()) == []


def refusal(reason: str) -> tuple[History, int]:
    if reason == EVENT_HORIZON_INVALID:
        h = started()
        c = h.set_eh(500)
    elif reason == EVENT_HORIZON_UNCHANGEABLE:
        h = started(protocols=MIXED)
        c = h.set_eh(20)
    else:
        h = started(event_horizon=20)
        c = h.add("old", OLD)
    assert h.outcomes[c].reason == reason
    h.execute_all(c)
    return h, c


@pytest.mark.parametrize("reason", [EVENT_HORIZON_INVALID, EVENT_HORIZON_UNCHANGEABLE, OLD_MEMBER_CUSTOM_EH])
def test_reconfig_refused(reason: str) -> None:
    h, c = refusal(reason)
    run = h.run()
    alert = run.one("RECONFIG_REFUSED")  # three reports, one alert
    check(alert, "RECONFIG_REFUSED", instance=c, node="n1",
          cites=(h.find("decision", "n1", instance=c), h.find("config", "n1", instance=c)))
    assert reason in alert.message
    assert violations(run) == [] and "CONFIG_INSTALLED" not in run.kinds


def config_installed() -> History:
    h = started()
    c = h.add("n4")
    h.execute_all(c)
    return h


def test_config_installed() -> None:
    h = config_installed()
    run = h.run()
    alert = run.one("CONFIG_INSTALLED")
    check(alert, "CONFIG_INSTALLED", instance=21, node="n1",
          cites=(h.find("decision", "n1", instance=21), h.find("config", "n1", instance=21)))
    assert "start 32" in alert.message
    assert violations(run) == [] and "RECONFIG_REFUSED" not in run.kinds


# =============================================================================================
# Decisions: BEYOND_HORIZON, CAN_LEAVE_UNSAFE, DIVERGENT_DECISION (worklog 3.6.3)
# =============================================================================================
def too_far() -> History:
    """Worklog 3.6.3: a(start 0, eh 10), b(52, eh 2), c(55, eh 2, without n) from set_eh(2) at 41
    and remove n at 42; every node has executed 47."""
    h = History(members=("n1", "n2", "n3", "n"), rules=TOO_FAR)
    h.run_to(40)
    h.advance(100)
    assert (h.set_eh(2), h.remove("n")) == (41, 42)
    h.execute_all(42)
    h.run_to(47)
    assert [(c.start, c.event_horizon) for c in h.truth.configs] == [(0, 10), (52, 2), (55, 2)]
    assert h.truth.latest().can_leave == 57
    return h


def beyond_horizon() -> History:
    h = too_far()
    h.advance(100)
    h.decide(48, 7)  # 48..54 with window_base 47: the horizon stops at 52 - 1 + 2 = 53
    h.tick(500)
    return h


def test_beyond_horizon_seed_too_far() -> None:
    h = beyond_horizon()
    run = h.run(Limits(rules=TOO_FAR))
    check(run.one("BEYOND_HORIZON"), "BEYOND_HORIZON", instance=54, node="n1",
          cites=(h.find("decision", "n1", instance=48),))
    assert h.find("decision", "n1", instance=48)["window_base"] == 47
    # Deciding 54 = can_leave(b) while nobody had executed 51 also breaks the can_leave invariant.
    assert sorted(violations(run)) == ["BEYOND_HORIZON", "CAN_LEAVE_UNSAFE"]
    assert run.one("CAN_LEAVE_UNSAFE").instance == 54


@pytest.mark.parametrize(("executed", "horizon"), [(47, 53), (50, 53), (51, 53), (52, 54), (55, 57)])
def test_seed_too_far_roll_forward(executed: int, horizon: int) -> None:
    # Worklog 3.6.3 rolled forward: after executing 47, 50 or 51 the horizon stays at 53; at 52
    # (b active) it is 54; at 55 (c active) it reaches can_leave(c) = 57.
    for last, fires in ((horizon, False), (horizon + 1, True)):
        h = too_far()
        h.run_to(executed)
        h.advance(100)
        h.decide(executed + 1, last - executed)
        assert h.find("decision", "n1")["window_base"] == executed
        h.tick(500)
        run = h.run(Limits(rules=TOO_FAR))
        if fires:
            check(run.one("BEYOND_HORIZON"), "BEYOND_HORIZON", instance=last, node="n1",
                  cites=(h.find("decision", "n1", instance=executed + 1),))
        else:
            assert violations(run) == [], (last, run.ids())


def lowered() -> History:
    """MySQL vector: eh 100 lowered to 10 at 41 starts at 142; every node executed 60."""
    h = started(event_horizon=100)
    h.run_to(40)
    assert h.set_eh(10) == 41
    h.execute_all(41)
    h.run_to(60)
    assert h.outcomes[41].config is not None and h.outcomes[41].config.start == 142
    return h


@pytest.mark.parametrize(("last", "fires"), [(151, False), (152, True)])
def test_beyond_horizon_capped_while_lowering_is_pending(last: int, fires: bool) -> None:
    # min(60 + 100, 142 - 1 + 10) = 151 (the worklog's bound; MySQL stops at 150).
    h = lowered()
    h.advance(100)
    h.decide(61, last - 60)
    run = h.run()
    assert ("BEYOND_HORIZON" in run.kinds) is fires
    if fires:
        check(run.one("BEYOND_HORIZON"), "BEYOND_HORIZON", instance=152, node="n1",
              cites=(h.find("decision", "n1", instance=61),))
    else:
        assert violations(run) == []


def remove_n(executed_54: tuple[str, ...] = ("n1",), *, late_n2_ms: int | None = None) -> History:
    """Worklog 3.6.3, rolled forward correctly to can_leave(c) = 57: n1 proposes 57 having
    executed 55; ``executed_54`` are the other members of c that executed 54 first. With
    ``late_n2_ms``, n2 executes 54 that long AFTER 57 was decided and learns 57 only then."""
    h = too_far()
    h.decide(48, 6)  # 48..53: within the capped horizon
    h.execute_all(52)
    h.decide(54)  # can_leave(b) = 54: everyone had executed 51
    h.execute("n1", 54)
    h.decide(55, 2)  # window_base 54: horizon 54 + 2
    h.execute("n1", 55)
    for m in executed_54:
        if m != "n1":
            h.execute(m, 54)
    h.advance(100)
    learners = [m for m in h.live if late_n2_ms is None or m != "n2"]
    h.decide(57, learners=learners)  # window_base 55: horizon 57 = can_leave(c)
    if late_n2_ms is not None:
        h.advance(late_n2_ms)
        h.execute("n2", 54)
        h.decide(57, learners=["n2"])
    h.tick(5000)
    return h


def test_can_leave_unsafe_seed_remove_n() -> None:
    # c = {n1, n2, n3} (majority 2): 57 decided while only n1 had executed 54.
    h = remove_n()
    run = h.run(Limits(rules=TOO_FAR))
    decision = h.find("decision", "n1", instance=57)
    alert = run.one("CAN_LEAVE_UNSAFE")
    check(alert, "CAN_LEAVE_UNSAFE", instance=57, node="n1", cites=(decision,))
    assert alert.event_ts_ms == decision["ts_ms"]
    assert {e["node"] for e in alert.evidence[1:]} == {"n2", "n3"}  # the members that were behind
    assert violations(run) == ["CAN_LEAVE_UNSAFE"]


def test_near_miss_can_leave_with_exactly_a_majority() -> None:
    run = remove_n(("n1", "n2")).run(Limits(rules=TOO_FAR))
    assert violations(run) == []


def test_near_miss_can_leave_with_cross_node_arrival_within_the_skew() -> None:
    # n2 executed 54 before 57 was decided, but its events arrive 1.9 s late, after the decision.
    h = remove_n(("n1", "n2"))
    events = arrival(h.events, {"n2": SKEW - 100})
    n2_exec = h.find("execution", "n2", executed=54)
    assert events.index(n2_exec) > events.index(h.find("decision", "n1", instance=57))
    assert violations(replay(events, Limits(rules=TOO_FAR))) == []


def test_can_leave_execution_later_than_the_skew_does_not_count() -> None:
    h = remove_n(("n1",), late_n2_ms=SKEW + 500)
    run = h.run(Limits(rules=TOO_FAR))
    check(run.one("CAN_LEAVE_UNSAFE"), "CAN_LEAVE_UNSAFE", instance=57, node="n1")


def test_can_leave_execution_within_the_skew_counts() -> None:
    h = remove_n(("n1",), late_n2_ms=SKEW - 500)
    assert violations(h.run(Limits(rules=TOO_FAR))) == []


def test_can_leave_verdict_is_not_lost_at_end_of_input() -> None:
    # The input ends (``replimon check`` over a file, or the group falls silent) right after every
    # member of c answered: n1 executed 54, n2 and n3 learned 57 without it. The verdict is
    # complete and must come out of ``finish()`` (flush) or at least of the timer.
    # Regression: flush() and on_timer() once left a fully answered check waiting for a clock
    # step that never came.
    h = too_far()
    h.decide(48, 6)
    h.execute_all(52)
    h.decide(54)
    h.execute("n1", 54)
    h.decide(55, 2)
    h.execute("n1", 55)
    h.advance(100)
    h.decide(57)
    mon = Monitor(Limits(rules=TOO_FAR))
    alerts = mon.run(h.events)
    alerts += mon.groups["g1"].on_timer(h.t + 30_000)
    assert "CAN_LEAVE_UNSAFE" in {a.kind for a in alerts}


def divergent() -> History:
    """Instance 21: n1 learns digest aa, n2 learns bb, n3 learns cc."""
    h = started()
    h.decide(21, learners=["n1"], digest="aa")
    h.decide(21, learners=["n2"], digest="bb")
    h.decide(21, learners=["n3"], digest="cc")
    return h


def test_divergent_decision() -> None:
    h = divergent()
    run = h.run()
    alert = run.one("DIVERGENT_DECISION")  # three values, one occurrence
    check(alert, "DIVERGENT_DECISION", instance=21, node="n2",
          cites=(h.find("decision", "n1", instance=21), h.find("decision", "n2", instance=21)))
    assert violations(run) == ["DIVERGENT_DECISION"]


def test_divergent_decision_single_inside_a_run_of_another_kind() -> None:
    h = started()
    h.decide(21, 5, learners=["n1"])  # app run 21..25
    h.decide(23, kind="noop", proposer="n2", learners=["n2"])
    run = h.run()
    check(run.one("DIVERGENT_DECISION"), "DIVERGENT_DECISION", instance=23, node="n2",
          cites=(h.find("decision", "n2", instance=23),))


@pytest.mark.parametrize("order", ["single-first", "run-first"])
def test_divergent_decision_app_single_inside_a_noop_run(order: str) -> None:
    # The same two decision events must give the same verdict in either arrival order.
    # Regression: a new single was once compared with the runs covering it only when its kind was
    # not "app", so the run-first order missed it.
    h = started()
    if order == "single-first":
        h.decide(23, learners=["n2"])
        h.decide(21, 5, kind="noop", proposer="n2", learners=["n1"])
    else:
        h.decide(21, 5, kind="noop", proposer="n2", learners=["n1"])
        h.decide(23, learners=["n2"])
    run = h.run()
    check(run.one("DIVERGENT_DECISION"), "DIVERGENT_DECISION", instance=23,
          node="n1" if order == "single-first" else "n2")


def test_divergent_decision_two_runs_of_different_kinds() -> None:
    # n1 learns 21..25 as app, n2 learns 21..25 as noop: two decided values for five instances.
    # Regression: runs were once compared with singles only, never with other runs.
    h = started()
    h.decide(21, 5, learners=["n1"])
    h.decide(21, 5, kind="noop", proposer="n2", learners=["n2"])
    run = h.run()
    check(run.one("DIVERGENT_DECISION"), "DIVERGENT_DECISION", instance=21, node="n2")


def test_near_miss_same_value_learned_by_every_node_and_run_covering_its_singles() -> None:
    h = started()
    h.decide(21, digest="aa")  # the same digest from every node
    h.decide(22, 5, learners=["n1", "n2"])  # app run 22..26
    h.decide(24, learners=["n3"])  # and n3 learns 24 alone, also app
    h.decide(25, 2, learners=["n3"])
    run = h.run()
    assert violations(run) == []


# =============================================================================================
# Data: EXECUTION_REGRESSION, EVENTS_LOST, INCOMPLETE_HISTORY
# =============================================================================================
def regression() -> History:
    h = started()
    h.execute("n2", 15)  # back from 20, same incarnation
    return h


def test_execution_regression() -> None:
    h = regression()
    run = h.run()
    check(run.one("EXECUTION_REGRESSION"), "EXECUTION_REGRESSION", instance=15, node="n2",
          cites=(h.find("execution", "n2", executed=15),))
    assert violations(run) == ["EXECUTION_REGRESSION"]


def test_near_miss_lower_executed_after_a_restart() -> None:
    h = started()
    h.restart("n2")
    h.execute("n2", 15)  # a new incarnation starts from what it recovered
    h.heartbeat("n2")
    h.tick(1000)
    run = h.run()
    assert violations(run) == [] and run.alerts == []


def events_lost() -> History:
    """Two of n2's events never arrive (their seqs are used)."""
    h = started()
    h.tick(1000)
    h.lose("n2", 2)
    h.tick(4000)
    return h


def test_events_lost() -> None:
    h = events_lost()
    run = h.run()
    mine = [e for e in h.events if e["node"] == "n2"]
    after_gap = next(b for a, b in zip(mine, mine[1:], strict=False) if b["seq"] != a["seq"] + 1)
    alert = run.one("EVENTS_LOST")
    check(alert, "EVENTS_LOST", node="n2", cites=(after_gap,))
    assert alert.event_ts_ms == after_gap["ts_ms"] and "2 event(s)" in alert.message
    assert violations(run) == []


def test_events_lost_at_the_start_of_an_incarnation() -> None:
    h = started()
    h.restart("n2")
    h.lose("n2", 3)  # seq 0..2 of incarnation 1 never arrive
    h.tick(4000)
    run = h.run()
    alert = run.one("EVENTS_LOST")
    check(alert, "EVENTS_LOST", node="n2", cites=(h.find("heartbeat", "n2", first=True, incarnation=1),))
    assert "incarnation 1, seq 0..2" in alert.message


def test_events_lost_at_the_end_of_input_come_out_of_finish() -> None:
    h = started()
    h.tick(1000)
    h.lose("n2", 2)
    h.heartbeat("n2")  # the last event of the input, held behind the gap
    assert [(a.kind, a.node) for a in Monitor().run(h.events)] == [("EVENTS_LOST", "n2")]


def test_near_miss_reordered_and_duplicated_events_of_one_node() -> None:
    h = started()
    h.tick(4000)
    events = list(h.events)
    mine = [e for e in events if e["node"] == "n2"]
    late = mine[-3]  # arrives after the next one (within the skew), then everything twice
    events.remove(late)
    events.insert(events.index(mine[-2]) + 1, late)
    run = replay([e for ev in events for e in (ev, ev)])
    assert run.alerts == []
    assert run.monitor.counts["duplicates"] == len(events)


def incomplete() -> History:
    """The monitor starts reading mid-stream: the boot and the first 20 instances are gone."""
    h = started()
    h.tick(1000)
    cut = len(h.events)
    h.run_to(30)
    h.tick(4000)
    del h.events[:cut]  # published before the monitor's history begins
    return h


def test_incomplete_history() -> None:
    events = incomplete().events
    run = replay(events)
    first_n1 = next(e for e in events if e["node"] == "n1")
    check(run.one("INCOMPLETE_HISTORY"), "INCOMPLETE_HISTORY", node="n1", cites=(first_n1,))
    assert run.kinds == {"INCOMPLETE_HISTORY"}  # views are learned, not judged: nothing else
    assert run.monitor.snapshot()["history"] == "incomplete"


def test_near_miss_complete_history() -> None:
    h = started()
    h.tick(1000)
    h.run_to(30)
    h.tick(4000)
    run = h.run()
    assert run.alerts == [] and run.monitor.snapshot()["history"] == "complete"


# =============================================================================================
# Wedges and liveness (thresholds + skew, to the millisecond)
# =============================================================================================
def horizon_wedge(wait: int = 12_000, every: int = 1000, upto: int = 30) -> History:
    """Decisions reach 20 + 10 = 30 (the horizon); nobody executes for ``wait`` ms."""
    h = started()
    h.decide(21, upto - 20)
    h.tick(wait, every=every)
    return h


def no_progress(wait: int = 32_000, every: int = 1000) -> History:
    """21..25 decided (below the horizon); nobody executes for ``wait`` ms."""
    h = started()
    h.decide(21, 5)
    h.tick(wait, every=every)
    return h


def pending_stuck(wait: int = 62_000, every: int = 1000) -> History:
    """add(n4) at 21 (start 32) is executed; nothing more is decided for ``wait`` ms."""
    h = started()
    h.add("n4")
    h.execute_all(21)
    h.tick(wait, every=every)
    return h


def node_silent(wait: int = 7_000, every: int = 1000) -> History:
    """n3 sends nothing for ``wait`` ms while n1 and n2 heartbeat."""
    h = started()
    h.tick(1000)
    h.tick(wait, silent=["n3"], every=every)
    return h


def executor_lag(wait: int = 12_000, every: int = 1000, n3_at: int = 0) -> History:
    """eh 200: n1 and n2 execute 1..1200, n3 stays at ``n3_at``; then ``wait`` ms pass."""
    h = History(event_horizon=200)
    h.run_to(n3_at)
    h.run_to(1200, executors=["n1", "n2"])
    h.advance(500)
    h.heartbeats()
    h.tick(wait, every=every)
    return h


def quorum(suspects: dict[str, list[str]], members: tuple[str, ...] = ("n1", "n2", "n3"),
           wait: int = 4_000) -> History:
    h = started(members=members)
    h.tick(1000)
    h.tick(wait, suspects=suspects)
    return h


AT_RISK = {"n1": ["n3"], "n2": ["n3"]}
LOST = {"n1": ["n2", "n3"], "n2": ["n3"], "n3": ["n2"]}


def test_horizon_wedge() -> None:
    h = horizon_wedge()
    run = h.run()
    reached = h.find("decision", "n1", instance=21)["ts_ms"]
    alert = run.one("HORIZON_WEDGE")
    check(alert, "HORIZON_WEDGE", instance=30)
    assert alert.event_ts_ms == reached and alert.detected_ts_ms == reached + 10_000 + SKEW
    assert "NO_PROGRESS" not in run.kinds


@pytest.mark.parametrize(("wait", "upto"), [(11_999, 30), (20_000, 29)], ids=["just-under", "below-horizon"])
def test_near_miss_horizon_wedge(wait: int, upto: int) -> None:
    assert horizon_wedge(wait, upto=upto).run().alerts == []


def test_no_progress() -> None:
    h = no_progress()
    run = h.run()
    alert = run.one("NO_PROGRESS")
    check(alert, "NO_PROGRESS", instance=25)
    assert alert.event_ts_ms == h.find("decision", "n3", instance=21)["ts_ms"]
    assert run.kinds == {"NO_PROGRESS"}


def test_near_miss_no_progress() -> None:
    assert no_progress(31_999).run().alerts == []
    idle = started()  # nothing pending: a quiet, healthy group raises nothing
    idle.tick(70_000)
    assert idle.run().alerts == []


def test_pending_config_stuck() -> None:
    h = pending_stuck()
    run = h.run()
    alert = run.one("PENDING_CONFIG_STUCK")
    check(alert, "PENDING_CONFIG_STUCK", instance=32)
    assert alert.event_ts_ms == h.find("decision", "n1", instance=21)["ts_ms"]
    assert run.kinds == {"CONFIG_INSTALLED", "NO_PROGRESS", "PENDING_CONFIG_STUCK"}


def test_near_miss_pending_config_stuck() -> None:
    assert "PENDING_CONFIG_STUCK" not in pending_stuck(61_999).run().kinds


def test_node_silent() -> None:
    h = node_silent()
    run = h.run()
    last = h.find("heartbeat", "n3")
    alert = run.one("NODE_SILENT")
    check(alert, "NODE_SILENT", node="n3", cites=(last,))
    assert alert.event_ts_ms == last["ts_ms"] and alert.detected_ts_ms == last["ts_ms"] + 5_000 + SKEW
    assert run.kinds == {"NODE_SILENT"}


def test_near_miss_node_silent() -> None:
    assert node_silent(6_999).run().alerts == []
    # n3 publishes all along, but its events arrive 1.9 s late (cross-node skew): not silent.
    h = started()
    h.tick(20_000)
    assert replay(arrival(h.events, {"n3": SKEW - 100})).alerts == []


def test_quorum_at_risk() -> None:
    h = quorum(AT_RISK)
    run = h.run()
    alert = run.one("QUORUM_AT_RISK")
    check(alert, "QUORUM_AT_RISK")
    assert {e["node"] for e in alert.evidence} == {"n1", "n2"}
    assert alert.detected_ts_ms == alert.event_ts_ms + SKEW  # the state held for the skew
    assert run.kinds == {"QUORUM_AT_RISK"}


def test_quorum_lost() -> None:
    run = quorum(LOST).run()
    check(run.one("QUORUM_LOST"), "QUORUM_LOST")
    assert run.kinds == {"QUORUM_LOST"}


@pytest.mark.parametrize(("suspects", "members"), [
    ({"n1": ["n3"]}, ("n1", "n2", "n3")),  # one suspicion is no majority
    ({"n1": ["n2"], "n2": ["n1"]}, ("n1", "n2")),  # two members: no AT_RISK, nobody lost
    ({"n1": ["n3"], "n2": ["n3"]}, ("n1", "n2", "n3", "n4", "n5")),  # 4 of 5 live
], ids=["one-vote", "two-members", "five-one-down"])
def test_near_miss_quorum(suspects: dict[str, list[str]], members: tuple[str, ...]) -> None:
    assert quorum(suspects, members, wait=8_000).run().alerts == []


def test_near_miss_quorum_lost_is_at_risk_with_a_bare_majority() -> None:
    # Five members, two suspected by a majority: 3 live == majority: AT_RISK, not LOST.
    run = quorum({"n1": ["n4", "n5"], "n2": ["n4", "n5"], "n3": ["n4", "n5"]},
                 ("n1", "n2", "n3", "n4", "n5")).run()
    assert run.kinds == {"QUORUM_AT_RISK"}


def two_crashed(silent: tuple[str, ...] = ("n2", "n3"), wait: int = 12_000) -> History:
    """``silent`` stop publishing (crashed) while the rest heartbeat, suspecting them."""
    h = started()
    h.tick(1000)
    rest = [m for m in h.members if m not in silent]
    h.tick(wait, silent=silent, suspects={m: list(silent) for m in rest})
    return h


def test_quorum_lost_when_two_of_three_fall_silent() -> None:
    # Only the survivor is left to suspect the two crashed members: one vote is no majority, so
    # suspicions alone never said the quorum was lost; silence does.
    h = two_crashed()
    run = h.run()
    alert = run.one("QUORUM_LOST")
    check(alert, "QUORUM_LOST")
    assert "1 of 3 members" in alert.message and "silent: n2, n3" in alert.message
    silent = [a for a in run.alerts if a.kind == "NODE_SILENT" and a.status == "firing"]
    assert {a.node for a in silent} == {"n2", "n3"}
    assert alert.event_ts_ms >= max(a.detected_ts_ms for a in silent)
    assert alert.detected_ts_ms == alert.event_ts_ms + SKEW  # the state held for the skew
    assert {e["node"] for e in alert.evidence} == {"n1", "n2", "n3"}
    assert run.kinds == {"NODE_SILENT", "QUORUM_LOST"}


def test_near_miss_quorum_one_of_three_silent() -> None:
    # One member of three silent (and suspected by one): a bare majority is live. NODE_SILENT is
    # its alert; the quorum is at risk at most, never lost.
    run = two_crashed(("n3",), wait=20_000).run()
    assert "QUORUM_LOST" not in run.kinds
    assert run.kinds <= {"NODE_SILENT", "QUORUM_AT_RISK"} and "NODE_SILENT" in run.kinds


def test_quorum_lost_by_silence_resolves_when_they_come_back() -> None:
    h = two_crashed()
    h.tick(4000)
    run = h.run()
    lost = [a for a in run.alerts if a.kind == "QUORUM_LOST"]
    assert [a.status for a in lost] == ["firing", "resolved"]
    assert lost[0].alert_id == lost[1].alert_id


def test_executor_lag() -> None:
    h = executor_lag()
    run = h.run()
    alert = run.one("EXECUTOR_LAG")
    # The evidence is n3's last event when the lag was judged (n1's beat at that time came first).
    check(alert, "EXECUTOR_LAG", instance=0, node="n3",
          cites=(h.find("heartbeat", "n3", ts_ms=alert.detected_ts_ms - 1000),))
    assert alert.detected_ts_ms == alert.event_ts_ms + 10_000 + SKEW
    assert run.kinds == {"EXECUTOR_LAG"}


def test_near_miss_executor_lag() -> None:
    assert executor_lag(11_999).run().alerts == []
    assert executor_lag(20_000, n3_at=200).run().alerts == []  # a lag of exactly 1000


def group_silent() -> tuple[History, Run]:
    h = started()
    h.tick(1000)
    return h, h.run()


def test_group_silent_fires_from_the_timer_alone() -> None:
    h, run = group_silent()
    last = h.t
    assert run.monitor.next_timer() == last + 15_000 + SKEW
    assert run.timer(last + 15_000 + SKEW - 1) == []
    fired = run.timer(last + 15_000 + SKEW)  # no event arrived: only the outside clock moved
    assert [a.kind for a in fired] == ["GROUP_SILENT"]
    check(fired[0], "GROUP_SILENT")
    assert fired[0].event_ts_ms == last and fired[0].detected_ts_ms == last + 15_000 + SKEW
    assert run.monitor.next_timer() is None and run.timer(last + 60_000) == []


def test_group_silent_in_a_fleet_is_driven_by_other_groups() -> None:
    quiet = started()
    quiet.tick(1000)
    busy = started(group="g2")
    busy.tick(20_000)
    merged = sorted(quiet.events + busy.events, key=lambda e: e["ts_ms"])
    alerts = Monitor().run(merged)
    assert [(a.group, a.kind) for a in alerts] == [("g1", "GROUP_SILENT")]
    assert alerts[0].event_ts_ms == quiet.t


# =============================================================================================
# Across kinds: every kind covered, deterministic ids, wedges resolve, violations do not,
# each occurrence once, custom limits honoured
# =============================================================================================
def healthy(seconds: int = 30) -> History:
    """A busy, correct group: 60 instances a second, horizon changes 10 -> 20 -> 10 and the
    removal of n3 along the way (each with its can_leave check), heartbeats every second."""
    h = History()
    for i in range(seconds):
        if i in (5, 15):
            h.execute_all(h.set_eh(20 if i == 5 else 10))
        if i == 20:
            h.execute_all(h.remove("n3"))
        if i == 22:  # can_leave = 1214 + 10 is decided: n3 goes
            assert h.decided >= h.truth.latest().can_leave
            h.leave("n3")
        h.run_to(h.decided + 60, step_ms=100)
        h.tick(400)
    return h


@pytest.mark.parametrize("delays", [{}, {"n2": SKEW - 100, "n3": SKEW // 2}, {"n1": SKEW - 1}],
                         ids=["in-order", "n2-n3-late", "proposer-late"])
def test_near_miss_healthy_group_with_cross_node_disorder_within_the_skew(delays: dict[str, int]) -> None:
    h = healthy()
    assert len(h.truth.configs) == 4 and h.decided > 1_500
    run = replay(arrival(h.events, delays))
    # Nothing but the three installs: no can_leave, horizon, lag or silence alert (n3 left after
    # can_leave and stayed silent for 8 s: it is no member any more).
    assert [(a.kind, a.instance) for a in run.alerts] == [("CONFIG_INSTALLED", c) for c in (301, 902, 1203)]
    assert {a.alert_id for a in run.alerts} == {a.alert_id for a in h.run().alerts}


HISTORIES: dict[str, tuple[Callable[[], History], Limits | None]] = {
    "EH_OUT_OF_DOMAIN": (out_of_domain, None),
    "EH_CHANGE_WITH_OLD_MEMBER": (eh_change_with_old_member, None),
    "OLD_MEMBER_JOIN_CUSTOM_EH": (old_member_join_custom_eh, None),
    "CONFIG_MISMATCH": (mismatch, None),
    "CONFIG_DISAGREEMENT": (report_disagreement, None),
    "CONFIG_DISAGREEMENT/view": (view_disagreement, None),
    "BEYOND_HORIZON": (beyond_horizon, Limits(rules=TOO_FAR)),
    "CAN_LEAVE_UNSAFE": (remove_n, Limits(rules=TOO_FAR)),
    "DIVERGENT_DECISION": (divergent, None),
    "EXECUTION_REGRESSION": (regression, None),
    "CACHE_INVARIANT": (cache_invariant_report, None),
    "HORIZON_WEDGE": (horizon_wedge, None),
    "NO_PROGRESS": (no_progress, None),
    "PENDING_CONFIG_STUCK": (pending_stuck, None),
    "NODE_SILENT": (node_silent, None),
    "QUORUM_AT_RISK": (lambda: quorum(AT_RISK), None),
    "QUORUM_LOST": (lambda: quorum(LOST), None),
    "EXECUTOR_LAG": (executor_lag, None),
    "GROUP_SILENT": (lambda: group_silent()[0], None),  # fired by the timer (see play)
    "EVENTS_LOST": (events_lost, None),
    "INCOMPLETE_HISTORY": (incomplete, None),
    "RECONFIG_REFUSED": (lambda: refusal(EVENT_HORIZON_INVALID)[0], None),
    "CONFIG_INSTALLED": (config_installed, None),
}


def play(case: str, *, roundtrip: bool = False) -> Run:
    """Replay the firing history of ``case`` (for GROUP_SILENT, then let the outside clock run)."""
    build, limits = HISTORIES[case]
    h = build()
    run = replay(h.events, limits, roundtrip=roundtrip)
    if case == "GROUP_SILENT":
        run.timer(h.t + 20_000)
    return run


def test_every_kind_has_a_history() -> None:
    # DATA_QUALITY_FAILED comes from the data-quality sink (replimon.quality), DATA_LOST from the job;
    # CLOCK_SKEW from the fleet and the job, which judge a clock against others (test_clocks.py);
    # the generations family's kinds have theirs in test_gen_rules.py and test_gen_simulated.py.
    # FAMILY_CONFLICT from a group given another family's event (test_family.py).
    xcom = {k for k in KINDS if not k.startswith(("GEN_", "QLOG_", "CHAIN_"))} - {"DATA_QUALITY_FAILED", "CLOCK_SKEW", "FAMILY_CONFLICT",
                                                           "DATA_LOST"}
    assert {case.split("/")[0] for case in HISTORIES} == xcom


@pytest.mark.parametrize("case", list(HISTORIES))
def test_alert_ids_are_deterministic(case: str) -> None:
    # The same history gives the same alerts and ids: twice from scratch, and again with the
    # state going through JSON after every event (Spark's state store; live vs replay).
    first = play(case)
    assert case.split("/")[0] in first.kinds
    assert [a.to_dict() for a in play(case).alerts] == [a.to_dict() for a in first.alerts]
    assert play(case, roundtrip=True).ids() == first.ids()
    fired = [a.alert_id for a in first.alerts if a.status == FIRING]
    assert len(set(fired)) == len(fired)  # one id per occurrence


def _resolving(kind: str) -> tuple[list[dict[str, object]], Limits | None]:
    """The firing history of ``kind`` followed by what clears its condition."""
    if kind == "HORIZON_WEDGE":
        h = horizon_wedge()
        h.execute("n1", 25)
    elif kind == "NO_PROGRESS":
        h = no_progress()
        h.execute("n1", 25)
    elif kind == "PENDING_CONFIG_STUCK":
        h = pending_stuck()
        h.run_to(32)
        h.tick(500)
    elif kind == "NODE_SILENT":
        h = node_silent()
        h.heartbeat("n3")
    elif kind in ("QUORUM_AT_RISK", "QUORUM_LOST"):
        h = quorum(AT_RISK if kind == "QUORUM_AT_RISK" else LOST)
        h.tick(1000)
    else:
        assert kind == "EXECUTOR_LAG"
        h = executor_lag()
        h.execute("n3", 1200)
        h.tick(500)
    return h.events, None


# The generations family's wedges resolve in tests/core/test_gen_simulated.py, the quorum log's in test_qlog_rules.py,
# the chain family's in test_chain_rules.py.
@pytest.mark.parametrize("kind", sorted(k for k in WEDGES - {"GROUP_SILENT"} if not k.startswith(("GEN_", "QLOG_", "CHAIN_"))))
def test_wedges_resolve_under_the_same_id(kind: str) -> None:
    events, limits = _resolving(kind)
    run = replay(events, limits)
    fired, resolved = run.of(kind), run.of(kind, RESOLVED)
    assert len(fired) == 1 and len(resolved) == 1, run.ids()
    assert resolved[0].alert_id == fired[0].alert_id
    assert run.alerts.index(resolved[0]) > run.alerts.index(fired[0])
    assert resolved[0].message.startswith("Resolved:")
    assert (resolved[0].severity, resolved[0].category) == KINDS[kind]
    assert not [a for a in run.monitor.open.values() if a.kind == kind]


def test_group_silent_resolves_when_the_group_publishes_again() -> None:
    h, run = group_silent()
    fired = run.timer(h.t + 20_000)
    h.advance(20_000)
    back = h.heartbeat("n1")
    resolved = run.feed([back])
    assert [(a.kind, a.status, a.alert_id) for a in resolved] == [("GROUP_SILENT", RESOLVED, fired[0].alert_id)]
    assert cited(resolved[0], back)


@pytest.mark.parametrize("case", [c for c in HISTORIES if c.split("/")[0] in VIOLATIONS])
def test_violations_never_resolve_and_fire_once(case: str) -> None:
    # The firing history, then a healthy tail (right views, caches unchanged, heartbeats, a
    # regressed node moving forward again), every event delivered twice: still the same single
    # firing alert, and never a resolved one.
    kind = case.split("/")[0]
    build, limits = HISTORIES[case]
    h = build()
    once = replay(h.events, limits).of(kind)
    assert len(once) == 1
    h.tick(3000)
    if kind == "EXECUTION_REGRESSION":
        h.execute("n2", 20)
        h.tick(1000)
    run = replay([e for ev in h.events for e in (ev, ev)], limits)
    assert [a.alert_id for a in run.of(kind)] == [once[0].alert_id]
    assert [a for a in run.alerts if a.kind in VIOLATIONS and a.status != FIRING] == []
    assert run.monitor.counts["duplicates"] == len(h.events)


CUSTOM = Limits(horizon_wedge_ms=1_000, no_progress_ms=1_500, pending_config_stuck_ms=2_500,
                node_silent_ms=800, executor_lag_instances=5, executor_lag_ms=700,
                group_silent_ms=3_000, skew_ms=300)


TIMED: dict[str, tuple[Callable[..., History], int]] = {
    "HORIZON_WEDGE": (horizon_wedge, CUSTOM.horizon_wedge_ms),
    "NO_PROGRESS": (no_progress, CUSTOM.no_progress_ms),
    "PENDING_CONFIG_STUCK": (pending_stuck, CUSTOM.pending_config_stuck_ms),
    "NODE_SILENT": (node_silent, CUSTOM.node_silent_ms),
}


@pytest.mark.parametrize("kind", list(TIMED))
def test_custom_limits_are_honoured(kind: str) -> None:
    build, threshold = TIMED[kind]
    due = threshold + CUSTOM.skew_ms
    # Beats every 250 ms: closer than the custom node_silent, so the group is never "quiet".
    assert kind in build(due, every=250).run(CUSTOM).kinds
    assert kind not in build(due - 1, every=250).run(CUSTOM).kinds
    assert kind not in build(due, every=250).run().kinds  # the defaults would not fire yet


def test_custom_executor_lag_and_group_silent() -> None:
    h = started()
    h.decide(21, 6, learners=["n1", "n2", "n3"])
    h.execute_all(26, ["n1", "n2"])  # n3 lags 6 > 5 instances
    h.tick(CUSTOM.executor_lag_ms + CUSTOM.skew_ms, every=250)
    run = h.run(CUSTOM)
    check(run.one("EXECUTOR_LAG"), "EXECUTOR_LAG", instance=20, node="n3")
    assert run.timer(h.t + CUSTOM.group_silent_ms + CUSTOM.skew_ms)[0].kind == "GROUP_SILENT"
    near = started()
    near.decide(21, 5)
    near.execute_all(25, ["n1", "n2"])  # a lag of exactly 5
    near.tick(5_000, every=250)
    assert "EXECUTOR_LAG" not in near.run(CUSTOM).kinds


def test_custom_domain_is_honoured() -> None:
    wide = Rules(eh_max=300)
    h = started(rules=wide)
    c = h.set_eh(250)
    h.execute_all(c)
    assert violations(h.run(Limits(rules=wide))) == []
    assert h.run(Limits(rules=wide)).one("CONFIG_INSTALLED").instance == c
    assert violations(h.run()) == ["EH_OUT_OF_DOMAIN"]  # the default domain stops at 200


# =============================================================================================
# The seed's worked examples and MySQL's vectors, through the whole monitor
# =============================================================================================
def abcd() -> History:
    """Worklog 3.5: set_eh(1000) at 41, set_eh(1) at 42, set_eh(100) at 43 (a domain of [1, 1000])."""
    h = History(rules=ABCD)
    h.run_to(40)
    h.advance(100)
    assert [h.set_eh(v) for v in (1000, 1, 100)] == [41, 42, 43]
    h.execute_all(43)
    h.run_to(60)
    h.tick(1000)
    return h


def test_seed_abcd_installs_52_1053_1055_without_violation() -> None:
    h = abcd()
    run = h.run(Limits(rules=ABCD))
    assert violations(run) == []
    assert [a.instance for a in run.of("CONFIG_INSTALLED")] == [41, 42, 43]
    assert all(f"start {s}" in a.message for a, s in zip(run.of("CONFIG_INSTALLED"), (52, 1053, 1055), strict=True))
    snap = run.monitor.snapshot()
    assert [(c["start"], c["event_horizon"]) for c in [snap["active"], *snap["pending"]]] == [
        (52, 1000), (1053, 1), (1055, 100)]


def test_seed_abcd_with_the_default_domain_is_out_of_domain() -> None:
    run = abcd().run()
    assert [(a.kind, a.instance) for a in run.alerts if a.kind in VIOLATIONS] == [
        ("EH_OUT_OF_DOMAIN", 41), ("EH_OUT_OF_DOMAIN", 42)]
    assert run.one("CONFIG_INSTALLED").instance == 43  # placed after the group's 1053 + 1


def mysql_vectors(add_start: int | None = None) -> History:
    """set_eh(20) at 41 -> start 52; add X at 42 -> 73 (52 + 20 + 1); add Y at 43 -> also 73,
    the newer replaces it. With ``add_start``, every node reports that start for add X instead
    (and the history stops there: the nodes' later views would contradict their own report)."""
    h = History()
    h.run_to(40)
    h.advance(100)
    assert (h.set_eh(20), h.add("X"), h.add("Y")) == (41, 42, 43)
    assert [(c.start, c.event_horizon, len(c.members)) for c in h.truth.configs] == [(0, 10, 3), (52, 20, 3), (73, 20, 5)]
    forged = {42: {**h.report(42), "start": add_start}} if add_start is not None else None
    for m in h.live:
        h.execute(m, 43, reports=forged)
    h.heartbeats()  # views: start 0 (52 is still pending)
    if add_start is None:
        h.run_to(60)
        h.heartbeats()  # views: start 52
        h.run_to(80)
        h.heartbeats()  # views: start 73 with X and Y
    h.tick(500)
    return h


def test_mysql_vectors_install_without_violation() -> None:
    h = mysql_vectors()
    assert h.find("heartbeat", "n1")["view"]["start"] == 73
    run = h.run()
    assert violations(run) == []
    done = run.of("CONFIG_INSTALLED")
    assert [a.instance for a in done] == [41, 42, 43]
    assert all(f"start {s}" in a.message for a, s in zip(done, (52, 73, 73), strict=True))
    # The newer command at the same start replaced the older one in the monitor's map too.
    active = run.monitor.snapshot()["active"]
    assert (active["start"], [m["id"] for m in active["members"]]) == (73, ["n1", "n2", "n3", "X", "Y"])
    # X and Y join from 72 and publish their views of 73; ten seconds later all is still quiet.
    h.join("X")
    h.join("Y")
    for _ in range(10):
        h.run_to(h.decided + 20, step_ms=100)
        h.tick(900)
    assert h.run().alerts == run.alerts


def test_mysql_vectors_wrong_start_is_config_mismatch() -> None:
    # 42 + 10 + 1 = 53 ignores the pending horizon change; the rules place it at 52 + 20 + 1.
    h = mysql_vectors(add_start=53)
    run = h.run()
    check(run.one("CONFIG_MISMATCH"), "CONFIG_MISMATCH", instance=42, node="n1",
          cites=(h.find("config", "n1", instance=42),))
    assert violations(run) == ["CONFIG_MISMATCH"]  # the map follows the group: no cascade


def test_mysql_vector_lowering_100_to_10_starts_at_142() -> None:
    h = lowered()
    h.heartbeats()
    h.tick(500)
    run = h.run()
    assert violations(run) == []
    alert = run.one("CONFIG_INSTALLED")
    assert alert.instance == 41 and "start 142, event horizon 10" in alert.message


def test_a_node_clock_far_ahead_does_not_make_another_node_flap() -> None:
    """One node stamps its events 10 minutes ahead (found by the data-quality suites, docs/quality.md):
    the group clock jumps, a member first seen after that looks silent since then, and each of
    its own (older) events used to resolve NODE_SILENT and fire it again under the same id. An
    (alert_id, status) pair must occur once: only an event newer than the silence ends it."""
    from collections import Counter

    from replimon.producers.simulator import SimOptions, Simulator

    events: list[dict[str, object]] = []
    Simulator(SimOptions(duration_ms=20_000, groups=3, seed=2), [], events.append).run()
    events = [{**e, "ts_ms": int(e["ts_ms"]) + 600_000} if (e["group"], e["node"]) == ("g2", "n2") else e  # type: ignore[call-overload]
              for e in events]
    alerts = Monitor().run(events)
    twice = [k for k, n in Counter((a.alert_id, a.status) for a in alerts).items() if n > 1]
    assert not twice, twice
    # The clock jump still shows beyond the bound, as CLOCK_SKEW; within it, the node's lead no
    # longer makes its group-mates look silent (docs/operations.md, "Clocks").
    assert "CLOCK_SKEW" in {a.kind for a in alerts if a.group == "g2"}
    near = Monitor(Limits(clock_skew_ms=900_000)).run(events)
    assert "NODE_SILENT" not in {a.kind for a in near if a.group == "g2"}
    assert not [k for k, n in Counter((a.alert_id, a.status) for a in near).items() if n > 1]
