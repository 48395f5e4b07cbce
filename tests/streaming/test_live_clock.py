"""A node's clock ten years ahead, through the live job (docs/operations.md, "Clocks"): the real
broker, Spark (processing time) and PostgreSQL. The node gets one CLOCK_SKEW, no other group and no
other node gets anything while the fleet publishes (no silence driven by its clock), and no alert
is dated in the future."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from replimon.producers.publisher import Publisher
from replimon.producers.simulator import SimOptions, Simulator
from tests.support import eventually, job_config

pytestmark = [pytest.mark.broker, pytest.mark.postgres, pytest.mark.timeout(600)]

YEARS_MS = 10 * 365 * 86_400_000
SECONDS = 20


def test_one_clock_ten_years_ahead_is_one_clock_skew(spark: Any, broker: Any, postgres: Any, topic_prefix: str,
                                                     tmp_path: Path, clean_env: None) -> None:
    from replimon.store.reads import RunReader
    from replimon.streaming.runner import start_query
    from replimon.streaming.sinks.postgres import PostgresSink

    _config, settings = job_config(broker, postgres, topic_prefix, tmp_path)
    run_id = f"clock-{uuid.uuid4().hex[:8]}"
    pg = PostgresSink(settings.postgres.dsn, run_id=run_id)
    stored = RunReader(settings.postgres.dsn, run_id)
    batches: list[int] = []
    query = start_query(spark, settings, run_id=run_id, pg=pg, observers=[lambda r: batches.append(r.batch_id)],
                        trigger_s=1.0)
    try:
        def running(done: Any) -> Any:
            assert query.isActive, query.exception()
            return done()

        eventually(lambda: running(lambda: batches), timeout=300, what="a first batch of the live query")
        sent = 0
        with Publisher.from_settings(settings) as publisher:
            def send(ev: dict[str, Any]) -> None:
                nonlocal sent
                if (ev["group"], ev["node"]) == ("g2", "n1"):
                    ev = {**ev, "ts_ms": ev["ts_ms"] + YEARS_MS}
                publisher.send(ev)
                sent += 1

            started = time.time()
            Simulator(SimOptions(duration_ms=SECONDS * 1000, groups=2, seed=4, start_ms=int(started * 1000)),
                      [], send).run(realtime=True)
            assert publisher.flush(60) == 0
            ended = time.time()

        def processed() -> int:
            return sum(s["counts"]["events"] for s in stored.group_snapshots().values())

        eventually(lambda: running(lambda: processed() == sent), timeout=240, interval=0.5,
                   what="every event processed")
        alerts = stored.alerts()
        skews = [a for a in alerts if a["kind"] == "CLOCK_SKEW"]
        assert [(a["group"], a["node"], a["status"]) for a in skews] == [("g2", "n1", "firing")], skews
        # Nothing else while the fleet publishes, but the data-quality suites' view of the same
        # records: the node's rows stamped in the future fail their time bound (docs/operations.md,
        # "Clocks"); they name that node only.
        problems = [a for a in alerts if a["category"] != "info" and a["kind"] != "CLOCK_SKEW"
                    and a["detected_ts_ms"] <= ended * 1000
                    and not (a["kind"] == "DATA_QUALITY_FAILED" and (a["group"], a["node"]) == ("g2", "n1"))]
        assert not problems, [(a["kind"], a["group"], a["node"]) for a in problems]
        future = [a for a in alerts if a["event_ts_ms"] > (time.time() + 3600) * 1000]
        assert not future, future
    finally:
        query.stop()
        query.awaitTermination(60)
        pg.close()
