-- 0005: dead and failed counts kept by triggers (see schema.sql).
--
-- The dead and failed rows counted as they come and go, per (queue, tenant or '', state): the
-- stats read these few rows instead of every kept dead and failed row. Triggers keep them, each
-- with a WHEN that lets it fire only when a row enters or leaves dead/failed, so the hot path
-- (ready, running, done) never runs one. A count that reaches 0 stays as a row of 0; the stats
-- skip it.
CREATE TABLE IF NOT EXISTS mcp_jobs_dead_counts (
    queue     TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    state     TEXT NOT NULL,
    n         INTEGER NOT NULL,
    PRIMARY KEY (queue, tenant_id, state)
);

CREATE TRIGGER IF NOT EXISTS mcp_jobs_dead_counts_insert
AFTER INSERT ON mcp_jobs_jobs
WHEN NEW.state IN ('dead', 'failed')
BEGIN
    INSERT INTO mcp_jobs_dead_counts (queue, tenant_id, state, n)
    VALUES (NEW.queue, coalesce(NEW.tenant_id, ''), NEW.state, 1)
    ON CONFLICT (queue, tenant_id, state) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER IF NOT EXISTS mcp_jobs_dead_counts_update
AFTER UPDATE OF state, queue, tenant_id ON mcp_jobs_jobs
WHEN (OLD.state IN ('dead', 'failed') OR NEW.state IN ('dead', 'failed'))
 AND (OLD.state IS NOT NEW.state OR OLD.queue IS NOT NEW.queue
      OR OLD.tenant_id IS NOT NEW.tenant_id)
BEGIN
    UPDATE mcp_jobs_dead_counts SET n = n - 1
     WHERE OLD.state IN ('dead', 'failed') AND queue = OLD.queue
       AND tenant_id = coalesce(OLD.tenant_id, '') AND state = OLD.state AND n > 0;
    INSERT INTO mcp_jobs_dead_counts (queue, tenant_id, state, n)
    SELECT NEW.queue, coalesce(NEW.tenant_id, ''), NEW.state, 1
     WHERE NEW.state IN ('dead', 'failed')
    ON CONFLICT (queue, tenant_id, state) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER IF NOT EXISTS mcp_jobs_dead_counts_delete
AFTER DELETE ON mcp_jobs_jobs
WHEN OLD.state IN ('dead', 'failed')
BEGIN
    UPDATE mcp_jobs_dead_counts SET n = n - 1
     WHERE queue = OLD.queue AND tenant_id = coalesce(OLD.tenant_id, '')
       AND state = OLD.state AND n > 0;
END;

-- The rows already kept, counted once, in the migration's write transaction: no other writer
-- runs between this count and the triggers above.
INSERT INTO mcp_jobs_dead_counts (queue, tenant_id, state, n)
SELECT queue, coalesce(tenant_id, ''), state, count(*)
  FROM mcp_jobs_jobs
 WHERE state IN ('dead', 'failed')
 GROUP BY queue, coalesce(tenant_id, ''), state;
