-- Named queries of the PostgreSQL driver, loaded into a dict by sql.py (`-- name: x` starts one).
--
-- `{schema}` is the configured schema, substituted as a quoted identifier at load. Everything
-- else is a parameter: values never enter the text. Every time ($now and friends) is epoch ms
-- from the driver's injected clock, never now(), so a manual clock rules SQL as it rules memory.
-- The live states are spelled out where they are used, identical to the dedupe index predicate.

-- name: enqueue
-- A batch in one round trip. Each row travels as a short JSON array ($2) of what differs from
-- job to job: [id, run_id, idempotency_key, input, shared]; `shared` indexes a second array
-- ($3) of what a batch mostly repeats: [name, queue, tenant_id, state, run_at, max_attempts,
-- timeout_ms, traceparent, enqueued_by, priority]. jsonb, so every field is an O(1) lookup in one parsed
-- document. Items with one dedupe key were folded in Python first, so no two rows here collide
-- with each other. The placeholder before RETURNING makes this two statements (sql.py):
-- `enqueue` skips the rows whose key a live row holds (rule 2's ON CONFLICT), and
-- `enqueue_new`, for a batch expected to be all new keys, fails on a held key instead. The
-- answer is one row: how many rows went in. Only a shorter count sends the caller to
-- enqueue_holders, to learn which rows were refused and who holds their keys. The wake-up is
-- sent once, and only when some row was inserted.
WITH req AS (
    SELECT r->>0 AS id, r->>1 AS run_id, r->>2 AS idempotency_key, r->3 AS input,
           g->>0 AS name, g->>1 AS queue, g->>2 AS tenant_id, g->>3 AS state,
           (g->>4)::bigint AS run_at, (g->>5)::integer AS max_attempts,
           (g->>6)::bigint AS timeout_ms, g->>7 AS traceparent, g->>8 AS enqueued_by,
           (g->>9)::smallint AS priority
      FROM jsonb_array_elements($2::jsonb) AS r
      JOIN jsonb_array_elements($3::jsonb) WITH ORDINALITY AS shared(g, n)
        ON shared.n = (r->>4)::bigint + 1
),
ins AS (
    INSERT INTO {schema}.jobs (
        id, run_id, name, queue, tenant_id, idempotency_key, input, state, attempt,
        max_attempts, run_at, queued_at, created_at, updated_at, timeout_ms, traceparent,
        enqueued_by, priority
    )
    SELECT id, run_id, name, queue, tenant_id, idempotency_key, input, state, 0,
           max_attempts, run_at, greatest(run_at, $1::bigint), $1::bigint, $1::bigint,
           timeout_ms, traceparent, enqueued_by, priority
      FROM req
    {skip_held_keys}
    RETURNING 1
)
SELECT count(*) AS inserted,
       CASE WHEN count(*) > 0 THEN pg_notify($4::text, '') END AS woke
  FROM ins;

-- name: enqueue_holders
-- After an insert that refused some rows (enqueue or enqueue_one): the rows of the same
-- documents that are not in the table, each with the live row holding its key, or with NULLs
-- when no row holds it any more (the holder settled since the insert, so the key is free: the
-- caller inserts those again). A new statement, so a holder that committed while the insert
-- waited on it is visible here. A row is told apart from its holder by id, not by key: the
-- insert's own rows may have been claimed and settled already, and a stranger may hold the
-- key by now.
WITH req AS (
    SELECT r->>0 AS id, r->>2 AS idempotency_key, g->>0 AS name, g->>2 AS tenant_id
      FROM jsonb_array_elements($1::jsonb) AS r
      JOIN jsonb_array_elements($2::jsonb) WITH ORDINALITY AS shared(g, n)
        ON shared.n = (r->>4)::bigint + 1
)
SELECT r.id AS request_id, live.id, live.run_id, live.state
  FROM req AS r
  LEFT JOIN {schema}.jobs AS live
    ON live.name = r.name
   AND coalesce(live.tenant_id, '') = coalesce(r.tenant_id, '')
   AND live.idempotency_key = r.idempotency_key
   AND live.state IN ('ready', 'delayed', 'running', 'suspended')
 WHERE NOT EXISTS (SELECT 1 FROM {schema}.jobs AS mine WHERE mine.id = r.id);

-- name: enqueue_one
-- The common single enqueue: a plain VALUES insert, the cheapest statement the server has for
-- it, whose RETURNING sends the wake-up. No row back means the key is held: the caller asks
-- enqueue_holders.
INSERT INTO {schema}.jobs (
    id, run_id, name, queue, tenant_id, idempotency_key, input, state, attempt,
    max_attempts, run_at, queued_at, created_at, updated_at, timeout_ms, traceparent,
    enqueued_by, priority
)
VALUES ($2, $3, $4, $5, $6, $7, $8::jsonb, $9, 0, $10, $11, greatest($11, $1::bigint),
        $1::bigint, $1::bigint, $12, $13, $14, $16)
ON CONFLICT (idempotency_key, name, (coalesce(tenant_id, '')))
   WHERE state IN ('ready', 'delayed', 'running', 'suspended')
   DO NOTHING
RETURNING pg_notify($15::text, '');

-- name: claim
-- One statement: lock up to $2 due rows in rules.claim_rank order (run_at less the priority's
-- head start, the claim index's expression spelled alike), skipping rows another claimer
-- holds, and lease them. A running row whose lease ran out is due again (rule 13). Two arms,
-- each walking its own index in order and stopping at $2, so a deep backlog costs a batch, not
-- a sort of the whole queue; rows an arm locked beyond the final batch are let go at commit.
-- `has_steps` says whether the run may have stored steps to replay: a fresh run's first step
-- then skips the read (one probe of the steps key here instead of a round trip per job
-- there). The probe is exact for a waiting row (no holder: no step can commit after this
-- snapshot). An abandoned row may have its stale holder mid-write, but it was claimed before,
-- so its attempt is now above 1: any run past its first attempt reads (the rule every driver
-- applies). The probe is a scalar subquery, not EXISTS: the planner may run an EXISTS as one
-- hashed read of every stored step, and the claim's plan, kept as the table grows (see below),
-- would read them all at every claim; a scalar subquery is one index probe per claimed row.
-- The lease token ($5) is one per claim, drawn by the caller: every fence compares it together
-- with the row's id, so the rows of one batch may share it. $6 false leaves running
-- rows alone: right after an outage their holders get a lease to come back (claims.py).
-- A running row taken over gets the event of the attempt its lease lost (`lost`, in this same
-- statement: engine/lease_expiry.py, its data pinned by the kit's test_lease_expiry): the
-- abandoned arm carries the held values, which RETURNING (the row as updated) no longer has.
-- Neither arm takes a job whose queue ($7) or name ($8) is paused (engine/pauses.py; claim_queues:
-- $8, $9): the claimer passes the paused names it read at most PAUSES_REFRESH_S ago, so the
-- statement stays one index scan under LIMIT (a NOT EXISTS per row halved the drain). The same
-- arrays carry the queues and names whose cap the worker found full, and $9 (claim_queues: $10)
-- its full tenants' (rules.is_excluded; a NULL tenant is contained in no array).
-- The pause test is spelled `NOT (paused @> ARRAY[column])`, not `column <> ALL (paused)`: the
-- planner estimates `<> ALL` of an unknown array as matching no row when the column holds one
-- value (one queue, one job name), and a plan made for no rows sorts the whole backlog. The
-- claim runs on connections that plan it once (connections.py `planned_once`), so that plan
-- would be the one every claim ran.
WITH due AS (
    SELECT id, rank, NULL::integer AS held_attempt, NULL::text AS held_by,
           NULL::bigint AS held_until, NULL::text AS held_tenant
      FROM (SELECT id, run_at - priority * 300000 AS rank
              FROM {schema}.jobs
             WHERE state IN ('ready', 'delayed', 'suspended')
               AND run_at - priority * 300000 <= $1::bigint AND run_at <= $1::bigint
               AND NOT ($7::text[] @> ARRAY[jobs.queue]) AND NOT ($8::text[] @> ARRAY[jobs.name])
               AND NOT ($9::text[] @> ARRAY[jobs.tenant_id])
             ORDER BY run_at - priority * 300000, id
             LIMIT $2
               FOR UPDATE SKIP LOCKED) AS waiting
    UNION ALL
    SELECT id, rank, attempt, worker_id, lease_expires_at, tenant_id
      FROM (SELECT id, run_at - priority * 300000 AS rank,
                   attempt, worker_id, lease_expires_at, tenant_id
              FROM {schema}.jobs
             WHERE $6::boolean AND state = 'running' AND lease_expires_at <= $1::bigint
               AND NOT ($7::text[] @> ARRAY[jobs.queue]) AND NOT ($8::text[] @> ARRAY[jobs.name])
               AND NOT ($9::text[] @> ARRAY[jobs.tenant_id])
             ORDER BY rank, id
             LIMIT $2
               FOR UPDATE SKIP LOCKED) AS abandoned
),
batch AS (
    SELECT * FROM due ORDER BY rank, id LIMIT $2
),
lost AS (
    INSERT INTO {schema}.events (job_id, at, kind, actor, tenant_id, data)
    SELECT id, $1::bigint, 'lease_expired', $3::text, held_tenant,
           jsonb_build_object('attempt', held_attempt, 'worker_id', held_by,
                              'lease_expires_at', held_until)
      FROM batch
     WHERE held_until IS NOT NULL
)
UPDATE {schema}.jobs AS j
   SET state = 'running', attempt = j.attempt + 1, worker_id = $3::text,
       lease_token = $5::text,
       lease_expires_at = $1 + $4::bigint, cancel_requested = false, updated_at = $1
 WHERE j.id = ANY(ARRAY(SELECT id FROM batch))
RETURNING j.*,
          j.attempt > 1
          OR (SELECT true FROM {schema}.steps AS s WHERE s.run_id = j.run_id LIMIT 1) IS NOT NULL
             AS has_steps;

-- name: claim_queues
-- claim, restricted to the worker's queues ($6; claim's $6 is $7 here). Each queue not paused is
-- walked on its own in jobs_claim_queue_idx (queue, rank, id), up to $2 rows in rank order, and
-- the batch is the best $2 of those: a worker of a small queue never reads past another queue's
-- backlog, whatever plan the statement was given once (claim's note on planning). The rank is
-- spelled `run_at - 300000 * priority` here, as that index spells it: the same number, but an
-- expression jobs_claim_idx does not hold, so no plan can walk that index instead (through every
-- other queue's rows) when the statistics say one queue holds everything.
WITH due AS (
    SELECT waiting.id, waiting.rank, NULL::integer AS held_attempt, NULL::text AS held_by,
           NULL::bigint AS held_until, NULL::text AS held_tenant
      FROM (SELECT DISTINCT name FROM unnest($6::text[]) AS n(name)
             WHERE NOT ($8::text[] @> ARRAY[name])) AS q
     CROSS JOIN LATERAL (
            SELECT id, run_at - 300000 * priority AS rank
              FROM {schema}.jobs
             WHERE jobs.queue = q.name
               AND state IN ('ready', 'delayed', 'suspended')
               AND run_at - 300000 * priority <= $1::bigint AND run_at <= $1::bigint
               AND NOT ($9::text[] @> ARRAY[jobs.name])
               AND NOT ($10::text[] @> ARRAY[jobs.tenant_id])
             ORDER BY run_at - 300000 * priority, id
             LIMIT $2
               FOR UPDATE SKIP LOCKED) AS waiting
    UNION ALL
    SELECT id, rank, attempt, worker_id, lease_expires_at, tenant_id
      FROM (SELECT id, run_at - priority * 300000 AS rank,
                   attempt, worker_id, lease_expires_at, tenant_id
              FROM {schema}.jobs
             WHERE $7::boolean AND state = 'running' AND lease_expires_at <= $1::bigint
               AND queue = ANY($6::text[])
               AND NOT ($8::text[] @> ARRAY[jobs.queue]) AND NOT ($9::text[] @> ARRAY[jobs.name])
               AND NOT ($10::text[] @> ARRAY[jobs.tenant_id])
             ORDER BY rank, id
             LIMIT $2
               FOR UPDATE SKIP LOCKED) AS abandoned
),
batch AS (
    SELECT * FROM due ORDER BY rank, id LIMIT $2
),
lost AS (
    INSERT INTO {schema}.events (job_id, at, kind, actor, tenant_id, data)
    SELECT id, $1::bigint, 'lease_expired', $3::text, held_tenant,
           jsonb_build_object('attempt', held_attempt, 'worker_id', held_by,
                              'lease_expires_at', held_until)
      FROM batch
     WHERE held_until IS NOT NULL
)
UPDATE {schema}.jobs AS j
   SET state = 'running', attempt = j.attempt + 1, worker_id = $3::text,
       lease_token = $5::text,
       lease_expires_at = $1 + $4::bigint, cancel_requested = false, updated_at = $1
 WHERE j.id = ANY(ARRAY(SELECT id FROM batch))
RETURNING j.*,
          j.attempt > 1
          OR (SELECT true FROM {schema}.steps AS s WHERE s.run_id = j.run_id LIMIT 1) IS NOT NULL
             AS has_steps;

-- name: claimed_with
-- After a claim whose connection broke: the rows it leased, if it committed (its token, $1).
SELECT j.*,
       j.attempt > 1
       OR (SELECT true FROM {schema}.steps AS s WHERE s.run_id = j.run_id LIMIT 1) IS NOT NULL
          AS has_steps
  FROM {schema}.jobs AS j
 WHERE j.state = 'running' AND j.lease_token = $1;

-- name: heartbeat
-- Extend the lease and the job's limiter slots. A cancelled row that still carries the token
-- answers with its state, so the holder hears cancel_requested; no row at all means lost.
WITH beat AS (
    UPDATE {schema}.jobs
       SET lease_expires_at = $3::bigint
     WHERE id = $1 AND lease_token = $2 AND state = 'running'
    RETURNING lease_expires_at
),
extended AS (
    UPDATE {schema}.slots
       SET expires_at = $3::bigint
     WHERE job_id = $1 AND EXISTS (SELECT 1 FROM beat)
)
SELECT 'running' AS state, lease_expires_at FROM beat
UNION ALL
SELECT state, lease_expires_at
  FROM {schema}.jobs
 WHERE id = $1 AND lease_token = $2 AND state = 'cancelled';

-- name: ack_many
-- Group commit of acks: one row per (id, token, output), as one JSON array ($1) like enqueue's
-- batch (cheaper to encode than arrays); a null output keeps the row's. Each pair that still
-- holds its running job settles it and comes back. A pair missing from the result lost its slot.
-- The rows are found by primary key, whatever the planner knows: `id = ANY(ARRAY(…))` is a
-- probe of jobs_pkey for the batch's ids, and `(state = 'running') IS TRUE` (state is NOT NULL:
-- the same test) keeps jobs_running_idx, full of dead entries between vacuums, out of the plan.
-- save_steps finds its jobs the same way for the same reason. The ack clears last_error.
-- One NOTIFY on the changes channel ($3) per statement that settled anything (an InitPlan, run
-- once), for readers that follow state (engine/changes.py); none when nothing settled, and none
-- when $3 is NULL: no process follows changes (worker_seen), so no NOTIFY lock at commit.
WITH req AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(id text, token text, output jsonb)
),
done AS (
    UPDATE {schema}.jobs AS j
       SET state = 'done', output = coalesce(req.output, j.output), last_error = NULL,
           updated_at = $2::bigint, finished_at = $2::bigint, worker_id = NULL,
           lease_expires_at = NULL, lease_token = NULL, settled_token = req.token
      FROM req
     WHERE j.id = ANY(ARRAY(SELECT id FROM req))
       AND j.id = req.id AND j.lease_token = req.token AND (j.state = 'running') IS TRUE
    RETURNING j.id, req.token
),
released AS (
    DELETE FROM {schema}.slots WHERE job_id IN (SELECT id FROM done)
)
SELECT id, token,
       (SELECT pg_notify($3::text, '') FROM done WHERE $3::text IS NOT NULL LIMIT 1) AS changed
  FROM done;

-- name: sweep_due
-- The jobs table's dead rows as the statistics count them; its rows changed since the last
-- ANALYZE and how many rows that ANALYZE saw (-1: never analyzed); its pages now (exact, not
-- waiting for other sessions to publish their statistics) and at the last ANALYZE or VACUUM;
-- and whether this role may vacuum and analyze it (its owner or a member of the owner's role,
-- which a superuser always is). See sweep.py.
SELECT pg_stat_get_dead_tuples(c.oid) AS dead, pg_has_role(c.relowner, 'USAGE') AS may_vacuum,
       pg_stat_get_mod_since_analyze(c.oid) AS changed, c.reltuples AS analyzed_rows,
       pg_relation_size(c.oid) / current_setting('block_size')::int AS pages,
       c.relpages AS analyzed_pages
  FROM pg_catalog.pg_class AS c
 WHERE c.oid = '{schema}.jobs'::regclass;

-- name: analyze
-- The planner's statistics for the jobs table (see sweep.py); `SKIP_LOCKED` as for the sweep.
ANALYZE (SKIP_LOCKED) {schema}.jobs;

-- name: sweep
-- `TRUNCATE false`: giving back the table's empty tail takes an exclusive lock that every claim
-- would queue behind, and a queue's tail is where new rows go anyway. `INDEX_CLEANUP ON`: the
-- index entries are the point; left to itself (AUTO) vacuum skips the indexes when few heap
-- pages hold dead rows, which a big table of settled history always has. `SKIP_LOCKED`: another
-- process (or autovacuum) already vacuuming the table does this one's work.
VACUUM (SKIP_LOCKED, TRUNCATE false, INDEX_CLEANUP ON) {schema}.jobs;

-- name: settled_many
-- After a batched settle whose connection broke: which (id, token) pairs did commit?
SELECT j.id, j.settled_token AS token, j.state
  FROM {schema}.jobs AS j
  JOIN unnest($1::text[], $2::text[]) AS r(id, token)
    ON j.id = r.id AND j.settled_token = r.token;

-- name: nack
-- Hand a claimed row back: requeue (ready/delayed/suspended) or settle (dead/failed). The
-- caller picks the state from engine.rules.nack_transition; $5 (new run_at) is NULL when
-- settling, $6 keeps queued_at (a shed, or a settle), $7 is the error as JSON text (NULL keeps
-- the last one). The event ($10) is written only when the caller names one: no happy-path rows.
WITH held AS (
    SELECT id, attempt
      FROM {schema}.jobs
     WHERE id = $1 AND lease_token = $2 AND state = 'running'
       FOR UPDATE
),
moved AS (
    UPDATE {schema}.jobs AS j
       SET state = $3::text,
           attempt = CASE WHEN $4::boolean THEN j.attempt ELSE greatest(j.attempt - 1, 0) END,
           run_at = coalesce($5::bigint, j.run_at),
           queued_at = CASE WHEN $6::boolean THEN j.queued_at
                            ELSE coalesce($5::bigint, j.queued_at) END,
           last_error = coalesce($7::text, j.last_error),
           finished_at = coalesce($8::bigint, j.finished_at),
           worker_id = NULL, lease_expires_at = NULL, lease_token = NULL, settled_token = $2,
           updated_at = $9::bigint
      FROM held
     WHERE j.id = held.id
    RETURNING j.*, held.attempt AS held_attempt
),
released AS (
    DELETE FROM {schema}.slots WHERE job_id = $1 AND EXISTS (SELECT 1 FROM moved)
),
logged AS (
    INSERT INTO {schema}.events (job_id, at, kind, tenant_id, data)
    SELECT id, $9::bigint, $10::text, tenant_id,
           CASE WHEN $10::text = 'parked'
                THEN jsonb_build_object('until', $5::bigint, 'reason', $7::text::jsonb)
                ELSE jsonb_build_object('attempt', held_attempt, 'error', $7::text::jsonb) END
      FROM moved
     WHERE $10::text IS NOT NULL
)
SELECT * FROM moved;

-- name: settled_by
-- After a settle whose connection broke: did that settle commit before the break?
SELECT * FROM {schema}.jobs WHERE id = $1 AND settled_token = $2;

-- name: get
SELECT * FROM {schema}.jobs WHERE id = $1 AND ($2::text IS NULL OR tenant_id = $2);

-- name: list_jobs
-- Unfiltered: newest first, the primary key walked backwards. A filtered list is built per filter
-- by engine.drivers.postgres.jobs.list_sql (one arm over live rows, one per settled state).
SELECT *
  FROM {schema}.jobs
 WHERE ($1::text IS NULL OR id < $1)
 ORDER BY id DESC
 LIMIT $2;

-- name: trace_steps_newest
-- A trace's page of steps: the newest $2 of the run, read backwards on steps_run_order_idx.
SELECT * FROM {schema}.steps WHERE run_id = $1 ORDER BY started_at DESC, seq DESC LIMIT $2;

-- name: trace_steps_before
-- The page before a cursor ($2 started_at, $3 seq): the row comparison is the index's range.
SELECT *
  FROM {schema}.steps
 WHERE run_id = $1 AND (started_at, seq) < ($2::bigint, $3::bigint)
 ORDER BY started_at DESC, seq DESC
 LIMIT $4;

-- name: trace_steps_count
SELECT count(*) FROM {schema}.steps WHERE run_id = $1;

-- name: trace_events_newest
SELECT * FROM {schema}.events WHERE job_id = $1 ORDER BY id DESC LIMIT $2;

-- name: trace_events_before
SELECT * FROM {schema}.events WHERE job_id = $1 AND id < $2::bigint ORDER BY id DESC LIMIT $3;

-- name: trace_events_count
SELECT count(*) FROM {schema}.events WHERE job_id = $1;

-- name: stats
-- Rule 7: a waiting row counts as ready as rules.counts_ready says (due, or a shed: `ready`,
-- queued by now; its age runs from queued_at, which a shed does not move), else as delayed. It
-- reads what is live, not what ever ran: live rows (jobs_live_idx), the dead and failed counts
-- (dead_counts, kept by triggers; each row stands for n jobs, hence sum(n) for those two
-- states), done and cancelled rows of the recent window (rules.recent_settled_since: since $4, or from the $6-th newest row of a state
-- that has more than $6, found by a backward walk of jobs_settled_idx that stops one row later;
-- the walk reads every queue and tenant, as the window is the whole history's, so a filter
-- matching few rows never walks the hour; the count reads those few entries again; the walk is
-- spelt once per state, as the partial index is used only for a literal state), and rows of a
-- state this build does not know (jobs_unknown_state_idx, always empty), which the caller
-- refuses by name. The counts fold a null tenant to '', and a tenant is never '' (bounds.text).
-- $5 is the largest bigint, a bound no row reaches: as a parameter it makes the generic plan
-- (the one the planned-once connections run, connections.py) estimate a narrow range of
-- finished_at, not a third of all history, for which it planned parallel workers that cost
-- more than the read.
-- Each arm folds its rows into (queue, state) groups itself, the live rows with the few sums
-- their states need (the oldest times as min, turned into ages below); the per-queue columns
-- then pick from those handful of groups (no sort of the rows). Expired leases are counted in
-- an arm of their own over the few running rows (jobs_running_idx): named in the live arm,
-- lease_expires_at made every live row be read out to its 21st column.
WITH since AS (
    SELECT greatest($4::bigint, max(at)) AS at
      FROM (
        SELECT CASE WHEN count(*) = 2 THEN max(finished_at) END
          FROM (SELECT finished_at
                  FROM {schema}.jobs
                 WHERE state = 'done'
                   AND finished_at >= $4::bigint AND finished_at <= $5::bigint
                 ORDER BY finished_at DESC
                 LIMIT 2 OFFSET $6::bigint - 1) AS edge
        UNION ALL
        SELECT CASE WHEN count(*) = 2 THEN max(finished_at) END
          FROM (SELECT finished_at
                  FROM {schema}.jobs
                 WHERE state = 'cancelled'
                   AND finished_at >= $4::bigint AND finished_at <= $5::bigint
                 ORDER BY finished_at DESC
                 LIMIT 2 OFFSET $6::bigint - 1) AS edge
      ) AS capped (at)
),
by_state AS (
    SELECT queue, state, count(*) AS n,
           count(*) FILTER (
               WHERE run_at <= $1::bigint OR (state = 'ready' AND queued_at <= $1::bigint)) AS due,
           min(queued_at) FILTER (
               WHERE queued_at <= $1::bigint AND (state = 'ready' OR run_at <= $1::bigint))
               AS oldest_queued_at,
           0 AS expired,
           min(run_at) FILTER (WHERE run_at <= $1::bigint) AS oldest_due_at
      FROM {schema}.jobs
     WHERE state IN ('ready', 'delayed', 'running', 'suspended')
       AND ($2::text[] IS NULL OR queue = ANY($2)) AND ($3::text IS NULL OR tenant_id = $3)
     GROUP BY queue, state
    UNION ALL
    SELECT queue, state, 0, 0, NULL, count(*), NULL
      FROM {schema}.jobs
     WHERE state = 'running' AND coalesce(lease_expires_at, 0) <= $1::bigint
       AND ($2::text[] IS NULL OR queue = ANY($2)) AND ($3::text IS NULL OR tenant_id = $3)
     GROUP BY queue, state
    UNION ALL
    SELECT queue, state, sum(n)::bigint, 0, NULL, 0, NULL
      FROM {schema}.dead_counts
     WHERE n > 0
       AND ($2::text[] IS NULL OR queue = ANY($2)) AND ($3::text IS NULL OR tenant_id = $3)
     GROUP BY queue, state
    UNION ALL
    SELECT queue, state, count(*), 0, NULL, 0, NULL
      FROM {schema}.jobs
     WHERE state IN ('done', 'cancelled')
       AND finished_at >= (SELECT at FROM since) AND finished_at <= $5::bigint
       AND ($2::text[] IS NULL OR queue = ANY($2)) AND ($3::text IS NULL OR tenant_id = $3)
     GROUP BY queue, state
    UNION ALL
    SELECT queue, state, count(*), 0, NULL, 0, NULL
      FROM {schema}.jobs
     WHERE state NOT IN ('ready', 'delayed', 'running', 'suspended',
                         'done', 'failed', 'dead', 'cancelled')
       AND ($2::text[] IS NULL OR queue = ANY($2)) AND ($3::text IS NULL OR tenant_id = $3)
     GROUP BY queue, state
)
SELECT queue,
       coalesce(sum(due) FILTER (WHERE state IN ('ready', 'delayed')), 0)::bigint AS ready,
       coalesce(sum(n - due) FILTER (WHERE state IN ('ready', 'delayed')), 0)::bigint AS delayed,
       coalesce(sum(n) FILTER (WHERE state = 'running'), 0)::bigint AS running,
       coalesce(sum(n) FILTER (WHERE state = 'suspended'), 0)::bigint AS suspended,
       coalesce(sum(n) FILTER (WHERE state = 'dead'), 0)::bigint AS dead,
       coalesce(sum(n) FILTER (WHERE state = 'failed'), 0)::bigint AS failed,
       coalesce(sum(n) FILTER (WHERE state = 'done'), 0)::bigint AS done,
       coalesce(sum(n) FILTER (WHERE state = 'cancelled'), 0)::bigint AS cancelled,
       greatest($1::bigint - (SELECT at FROM since), 0) AS settled_window_ms,
       coalesce($1::bigint - min(oldest_queued_at) FILTER (WHERE state IN ('ready', 'delayed')), 0)
           AS oldest_ready_ms,
       coalesce(sum(expired) FILTER (WHERE state = 'running'), 0)::bigint AS expired_leases,
       coalesce(sum(due) FILTER (WHERE state = 'suspended'), 0)::bigint AS due_suspended,
       coalesce($1::bigint - min(oldest_due_at) FILTER (WHERE state = 'suspended'), 0)
           AS oldest_due_suspended_ms,
       array_agg(state) AS states
  FROM by_state
 GROUP BY queue;

-- name: cancel
-- Live → cancelled. A running row keeps its token and lease so the holder's next heartbeat
-- hears cancel_requested; any other row drops its token.
WITH target AS (
    SELECT id, state
      FROM {schema}.jobs
     WHERE id = $1 AND ($2::text IS NULL OR tenant_id = $2)
       FOR UPDATE
),
cancelled AS (
    UPDATE {schema}.jobs AS j
       SET state = 'cancelled', cancel_requested = (target.state = 'running'),
           lease_token = CASE WHEN target.state = 'running' THEN j.lease_token END,
           updated_at = $3::bigint, finished_at = $3::bigint
      FROM target
     WHERE j.id = target.id AND target.state IN ('ready', 'delayed', 'running', 'suspended')
    RETURNING j.*
),
logged AS (
    INSERT INTO {schema}.events (job_id, at, kind, actor, tenant_id, data)
    SELECT c.id, $3::bigint, 'cancelled', $4::text, c.tenant_id,
           jsonb_build_object('from', t.state)
      FROM cancelled AS c JOIN target AS t ON t.id = c.id
)
SELECT t.state AS previous_state, c.*
  FROM target AS t LEFT JOIN cancelled AS c ON c.id = t.id;

-- name: retry
-- A row in one of $3 (rules.can_retry: failed, dead, delayed; cancelled when asked) → ready now,
-- attempt 0, same run id. Refused while another live row holds the key (same predicate as the
-- dedupe index): a delayed row holds its own.
WITH target AS (
    SELECT id, state, name, tenant_id, idempotency_key
      FROM {schema}.jobs
     WHERE id = $1 AND ($2::text IS NULL OR tenant_id = $2)
       FOR UPDATE
),
holder AS (
    SELECT live.id
      FROM {schema}.jobs AS live, target
     WHERE live.name = target.name
       AND coalesce(live.tenant_id, '') = coalesce(target.tenant_id, '')
       AND live.idempotency_key = target.idempotency_key
       AND live.state IN ('ready', 'delayed', 'running', 'suspended')
       AND live.id <> target.id
     LIMIT 1
),
requeued AS (
    UPDATE {schema}.jobs AS j
       SET state = 'ready',
           -- rules.retry_transition: a delayed job run now keeps its count (RUN_NOW_STATES)
           attempt = CASE WHEN target.state = 'delayed' THEN j.attempt ELSE 0 END,
           run_at = $4::bigint, queued_at = $4::bigint,
           updated_at = $4::bigint, finished_at = NULL, cancel_requested = false,
           worker_id = NULL, lease_expires_at = NULL, lease_token = NULL
      FROM target
     WHERE j.id = target.id
       AND target.state = ANY($3::text[])
       AND NOT EXISTS (SELECT 1 FROM holder)
    RETURNING j.*
),
logged AS (
    INSERT INTO {schema}.events (job_id, at, kind, actor, tenant_id, data)
    SELECT r.id, $4::bigint, 'requeued', $5::text, r.tenant_id,
           jsonb_build_object('from', t.state)
      FROM requeued AS r JOIN target AS t ON t.id = r.id
)
SELECT t.state AS previous_state, t.name AS target_name, t.idempotency_key AS target_key,
       t.tenant_id AS target_tenant, (SELECT id FROM holder) AS holder_id, r.*,
       (SELECT pg_notify($6::text, '') FROM requeued LIMIT 1) AS woke
  FROM target AS t LEFT JOIN requeued AS r ON r.id = t.id;

-- name: record_event
INSERT INTO {schema}.events (job_id, at, kind, actor, tenant_id, data)
VALUES ($1, $2, $3, $4, $5, $6::jsonb);

-- name: load_steps_many
-- The steps of many runs in one round trip (concurrent callers share it).
SELECT * FROM {schema}.steps WHERE run_id = ANY($1::text[]) ORDER BY started_at, seq;

-- name: save_steps
-- Group commit of step writes: upsert by (run_id, name) for many (job, token, step) at once,
-- each only while its token holds the running job. The batch is one JSON array ($1), as for
-- enqueue. FOR SHARE makes a concurrent re-claim wait for this write (or this write see the
-- re-claim and write nothing). A step not written is missing from the result. The caller never
-- puts one (run_id, name) twice in a batch.
WITH req AS (
    SELECT *
      FROM ROWS FROM (
               jsonb_to_recordset($1::jsonb)
               AS (held_id text, token text, run_id text, name text, job_id text, status text,
                   output jsonb, error text, started_at bigint, finished_at bigint,
                   attempts integer)
           ) WITH ORDINALITY
           AS r(held_id, token, run_id, name, job_id, status, output, error, started_at,
                finished_at, attempts, ord)
),
held AS (
    SELECT req.*
      FROM req
      JOIN {schema}.jobs AS j
        ON j.id = req.held_id AND j.lease_token = req.token AND (j.state = 'running') IS TRUE
     WHERE j.id = ANY(ARRAY(SELECT held_id FROM req))
       FOR SHARE OF j
)
INSERT INTO {schema}.steps AS s (
    run_id, name, job_id, status, output, error, started_at, finished_at, attempts
)
SELECT run_id, name, job_id, status, output, error, started_at, finished_at, attempts
  FROM held
 ORDER BY ord  -- steps keep their callers' order (seq breaks started_at ties)
ON CONFLICT (run_id, name) DO UPDATE
   SET job_id = excluded.job_id, status = excluded.status, output = excluded.output,
       error = excluded.error, started_at = excluded.started_at,
       finished_at = excluded.finished_at, attempts = excluded.attempts
RETURNING s.run_id, s.name;

-- name: acquire_slots
SELECT {schema}.acquire_slots($1, $2::text[], $3::integer[], $4::bigint, $5::bigint);

-- name: release_slots
DELETE FROM {schema}.slots WHERE job_id = $1;

-- name: worker_seen
-- The beat also deletes up to $9 OTHER workers' rows last seen before $8 (engine.presence);
-- SKIP LOCKED: two workers beating at once never wait on each other's cleanup. It answers
-- whether a process follows changes (a live `followers:` lease, $10 the time): only then do
-- this worker's settles NOTIFY, since a NOTIFY serialises committing transactions. Every
-- process that followed changes (an MCP server) named a lease of its own: up to $9 of those
-- that expired before $8 go too, so the check reads the followers of late, not of all time (a
-- follower whose lease went takes it anew at its next refresh).
WITH expired AS (
    DELETE FROM {schema}.workers
     WHERE id IN (
           SELECT id FROM {schema}.workers
            WHERE last_seen_at < $8::bigint AND id <> $1
            LIMIT $9::integer
              FOR UPDATE SKIP LOCKED
     )
),
unfollowed AS (
    DELETE FROM {schema}.leaders
     WHERE name IN (
           SELECT name FROM {schema}.leaders
            WHERE name LIKE 'followers:%' AND expires_at < $8::bigint
            LIMIT $9::integer
              FOR UPDATE SKIP LOCKED
     )
)
INSERT INTO {schema}.workers (
    id, hostname, pid, queues, concurrency, started_at, last_seen_at, caps
)
VALUES ($1, $2, $3, $4::text[], $5, $6, $7, $11::jsonb)
ON CONFLICT (id) DO UPDATE
   SET hostname = excluded.hostname, pid = excluded.pid, queues = excluded.queues,
       concurrency = excluded.concurrency, started_at = excluded.started_at,
       last_seen_at = excluded.last_seen_at, caps = excluded.caps
RETURNING EXISTS (
    SELECT 1 FROM {schema}.leaders
     WHERE name LIKE 'followers:%' AND expires_at > $10::bigint
) AS followed;

-- name: worker_gone
DELETE FROM {schema}.workers WHERE id = $1;

-- name: live_workers
SELECT * FROM {schema}.workers WHERE last_seen_at >= $1 ORDER BY seq;

-- name: backfill_save
INSERT INTO {schema}.backfills (
    run_id, name, checksum, environment, status, app_version, rows_processed, rows_total,
    cursor, job_id, started_at, finished_at, error
)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10, $11, $12, $13)
ON CONFLICT (run_id) DO UPDATE
   SET name = excluded.name, checksum = excluded.checksum,
       environment = excluded.environment, status = excluded.status,
       app_version = excluded.app_version, rows_processed = excluded.rows_processed,
       rows_total = excluded.rows_total, cursor = excluded.cursor, job_id = excluded.job_id,
       started_at = excluded.started_at, finished_at = excluded.finished_at,
       error = excluded.error;

-- name: backfill_runs
-- The general read (any filter may be absent): newest first; LIMIT NULL is no limit.
SELECT *
  FROM {schema}.backfills
 WHERE ($1::text IS NULL OR name = $1)
   AND ($2::text IS NULL OR environment = $2)
   AND ($3::text IS NULL OR status = $3)
   AND ($4::bigint IS NULL OR (started_at, run_id) < ($4::bigint, $5::text))
 ORDER BY started_at DESC, run_id DESC
 LIMIT $6;

-- name: backfill_runs_of
-- One backfill's runs in one environment, newest first: one backward descent of
-- backfills_newest_idx, stopping at the page.
SELECT *
  FROM {schema}.backfills
 WHERE name = $1 AND environment = $2
 ORDER BY started_at DESC, run_id DESC
 LIMIT $3;

-- name: backfill_runs_of_before
SELECT *
  FROM {schema}.backfills
 WHERE name = $1 AND environment = $2 AND (started_at, run_id) < ($3::bigint, $4::text)
 ORDER BY started_at DESC, run_id DESC
 LIMIT $5;

-- name: backfill_status_of
-- The same, of one status (the newest completed run, say): backfills_status_idx.
SELECT *
  FROM {schema}.backfills
 WHERE name = $1 AND environment = $2 AND status = $3
 ORDER BY started_at DESC, run_id DESC
 LIMIT $4;

-- name: backfill_status_of_before
SELECT *
  FROM {schema}.backfills
 WHERE name = $1 AND environment = $2 AND status = $3
   AND (started_at, run_id) < ($4::bigint, $5::text)
 ORDER BY started_at DESC, run_id DESC
 LIMIT $6;

-- name: task_state
SELECT * FROM {schema}.scheduler_state WHERE task = $1;

-- name: task_claim
-- Compare-and-set from $2 (the claimant's read): the row lock makes a second claimant wait and
-- re-check the WHERE against the first one's value, so it claims nothing.
-- A claim clears the task's failure: it fires again.
UPDATE {schema}.scheduler_state
   SET last_fired_at = $3, updated_at = $4, failure = NULL
 WHERE task = $1 AND last_fired_at = $2
RETURNING task;

-- name: task_claim_first
-- As task_claim, from no state: the row is new, or its last fired occurrence is NULL.
INSERT INTO {schema}.scheduler_state AS s (task, last_fired_at, updated_at)
VALUES ($1, $2, $3)
ON CONFLICT (task) DO UPDATE
   SET last_fired_at = excluded.last_fired_at, updated_at = excluded.updated_at, failure = NULL
 WHERE s.last_fired_at IS NULL
RETURNING task;

-- name: task_failure
-- A failed round's failure, beside the last fired occurrence (none for a new row).
INSERT INTO {schema}.scheduler_state AS s (task, last_fired_at, updated_at, failure)
VALUES ($1, NULL, $2, $3::jsonb)
ON CONFLICT (task) DO UPDATE
   SET updated_at = excluded.updated_at, failure = excluded.failure;

-- name: outbox_stage
INSERT INTO {schema}.outbox (id, staged_at, request)
SELECT id, $1::bigint, request::jsonb
  FROM unnest($2::text[], $3::text[]) AS r(id, request);

-- name: outbox_claim
WITH free AS (
    SELECT id
      FROM {schema}.outbox
     WHERE published_at IS NULL AND (claim_expires_at IS NULL OR claim_expires_at <= $1::bigint)
     ORDER BY staged_at, id
     LIMIT $2
       FOR UPDATE SKIP LOCKED
)
UPDATE {schema}.outbox AS o
   SET claimed_by = $3::text, claim_expires_at = $1 + $4::bigint
  FROM free
 WHERE o.id = free.id
RETURNING o.*;

-- name: outbox_owned
-- Inside publish's transaction: the rows this token still holds, locked until commit.
SELECT *
  FROM {schema}.outbox
 WHERE id = ANY($1::text[]) AND claimed_by = $2 AND published_at IS NULL
   FOR UPDATE;

-- name: outbox_mark_published
-- First writer wins: published_at is stamped once, never rewritten.
UPDATE {schema}.outbox AS o
   SET published_at = $1::bigint, job_id = p.job_id
  FROM unnest($2::text[], $3::text[]) AS p(id, job_id)
 WHERE o.id = p.id AND o.published_at IS NULL;

-- name: outbox_waiting
-- Both on outbox_unpublished_idx, which holds only the rows that wait: a bounded count, and the
-- oldest as the index's first entry.
SELECT (SELECT count(*) FROM (SELECT 1 FROM {schema}.outbox WHERE published_at IS NULL
                              LIMIT $1) AS w) AS count,
       (SELECT min(staged_at) FROM {schema}.outbox WHERE published_at IS NULL) AS oldest;

-- name: outbox_release
UPDATE {schema}.outbox
   SET claimed_by = NULL, claim_expires_at = NULL
 WHERE id = ANY($1::text[]) AND claimed_by = $2 AND published_at IS NULL;

-- name: outbox_forget_published
-- Published rows past their keep, oldest first on outbox_published_idx (a published row is
-- never written again, so no lock is waited for). `= ANY(ARRAY(...))` as forget_jobless_events.
DELETE FROM {schema}.outbox
 WHERE id = ANY(ARRAY(SELECT id FROM {schema}.outbox
                       WHERE published_at < $1::bigint
                       ORDER BY published_at
                       LIMIT $2));

-- --- retention: pruning settled history (engine/retention.py), named leader leases -------------

-- name: prune_jobs
-- Each rule (state, name or NULL, cutoff) walks jobs_settled_idx oldest first; the literal
-- settled predicate lets the planner use that partial index. A NULL-name rule skips the names
-- that have rules of their own ($4). SKIP LOCKED: two pruners never wait on, take, or count one
-- row twice, and a row some other transaction holds (a retry) is left for the next batch. The
-- steps, events and slots of the deleted jobs go in the same statement. The dead/failed counts
-- the delete moves are locked first, in key order (schema.sql, dead_counts).
WITH rules AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]) AS r(state, name, cutoff)
), doomed AS (
    SELECT j.id, j.run_id, j.queue, j.tenant_id, j.state
      FROM rules r
     CROSS JOIN LATERAL (
        SELECT id, run_id, finished_at, queue, tenant_id, state
          FROM {schema}.jobs j
         WHERE j.state IN ('done', 'failed', 'dead', 'cancelled')
           AND j.state = r.state
           AND j.finished_at < r.cutoff
           AND CASE WHEN r.name IS NULL THEN j.name <> ALL($4::text[]) ELSE j.name = r.name END
           AND ($5::text IS NULL OR j.tenant_id = $5)
         ORDER BY j.finished_at, j.id
         LIMIT $6
         FOR UPDATE SKIP LOCKED
     ) j
     ORDER BY j.finished_at, j.id
     LIMIT $6
), counted AS (
    SELECT 1
      FROM {schema}.dead_counts c
      JOIN (SELECT DISTINCT queue, coalesce(tenant_id, '') AS tenant_id, state
              FROM doomed
             WHERE state IN ('dead', 'failed')) AS g
        ON c.queue = g.queue AND c.tenant_id = g.tenant_id AND c.state = g.state
     ORDER BY c.queue, c.tenant_id, c.state
       FOR UPDATE OF c
), gone AS (
    DELETE FROM {schema}.jobs j
     USING doomed d
     WHERE j.id = d.id AND j.state IN ('done', 'failed', 'dead', 'cancelled')
       -- Always true: it runs `counted` before any count is moved (triggers fire at the end).
       AND (SELECT count(*) FROM counted) >= 0
    RETURNING j.id, j.run_id, j.state, j.queue
), steps_gone AS (
    DELETE FROM {schema}.steps s USING gone g WHERE s.run_id = g.run_id
), reruns_gone AS (
    -- The earlier runs of a rerun job (engine/reruns.py) and their steps go with it.
    DELETE FROM {schema}.reruns r USING gone g WHERE r.job_id = g.id
    RETURNING r.previous_run_id
), earlier_steps_gone AS (
    DELETE FROM {schema}.steps s USING reruns_gone r WHERE s.run_id = r.previous_run_id
), events_gone AS (
    DELETE FROM {schema}.events e USING gone g WHERE e.job_id = g.id
), slots_gone AS (
    DELETE FROM {schema}.slots s USING gone g WHERE s.job_id = g.id
)
SELECT state, queue, count(*) AS n FROM gone GROUP BY state, queue;

