-- 0015: published outbox rows by publish time (see schema.sql).

-- A published row was kept for good: the outbox grew with every job ever staged. The pruner now
-- deletes published rows past their keep (engine/outbox.py), oldest first, on this index.
CREATE INDEX IF NOT EXISTS mcp_jobs_outbox_published
    ON mcp_jobs_outbox (published_at)
    WHERE published_at IS NOT NULL;
