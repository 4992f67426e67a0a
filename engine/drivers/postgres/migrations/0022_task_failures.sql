-- Version 22: a cron task's last failure beside its last fired occurrence (see schema.sql).
--
-- The scheduler runs in a worker; describe and diagnose run elsewhere, so a task whose rounds
-- fail (it names a job that is gone) must be stored as failing to be seen. NULL for no
-- failure: rows written before read as not failing.
ALTER TABLE {schema}.scheduler_state ADD COLUMN failure jsonb;