-- name: prune_counts
-- What prune_jobs would take, without its limit: one range of jobs_settled_idx per rule.
WITH rules AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]) AS r(state, name, cutoff)
)
SELECT j.state, j.queue, count(*) AS n
  FROM rules r
  JOIN {schema}.jobs j
    ON j.state IN ('done', 'failed', 'dead', 'cancelled')
   AND j.state = r.state
   AND j.finished_at < r.cutoff
   AND CASE WHEN r.name IS NULL THEN j.name <> ALL($4::text[]) ELSE j.name = r.name END
   AND ($5::text IS NULL OR j.tenant_id = $5)
 GROUP BY j.state, j.queue;

-- name: count_jobless_events
-- Events of no job recorded before $1: one range of events_jobless_idx.
SELECT count(*) FROM {schema}.events WHERE job_id IS NULL AND at < $1::bigint;

-- name: forget_jobless_events
-- Events of no job past the audit retention, oldest first on events_jobless_idx (an event is
-- never written again, so no lock is waited for). `= ANY(ARRAY(...))`, not `IN (...)`: the
-- generic plan, which cannot see the limit, hash-joined a scan of every event to the batch.
DELETE FROM {schema}.events
 WHERE id = ANY(ARRAY(SELECT id FROM {schema}.events
                       WHERE job_id IS NULL AND at < $1::bigint
                       ORDER BY at, id
                       LIMIT $2));

