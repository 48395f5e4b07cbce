-- replimon PostgreSQL schema, version 3: how long a micro-batch's rows waited for PostgreSQL
-- (docs/operations.md, "PostgreSQL outage").
--
-- While PostgreSQL is unreachable the job goes on (alerts still to Kafka) and keeps each batch's
-- rows in a backlog; when PostgreSQL is back they are written oldest first. These columns say so
-- on each batch's row: NULL or 0 for a batch written on time.

ALTER TABLE pipeline_metrics
    ADD COLUMN pg_backlog  integer,             -- batches waiting for PostgreSQL when this one was written (itself included)
    ADD COLUMN pg_wait_s   double precision;    -- seconds this batch's rows waited for PostgreSQL
