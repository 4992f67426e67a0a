-- The declared current schema of the PostgreSQL driver.
--
-- `{schema}` stands for the configured schema name (default mcp_jobs), substituted as a quoted
-- identifier before execution. A fresh database is installed from this file and stamped with the
-- latest migration version; an existing one is brought here by the numbered files in
-- migrations/. tests/postgres/test_migrate.py proves the two roads end at the same catalog.
--
-- Every time is a bigint of epoch milliseconds read from the driver's injected clock and passed
-- as a parameter, never now(): a manual clock then means the same thing on every driver.
-- Status columns carry no CHECK on purpose: a row written by a newer deploy must reach the
-- decoder, which refuses it with JOB_ROW_STATUS_UNKNOWN instead of the insert failing elsewhere.

CREATE SCHEMA IF NOT EXISTS {schema};

CREATE TABLE IF NOT EXISTS {schema}.schema_version (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at bigint NOT NULL
);

CREATE TABLE {schema}.jobs (
    -- "C" collation on ids, names and keys: ordering and cursors compare code points, like
    -- Python does, and every comparison is a memcmp instead of a locale's strcoll. An insert
    -- compares the dedupe key a dozen times on its way down the index (migration 3).
    id text COLLATE "C" PRIMARY KEY,
    run_id text COLLATE "C" NOT NULL,
    name text COLLATE "C" NOT NULL,
    queue text COLLATE "C" NOT NULL,
    tenant_id text COLLATE "C",
    idempotency_key text COLLATE "C" NOT NULL,
    input jsonb NOT NULL,
    state text NOT NULL,
    attempt integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL,
    run_at bigint NOT NULL,
    queued_at bigint NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    finished_at bigint,
    timeout_ms bigint,
    last_error text,
    output jsonb,
    worker_id text,
    -- The claim token that fences ack/nack/heartbeat/save_step. Kept through a cancel of a
    -- running job so the holder's next heartbeat hears cancel_requested.
    lease_token text,
    lease_expires_at bigint,
    -- The token whose ack/nack settled the row: lets a settle retried after a lost connection
    -- tell "my first try committed" from "someone else holds the job now".
    settled_token text,
    cancel_requested boolean NOT NULL DEFAULT false,
    traceparent text,
    enqueued_by text,
    -- Migration 10: higher is claimed first (engine/rules.py claim_rank).
    priority smallint NOT NULL DEFAULT 0
);

-- A queue table churns: every job is one insert and two updates that leave dead versions
-- behind, in the heap and in every index the claim walks. The default autovacuum waits for 20%
-- of the table to be dead; a queue wants it swept early and without throttling, as PgQueuer
-- also recommends for its own table.
ALTER TABLE {schema}.jobs SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_analyze_threshold = 500,
    autovacuum_vacuum_cost_limit = 10000,
    autovacuum_vacuum_cost_delay = 0
);

-- Migration 16: no statistics where no plan hangs on the column (a token is only compared beside
-- the id or the running state); these values are the costly ones for the frequent ANALYZE
-- (sweep.py) to sample.
ALTER TABLE {schema}.jobs
    ALTER COLUMN input SET STATISTICS 0,
    ALTER COLUMN output SET STATISTICS 0,
    ALTER COLUMN last_error SET STATISTICS 0,
    ALTER COLUMN traceparent SET STATISTICS 0,
    ALTER COLUMN lease_token SET STATISTICS 0,
    ALTER COLUMN settled_token SET STATISTICS 0,
    ALTER COLUMN worker_id SET STATISTICS 0,
    ALTER COLUMN enqueued_by SET STATISTICS 0;

-- Rule 2: the dedupe namespace is (name, tenant or '', key) over LIVE rows. The ON CONFLICT
-- target in queries.sql spells this expression exactly, and the live-row lookup uses the same
-- predicate; tests/postgres/test_dedupe.py pins the three together. The key leads: keys differ
-- where names and tenants mostly repeat, so a descent decides on the first column.
CREATE UNIQUE INDEX jobs_dedupe_live_idx
    ON {schema}.jobs (idempotency_key, name, (coalesce(tenant_id, '')))
    WHERE state IN ('ready', 'delayed', 'running', 'suspended');

