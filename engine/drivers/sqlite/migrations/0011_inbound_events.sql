-- 0011: inbound events (engine/inbound_events.py). Events jobs wait for with
-- ctx.step.wait_for_event, kept until expires_at (the pruner deletes them then), and the waiters
-- index a send reads to wake the suspended jobs waiting on its (name, key, tenant).
CREATE TABLE IF NOT EXISTS mcp_jobs_inbound_events (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    key        TEXT NOT NULL,
    tenant_id  TEXT,
    payload    TEXT,                             -- JSON
    sent_at    INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
-- A wait's look: the earliest live event of one (name, key, tenant) after a cursor.
CREATE INDEX IF NOT EXISTS mcp_jobs_inbound_events_match
    ON mcp_jobs_inbound_events (name, key, coalesce(tenant_id, ''), sent_at, id);
CREATE INDEX IF NOT EXISTS mcp_jobs_inbound_events_expiry
    ON mcp_jobs_inbound_events (expires_at);
-- One row per job waiting for an event: a send wakes the suspended jobs listed for its
-- (name, key, tenant).
CREATE TABLE IF NOT EXISTS mcp_jobs_inbound_event_waiters (
    job_id    TEXT PRIMARY KEY,
    name      TEXT NOT NULL,
    key       TEXT NOT NULL,
    tenant_id TEXT
);
CREATE INDEX IF NOT EXISTS mcp_jobs_inbound_event_waiters_target
    ON mcp_jobs_inbound_event_waiters (name, key, coalesce(tenant_id, ''));
