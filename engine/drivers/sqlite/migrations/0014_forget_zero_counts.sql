-- 0014: a dead/failed count that reaches 0 is deleted (see schema.sql).
--
-- A row of 0 was kept, and the stats read every row of the table: a deployment whose failures
-- had all been retried or pruned still read one row per (queue, tenant, state) that had ever
-- failed. The triggers delete a count as it reaches 0; the rows of 0 already kept go here.
DROP TRIGGER IF EXISTS mcp_jobs_dead_counts_update;
DROP TRIGGER IF EXISTS mcp_jobs_dead_counts_delete;

CREATE TRIGGER IF NOT EXISTS mcp_jobs_dead_counts_update
AFTER UPDATE OF state, queue, tenant_id ON mcp_jobs_jobs
WHEN (OLD.state IN ('dead', 'failed') OR NEW.state IN ('dead', 'failed'))
 AND (OLD.state IS NOT NEW.state OR OLD.queue IS NOT NEW.queue
      OR OLD.tenant_id IS NOT NEW.tenant_id)
BEGIN
    UPDATE mcp_jobs_dead_counts SET n = n - 1
     WHERE OLD.state IN ('dead', 'failed') AND queue = OLD.queue
       AND tenant_id = coalesce(OLD.tenant_id, '') AND state = OLD.state AND n > 0;
    DELETE FROM mcp_jobs_dead_counts
     WHERE OLD.state IN ('dead', 'failed') AND queue = OLD.queue
       AND tenant_id = coalesce(OLD.tenant_id, '') AND state = OLD.state AND n = 0;
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
    DELETE FROM mcp_jobs_dead_counts
     WHERE queue = OLD.queue AND tenant_id = coalesce(OLD.tenant_id, '')
       AND state = OLD.state AND n = 0;
END;

DELETE FROM mcp_jobs_dead_counts WHERE n = 0;
