-- 0016: events of no job by time (see schema.sql).

-- An event of no job (the audit of a call that named no job the caller may see) was kept for
-- good: nothing deleted it. The pruner now deletes those past the audit retention
-- (engine/retention.py), oldest first, on this index.
CREATE INDEX IF NOT EXISTS mcp_jobs_events_jobless
    ON mcp_jobs_events (at, seq)
    WHERE job_id IS NULL;
