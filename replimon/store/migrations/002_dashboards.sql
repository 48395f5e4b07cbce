-- replimon PostgreSQL schema, version 2: what the Grafana dashboards draw over time
-- (docs/postgres.md, docs/dashboards.md).
--
-- group_timeseries gains the configuration map at each point (the active config and the pending
-- ones as text, for a state timeline); pipeline_metrics the trigger interval and the consumer lag;
-- node_timeseries keeps each node's frontiers and heartbeat
-- freshness at each snapshot of its group; dq_results holds data-quality results (filled by the
-- data-quality sink, docs/quality.md). Keys as in version 1: facts of the history or the batch id, so a
-- retried micro-batch writes the same keys and changes nothing.

ALTER TABLE group_timeseries
    ADD COLUMN active_start    bigint,          -- start instance of the active config
    ADD COLUMN active_config   text,            -- 'start 1201 · eh 10 · n1 n2 n3'
    ADD COLUMN pending_configs text;            -- the pending ones the same way, ' | '-separated; NULL: none

ALTER TABLE pipeline_metrics
    ADD COLUMN trigger_ms   bigint,             -- the trigger interval the batch ran under
    ADD COLUMN lag_records  bigint;             -- records on the topics not read yet at its end

CREATE TABLE node_timeseries (
    run_id             text        NOT NULL,
    group_id           text        NOT NULL,
    node_id            text        NOT NULL,
    ts                 timestamptz NOT NULL,    -- the group clock when the snapshot was taken
    member             boolean     NOT NULL,    -- of the active config
    decided            bigint,
    executed           bigint,
    last_ts            timestamptz,             -- the node's latest event time
    heartbeat_age_ms   bigint,                  -- ts - last_ts: how stale the node looks
    silent             boolean     NOT NULL,
    PRIMARY KEY (run_id, group_id, node_id, ts)
);
CREATE INDEX node_timeseries_time ON node_timeseries (run_id, ts);

CREATE TABLE dq_results (
    run_id       text        NOT NULL,
    batch_id     bigint      NOT NULL,
    suite        text        NOT NULL,          -- e.g. replica.decisions, monitor.alerts
    expectation  text        NOT NULL,          -- the expectation's name with its column
    ts           timestamptz NOT NULL,          -- when it was evaluated
    success      boolean     NOT NULL,
    evaluated    bigint,                        -- rows evaluated
    unexpected   bigint,                        -- rows that failed it
    details      jsonb       NOT NULL DEFAULT '{}'::jsonb,  -- observed value, sample rows
    PRIMARY KEY (run_id, batch_id, suite, expectation)
);
CREATE INDEX dq_results_time ON dq_results (run_id, ts);
