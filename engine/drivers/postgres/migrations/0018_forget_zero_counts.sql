-- Version 18: a dead/failed count that reaches 0 is deleted (see schema.sql).
--
-- A row of 0 was kept, and the stats read every row of the table: a deployment whose failures
-- had all been retried or pruned still read one row per (queue, tenant, state) that had ever
-- failed. The function deletes a count as it reaches 0; the rows of 0 already kept go here.
CREATE OR REPLACE FUNCTION {schema}.keep_dead_counts() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    left_n bigint;
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.state IN ('dead', 'failed') THEN
        UPDATE {schema}.dead_counts
           SET n = n - 1
         WHERE queue = OLD.queue AND tenant_id = coalesce(OLD.tenant_id, '')
           AND state = OLD.state AND n > 0
        RETURNING n INTO left_n;
        -- This transaction holds the row until it commits; an upsert of the same count waits
        -- and then inserts it anew (ON CONFLICT's insert-or-update guarantee).
        IF left_n = 0 THEN
            DELETE FROM {schema}.dead_counts
             WHERE queue = OLD.queue AND tenant_id = coalesce(OLD.tenant_id, '')
               AND state = OLD.state AND n = 0;
        END IF;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.state IN ('dead', 'failed') THEN
        INSERT INTO {schema}.dead_counts AS c (queue, tenant_id, state, n)
        VALUES (NEW.queue, coalesce(NEW.tenant_id, ''), NEW.state, 1)
        ON CONFLICT (queue, tenant_id, state) DO UPDATE SET n = c.n + 1;
    END IF;
    RETURN NULL;
END
$$;

DELETE FROM {schema}.dead_counts WHERE n = 0;
