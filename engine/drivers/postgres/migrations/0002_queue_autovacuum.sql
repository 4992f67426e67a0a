-- Version 2: vacuum the jobs table early and unthrottled (see schema.sql).

-- A queue table churns: every job is one insert and two updates that leave dead versions
-- behind, in the heap and in every index the claim walks. The default autovacuum waits for 20%
-- of the table to be dead; a queue wants it swept early and without throttling, as PgQueuer
-- also recommends for its own table.
ALTER TABLE {schema}.jobs SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_analyze_threshold = 500,
    autovacuum_vacuum_cost_limit = 10000,
    autovacuum_vacuum_cost_delay = 0
);
