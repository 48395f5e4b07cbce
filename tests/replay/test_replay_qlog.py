"""A replay of topics holding quorum-log events (docs/replay.md): a quorum-log fleet with faults
published to the real broker and run through the job once as the live run would see it (several
micro-batches, checkpoint records to ``monitor.state``); a window of it replayed from the
checkpoint records gives the live run's alerts for the window (same ids, kinds, statuses,
evidence), and its groups' rows are quorum-log rows (family qlog, the legislature as
config_version)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from replimon.producers import simulator_qlog
from replimon.streaming.replay import replay
from tests.support import settings_for
from tests.support.replays import Base, alert_rows, live_run

pytestmark = [pytest.mark.broker, pytest.mark.postgres, pytest.mark.timeout(900)]

SECONDS = 200
FAULTS = ("qlog_reconf_without_old_quorum:ql1@95s", "qlog_no_leader:ql2@100s",
          "qlog_divergent_decree:ql3@120s")
FROM_S, TO_S = 90, 170  # the window, in seconds of the trace: past the 60 s checkpoints


@pytest.fixture(scope="module")
def base(spark: Any, broker: Any, postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Base]:
    tmp = tmp_path_factory.mktemp("replay-qlog")
    settings = settings_for(broker, postgres, f"rq-{uuid.uuid4().hex[:10]}-", tmp)
    events: list[dict[str, Any]] = []
    simulator_qlog.Simulator(simulator_qlog.SimOptions(duration_ms=SECONDS * 1000, groups=3, seed=5),
                             [simulator_qlog.parse_injection(f) for f in FAULTS], events.append).run()
    events.sort(key=lambda e: e["ts_ms"])
    yield live_run(spark, settings, events, tmp)


def test_a_quorum_log_window_from_checkpoint_records_gives_the_runs_alerts(spark: Any, base: Base) -> None:
    lo, hi = base.at(FROM_S), base.at(TO_S)
    got = replay(base.settings, lo, hi, spark=spark, checkpoints_of=base.run_id)
    dsn = base.settings.postgres.dsn
    want = alert_rows(dsn, base.run_id, lo, hi)
    kinds = {r[3] for r in want}
    assert {"QLOG_RECONF_WITHOUT_OLD_QUORUM", "QLOG_NO_LEADER", "QLOG_DIVERGENT_DECREE",
            "QLOG_RECONFIGURED"} <= kinds, kinds
    assert alert_rows(dsn, got.run_id, lo, hi) == want
    with psycopg.connect(dsn) as conn:
        groups = conn.execute(
            "SELECT group_id, family, (config->>'legislature')::bigint, active_start, pending"
            " FROM group_state WHERE run_id = %s ORDER BY group_id", (got.run_id,)).fetchall()
        steps = conn.execute(
            "SELECT count(DISTINCT config_version), count(*) FILTER (WHERE config_version IS NULL)"
            " FROM group_timeseries WHERE run_id = %s", (got.run_id,)).fetchone()
        incomplete = conn.execute("SELECT count(*) FROM alerts WHERE run_id = %s AND kind = 'INCOMPLETE_HISTORY'",
                                  (got.run_id,)).fetchone()
    assert [(g, f) for g, f, *_ in groups] == [("ql1", "qlog"), ("ql2", "qlog"), ("ql3", "qlog")]
    assert all(leg and leg > 1 and start is None and pending is None for _, _, leg, start, pending in groups)
    assert steps is not None and steps[0] > 1 and steps[1] == 0  # the legislature steps on the timeline
    assert incomplete == (0,)  # every group started from its checkpoint record
