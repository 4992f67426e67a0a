-- 0020: each settled filter index ends with the other two filters (schema.sql).

-- A list filtered by two of name, queue and tenant whose combination is rare read every row of
-- the leading filter to test the other. SQLite tests a term on an index column before it reads
-- the row: 113 ms became 17 ms for a tenant of 100,000 rows among 1,000,000.

DROP INDEX IF EXISTS mcp_jobs_jobs_settled_name;
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_settled_name
    ON mcp_jobs_jobs (name, state, id, queue, tenant_id)
    WHERE (state = 'done' OR state = 'failed' OR state = 'dead' OR state = 'cancelled');

DROP INDEX IF EXISTS mcp_jobs_jobs_settled_queue;
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_settled_queue
    ON mcp_jobs_jobs (queue, state, id, name, tenant_id)
    WHERE (state = 'done' OR state = 'failed' OR state = 'dead' OR state = 'cancelled');

DROP INDEX IF EXISTS mcp_jobs_jobs_settled_tenant;
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_settled_tenant
    ON mcp_jobs_jobs (tenant_id, state, id, name, queue)
    WHERE (state = 'done' OR state = 'failed' OR state = 'dead' OR state = 'cancelled');
