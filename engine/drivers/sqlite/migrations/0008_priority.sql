-- 0008: priority (engine/rules.py claim_rank). Claims take due rows by run_at less the
-- priority's head start; the due index is rebuilt on that expression (queries.CLAIM_RANK).
ALTER TABLE mcp_jobs_jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
DROP INDEX IF EXISTS mcp_jobs_jobs_due;
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_due
    ON mcp_jobs_jobs (run_at - priority * 300000, id)
    WHERE state IN ('ready', 'delayed', 'suspended');
