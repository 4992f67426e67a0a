-- Version 23: a worker's concurrency caps beside its presence (see schema.sql).
--
-- Caps live in each worker's Limits; diagnose runs elsewhere, so a queue held at a cap could
-- only be told from one short of workers once the caps are stored. NULL for none: rows written
-- before read as a worker with no caps.
ALTER TABLE {schema}.workers ADD COLUMN caps jsonb;
