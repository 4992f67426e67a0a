-- 0009: rate limits (engine/rate_limits.py). One row per key: its GCRA theoretical arrival time
-- in epoch µs, and the rate that last took from it (what queue_stats and diagnose_queue show).
CREATE TABLE IF NOT EXISTS mcp_jobs_rate_limits (
    key        TEXT PRIMARY KEY,
    tat        INTEGER NOT NULL,
    rate_limit INTEGER NOT NULL,
    per_ms     INTEGER NOT NULL,
    burst      INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
