-- The declared current schema: what applying every file in migrations/ from nothing yields.
-- tests/sqlite/test_schema.py holds the two together; edit both when adding a migration.
-- All times are epoch milliseconds written by the engine's injected clock, never SQLite's own.
-- Tables carry the mcp_jobs_ prefix because the outbox shares this file with the application.

CREATE TABLE IF NOT EXISTS mcp_jobs_jobs (
    id               TEXT PRIMARY KEY,
    run_id           TEXT NOT NULL,
    name             TEXT NOT NULL,
    queue            TEXT NOT NULL,
    tenant_id        TEXT,
    idempotency_key  TEXT NOT NULL,
    input            TEXT NOT NULL,              -- JSON object
    -- No CHECK on state: a newer build may write a state this one does not know, and the
    -- decoder refuses it by name (JOB_ROW_STATUS_UNKNOWN) instead of the write failing.
    state            TEXT NOT NULL,
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    run_at           INTEGER NOT NULL,
    queued_at        INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    finished_at      INTEGER,
    timeout_ms       INTEGER,
    last_error       TEXT,
    output           TEXT,                       -- JSON
    worker_id        TEXT,
    token            TEXT,                       -- the claim's fence; kept by a cancel of a running row
    lease_expires_at INTEGER,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    traceparent      TEXT,
    enqueued_by      TEXT,
    priority         INTEGER NOT NULL DEFAULT 0  -- 0008: higher is claimed first (rules.claim_rank)
);

-- Rule 2: the dedupe namespace is (name, tenant or '', key) over LIVE rows. The INSERT's
-- ON CONFLICT target and the live-row lookup spell this expression and predicate exactly.
-- Every partial index spells its states as equalities, not an IN list (0017, queries.state_in).
CREATE UNIQUE INDEX IF NOT EXISTS mcp_jobs_jobs_live_key
    ON mcp_jobs_jobs (name, coalesce(tenant_id, ''), idempotency_key)
    WHERE (state = 'ready' OR state = 'delayed' OR state = 'running' OR state = 'suspended');

