-- Version 24: each settled filter index carries the other two filters (see schema.sql).

-- A list filtered by two of name, queue and tenant whose combination is rare walked the leading
-- filter's settled rows and read each one's heap tuple to test the other: 2.6 s cold, 350 ms
-- warm for a tenant of 100,000 rows. With the others on the entry it is an index-only walk
-- (13 ms warm). The rebuild reads the settled rows under this migration's lock, so writes wait
-- for it: 5.4 s for the three at 1,000,000 settled rows on the durable benchmark server.
DROP INDEX {schema}.jobs_settled_name_idx;
CREATE INDEX jobs_settled_name_idx
    ON {schema}.jobs (name, state, id) INCLUDE (queue, tenant_id)
    WHERE state IN ('done', 'failed', 'dead', 'cancelled');
DROP INDEX {schema}.jobs_settled_queue_idx;
CREATE INDEX jobs_settled_queue_idx
    ON {schema}.jobs (queue, state, id) INCLUDE (name, tenant_id)
    WHERE state IN ('done', 'failed', 'dead', 'cancelled');
DROP INDEX {schema}.jobs_settled_tenant_idx;
CREATE INDEX jobs_settled_tenant_idx
    ON {schema}.jobs (tenant_id, state, id) INCLUDE (name, queue)
    WHERE state IN ('done', 'failed', 'dead', 'cancelled');
