-- Version 17: the live rows newest first (see schema.sql).

-- A filtered list's live side walks this backwards and stops at its page; at worst it reads the
-- live rows. Keyed by (queue, state), a filter matching few or no live rows was walked through
-- the primary key instead, past every settled row. The stats read every live row either way,
-- and an abandoned claim finds its rows on jobs_running_idx.
-- A build over the live rows only, under this migration's lock.
DROP INDEX {schema}.jobs_live_idx;
CREATE INDEX jobs_live_idx
    ON {schema}.jobs (id)
    WHERE state IN ('ready', 'delayed', 'running', 'suspended');
