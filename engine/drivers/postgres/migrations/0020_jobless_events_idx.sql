-- Version 20: events of no job by time (see schema.sql).

-- An event of no job (the audit of a call that named no job the caller may see) was kept for
-- good: nothing deleted it. The pruner now deletes those past the audit retention
-- (engine/retention.py), oldest first, on this index.
CREATE INDEX events_jobless_idx
    ON {schema}.events (at, id)
    WHERE job_id IS NULL;
