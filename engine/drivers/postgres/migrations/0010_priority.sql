-- Version 10: priority (see schema.sql).

-- Claims take due rows by run_at less the priority's head start (engine/rules.py claim_rank).
-- Adding a column with a constant default rewrites nothing; the claim index is rebuilt on the
-- rank expression, under this migration's lock (a build over the waiting rows only).
ALTER TABLE {schema}.jobs ADD COLUMN priority smallint NOT NULL DEFAULT 0;
DROP INDEX {schema}.jobs_claim_idx;
CREATE INDEX jobs_claim_idx
    ON {schema}.jobs ((run_at - priority * 300000), id)
    WHERE state IN ('ready', 'delayed', 'suspended');
