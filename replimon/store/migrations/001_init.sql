-- replimon PostgreSQL schema, version 1 (docs/postgres.md).
--
-- Every table starts its key with run_id: 'live' for the live job, a replay run id otherwise, so a
-- replay never touches live rows. Every key is made of facts of the history (alert id, group,
-- event time, Kafka offset) or of the micro-batch id, so a replayed or retried micro-batch writes
-- the same keys and changes nothing. pipeline_batches is the exactly-once guard: the sink advances
-- it in the same transaction as the rows (docs/postgres.md "Exactly-once effect").
--
-- Conventions: event times are timestamptz (from epoch ms, exact); the monitor's "none yet"
-- sentinels (-1 frontiers, -1 protocol, '' status) are stored as NULL; jsonb keeps lists and
-- nested objects as the monitor emits them.

CREATE TABLE alerts (
    run_id       text        NOT NULL,
    alert_id     text        NOT NULL,
    status       text        NOT NULL CHECK (status IN ('firing', 'resolved')),
    group_id     text        NOT NULL,
    kind         text        NOT NULL,
    severity     text        NOT NULL CHECK (severity IN ('critical', 'warning', 'info')),
    category     text        NOT NULL CHECK (category IN ('violation', 'wedge', 'data', 'info')),
    instance     bigint,
    node         text,
    event_ts     timestamptz NOT NULL,
    detected_ts  timestamptz NOT NULL,
    message      text        NOT NULL,
    evidence     jsonb       NOT NULL DEFAULT '[]'::jsonb,
    batch_id     bigint      NOT NULL,
    inserted_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, alert_id, status)
);
-- Timelines per group and over all groups (Grafana time ranges filter on event_ts).
CREATE INDEX alerts_group_time ON alerts (run_id, group_id, event_ts DESC);
CREATE INDEX alerts_time ON alerts (run_id, event_ts DESC);
-- "What is firing": firing rows, then an anti-join on the primary key for their resolution.
CREATE INDEX alerts_firing ON alerts (run_id, severity, event_ts DESC) WHERE status = 'firing';

-- Latest state of an alert occurrence: its resolved row if it has one, else its firing row.
CREATE VIEW alerts_current AS
SELECT DISTINCT ON (run_id, alert_id) *
FROM alerts
ORDER BY run_id, alert_id, (status = 'resolved') DESC;

CREATE TABLE group_state (
    run_id                text        NOT NULL,
    group_id              text        NOT NULL,
    history               text        NOT NULL,
    trusted               boolean     NOT NULL,
    clock_ts              timestamptz,           -- group clock; NULL before its first event
    decided               bigint,                -- contiguous decided frontier
    active_start          bigint,                -- NULL while the group has no map yet
    active_event_horizon  integer,
    members               jsonb,                 -- active config members [{id, protocol}]
    pending               jsonb       NOT NULL DEFAULT '[]'::jsonb,
    effective_horizon     bigint,                -- NULL until a majority reported executions
    executed_majority     bigint,
    window_use            bigint,
    window_fraction       double precision,
    open_alerts           jsonb       NOT NULL DEFAULT '[]'::jsonb,
    snapshot              jsonb       NOT NULL,  -- GroupMonitor.snapshot() as emitted
    batch_id              bigint      NOT NULL,
    updated_at            timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, group_id)
);

CREATE TABLE node_state (
    run_id             text        NOT NULL,
    group_id           text        NOT NULL,
    node_id            text        NOT NULL,
    member             boolean     NOT NULL,
    executed           bigint,
    decided            bigint,
    incarnation        bigint,
    protocol           integer,
    status             text,
    last_ts            timestamptz,
    suspects           jsonb       NOT NULL DEFAULT '[]'::jsonb,
    effective_horizon  bigint,
    silent             boolean     NOT NULL,
    batch_id           bigint      NOT NULL,
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, group_id, node_id)
);

CREATE TABLE group_timeseries (
    run_id             text        NOT NULL,
    group_id           text        NOT NULL,
    ts                 timestamptz NOT NULL,     -- the group clock when the snapshot was taken
    decided            bigint,
    executed_majority  bigint,
    effective_horizon  bigint,
    event_horizon      integer,                  -- of the active config
    window_use         bigint,
    window_fraction    double precision,
    members            integer,                  -- members of the active config
    pending            integer,                  -- pending configs
    PRIMARY KEY (run_id, group_id, ts)
);
-- The primary key serves one group over a range; this one serves all groups over a range.
CREATE INDEX group_timeseries_time ON group_timeseries (run_id, ts);

CREATE TABLE dead_letters (
    run_id      text        NOT NULL,
    topic       text        NOT NULL,
    partition   integer     NOT NULL,
    "offset"    bigint      NOT NULL,
    raw         bytea,                           -- the record value as read (NULL: no value)
    reason      text        NOT NULL,
    kafka_ts    timestamptz,
    batch_id    bigint      NOT NULL,
    PRIMARY KEY (run_id, topic, partition, "offset")
);
CREATE INDEX dead_letters_time ON dead_letters (run_id, kafka_ts DESC);

CREATE TABLE pipeline_metrics (
    run_id                text             NOT NULL,
    batch_id              bigint           NOT NULL,
    ts                    timestamptz      NOT NULL,
    duration_ms           bigint,
    input_rows            bigint,
    input_rows_per_s      double precision,
    processed_rows_per_s  double precision,
    alerts                integer,
    dead_letters          integer,
    groups                integer,
    PRIMARY KEY (run_id, batch_id)
);
CREATE INDEX pipeline_metrics_time ON pipeline_metrics (run_id, ts);

-- The exactly-once guard: the last micro-batch whose effects were committed, per run and
-- pipeline. A batch id <= last_batch_id is a retry or replay of committed work and is skipped.
CREATE TABLE pipeline_batches (
    run_id         text        NOT NULL,
    pipeline       text        NOT NULL,
    last_batch_id  bigint      NOT NULL,
    committed_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, pipeline)
);

-- Replay runs (filled by the replay command; the live job has no row).
CREATE TABLE replay_runs (
    run_id       text        PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    params       jsonb       NOT NULL DEFAULT '{}'::jsonb,
    status       text        NOT NULL DEFAULT 'running'
);
