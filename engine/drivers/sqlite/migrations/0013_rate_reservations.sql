-- 0013: rate-limit reservations (engine/rate_limits.py). A job shed over its rate keeps the start
-- its take reserved: claimed again from slot_at to late_at (epoch ms) it starts without taking
-- again. Rows are deleted when used, or by the next take once past late_at.
CREATE TABLE IF NOT EXISTS mcp_jobs_rate_reservations (
    job_id      TEXT PRIMARY KEY,
    slot_at     INTEGER NOT NULL,
    late_at     INTEGER NOT NULL,
    blocked_key TEXT NOT NULL,
    keys        TEXT NOT NULL,
    reserved_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS mcp_jobs_rate_reservations_late
    ON mcp_jobs_rate_reservations (late_at);
CREATE INDEX IF NOT EXISTS mcp_jobs_rate_reservations_keys
    ON mcp_jobs_rate_reservations (keys, slot_at);
