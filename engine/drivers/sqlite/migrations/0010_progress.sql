-- 0010: progress (see schema.sql).

-- A running job's last `ctx.progress` report (engine/progress.py), JSON text: {done, total,
-- message, at, attempt}. NULL until the body reports; kept through the ack and a retry.
ALTER TABLE mcp_jobs_jobs ADD COLUMN progress TEXT;
