-- Version 21: a TRUNCATE of the jobs table clears the dead/failed counts (see schema.sql).
--
-- The counts are kept by row triggers, and TRUNCATE fires none: after `TRUNCATE jobs CASCADE`
-- (a staging database cleared) the stats showed the dead jobs it removed for ever, and nothing
-- could bring the counts down. A statement trigger on TRUNCATE empties them in its transaction.
CREATE FUNCTION {schema}.clear_dead_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {schema}.dead_counts;
    RETURN NULL;
END
$$;

CREATE TRIGGER dead_counts_truncate
    AFTER TRUNCATE ON {schema}.jobs
    FOR EACH STATEMENT
    EXECUTE FUNCTION {schema}.clear_dead_counts();
