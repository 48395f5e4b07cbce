-- replimon PostgreSQL schema, version 5: protocol families (docs/postgres.md, "Tables";
-- docs/families.md, "Which family a group is").
--
-- A group is of one family ('xcom' or 'gen'); each family has its own configuration. The
-- columns every family fills are family-neutral: group_state.family and .config (the family's
-- configuration as JSON, GroupMonitor.snapshot()'s ``config``), node_state.family_state (the
-- node's fields beyond those every family has), group_timeseries.config_version (XCom: the
-- active configuration's start; generations: the generation number), so a configuration change
-- is one step on the timeline whatever the family. XCom's flattened columns stay and are NULL
-- for the other families (group_state.pending too, which was NOT NULL: '[]' meant "no pending
-- XCom configuration", not "no such thing").
--
-- Rows written before this version are XCom's: the only family then.

ALTER TABLE group_state
    ADD COLUMN family  text,
    ADD COLUMN config  jsonb;                   -- NULL before the group has a configuration
UPDATE group_state SET family = 'xcom',
    config = jsonb_strip_nulls(jsonb_build_object(
        'active', snapshot->'active', 'pending', snapshot->'pending',
        'effective_horizon', snapshot->'effective_horizon', 'window_use', snapshot->'window_use'))
    WHERE snapshot->'active' IS NOT NULL AND snapshot->'active' <> 'null'::jsonb;
UPDATE group_state SET family = 'xcom' WHERE family IS NULL;
ALTER TABLE group_state
    ALTER COLUMN family SET NOT NULL,
    ALTER COLUMN pending DROP NOT NULL;
-- The family variable's choices and the per-family group lists (docs/dashboards.md).
CREATE INDEX group_state_family ON group_state (run_id, family, group_id);

ALTER TABLE node_state
    ADD COLUMN family_state  jsonb;             -- gen: gen, node_status, last_online_in, last_vote

ALTER TABLE group_timeseries
    ADD COLUMN config_version  bigint;          -- XCom: active start; gen: generation number
UPDATE group_timeseries SET config_version = active_start;
