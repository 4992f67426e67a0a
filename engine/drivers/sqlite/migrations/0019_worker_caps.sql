-- 0019: a worker's concurrency caps beside its presence (schema.sql).

-- Caps live in each worker's Limits; diagnose runs elsewhere, so a queue held at a cap could
-- only be told from one short of workers once the caps are stored. JSON text, NULL for none:
-- rows written before read as a worker with no caps.

ALTER TABLE mcp_jobs_workers ADD COLUMN caps TEXT;
