"""The streaming job around a fault-injection test (a broker or PostgreSQL outage): started with
a PostgreSQL sink and an observer that keeps every batch's record, stopped and its sink closed
whatever the test did, so each outage test says only what it injects and what it expects."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RunningJob:
    """A started query and what its batches reported so far (``batches``: the runner's batch
    records, in order)."""

    query: Any
    batches: list[Any] = field(default_factory=list)

    def assert_running(self) -> None:
        """The query neither failed nor stopped (an outage must not end it)."""
        assert self.query.isActive and self.query.exception() is None, self.query.exception()


@contextlib.contextmanager
def running_job(spark: Any, settings: Any, dsn: str, run_id: str,
                trigger_s: float = 1.0) -> Iterator[RunningJob]:
    """`replimon.streaming.runner.start_query` with a `PostgresSink` on ``dsn`` for ``run_id``;
    on exit the query is stopped (60 s to end) and the sink closed."""
    from replimon.streaming.runner import start_query
    from replimon.streaming.sinks.postgres import PostgresSink

    pg = PostgresSink(dsn, run_id=run_id)
    job: RunningJob | None = None
    try:
        batches: list[Any] = []
        job = RunningJob(start_query(spark, settings, run_id=run_id, pg=pg,
                                     observers=[batches.append], trigger_s=trigger_s), batches)
        yield job
    finally:
        if job is not None:
            job.query.stop()
            job.query.awaitTermination(60)
        pg.close()
