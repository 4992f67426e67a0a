-- Version 11: rate_limits (see schema.sql).

-- One row per rate-limit key (engine/rate_limits.py): its GCRA theoretical arrival time in epoch
-- µs, and the rate that last took from it (what queue_stats and diagnose_queue show).
CREATE TABLE {schema}.rate_limits (
    key text COLLATE "C" PRIMARY KEY,
    tat bigint NOT NULL,
    rate_limit integer NOT NULL,
    per_ms bigint NOT NULL,
    burst integer NOT NULL,
    updated_at bigint NOT NULL
);
