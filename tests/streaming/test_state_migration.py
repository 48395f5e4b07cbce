"""The bucket state's shape (``streaming/bucket_state.py``): each group's line carries its family
(state ``monitor_v6``), and a checkpoint written by the code before (``monitor_v5``, no family
field) is carried on by today's job: the same alerts as the core over both runs, none twice, and a
timer registered by the old code fires under the new one."""

from __future__ import annotations

import json
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from replimon.core import Monitor
from replimon.streaming.bucket_state import (
    LEGACY_STATE_NAME,
    STATE_NAME,
    legacy_in,
    migrate_text,
    parse_groups,
)
from replimon.streaming.rows import bucket_of
from tests.streaming import legacy_v5
from tests.support import publish, replay, settings_for, simulate


def test_old_lines_gain_their_family() -> None:
    gen_state = json.dumps({"v": 1, "family": "gen"}, separators=(",", ":"))
    old = "\n".join(["g1\t123\t\t{\"v\":1}", f"g2\t\t{{\"t\":{{\"0\":5}}}}\t4000\t{gen_state}", "g3\t\t\t"])
    assert parse_groups(migrate_text(old)) == {
        "g1": ['{"v":1}', 123, "", "xcom"],
        "g2": [gen_state, None, '{"t":{"0":5}}', "gen", 4000],
        "g3": ["", None, "", ""],
    }
    assert migrate_text("") == ""


def test_a_checkpoint_of_the_old_shape_carries_on(spark: Any, broker: Any, postgres: Any, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark import cloudpickle

    from replimon.streaming import job

    settings = settings_for(broker, postgres, f"mig-{uuid.uuid4().hex[:10]}-", tmp_path)
    # 64 buckets, the default when monitor_v5 was written (g1 and g2 in buckets of their own).
    settings = settings.model_copy(update={"streaming": settings.streaming.model_copy(update={"state_buckets": 64})})
    # g1 falls silent at 10 s (until 35 s), g2 loses a node at 3 s that is back at 15 s.
    events = simulate(40, "group_silent:g1@10s", "node_silent:g2@3s", groups=2)
    start = min(e["ts_ms"] for e in events)
    first = [e for e in events if e["ts_ms"] < start + 11_000]
    second = [e for e in events if start + 11_000 <= e["ts_ms"] < start + 34_000]
    assert {e["group"] for e in second} == {"g2"}  # g1's timer must fire with no input for it
    assert bucket_of("g1", settings.streaming.state_buckets) != bucket_of("g2", settings.streaming.state_buckets)
    run_id = f"mig-{uuid.uuid4().hex[:8]}"
    ckpt = str(Path(settings.paths.checkpoint_dir) / run_id)

    # Run 1: the old code's state (monitor_v5, old lines), shipped to the workers by value.
    cloudpickle.register_pickle_by_value(sys.modules[legacy_v5.__name__])
    try:
        with monkeypatch.context() as m:
            m.setattr(job, "pandas_processor", legacy_v5.v5_pandas_processor)
            publish(settings, first)
            _, seen1 = replay(spark, settings, run_id)
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[legacy_v5.__name__])
    assert legacy_in(spark, ckpt) == LEGACY_STATE_NAME
    old = spark.read.format("statestore").option("stateVarName", LEGACY_STATE_NAME).load(ckpt).collect()
    lines = [line for r in old if r.value is not None for line in r.value.groups.split("\n")]
    assert lines and all(len(line.split("\t")) in (4, 5) for line in lines)  # the old shape

    # Run 2: today's job on that checkpoint.
    publish(settings, second)
    _, seen2 = replay(spark, settings, run_id)

    alerts = [(a.alert_id, a.status) for r in [*seen1, *seen2] for a in r.alert_rows]
    assert Counter(alerts).most_common(1)[0][1] == 1  # no alert raised (or resolved) twice
    core = Monitor().run(first + second)
    assert set(alerts) == {(a.alert_id, a.status) for a in core}
    fired = {(p["group"], p["kind"], p["status"]) for r in seen2 for p in (json.loads(x.payload) for x in r.alert_rows)}
    assert ("g1", "GROUP_SILENT", "firing") in fired  # the old code's timer fired under the new one
    assert ("g2", "NODE_SILENT", "resolved") in fired  # the open alert carried over
    new = spark.read.format("statestore").option("stateVarName", STATE_NAME).load(ckpt).collect()
    families = {name: kept[3] for r in new if r.value is not None
                for name, kept in parse_groups(r.value.groups).items()}
    assert families == {"g1": "xcom", "g2": "xcom"}
    assert legacy_in(spark, ckpt) is None  # every bucket was read: nothing left to migrate


def test_a_checkpoint_keeps_its_bucket_count(spark: Any, broker: Any, postgres: Any, tmp_path: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    """A checkpoint started with one ``state_buckets`` resumes under a setting of another (the
    default changed from 64 to 6): its own count is used, with a warning, and the two runs give
    the core's alerts, none twice. Bucketing by the new setting would send a group's events to a
    key whose state does not hold it (the processor refuses such a state: StateBucketsChanged)."""
    from replimon.streaming.bucket_state import pinned_buckets

    base = settings_for(broker, postgres, f"bk-{uuid.uuid4().hex[:10]}-", tmp_path)

    def with_buckets(n: int) -> Any:
        return base.model_copy(update={"streaming": base.streaming.model_copy(update={"state_buckets": n})})

    events = simulate(30, "group_silent:g1@8s", "beyond_horizon:g2@20s", groups=3)
    start = min(e["ts_ms"] for e in events)
    first = [e for e in events if e["ts_ms"] < start + 12_000]
    second = [e for e in events if e["ts_ms"] >= start + 12_000]
    # Under 3 buckets and under 2 the groups share keys differently: the second run's setting
    # would put some group under another key than the one holding its state.
    assert [bucket_of(g, 3) for g in ("g1", "g2", "g3")] != [bucket_of(g, 2) for g in ("g1", "g2", "g3")]
    run_id = f"bk-{uuid.uuid4().hex[:8]}"
    ckpt = str(Path(base.paths.checkpoint_dir) / run_id)
    assert pinned_buckets(spark, ckpt) is None  # no checkpoint yet

    publish(base, first)
    _, seen1 = replay(spark, with_buckets(3), run_id)
    assert pinned_buckets(spark, ckpt) == 3
    publish(base, second)
    with caplog.at_level("WARNING", logger="replimon.run"):
        _, seen2 = replay(spark, with_buckets(2), run_id)
    assert any("state_buckets is 2 but the checkpoint" in r.getMessage() and "started with 3" in r.getMessage()
               for r in caplog.records)

    alerts = [(a.alert_id, a.status) for r in [*seen1, *seen2] for a in r.alert_rows]
    assert Counter(alerts).most_common(1)[0][1] == 1
    assert set(alerts) == {(a.alert_id, a.status) for a in Monitor().run(first + second)}
    kinds = {json.loads(a.payload)["kind"] for r in [*seen1, *seen2] for a in r.alert_rows}
    assert {"GROUP_SILENT", "BEYOND_HORIZON"} <= kinds
