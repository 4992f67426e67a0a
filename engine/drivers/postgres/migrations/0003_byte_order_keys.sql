-- Version 3: a job's name, queue, tenant and idempotency key compare byte by byte (COLLATE "C"),
-- and the dedupe index leads with the idempotency key (see schema.sql).
--
-- Changing a text column's collation does not rewrite the table; the indexes on those columns
-- are rebuilt, under the ACCESS EXCLUSIVE lock ALTER TABLE holds until this migration commits.

DROP INDEX {schema}.jobs_dedupe_live_idx;

ALTER TABLE {schema}.jobs
    ALTER COLUMN name TYPE text COLLATE "C",
    ALTER COLUMN queue TYPE text COLLATE "C",
    ALTER COLUMN tenant_id TYPE text COLLATE "C",
    ALTER COLUMN idempotency_key TYPE text COLLATE "C";

CREATE UNIQUE INDEX jobs_dedupe_live_idx
    ON {schema}.jobs (idempotency_key, name, (coalesce(tenant_id, '')))
    WHERE state IN ('ready', 'delayed', 'running', 'suspended');
