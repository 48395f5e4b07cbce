-- replimon PostgreSQL schema, version 6: what Pipeline health needs for alert latency and the
-- batch-cost fit (docs/dashboards.md, "Pipeline health" and "Alert latency").
--
-- Alert latency is measured from an alert's evidence (or, for a wedge, its detection) to the
-- moment the batch that wrote it had its rows in PostgreSQL. Each batch's metrics row says when
-- that was and whether the batch ran live: a replay stores old events, so its "latency" would be
-- their age. Both are written in the batch's own transaction (a retried batch is skipped by the
-- guard and writes nothing; the listener's later update of the row never changes them). Alerts
-- are joined to the batch that first wrote them through (run_id, batch_id).

ALTER TABLE pipeline_metrics
    ADD COLUMN live        boolean,             -- ran in live mode (processing time); false: a replay (event time); NULL: not known (before version 6, or a write without the job's writer)
    ADD COLUMN written_at  timestamptz;         -- the clock at the end of the batch's write, just before its commit

-- Rows written before version 6 keep NULL in both: they have no alert latency.

CREATE INDEX alerts_batch ON alerts (run_id, batch_id);