-- Claims: due waiting rows in rules.claim_rank order (0008: the rank is run_at less the
-- priority's head start; queries.CLAIM_RANK spells the expression alike), and running rows
-- whose lease ran out.
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_due
    ON mcp_jobs_jobs (run_at - priority * 300000, id)
    WHERE (state = 'ready' OR state = 'delayed' OR state = 'suspended');
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_leased
    ON mcp_jobs_jobs (lease_expires_at)
    WHERE state = 'running';

-- 0002, reads that cost what is live: every index below is partial over live or over
-- settled rows, so the hot path touches only the small live-side ones.
-- Settled rows by state and finish time: the pruner walks it oldest first per state; the stats
-- count done/cancelled rows of the recent window from it (dead and failed ones from
-- mcp_jobs_dead_counts, 0005).
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_settled
    ON mcp_jobs_jobs (state, finished_at, id)
    WHERE (state = 'done' OR state = 'failed' OR state = 'dead' OR state = 'cancelled');

-- Live rows by queue: the stats' live counts and the live side of every filtered list.
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_live
    ON mcp_jobs_jobs (queue, state, id)
    WHERE (state = 'ready' OR state = 'delayed' OR state = 'running' OR state = 'suspended');

-- The settled side of the filtered lists, newest first per (filter, state). Each filter's index
-- ends with the other two filters (0020), so a list filtered by two of them tests the second on
-- the index entry before it reads the row: a rare combination walks entries, not rows.
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_settled_state
    ON mcp_jobs_jobs (state, id)
    WHERE (state = 'done' OR state = 'failed' OR state = 'dead' OR state = 'cancelled');
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_settled_name
    ON mcp_jobs_jobs (name, state, id, queue, tenant_id)
    WHERE (state = 'done' OR state = 'failed' OR state = 'dead' OR state = 'cancelled');
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_settled_queue
    ON mcp_jobs_jobs (queue, state, id, name, tenant_id)
    WHERE (state = 'done' OR state = 'failed' OR state = 'dead' OR state = 'cancelled');
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_settled_tenant
    ON mcp_jobs_jobs (tenant_id, state, id, name, queue)
    WHERE (state = 'done' OR state = 'failed' OR state = 'dead' OR state = 'cancelled');

-- Rows in a state this build does not know (rule 5): always empty, so the stats find such a
-- row, and refuse it by name, in one descent instead of a scan.
CREATE INDEX IF NOT EXISTS mcp_jobs_jobs_unknown_state
    ON mcp_jobs_jobs (state)
    WHERE (state != 'ready' AND state != 'delayed' AND state != 'running' AND state != 'suspended' AND state != 'done' AND state != 'failed' AND state != 'dead' AND state != 'cancelled');

CREATE TABLE IF NOT EXISTS mcp_jobs_steps (
    run_id      TEXT NOT NULL,
    name        TEXT NOT NULL,
    job_id      TEXT NOT NULL REFERENCES mcp_jobs_jobs (id) ON DELETE CASCADE,
    status      TEXT NOT NULL,
    output      TEXT,                            -- JSON
    error       TEXT,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER,
    attempts    INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (run_id, name)
);
CREATE INDEX IF NOT EXISTS mcp_jobs_steps_job ON mcp_jobs_steps (job_id);
-- A run's steps in start order (rowid breaks ties): a trace pages the newest without reading
-- them all (0002).
CREATE INDEX IF NOT EXISTS mcp_jobs_steps_run_order ON mcp_jobs_steps (run_id, started_at);

-- No foreign key: an operator's action on an id that does not exist is still recorded.
CREATE TABLE IF NOT EXISTS mcp_jobs_events (
    seq       INTEGER PRIMARY KEY,
    job_id    TEXT,
    at        INTEGER NOT NULL,
    kind      TEXT NOT NULL,
    actor     TEXT,
    tenant_id TEXT,
    data      TEXT                               -- JSON object
);
CREATE INDEX IF NOT EXISTS mcp_jobs_events_job ON mcp_jobs_events (job_id, seq);
-- Events of no job by time (0016): the pruner deletes them past the audit retention.
CREATE INDEX IF NOT EXISTS mcp_jobs_events_jobless
    ON mcp_jobs_events (at, seq)
    WHERE job_id IS NULL;

-- Limiter slots: one row per (cap key, job) holding a slot until it expires or is released.
CREATE TABLE IF NOT EXISTS mcp_jobs_leases (
    key        TEXT NOT NULL,
    job_id     TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (key, job_id)
);
CREATE INDEX IF NOT EXISTS mcp_jobs_leases_job ON mcp_jobs_leases (job_id);

CREATE TABLE IF NOT EXISTS mcp_jobs_workers (
    id           TEXT PRIMARY KEY,
    hostname     TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    queues       TEXT,                           -- JSON list, NULL for every queue
    concurrency  INTEGER NOT NULL,
    started_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    caps         TEXT                            -- JSON {cap key: cap}, NULL for none
);

CREATE TABLE IF NOT EXISTS mcp_jobs_backfills (
    run_id         TEXT PRIMARY KEY,
    name           TEXT NOT NULL,
    checksum       TEXT NOT NULL,
    environment    TEXT NOT NULL,
    status         TEXT NOT NULL,
    app_version    TEXT,
    rows_processed INTEGER NOT NULL,
    rows_total     INTEGER,
    cursor         TEXT,                         -- JSON
    job_id         TEXT,
    started_at     INTEGER NOT NULL,
    finished_at    INTEGER,
    error          TEXT
);
-- One backfill's runs in one environment newest first, and the newest of one status: a page
-- of the ledger is one descent (0004).
CREATE INDEX IF NOT EXISTS mcp_jobs_backfills_newest
    ON mcp_jobs_backfills (name, environment, started_at, run_id);
CREATE INDEX IF NOT EXISTS mcp_jobs_backfills_status
    ON mcp_jobs_backfills (name, environment, status, started_at, run_id);

CREATE TABLE IF NOT EXISTS mcp_jobs_scheduler_state (
    task          TEXT PRIMARY KEY,
    last_fired_at INTEGER,
    updated_at    INTEGER NOT NULL,
    failure       TEXT  -- schemas.scheduler.TaskFailure as JSON; NULL: not failing
);

-- The one scheduler lease of earlier versions: kept for their workers during a rolling deploy,
-- read by none of this version (a cron task's lease is a row of mcp_jobs_leaders).
CREATE TABLE IF NOT EXISTS mcp_jobs_scheduler_leader (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    holder     TEXT NOT NULL,
    expires_at INTEGER NOT NULL
);

-- Named leadership leases (0003), one row per name (the pruner's, say): one holder at a time,
-- until expires_at.
CREATE TABLE IF NOT EXISTS mcp_jobs_leaders (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS mcp_jobs_outbox (
    id               TEXT PRIMARY KEY,
    staged_at        INTEGER NOT NULL,
    request          TEXT NOT NULL,              -- JSON EnqueueRequest
    claimed_by       TEXT,
    claim_expires_at INTEGER,
    published_at     INTEGER,
    job_id           TEXT
);
-- (staged_at, id) is the relay's total order; published rows leave the index.
CREATE INDEX IF NOT EXISTS mcp_jobs_outbox_unpublished
    ON mcp_jobs_outbox (staged_at, id)
    WHERE published_at IS NULL;
-- Published rows by publish time (0015): the pruner deletes them past their keep.
CREATE INDEX IF NOT EXISTS mcp_jobs_outbox_published
    ON mcp_jobs_outbox (published_at)
    WHERE published_at IS NOT NULL;

-- 0005: dead and failed counts kept by triggers.
-- The dead and failed rows counted as they come and go, per (queue, tenant or '', state): the
-- stats read these few rows instead of every kept dead and failed row. Triggers keep them, each
-- with a WHEN that lets it fire only when a row enters or leaves dead/failed, so the hot path
-- (ready, running, done) never runs one. A count that reaches 0 is deleted (0014), so the table
-- holds the groups that have failures.
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

-- 0006: published job descriptors, one row per job name, the last one a worker published
-- (engine/descriptors.py). The pruner deletes rows nobody published for a long time.
CREATE TABLE IF NOT EXISTS mcp_jobs_descriptors (
    name         TEXT PRIMARY KEY,
    version      TEXT NOT NULL,
    published_by TEXT NOT NULL,
    published_at INTEGER NOT NULL,
    descriptor   TEXT NOT NULL                   -- JSON JobDescriptor
);

-- 0007: pauses (engine/pauses.py). A queue or job name listed here is not claimed until its row
-- is deleted; the claim reads this table (a handful of rows) by its primary key.
CREATE TABLE IF NOT EXISTS mcp_jobs_pauses (
    kind      TEXT NOT NULL CHECK (kind IN ('queue', 'job')),
    name      TEXT NOT NULL,
    paused_by TEXT,
    paused_at INTEGER NOT NULL,
    reason    TEXT,
    PRIMARY KEY (kind, name)
);

-- 0009: rate limits (engine/rate_limits.py). One row per key: its GCRA theoretical arrival time
-- in epoch µs, and the rate that last took from it (what queue_stats and diagnose_queue show).
CREATE TABLE IF NOT EXISTS mcp_jobs_rate_limits (
    key        TEXT PRIMARY KEY,
    tat        INTEGER NOT NULL,
    rate_limit INTEGER NOT NULL,
    per_ms     INTEGER NOT NULL,
    burst      INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

-- 0011: inbound events (engine/inbound_events.py). Events jobs wait for with
-- ctx.step.wait_for_event, kept until expires_at (the pruner deletes them then), and the waiters
-- index a send reads to wake the suspended jobs waiting on its (name, key, tenant).
CREATE TABLE IF NOT EXISTS mcp_jobs_inbound_events (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    key        TEXT NOT NULL,
    tenant_id  TEXT,
    payload    TEXT,                             -- JSON
    sent_at    INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
-- A wait's look: the earliest live event of one (name, key, tenant) after a cursor.
CREATE INDEX IF NOT EXISTS mcp_jobs_inbound_events_match
    ON mcp_jobs_inbound_events (name, key, coalesce(tenant_id, ''), sent_at, id);
CREATE INDEX IF NOT EXISTS mcp_jobs_inbound_events_expiry
    ON mcp_jobs_inbound_events (expires_at);
-- One row per job waiting for an event: a send wakes the suspended jobs listed for its
-- (name, key, tenant).
CREATE TABLE IF NOT EXISTS mcp_jobs_inbound_event_waiters (
    job_id    TEXT PRIMARY KEY,
    name      TEXT NOT NULL,
    key       TEXT NOT NULL,
    tenant_id TEXT
);
CREATE INDEX IF NOT EXISTS mcp_jobs_inbound_event_waiters_target
    ON mcp_jobs_inbound_event_waiters (name, key, coalesce(tenant_id, ''));

-- 0010: progress (engine/progress.py): a running job's last `ctx.progress` report, JSON text
-- {done, total, message, at, attempt}; NULL until it reports, kept through the ack and a retry.
-- Before 0012's column: the jobs table's columns are in migration order.
ALTER TABLE mcp_jobs_jobs ADD COLUMN progress TEXT;

-- 0012: reruns from a step (engine/reruns.py): `rerun_of` names the run a rerun came from.
ALTER TABLE mcp_jobs_jobs ADD COLUMN rerun_of TEXT;

-- 0013: rate-limit reservations (engine/rate_limits.py). A job shed over its rate keeps the start
-- its take reserved: claimed again from slot_at to late_at (epoch ms) it starts without taking
-- again. Rows are deleted when used, or by the next take once past late_at.
CREATE TABLE IF NOT EXISTS mcp_jobs_rate_reservations (
    job_id      TEXT PRIMARY KEY,
    slot_at     INTEGER NOT NULL,
    late_at     INTEGER NOT NULL,
    blocked_key TEXT NOT NULL,
    keys        TEXT NOT NULL,
    reserved_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS mcp_jobs_rate_reservations_late
    ON mcp_jobs_rate_reservations (late_at);
CREATE INDEX IF NOT EXISTS mcp_jobs_rate_reservations_keys
    ON mcp_jobs_rate_reservations (keys, slot_at);
