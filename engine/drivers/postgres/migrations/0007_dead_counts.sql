-- Version 7: dead and failed counts kept by triggers (see schema.sql).
--
-- The dead and failed rows counted as they come and go, per (queue, tenant or '', state): the
-- stats read these few rows instead of every kept dead and failed row. Row triggers keep them,
-- and each fires only when a row enters or leaves dead/failed: a WHEN condition is checked
-- without calling the function, so the hot path (ready, running, done) never calls it. A count
-- that reaches 0 stays as a row of 0; the stats skip it.
CREATE TABLE {schema}.dead_counts (
    queue text COLLATE "C" NOT NULL,
    tenant_id text COLLATE "C" NOT NULL,
    state text NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (queue, tenant_id, state)
);

CREATE FUNCTION {schema}.keep_dead_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.state IN ('dead', 'failed') THEN
        UPDATE {schema}.dead_counts
           SET n = n - 1
         WHERE queue = OLD.queue AND tenant_id = coalesce(OLD.tenant_id, '')
           AND state = OLD.state AND n > 0;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.state IN ('dead', 'failed') THEN
        INSERT INTO {schema}.dead_counts AS c (queue, tenant_id, state, n)
        VALUES (NEW.queue, coalesce(NEW.tenant_id, ''), NEW.state, 1)
        ON CONFLICT (queue, tenant_id, state) DO UPDATE SET n = c.n + 1;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER dead_counts_insert
    AFTER INSERT ON {schema}.jobs
    FOR EACH ROW WHEN (NEW.state IN ('dead', 'failed'))
    EXECUTE FUNCTION {schema}.keep_dead_counts();
CREATE TRIGGER dead_counts_update
    AFTER UPDATE OF state, queue, tenant_id ON {schema}.jobs
    FOR EACH ROW WHEN ((OLD.state IN ('dead', 'failed') OR NEW.state IN ('dead', 'failed'))
                       AND (OLD.state IS DISTINCT FROM NEW.state
                            OR OLD.queue IS DISTINCT FROM NEW.queue
                            OR OLD.tenant_id IS DISTINCT FROM NEW.tenant_id))
    EXECUTE FUNCTION {schema}.keep_dead_counts();
CREATE TRIGGER dead_counts_delete
    AFTER DELETE ON {schema}.jobs
    FOR EACH ROW WHEN (OLD.state IN ('dead', 'failed'))
    EXECUTE FUNCTION {schema}.keep_dead_counts();

-- The rows already kept, counted once. The triggers above hold the jobs table against writers
-- until this transaction commits, so no change falls between this count and the first firing.
INSERT INTO {schema}.dead_counts (queue, tenant_id, state, n)
SELECT queue, coalesce(tenant_id, ''), state, count(*)
  FROM {schema}.jobs
 WHERE state IN ('dead', 'failed')
 GROUP BY queue, coalesce(tenant_id, ''), state;