-- The claim walks this in rules.claim_rank order (migration 10: run_at less the priority's head
-- start, spelled exactly as queries.sql's claim spells it) and stops after a batch.
CREATE INDEX jobs_claim_idx
    ON {schema}.jobs ((run_at - priority * 300000), id)
    WHERE state IN ('ready', 'delayed', 'suspended');

-- A worker of named queues walks each queue alone in rank order (migration 16; queries.sql
-- claim_queues): a small queue's claim never reads past another queue's backlog. The rank is
-- spelled apart from jobs_claim_idx's on purpose (claim_queues says why).
CREATE INDEX jobs_claim_queue_idx
    ON {schema}.jobs (queue, (run_at - 300000 * priority), id)
    WHERE state IN ('ready', 'delayed', 'suspended');

-- Running rows are few (at most every worker's concurrency): the claim's second arm finds the
-- expired leases among them here.
CREATE INDEX jobs_running_idx
    ON {schema}.jobs (lease_expires_at)
    WHERE state = 'running';

-- Migration 4, reads that cost what is live: every index below is partial over live or over
-- settled rows, so the hot path touches only the small live-side ones.
-- Settled rows by state and finish time: the pruner walks it oldest first per state. (The stats
-- read dead and failed counts from dead_counts, migration 7, and done/cancelled rows of the
-- recent window through the settled indexes.)
CREATE INDEX jobs_settled_idx
    ON {schema}.jobs (state, finished_at, id) INCLUDE (queue, tenant_id)
    WHERE state IN ('done', 'failed', 'dead', 'cancelled');

-- Live rows newest first (migration 17): the live side of every filtered list walks it back to
-- its page, at worst through the live rows, never through the settled ones; the stats' live
-- counts read it whole.
CREATE INDEX jobs_live_idx
    ON {schema}.jobs (id)
    WHERE state IN ('ready', 'delayed', 'running', 'suspended');

-- The settled side of the filtered lists, newest first per (filter, state). Each filter's index
-- carries the other two filters (migration 24), so a list filtered by two of them tests the
-- second on the index entry: a rare combination walks the leading filter's entries, not its rows.
CREATE INDEX jobs_settled_state_idx
    ON {schema}.jobs (state, id)
    WHERE state IN ('done', 'failed', 'dead', 'cancelled');
CREATE INDEX jobs_settled_name_idx
    ON {schema}.jobs (name, state, id) INCLUDE (queue, tenant_id)
    WHERE state IN ('done', 'failed', 'dead', 'cancelled');
CREATE INDEX jobs_settled_queue_idx
    ON {schema}.jobs (queue, state, id) INCLUDE (name, tenant_id)
    WHERE state IN ('done', 'failed', 'dead', 'cancelled');
CREATE INDEX jobs_settled_tenant_idx
    ON {schema}.jobs (tenant_id, state, id) INCLUDE (name, queue)
    WHERE state IN ('done', 'failed', 'dead', 'cancelled');

-- Rows in a state this build does not know (rule 5): always empty, so the stats find such a
-- row, and refuse it by name, in one descent instead of a scan.
CREATE INDEX jobs_unknown_state_idx
    ON {schema}.jobs (state)
    WHERE state NOT IN ('ready', 'delayed', 'running', 'suspended',
                        'done', 'failed', 'dead', 'cancelled');

CREATE TABLE {schema}.steps (
    run_id text COLLATE "C" NOT NULL,
    name text NOT NULL,
    -- Insertion order breaks started_at ties; an upsert keeps the first position.
    seq bigint GENERATED ALWAYS AS IDENTITY,
    job_id text NOT NULL,
    status text NOT NULL,
    output jsonb,
    error text,
    started_at bigint NOT NULL,
    finished_at bigint,
    attempts integer NOT NULL DEFAULT 1,
    PRIMARY KEY (run_id, name)
);

-- A run's steps in start order: a trace pages the newest without reading them all.
CREATE INDEX steps_run_order_idx ON {schema}.steps (run_id, started_at, seq);

CREATE TABLE {schema}.events (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id text,
    at bigint NOT NULL,
    kind text NOT NULL,
    actor text,
    tenant_id text,
    data jsonb
);

CREATE INDEX events_job_idx ON {schema}.events (job_id, id);
-- Events of no job by time (migration 20): the pruner deletes them past the audit retention.
CREATE INDEX events_jobless_idx
    ON {schema}.events (at, id)
    WHERE job_id IS NULL;

-- Limiter leases: one row per (cap key, job) holding a slot until expires_at.
CREATE TABLE {schema}.slots (
    key text NOT NULL,
    job_id text NOT NULL,
    expires_at bigint NOT NULL,
    PRIMARY KEY (key, job_id)
);

CREATE INDEX slots_job_idx ON {schema}.slots (job_id);

CREATE TABLE {schema}.workers (
    id text PRIMARY KEY,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    hostname text NOT NULL,
    pid integer NOT NULL,
    queues text[],
    concurrency integer NOT NULL,
    started_at bigint NOT NULL,
    last_seen_at bigint NOT NULL,
    caps jsonb  -- {cap key: cap} (engine.limits.Limits.published); NULL: none
);

CREATE TABLE {schema}.backfills (
    run_id text COLLATE "C" PRIMARY KEY,
    name text NOT NULL,
    checksum text NOT NULL,
    environment text NOT NULL,
    status text NOT NULL,
    app_version text,
    rows_processed bigint NOT NULL,
    rows_total bigint,
    cursor jsonb,
    job_id text,
    started_at bigint NOT NULL,
    finished_at bigint,
    error text
);

-- One backfill's runs in one environment newest first, and the newest of one status: a page
-- of the ledger is one descent (version 6).
CREATE INDEX backfills_newest_idx
    ON {schema}.backfills (name, environment, started_at, run_id);
CREATE INDEX backfills_status_idx
    ON {schema}.backfills (name, environment, status, started_at, run_id);

CREATE TABLE {schema}.outbox (
    id text COLLATE "C" PRIMARY KEY,
    staged_at bigint NOT NULL,
    request jsonb NOT NULL,
    claimed_by text,
    claim_expires_at bigint,
    published_at bigint,
    job_id text
);

-- (staged_at, id) is the relay's total order: rows staged in one transaction share staged_at.
CREATE INDEX outbox_unpublished_idx
    ON {schema}.outbox (staged_at, id)
    WHERE published_at IS NULL;
-- Published rows by publish time (migration 19): the pruner deletes them past their keep.
CREATE INDEX outbox_published_idx
    ON {schema}.outbox (published_at)
    WHERE published_at IS NOT NULL;

CREATE TABLE {schema}.scheduler_state (
    task text PRIMARY KEY,
    last_fired_at bigint,
    updated_at bigint NOT NULL,
    failure jsonb  -- schemas.scheduler.TaskFailure; NULL: not failing
);

-- The one scheduler lease of earlier versions: kept for their workers during a rolling deploy,
-- read by none of this version (a cron task's lease is a row of `leaders`).
CREATE TABLE {schema}.scheduler_leader (
    id smallint PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    holder text NOT NULL,
    expires_at bigint NOT NULL
);

-- Named leadership leases (migration 5), one row per name (the pruner's, say): one holder at a
-- time, until expires_at.
CREATE TABLE {schema}.leaders (
    name text COLLATE "C" PRIMARY KEY,
    holder text NOT NULL,
    expires_at bigint NOT NULL
);

-- All or nothing: one slot under each (key, cap) for the job, or none; answers the first key at
-- its cap. A function so the per-key advisory locks and the counts after them are one round trip:
-- each statement inside takes a fresh snapshot, so the counts see every holder committed before
-- the lock was granted.
CREATE FUNCTION {schema}.acquire_slots(
    p_job_id text, p_keys text[], p_caps integer[], p_now bigint, p_expires_at bigint
) RETURNS text
LANGUAGE plpgsql AS $fn$
DECLARE
    i integer;
    taken bigint;
BEGIN
    -- Sorted, so two acquirers of overlapping key sets cannot deadlock.
    PERFORM pg_advisory_xact_lock(hashtext('{schema}.slot:' || k))
       FROM (SELECT DISTINCT k FROM unnest(p_keys) AS k ORDER BY k) AS sorted;
    FOR i IN 1 .. coalesce(array_length(p_keys, 1), 0) LOOP
        SELECT count(*) INTO taken
          FROM {schema}.slots
         WHERE key = p_keys[i] AND expires_at > p_now AND job_id <> p_job_id;
        IF taken >= p_caps[i] THEN
            RETURN p_keys[i];
        END IF;
    END LOOP;
    INSERT INTO {schema}.slots (key, job_id, expires_at)
    SELECT DISTINCT k, p_job_id, p_expires_at FROM unnest(p_keys) AS k
    ON CONFLICT (key, job_id) DO UPDATE SET expires_at = excluded.expires_at;
    RETURN NULL;
END
$fn$;

-- Migration 7: dead and failed counts kept by triggers.
-- The dead and failed rows counted as they come and go, per (queue, tenant or '', state): the
-- stats read these few rows instead of every kept dead and failed row. Row triggers keep them,
-- and each fires only when a row enters or leaves dead/failed: a WHEN condition is checked
-- without calling the function, so the hot path (ready, running, done) never calls it. A count
-- that reaches 0 is deleted (migration 18), so the table holds the groups that have failures.
-- Each firing holds its count until commit, so a statement that moves rows of several groups
-- locks their counts first, in key order (prune_jobs): two taking them in the order of their
-- rows can deadlock. A one-row statement (nack, retry) takes one count, at its end.
CREATE TABLE {schema}.dead_counts (
    queue text COLLATE "C" NOT NULL,
    tenant_id text COLLATE "C" NOT NULL,
    state text NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (queue, tenant_id, state)
);

CREATE FUNCTION {schema}.keep_dead_counts() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- TRUNCATE fires no row trigger: the counts of the rows it removes are cleared with them
-- (migration 21); without this the stats showed them for ever.
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

-- Published job descriptors (migration 8), one row per job name, the last one a worker published
-- (engine/descriptors.py). The pruner deletes rows nobody published for a long time.
CREATE TABLE {schema}.descriptors (
    name text COLLATE "C" PRIMARY KEY,
    version text NOT NULL,
    published_by text NOT NULL,
    published_at bigint NOT NULL,
    descriptor jsonb NOT NULL
);

-- Pauses (migration 9), one row per paused queue or job name (engine/pauses.py): the claim
-- skips waiting jobs whose queue or name has a row here, probing the primary key, until the row
-- is deleted.
CREATE TABLE {schema}.pauses (
    kind text COLLATE "C" NOT NULL CHECK (kind IN ('queue', 'job')),
    name text COLLATE "C" NOT NULL,
    paused_by text,
    paused_at bigint NOT NULL,
    reason text,
    PRIMARY KEY (kind, name)
);

-- Rate limits (migration 11), one row per key (engine/rate_limits.py): its GCRA theoretical
-- arrival time in epoch µs, and the rate that last took from it (what queue_stats shows).
CREATE TABLE {schema}.rate_limits (
    key text COLLATE "C" PRIMARY KEY,
    tat bigint NOT NULL,
    rate_limit integer NOT NULL,
    per_ms bigint NOT NULL,
    burst integer NOT NULL,
    updated_at bigint NOT NULL
);

-- Inbound events (migration 13, engine/inbound_events.py): events jobs wait for with
-- ctx.step.wait_for_event, kept until expires_at (the pruner deletes them then), and the waiters
-- index a send reads to wake the suspended jobs waiting on its (name, key, tenant).
CREATE TABLE {schema}.inbound_events (
    id text COLLATE "C" PRIMARY KEY,
    name text COLLATE "C" NOT NULL,
    key text COLLATE "C" NOT NULL,
    tenant_id text COLLATE "C",
    payload jsonb,
    sent_at bigint NOT NULL,
    expires_at bigint NOT NULL
);
-- A wait's look: the earliest live event of one (name, key, tenant) after a cursor.
CREATE INDEX inbound_events_match_idx
    ON {schema}.inbound_events (name, key, (coalesce(tenant_id, '')), sent_at, id);
CREATE INDEX inbound_events_expiry_idx ON {schema}.inbound_events (expires_at);
-- One row per job waiting for an event: a send wakes the suspended jobs listed for its
-- (name, key, tenant).
CREATE TABLE {schema}.inbound_event_waiters (
    job_id text COLLATE "C" PRIMARY KEY,
    name text COLLATE "C" NOT NULL,
    key text COLLATE "C" NOT NULL,
    tenant_id text COLLATE "C"
);
CREATE INDEX inbound_event_waiters_target_idx
    ON {schema}.inbound_event_waiters (name, key, (coalesce(tenant_id, '')));

-- Progress (migration 12, engine/progress.py): a running job's last `ctx.progress` report,
-- {done, total, message, at, attempt}; NULL until it reports, kept through the ack and a retry.
ALTER TABLE {schema}.jobs ADD COLUMN progress jsonb;

-- Reruns from a step (migration 14, engine/reruns.py): `rerun_of` names the run a rerun came
-- from; one `reruns` row per rerun finds a job's earlier runs (their steps go with the job).
ALTER TABLE {schema}.jobs ADD COLUMN rerun_of text COLLATE "C";
CREATE TABLE {schema}.reruns (
    run_id text COLLATE "C" PRIMARY KEY,
    job_id text NOT NULL,
    previous_run_id text COLLATE "C" NOT NULL,
    from_step text NOT NULL,
    at bigint NOT NULL
);
CREATE INDEX reruns_job_idx ON {schema}.reruns (job_id);

-- Rate-limit reservations (migration 15, engine/rate_limits.py): a job shed over its rate keeps
-- the start its take reserved; claimed again from slot_at to late_at (epoch ms) it starts
-- without taking again. Deleted when used, or by the next take once past late_at.
CREATE TABLE {schema}.rate_reservations (
    job_id text COLLATE "C" PRIMARY KEY,
    slot_at bigint NOT NULL,
    late_at bigint NOT NULL,
    blocked_key text COLLATE "C" NOT NULL,
    keys text COLLATE "C" NOT NULL,
    reserved_at bigint NOT NULL
);
CREATE INDEX rate_reservations_late_idx ON {schema}.rate_reservations (late_at);
CREATE INDEX rate_reservations_keys_idx ON {schema}.rate_reservations (keys, slot_at);
