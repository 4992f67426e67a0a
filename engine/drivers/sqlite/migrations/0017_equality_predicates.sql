-- 0017: the jobs table's partial indexes with their states spelled as equalities (schema.sql).

-- SQLite tests `state IN (a, b, c)` through a temporary b-tree it builds and frees for every
-- statement that evaluates it: on every write of a job row, once per index. Equalities joined
-- by OR cost a few comparisons. The queries spell the same predicates (queries.py), so that the
-- planner still proves them and the upsert's conflict target still names the live key.

DROP INDEX IF EXISTS mcp_jobs_jobs_live_key;
CREATE UNIQUE INDEX IF NOT EXISTS mcp_jobs_jobs_live_key
    ON mcp_jobs_jobs (name, coalesce(tenant_id, ''), idempotency_key)
    WHERE (state = 'ready' OR state = 'delayed' OR state = 'running' OR state = 'suspended');

DROP INDEX IF EXISTS mcp_jobs_jobs_due;
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_due
    ON mcp_jobs_jobs (run_at - priority * 300000, id)
    WHERE (state = 'ready' OR state = 'delayed' OR state = 'suspended');

DROP INDEX IF EXISTS mcp_jobs_jobs_settled;
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_settled
    ON mcp_jobs_jobs (state, finished_at, id)
    WHERE (state = 'done' OR state = 'failed' OR state = 'dead' OR state = 'cancelled');

DROP INDEX IF EXISTS mcp_jobs_jobs_live;
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_live
    ON mcp_jobs_jobs (queue, state, id)
    WHERE (state = 'ready' OR state = 'delayed' OR state = 'running' OR state = 'suspended');

DROP INDEX IF EXISTS mcp_jobs_jobs_settled_state;
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_settled_state
    ON mcp_jobs_jobs (state, id)
    WHERE (state = 'done' OR state = 'failed' OR state = 'dead' OR state = 'cancelled');

DROP INDEX IF EXISTS mcp_jobs_jobs_settled_name;
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_settled_name
    ON mcp_jobs_jobs (name, state, id)
    WHERE (state = 'done' OR state = 'failed' OR state = 'dead' OR state = 'cancelled');

DROP INDEX IF EXISTS mcp_jobs_jobs_settled_queue;
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_settled_queue
    ON mcp_jobs_jobs (queue, state, id)
    WHERE (state = 'done' OR state = 'failed' OR state = 'dead' OR state = 'cancelled');

DROP INDEX IF EXISTS mcp_jobs_jobs_settled_tenant;
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_settled_tenant
    ON mcp_jobs_jobs (tenant_id, state, id)
    WHERE (state = 'done' OR state = 'failed' OR state = 'dead' OR state = 'cancelled');

DROP INDEX IF EXISTS mcp_jobs_jobs_unknown_state;
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_unknown_state
    ON mcp_jobs_jobs (state)
    WHERE (state != 'ready' AND state != 'delayed' AND state != 'running' AND state != 'suspended' AND state != 'done' AND state != 'failed' AND state != 'dead' AND state != 'cancelled');
