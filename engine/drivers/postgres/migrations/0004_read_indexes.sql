-- Version 4: reads that cost what is live, not what ever ran (see schema.sql).
--
-- Live rows are few and churn; settled rows are many and never change again. Every index the
-- reads need is partial over one side, so the hot path (claim, heartbeat, ack) touches only the
-- small live-side indexes, and a settled row is written into the settled-side ones once.

-- Settled rows by state and finish time: the pruner walks it oldest first per state; the stats
-- count dead and failed rows, and done/cancelled ones of the recent window, from it alone.
CREATE INDEX jobs_settled_idx
    ON {schema}.jobs (state, finished_at, id) INCLUDE (queue, tenant_id)
    WHERE state IN ('done', 'failed', 'dead', 'cancelled');

-- Live rows by queue: the stats' live counts, and the live side of every filtered list.
CREATE INDEX jobs_live_idx
    ON {schema}.jobs (queue, state, id)
    WHERE state IN ('ready', 'delayed', 'running', 'suspended');

-- The settled side of the filtered lists, newest first per (filter, state).
CREATE INDEX jobs_settled_state_idx
    ON {schema}.jobs (state, id)
    WHERE state IN ('done', 'failed', 'dead', 'cancelled');
CREATE INDEX jobs_settled_name_idx
    ON {schema}.jobs (name, state, id)
    WHERE state IN ('done', 'failed', 'dead', 'cancelled');
CREATE INDEX jobs_settled_queue_idx
    ON {schema}.jobs (queue, state, id)
    WHERE state IN ('done', 'failed', 'dead', 'cancelled');
CREATE INDEX jobs_settled_tenant_idx
    ON {schema}.jobs (tenant_id, state, id)
    WHERE state IN ('done', 'failed', 'dead', 'cancelled');

-- Rows in a state this build does not know (rule 5): always empty, so the stats find such a
-- row, and refuse it by name, in one descent instead of a scan.
CREATE INDEX jobs_unknown_state_idx
    ON {schema}.jobs (state)
    WHERE state NOT IN ('ready', 'delayed', 'running', 'suspended',
                        'done', 'failed', 'dead', 'cancelled');

-- A run's steps in start order: a trace pages the newest without reading them all.
CREATE INDEX steps_run_order_idx ON {schema}.steps (run_id, started_at, seq);