-- name: lead
-- Take the lease row `name` when it is free, expired, or already ours. The row lock taken by
-- ON CONFLICT makes two contenders queue, and the second re-reads the first's lease.
INSERT INTO {schema}.leaders AS l (name, holder, expires_at)
VALUES ($1, $2, $3::bigint + $4::bigint)
ON CONFLICT (name) DO UPDATE
   SET holder = excluded.holder, expires_at = excluded.expires_at
 WHERE l.holder = excluded.holder OR l.expires_at <= $3::bigint
RETURNING holder;

-- name: lead_many
-- `lead` for many names in one statement, taken in name order so two contenders lock their rows
-- in the same order (no deadlock); answers the names held.
INSERT INTO {schema}.leaders AS l (name, holder, expires_at)
SELECT n, $2, $3::bigint + $4::bigint FROM unnest($1::text[]) AS n ORDER BY n
ON CONFLICT (name) DO UPDATE
   SET holder = excluded.holder, expires_at = excluded.expires_at
 WHERE l.holder = excluded.holder OR l.expires_at <= $3::bigint
RETURNING name;

-- name: pause
-- Store a pause unless one is in force; answer the pause in force and whether it was there
-- already (`inserted` false: the first pause, its actor and time, stay).
WITH ins AS (
    INSERT INTO {schema}.pauses (kind, name, paused_by, paused_at, reason)
    VALUES ($1::text, $2::text, $3::text, $4::bigint, $5::text)
    ON CONFLICT (kind, name) DO NOTHING
    RETURNING kind, name, paused_by, paused_at, reason
)
SELECT kind, name, paused_by, paused_at, reason, true AS inserted FROM ins
UNION ALL
SELECT kind, name, paused_by, paused_at, reason, false AS inserted
  FROM {schema}.pauses
 WHERE kind = $1 AND name = $2 AND NOT EXISTS (SELECT 1 FROM ins);

-- name: resume
-- Lift a pause; answer it (no row: none was in force). The wake-up channel ($3) is notified
-- when one was lifted, so idle workers in every process claim what it held back now.
WITH gone AS (
    DELETE FROM {schema}.pauses WHERE kind = $1::text AND name = $2::text
    RETURNING kind, name, paused_by, paused_at, reason
)
SELECT kind, name, paused_by, paused_at, reason, pg_notify($3::text, '') AS notified FROM gone;

-- name: pauses
SELECT kind, name, paused_by, paused_at, reason FROM {schema}.pauses ORDER BY kind, name;
