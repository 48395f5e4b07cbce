"""What the data-quality tests of every family share (docs/quality.md): records as read from one
partition per topic, running the suites, the mutations that break one expectation each, and the
four checks each family's suites get: a trace with every fault of its catalogue passes, each
expectation fails on its mutation naming the mutated row, a mixed stream leaves XCom's verdicts as
they are alone, and ``replimon validate`` of a mixed file names the one bad record of the family.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from replimon.contract import Invalid, parse_event
from replimon.core import Monitor
from replimon.quality import engine
from replimon.quality.derive import Record, alert_frame, input_frames, state_frames
from replimon.quality.engine import Outcome
from replimon.quality.suites import ALERTS, EVENT_TYPE, XCOM_SUITES, specs

Events = list[dict[str, Any]]
Mutation = Callable[[Events], tuple[Events, dict[str, Any]]]
Results = dict[tuple[str, str], Outcome]

START_MS = 1_767_225_600_000  # 2026-01-01: where the families' traces start
NOW_MS = START_MS + 24 * 3600 * 1000  # the validating clock (no event is in its future)


def family_trace(sim: ModuleType, seconds: int, *faults: str, groups: int = 3, seed: int = 1) -> Events:
    """The events of a family simulator (``replimon.producers.simulator_*``) run ``seconds`` from
    ``START_MS`` with ``faults`` injected (``NAME[:GROUP][@TIME]``)."""
    events: Events = []
    sim.Simulator(sim.SimOptions(groups=groups, seed=seed, duration_ms=seconds * 1000, start_ms=START_MS),
                  [sim.parse_injection(f) for f in faults], events.append).run()
    return events


def records(events: Events, topic_of: Mapping[str, str] | None = None) -> list[Record]:
    """Events as read from one partition per topic, in list order (each type on the topic
    ``topic_of`` names; ``replica.<type>`` otherwise)."""
    topic_of = topic_of or {}
    return [Record(topic_of.get(e["type"], f"replica.{e['type']}"), 0, i, e) for i, e in enumerate(events)]


def run(frames: Mapping[str, Any], params: Mapping[str, int]) -> Results:
    return {(o.suite, o.expectation): o for o in engine.validate(dict(frames), dict(params), sample_rows=5)}


# -- mutations ---------------------------------------------------------------------------------------
def pick(events: Events, type_: str, ok: Callable[[dict[str, Any]], bool] = lambda e: True) -> int:
    """The index of a matching event from the middle of the trace (mutated in a copy)."""
    found = [i for i, e in enumerate(events) if e["type"] == type_ and ok(e)]
    assert found, type_
    i = found[len(found) // 2]
    events[i] = copy.deepcopy(events[i])
    return i


def who(e: Mapping[str, Any]) -> dict[str, Any]:
    return {k: e[k] for k in ("group", "node", "seq")}


def set_field(type_: str, change: Callable[[dict[str, Any]], None],
              ok: Callable[[dict[str, Any]], bool] = lambda e: True) -> Mutation:
    """Change one event of ``type_`` (one ``ok`` accepts)."""
    def m(events: Events) -> tuple[Events, dict[str, Any]]:
        i = pick(events, type_, ok)
        change(events[i])
        return events, who(events[i])
    return m


def seq_back(type_: str) -> Mutation:
    """Swap the seq of two events of one node and incarnation: the later has the lower one."""
    def key(e: dict[str, Any]) -> tuple[Any, ...]:
        return e["type"], e["group"], e["node"], e["incarnation"]

    def m(events: Events) -> tuple[Events, dict[str, Any]]:
        last = {key(e): id(e) for e in events}  # an event with a later one of its node and type
        i = pick(events, type_, lambda e: last[key(e)] != id(e))
        j = next(k for k in range(i + 1, len(events)) if key(events[k]) == key(events[i]))
        events[j] = dict(events[j])
        events[i]["seq"], events[j]["seq"] = events[j]["seq"], events[i]["seq"]
        return events, who(events[j])
    return m


def clock_ahead(type_: str) -> Mutation:
    """Every event of one node (the sender of a ``type_`` heartbeat) 10 minutes ahead."""
    def m(events: Events) -> tuple[Events, dict[str, Any]]:
        i = pick(events, type_)
        group, node = events[i]["group"], events[i]["node"]
        for k, e in enumerate(events):
            if (e["group"], e["node"]) == (group, node):
                events[k] = {**e, "ts_ms": e["ts_ms"] + 10 * 60_000}
        return events, {"group": group, "node": node}
    return m


# -- the checks ---------------------------------------------------------------------------------------
def assert_every_expectation_passes(events: Events, suites: Sequence[str], params: Mapping[str, int],
                                    topic_of: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The family's suites (and the output suites) pass on ``events``, each judging real values,
    not only NULLs; returns the monitor's alerts on them."""
    m = Monitor()
    alerts = [a.to_dict() for e in events for a in m.process(e)] + [a.to_dict() for a in m.finish()]
    frames: dict[str, Any] = input_frames(records(events, topic_of))
    assert set(frames) == set(suites)  # every type lands in its suite
    frames[ALERTS] = alert_frame(alerts)
    frames.update(state_frames([g.snapshot() for g in m.groups.values()]))
    results = run(frames, params)
    family = {(s, spec.name) for s in suites for spec in specs()[s]}
    assert family <= set(results)
    failed = {k: (o.unexpected, o.samples[:2], o.error) for k, o in results.items() if not o.success}
    assert failed == {}
    for key in family:
        o = results[key]
        assert o.evaluated and o.evaluated - o.details.get("missing_count", 0) > 0, key
    return alerts


