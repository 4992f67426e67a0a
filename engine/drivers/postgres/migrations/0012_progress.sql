-- Version 12: progress (see schema.sql).

-- A running job's last `ctx.progress` report (engine/progress.py): {done, total, message, at,
-- attempt}. NULL until the body reports; kept through the ack and through a retry.
ALTER TABLE {schema}.jobs ADD COLUMN progress jsonb;
