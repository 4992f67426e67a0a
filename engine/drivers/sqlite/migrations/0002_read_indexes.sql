-- 0002: reads that cost what is live, not what ever ran. Every index the reads need is partial
-- over live or over settled rows, so the hot path touches only the small live-side ones.

-- Settled rows by state and finish time: the pruner walks it oldest first per state; the stats
-- count dead and failed rows, and done/cancelled ones of the recent window, from it.
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_settled
    ON mcp_jobs_jobs (state, finished_at, id)
    WHERE state IN ('done', 'failed', 'dead', 'cancelled');

-- Live rows by queue: the stats' live counts and the live side of every filtered list. With
-- the settled one by queue below, it replaces (queue, state) over every row.
DROP INDEX IF EXISTS mcp_jobs_jobs_queue_state;
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_live
    ON mcp_jobs_jobs (queue, state, id)
    WHERE state IN ('ready', 'delayed', 'running', 'suspended');

-- The settled side of the filtered lists, newest first per (filter, state).
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_settled_state
    ON mcp_jobs_jobs (state, id)
    WHERE state IN ('done', 'failed', 'dead', 'cancelled');
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_settled_name
    ON mcp_jobs_jobs (name, state, id)
    WHERE state IN ('done', 'failed', 'dead', 'cancelled');
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_settled_queue
    ON mcp_jobs_jobs (queue, state, id)
    WHERE state IN ('done', 'failed', 'dead', 'cancelled');
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_settled_tenant
    ON mcp_jobs_jobs (tenant_id, state, id)
    WHERE state IN ('done', 'failed', 'dead', 'cancelled');

-- Rows in a state this build does not know (rule 5): always empty, so the stats find such a
-- row, and refuse it by name, in one descent instead of a scan.
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_unknown_state
    ON mcp_jobs_jobs (state)
    WHERE state NOT IN ('ready', 'delayed', 'running', 'suspended',
                        'done', 'failed', 'dead', 'cancelled');

-- A run's steps in start order (rowid breaks ties): a trace pages the newest without reading
-- them all.
CREATE INDEX IF NOT EXISTS mcp_jobs_steps_run_order ON mcp_jobs_steps (run_id, started_at);