def assert_fails_on_mutation(clean: Events, key: tuple[str, str], mutation: Mutation, valid: bool,
                             params: Mapping[str, int], topic_of: Mapping[str, str] | None = None) -> None:
    """Expectation ``key`` passes on ``clean`` and fails on ``mutation`` of it, naming the mutated
    row and its type; ``valid``: whether the mutated records still pass contract v1 (those that
    do not reach a frame only from a source that skipped parsing)."""
    suite = key[0]
    type_ = EVENT_TYPE[suite]

    def frame(events: Events) -> Any:
        return input_frames(r for r in records(events, topic_of) if r.event["type"] == type_)[suite]

    assert run({suite: frame(clean)}, params)[key].success
    events, named = mutation(list(clean))
    changed = [e for e, c in zip(events, clean, strict=True) if e is not c]
    assert changed and all(isinstance(parse_event(json.dumps(e)), Invalid) != valid for e in changed)
    o = run({suite: frame(events)}, params)[key]
    assert not o.success and not o.error and o.unexpected and o.unexpected >= 1, (key, o)
    assert any(all(s.get(k) == v for k, v in named.items()) for s in o.samples), (key, named, o.samples)
    assert all(s["type"] == type_ for s in o.samples)  # the evidence names the record's type


def assert_verdicts_unchanged(alone: list[Record], family: Iterable[Record], params: Mapping[str, int],
                              suites: Sequence[str]) -> None:
    """``suites`` say the same of ``alone`` (where they all pass, each judging records) and of
    ``alone`` mixed with ``family``'s records (after them on the same partitions)."""
    mixed = [*alone, *(Record(r.source, 0, len(alone) + r.offset, r.event) for r in family)]

    def verdicts(recs: list[Record]) -> dict[tuple[str, str], tuple[bool, int | None, int | None]]:
        return {k: (o.success, o.evaluated, o.unexpected) for k, o in run(input_frames(recs), params).items()
                if k[0] in suites}

    before = verdicts(alone)
    assert {k[0] for k in before} == set(suites) and all(ok for ok, _, _ in before.values())
    assert verdicts(mixed) == before


def assert_xcom_verdicts_unchanged(family: Iterable[Record], params: Mapping[str, int]) -> None:
    """XCom's suites say the same of an XCom trace alone and mixed with ``family``'s records."""
    from tests.support import simulate

    xcom = simulate(30, groups=3, seed=2)
    xcom_recs = [Record(f"replica.{e['type']}s" if e["type"] != "config" else "replica.config", 0, i, e)
                 for i, e in enumerate(xcom)]
    assert_verdicts_unchanged(xcom_recs, family, params, XCOM_SUITES)


def assert_validate_names_the_bad_record(family: Events, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         key: tuple[str, str], bad: Callable[[dict[str, Any]], bool],
                                         change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """``replimon validate`` of a file mixing an XCom trace with ``family``'s events passes every
    suite; after ``change`` of the first event ``bad`` accepts, exactly expectation ``key`` fails,
    naming the file's line of that event."""
    from replimon.cli import main
    from tests.support import simulate

    suite, expectation = key
    events = [*simulate(20, groups=2, seed=2), *family]
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"pass  {suite}" in out and "pass  replica.heartbeats" in out and "FAIL" not in out
    i = next(k for k, e in enumerate(events) if bad(e))
    events[i] = change(events[i])
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    assert main(["validate", str(path)]) == 1
    fails = [line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("FAIL")]
    assert len(fails) == 1, fails
    assert suite in fails[0] and expectation in fails[0]
    assert f"mixed.jsonl:{i + 1}:" in fails[0]
