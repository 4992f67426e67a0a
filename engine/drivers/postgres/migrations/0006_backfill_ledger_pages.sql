-- Version 6: the backfill ledger read a page at a time (see schema.sql).
--
-- The ledger is kept (it is the record of what ran), so a read costs its page: one backfill's
-- runs in one environment newest first, and the newest of one status (a completed run is what
-- makes a name applied), each one index descent. run_id breaks ties of started_at, as the
-- keyset cursor does. Both lead with (name, environment), so the old index goes.
DROP INDEX {schema}.backfills_name_idx;
CREATE INDEX backfills_newest_idx
    ON {schema}.backfills (name, environment, started_at, run_id);
CREATE INDEX backfills_status_idx
    ON {schema}.backfills (name, environment, status, started_at, run_id);
