-- 0004: the backfill ledger read a page at a time. The ledger is kept (it is the record of what
-- ran), so a read costs its page: one backfill's runs in one environment newest first, and the
-- newest of one status (a completed run is what makes a name applied), each one index descent.
-- The run_id breaks ties of started_at, as the keyset cursor does.
DROP INDEX IF EXISTS mcp_jobs_backfills_name;
CREATE INDEX IF NOT EXISTS mcp_jobs_backfills_newest
    ON mcp_jobs_backfills (name, environment, started_at, run_id);
CREATE INDEX IF NOT EXISTS mcp_jobs_backfills_status
    ON mcp_jobs_backfills (name, environment, status, started_at, run_id);
