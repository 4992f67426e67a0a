"""Every statement the SQLite driver runs, parameterized. Schema DDL lives in migrations/*.sql.

The dedupe rule (rule 2) is spelled in three places that must agree: the unique index in
`0001_initial.sql`, the `ON CONFLICT` target of `INSERT_JOB`, and `FIND_LIVE`. The two fragments
below are the single spelling the last two use, and a test checks the index against them.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine import paging, rules
from engine.drivers.sqlite.codec import (
    BACKFILL_COLUMNS,
    EVENT_COLUMNS,
    JOB_SELECT,
    OUTBOX_COLUMNS,
    STEP_COLUMNS,
    WORKER_COLUMNS,
)
from schemas.states import JOB_STATES, SETTLED_STATES, JobState
from schemas.stats import QueueStats


def _listed(states: tuple[str, ...]) -> str:
    return ", ".join(f"'{state}'" for state in states)  # constants, not values


def state_in(states: Sequence[str]) -> str:
    """`state IN (…)` spelled as equalities, as the partial indexes' predicates are (0017):
    SQLite evaluates an IN list of three or more through a temporary b-tree it builds anew
    for every statement, a cost each write of a row paid once per index."""
    return "(" + " OR ".join(f"state = '{state}'" for state in states) + ")"


def state_not_in(states: Sequence[str]) -> str:
    """`state NOT IN (…)` spelled as inequalities, for the reason `state_in` gives."""
    return "(" + " AND ".join(f"state != '{state}'" for state in states) + ")"


def is_number(column: str) -> str:
    """Whether `column` holds a number: SQLite keeps another program's text as it was given."""
    return f"typeof({column}) IN ('integer', 'real')"


def lease_over(column: str) -> str:
    """The lease whose expiry is `column` ran out by :now, or holds no number (another
    program's value), which is no lease: text sorts after every number, so it would hold
    for ever."""
    return f"(NOT {is_number(column)} OR {column} <= :now)"


# rules.dedupe_key and rules.LIVE_STATES in SQL (tests/sqlite/test_rules_sql.py pins them).
DEDUPE_KEY = "name, coalesce(tenant_id, ''), idempotency_key"
LIVE_PREDICATE = state_in(rules.LIVE_STATES)
WAITING_PREDICATE = state_in(rules.WAITING_STATES)

# --- jobs ---------------------------------------------------------------------------------------

_INSERT_COLUMNS = (
    "id, run_id, name, queue, tenant_id, idempotency_key, input, state, attempt, max_attempts, "
    "run_at, queued_at, created_at, updated_at, timeout_ms, traceparent, enqueued_by, priority"
)
# One row; whether it went in is the cursor's rowcount (1 or 0). No RETURNING: SQLite gathers
# RETURNING rows in a temporary b-tree, whose page cache is allocated and freed every statement.
INSERT_JOB = f"""
INSERT INTO mcp_jobs_jobs ({_INSERT_COLUMNS})
VALUES (:id, :run_id, :name, :queue, :tenant_id, :idempotency_key, :input, :state, 0,
        :max_attempts, :run_at, max(:run_at, :now), :now, :now, :timeout_ms, :traceparent,
        :enqueued_by, :priority)
ON CONFLICT ({DEDUPE_KEY}) WHERE {LIVE_PREDICATE} DO NOTHING
"""

# INSERT_JOB for a whole batch in one statement: `:rows` is a JSON array of ENQUEUE_ROW arrays,
# inserted in array order (`key`), so a later item meets an earlier one's live key exactly as
# it would one statement each; RETURNING names the rows that went in. (`WHERE true` tells
# SQLite's parser that ON CONFLICT is the upsert's, not a join's.)
ENQUEUE_ROW = (
    "id",
    "run_id",
    "name",
    "queue",
    "tenant_id",
    "idempotency_key",
    "input",
    "state",
    "max_attempts",
    "run_at",
    "now",
    "timeout_ms",
    "traceparent",
    "enqueued_by",
    "priority",
)


def _cell(name: str) -> str:
    return f"json_extract(value, '$[{ENQUEUE_ROW.index(name)}]')"


INSERT_JOBS = f"""
INSERT INTO mcp_jobs_jobs ({_INSERT_COLUMNS})
SELECT {", ".join(_cell(c) for c in ENQUEUE_ROW[:8])}, 0, {_cell("max_attempts")},
       {_cell("run_at")}, max({_cell("run_at")}, {_cell("now")}), {_cell("now")}, {_cell("now")},
       {", ".join(_cell(c) for c in ENQUEUE_ROW[11:])}
FROM json_each(:rows) WHERE true ORDER BY key
ON CONFLICT ({DEDUPE_KEY}) WHERE {LIVE_PREDICATE} DO NOTHING
RETURNING id
"""

FIND_LIVE = f"""
SELECT id, run_id, state FROM mcp_jobs_jobs
WHERE name = :name AND coalesce(tenant_id, '') = coalesce(:tenant_id, '')
  AND idempotency_key = :idempotency_key AND {LIVE_PREDICATE}
"""

# engine.pauses.is_held negated: two probes of the pauses table's primary key per candidate row,
# nothing at all to read while no pause is stored.
NOT_PAUSED = """NOT EXISTS (SELECT 1 FROM mcp_jobs_pauses AS p
                            WHERE p.kind = 'queue' AND p.name = mcp_jobs_jobs.queue)
              AND NOT EXISTS (SELECT 1 FROM mcp_jobs_pauses AS p
                              WHERE p.kind = 'job' AND p.name = mcp_jobs_jobs.name)"""

# rules.is_excluded negated: the queues, names and tenants (JSON arrays, NULL for none) whose cap
# the claiming worker found full. A job with no tenant is under no tenant's cap.
NOT_EXCLUDED = """(:excluded_queues IS NULL
               OR queue NOT IN (SELECT value FROM json_each(:excluded_queues)))
              AND (:excluded_names IS NULL
                   OR name NOT IN (SELECT value FROM json_each(:excluded_names)))
              AND (:excluded_tenants IS NULL OR tenant_id IS NULL
                   OR tenant_id NOT IN (SELECT value FROM json_each(:excluded_tenants)))"""

# rules.claim_rank in SQL: the expression the due index (schema.sql) is built on, spelled alike.
CLAIM_RANK = f"run_at - priority * {rules.PRIORITY_STEP_MS}"

# rules.is_claimable and rules.claim_transition in SQL, pinned like the rest. Index-backed
# arms (due waiting rows; running rows whose lease ran out), each cut to the limit, then merged
# in the one claim_rank order the memory driver sorts by. The waiting arm bounds the index walk
# by the rank and filters by run_at: what it skips is only higher-priority work due within its
# priority's head start.
#
# A time another program wrote as text (or a blob) is no time: such a row is due and its lease
# is over, and the claim settles it dead as a row it cannot read (damage.burial), where it would
# wait or run for ever (both sort after every number). A lapsed lease is then two ranges of the
# leased index: the numeric one is read first (LAPSED) and the text one is CLAIM's own arm (an OR
# of them is planned as a walk of every live row). `take_over` false (after this process found
# the file locked: engine/drivers/lease_grace.py) reads no LAPSED, and so leaves the leases that
# ran out to their holders; a time written as text is no lease to spare.
_CLAIM_FILTER = f"""(:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues)))
              AND {NOT_PAUSED} AND {NOT_EXCLUDED}"""

# The leases the claim may take over: running rows whose lease ran out, the first :limit in
# claim order, read just before CLAIM in its write transaction. Their values as they stand are
# what the event of each attempt lost reports (engine.lease_expiry), and CLAIM's RETURNING (the
# rows as updated) no longer has them; CLAIM takes these rows by id (`:lapsed`, a JSON array), so
# the leased index is walked once.
LAPSED = f"""
SELECT id, attempt, worker_id, lease_expires_at FROM mcp_jobs_jobs
WHERE state = 'running' AND lease_expires_at <= :now AND {_CLAIM_FILTER}
ORDER BY {CLAIM_RANK}, id LIMIT :limit
"""
_CLAIM_ARMS = "\n        UNION ALL\n".join(
    f"""        SELECT id, rank FROM (
            SELECT id, {CLAIM_RANK} AS rank FROM mcp_jobs_jobs
            WHERE {where} AND {_CLAIM_FILTER}
            ORDER BY rank, id LIMIT :limit)"""
    for where in (
        f"{WAITING_PREDICATE} AND {CLAIM_RANK} <= :now"
        f" AND (run_at <= :now OR NOT {is_number('run_at')})",
        "state = 'running' AND id IN (SELECT value FROM json_each(:lapsed))",
        "state = 'running' AND lease_expires_at >= ''",
    )
)
CLAIM = f"""
UPDATE mcp_jobs_jobs
SET state = 'running', attempt = attempt + 1, worker_id = :worker_id,
    token = lower(hex(randomblob(16))), lease_expires_at = :expires, cancel_requested = 0,
    updated_at = :now
WHERE id IN (
    SELECT id FROM (
{_CLAIM_ARMS}
    )
    ORDER BY rank, id LIMIT :limit)
RETURNING {JOB_SELECT}, token,
    attempt > 1 OR EXISTS (SELECT 1 FROM mcp_jobs_steps AS s WHERE s.run_id = mcp_jobs_jobs.run_id)
"""

SELECT_HELD = f"SELECT {JOB_SELECT}, token FROM mcp_jobs_jobs WHERE id = :id"

# rules.ack_transition in SQL (tests/sqlite/test_rules_sql.py pins the two together): one job
# (ACK), or a batch (ACK_MANY: `:items` a JSON array of [id, token, output JSON text or null];
# RETURNING names the jobs whose fence held). Both spell the same SET.
_ACK_SET = """state = 'done', updated_at = :now, finished_at = :now,
    worker_id = NULL, lease_expires_at = NULL, token = NULL, last_error = NULL"""
ACK = f"""
UPDATE mcp_jobs_jobs
SET {_ACK_SET}, output = coalesce(:output, output)
WHERE id = :id AND token = :token AND state = 'running'
"""
ACK_MANY = f"""
UPDATE mcp_jobs_jobs
SET {_ACK_SET}, output = coalesce(item.output, mcp_jobs_jobs.output)
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS token,
             json_extract(value, '$[2]') AS output
      FROM json_each(:items)) AS item
WHERE mcp_jobs_jobs.id = item.id AND mcp_jobs_jobs.token = item.token
  AND mcp_jobs_jobs.state = 'running'
RETURNING mcp_jobs_jobs.id
"""

EXTEND_LEASE = "UPDATE mcp_jobs_jobs SET lease_expires_at = :expires WHERE id = :id"

# Writes back a record computed in Python (nack, cancel, retry): every column those change.
UPDATE_JOB = """
UPDATE mcp_jobs_jobs
SET state = :state, attempt = :attempt, run_at = :run_at, queued_at = :queued_at,
    updated_at = :updated_at, finished_at = :finished_at, last_error = :last_error,
    worker_id = :worker_id, lease_expires_at = :lease_expires_at,
    cancel_requested = :cancel_requested, token = :token
WHERE id = :id
"""

# engine.drivers.damage.burial: a claimed row that cannot be read, settled without reading it.
BURY = """
UPDATE mcp_jobs_jobs
SET state = :state, updated_at = :now, finished_at = :finished_at, last_error = :last_error,
    worker_id = NULL, lease_expires_at = NULL, token = NULL
WHERE id = :id AND token = :token
"""

SETTLED_PREDICATE = state_in(SETTLED_STATES)
UNKNOWN_PREDICATE = state_not_in(JOB_STATES)
# Newest first, the whole table: the primary key walked backwards.
LIST_ALL = f"""
SELECT {JOB_SELECT} FROM mcp_jobs_jobs
WHERE (:cursor IS NULL OR id < :cursor)
ORDER BY id DESC
LIMIT :limit
"""


def list_jobs_sql(
    states: Sequence[JobState] | None,
    name: str | None,
    queue: str | None,
    tenant_id: str | None,
    cursor: str | None,
) -> str:
    """A filtered list: one arm over the live states it wants (the live index), one per settled
    state (the settled index its filter leads, which ends with the other two filters, so a second
    filter is tested before the row is read), each cut to the page, merged by id. Each arm
    spells its index's predicate exactly, as SQLite needs to use a partial index. Only the
    filters given appear, so the plan fits them. Parameters: :name :queue :tenant_id :cursor
    :limit."""
    terms = [
        term
        for given, term in (
            (name, "name = :name"),
            (queue, "queue = :queue"),
            (tenant_id, "tenant_id = :tenant_id"),
            (cursor, "id < :cursor"),
        )
        if given is not None
    ]
    live, settled = paging.list_arms(states)
    # Named, not left to the planner: with statistics that show one queue or one state holding
    # most rows, SQLite would walk another index in id order and filter, which costs the
    # history when the filter matches nothing.
    leading = next(
        (
            f"mcp_jobs_jobs_settled_{column}"
            for column, given in (("name", name), ("queue", queue), ("tenant", tenant_id))
            if given is not None
        ),
        "mcp_jobs_jobs_settled_state",
    )
    wheres: list[tuple[str, str]] = []
    # The narrower state term first: SQLite constrains the index by the first term on a column.
    if live:
        narrower = "" if len(live) == len(rules.LIVE_STATES) else f"{state_in(live)} AND "
        wheres.append(("mcp_jobs_jobs_live", narrower + LIVE_PREDICATE))
    wheres.extend((leading, f"state = '{state}' AND {SETTLED_PREDICATE}") for state in settled)
    arms = [
        f"SELECT * FROM (SELECT {JOB_SELECT} FROM mcp_jobs_jobs INDEXED BY {index} "
        f"WHERE {' AND '.join([where, *terms])} ORDER BY id DESC LIMIT :limit)"
        for index, where in wheres
    ]
    if not arms:
        return f"SELECT {JOB_SELECT} FROM mcp_jobs_jobs WHERE 0"
    return "\nUNION ALL\n".join(arms) + "\nORDER BY id DESC LIMIT :limit"


# rules.queue_stats in SQL (rule 7), pinned like the rest: a waiting row counts as ready as
# rules.counts_ready says (due, or a shed: `ready`, queued by now, its run_at maybe later, its age
# measured from `queued_at`), and as delayed otherwise. What it reads costs what is live: the
# live rows (live index), every dead and failed row, the done and cancelled rows of the recent
# window (rules.recent_settled_since: since :recent, or from the :cap-th newest row of a state
# that has more than :cap, found by a backward walk of the settled index, over every queue and
# tenant, that stops one row later), and rows of a state this build does not know (an
# always-empty index).
_KNOWN = _listed(JOB_STATES)
_READY = (
    "((state = 'ready' AND (run_at <= :now OR queued_at <= :now))"
    " OR (state = 'delayed' AND run_at <= :now))"
)
_STATS_FILTER = (
    "(:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues)))"
    " AND (:tenant IS NULL OR tenant_id = :tenant)"
)
# Every arm yields these columns; `n` is how many jobs a row stands for: 1 for a job row, the
# count of a dead/failed counts row (mcp_jobs_dead_counts, kept by triggers). The counts fold a
# null tenant to '', and a tenant is never '' (bounds.text).
_STATS_COLUMNS = "queue, state, run_at, queued_at, lease_expires_at, 1 AS n"
_COUNTED = _listed(tuple(s for s in SETTLED_STATES if s not in rules.RECENT_SETTLED_STATES))
_RECENT = _listed(rules.RECENT_SETTLED_STATES)
# Per recent state, its :cap-th newest finish time when it has more than :cap rows (else NULL):
# rules.recent_settled_edge.
_EDGES = "\n    UNION ALL\n".join(
    f"""    SELECT CASE WHEN count(*) = 2 THEN max(finished_at) END AS at FROM (
        SELECT finished_at FROM mcp_jobs_jobs INDEXED BY mcp_jobs_jobs_settled
        WHERE state = '{state}' AND {SETTLED_PREDICATE} AND finished_at >= :recent
        ORDER BY finished_at DESC LIMIT 2 OFFSET :cap - 1)"""
    for state in rules.RECENT_SETTLED_STATES
)
STATS = f"""
WITH since AS (
    SELECT max(:recent, coalesce(max(at), :recent)) AS at FROM (
{_EDGES}
    )
)
SELECT queue,
       sum({_READY}),
       sum(state IN ('ready', 'delayed') AND NOT {_READY}),
       sum(state = 'running'),
       sum(state = 'suspended'),
       sum(CASE WHEN state = 'dead' THEN n ELSE 0 END),
       sum(CASE WHEN state = 'failed' THEN n ELSE 0 END),
       sum(state = 'done'),
       sum(state = 'cancelled'),
       max(:now - (SELECT at FROM since), 0),
       coalesce(max(CASE WHEN {_READY} AND queued_at <= :now THEN :now - queued_at END), 0),
       sum(state = 'running' AND {lease_over("lease_expires_at")}),
       sum(state = 'suspended' AND run_at <= :now),
       coalesce(max(CASE WHEN state = 'suspended' AND run_at <= :now THEN :now - run_at END), 0),
       -- a state this build does not know: the caller refuses it by name, as on decode
       max(CASE WHEN state NOT IN ({_KNOWN}) THEN state END)
FROM (
    SELECT {_STATS_COLUMNS} FROM mcp_jobs_jobs INDEXED BY mcp_jobs_jobs_live
    WHERE {LIVE_PREDICATE} AND {_STATS_FILTER}
    UNION ALL
    SELECT queue, state, NULL, NULL, NULL, n FROM mcp_jobs_dead_counts
    WHERE n > 0 AND state IN ({_COUNTED}) AND {_STATS_FILTER}
    UNION ALL
    SELECT {_STATS_COLUMNS} FROM mcp_jobs_jobs INDEXED BY mcp_jobs_jobs_settled
    WHERE state IN ({_RECENT}) AND {SETTLED_PREDICATE}
      AND finished_at >= (SELECT at FROM since) AND {_STATS_FILTER}
    UNION ALL
    SELECT {_STATS_COLUMNS} FROM mcp_jobs_jobs INDEXED BY mcp_jobs_jobs_unknown_state
    WHERE {UNKNOWN_PREDICATE} AND {_STATS_FILTER}
)
GROUP BY queue
ORDER BY queue
"""
# The QueueStats fields the columns above fill, in their order (every field but `queue`).
STATS_FIELDS = tuple(name for name in QueueStats.model_fields if name != "queue")

# --- events -------------------------------------------------------------------------------------

INSERT_EVENT = """
INSERT INTO mcp_jobs_events (job_id, at, kind, actor, tenant_id, data)
VALUES (:job_id, :at, :kind, :actor, :tenant_id, :data)
"""
SELECT_EVENTS = f"SELECT {EVENT_COLUMNS} FROM mcp_jobs_events WHERE job_id = :job_id ORDER BY seq"
# A trace's page of events: the newest :limit before :before (a seq; NULL for the newest).
PAGE_EVENTS = f"""
SELECT {EVENT_COLUMNS}, seq FROM mcp_jobs_events
WHERE job_id = :job_id AND seq < coalesce(:before, 9223372036854775807)
ORDER BY seq DESC LIMIT :limit
"""
COUNT_EVENTS = "SELECT count(*) FROM mcp_jobs_events WHERE job_id = :job_id"

# --- steps --------------------------------------------------------------------------------------

# Ties in started_at keep first-save order: an upsert keeps the row's rowid.
SELECT_STEPS = (
    f"SELECT {STEP_COLUMNS} FROM mcp_jobs_steps WHERE run_id = :run_id ORDER BY started_at, rowid"
)
# A trace's page of steps: the newest :limit before (:started_at, :pos) in start order (rowid
# breaks ties); NULLs for the newest. The run-order index serves both the range and the order.
PAGE_STEPS = f"""
SELECT {STEP_COLUMNS}, rowid FROM mcp_jobs_steps
WHERE run_id = :run_id
  AND (started_at, rowid) < (coalesce(:started_at, 9223372036854775807),
                             coalesce(:pos, 9223372036854775807))
ORDER BY started_at DESC, rowid DESC LIMIT :limit
"""
COUNT_STEPS = "SELECT count(*) FROM mcp_jobs_steps WHERE run_id = :run_id"
UPSERT_STEP = """
INSERT INTO mcp_jobs_steps
    (job_id, run_id, name, status, output, error, started_at, finished_at, attempts)
VALUES (:job_id, :run_id, :name, :status, :output, :error, :started_at, :finished_at, :attempts)
ON CONFLICT (run_id, name) DO UPDATE SET
    job_id = excluded.job_id, status = excluded.status, output = excluded.output,
    error = excluded.error, started_at = excluded.started_at,
    finished_at = excluded.finished_at, attempts = excluded.attempts
"""
HOLDS_RUNNING = (
    "SELECT 1 FROM mcp_jobs_jobs WHERE id = :id AND token = :token AND state = 'running'"
)

# --- limiter slots ------------------------------------------------------------------------------

# A holder whose expiry another program overwrote holds nothing (`lease_over`).
COUNT_SLOTS = f"""
SELECT count(*) FROM mcp_jobs_leases
WHERE key = :key AND NOT {lease_over("expires_at")} AND job_id != :job_id
"""
UPSERT_SLOT = """
INSERT INTO mcp_jobs_leases (key, job_id, expires_at) VALUES (:key, :job_id, :expires_at)
ON CONFLICT (key, job_id) DO UPDATE SET expires_at = excluded.expires_at
"""
RELEASE_SLOTS = "DELETE FROM mcp_jobs_leases WHERE job_id = :job_id"
RELEASE_SLOTS_MANY = (
    "DELETE FROM mcp_jobs_leases WHERE job_id IN (SELECT value FROM json_each(:job_ids))"
)
EXTEND_SLOTS = "UPDATE mcp_jobs_leases SET expires_at = :expires WHERE job_id = :id"

# --- workers ------------------------------------------------------------------------------------

UPSERT_WORKER = """
INSERT INTO mcp_jobs_workers (
    id, hostname, pid, queues, concurrency, started_at, last_seen_at, caps
)
VALUES (:id, :hostname, :pid, :queues, :concurrency, :started_at, :last_seen_at, :caps)
ON CONFLICT (id) DO UPDATE SET
    hostname = excluded.hostname, pid = excluded.pid, queues = excluded.queues,
    concurrency = excluded.concurrency, started_at = excluded.started_at,
    last_seen_at = excluded.last_seen_at, caps = excluded.caps
"""
DELETE_WORKER = "DELETE FROM mcp_jobs_workers WHERE id = :id"
EXPIRE_WORKERS = """
DELETE FROM mcp_jobs_workers WHERE rowid IN (
    SELECT rowid FROM mcp_jobs_workers WHERE last_seen_at < :before AND id <> :id LIMIT :limit
)
"""
LIVE_WORKERS = f"""
SELECT {WORKER_COLUMNS} FROM mcp_jobs_workers WHERE last_seen_at >= :since ORDER BY rowid
"""

# --- backfill ledger ----------------------------------------------------------------------------

UPSERT_BACKFILL = f"""
INSERT INTO mcp_jobs_backfills ({BACKFILL_COLUMNS})
VALUES (:run_id, :name, :checksum, :environment, :status, :app_version, :rows_processed,
        :rows_total, :cursor, :job_id, :started_at, :finished_at, :error)
ON CONFLICT (run_id) DO UPDATE SET
    name = excluded.name, checksum = excluded.checksum, environment = excluded.environment,
    status = excluded.status, app_version = excluded.app_version,
    rows_processed = excluded.rows_processed, rows_total = excluded.rows_total,
    cursor = excluded.cursor, job_id = excluded.job_id, started_at = excluded.started_at,
    finished_at = excluded.finished_at, error = excluded.error
"""


def select_backfills_sql(
    name: bool, environment: bool, status: bool, before: bool, limit: bool
) -> str:
    """Ledger rows newest first, with only the filters given (each flag says one is), so the
    plan fits them. With one name in one environment the page is one descent of an index that
    holds the order — `mcp_jobs_backfills_newest`, or `mcp_jobs_backfills_status` for one
    status — named, as the job lists name theirs. Parameters: :name :environment :status
    :before_at :before_id :limit."""
    terms = [
        term
        for given, term in (
            (name, "name = :name"),
            (environment, "environment = :environment"),
            (status, "status = :status"),
            (before, "(started_at, run_id) < (:before_at, :before_id)"),
        )
        if given
    ]
    index = ""
    if name and environment:
        which = "status" if status else "newest"
        index = f" INDEXED BY mcp_jobs_backfills_{which}"
    where = f"WHERE {' AND '.join(terms)}" if terms else ""
    return (
        f"SELECT {BACKFILL_COLUMNS} FROM mcp_jobs_backfills{index} {where} "
        f"ORDER BY started_at DESC, run_id DESC{' LIMIT :limit' if limit else ''}"
    )


# --- scheduler ----------------------------------------------------------------------------------

SELECT_TASK = (
    "SELECT task, last_fired_at, updated_at, failure FROM mcp_jobs_scheduler_state"
    " WHERE task = :task"
)
# A claim compared in the same transaction (ledgers.task_claim): it may move backwards, and
# it clears the task's failure (the task fires again).
TASK_CLAIMED = """
INSERT INTO mcp_jobs_scheduler_state (task, last_fired_at, updated_at)
VALUES (:task, :occurrence, :now)
ON CONFLICT (task) DO UPDATE SET
    last_fired_at = excluded.last_fired_at, updated_at = excluded.updated_at, failure = NULL
"""
# A failed round's failure, beside the last fired occurrence (none for a new row).
TASK_FAILURE = """
INSERT INTO mcp_jobs_scheduler_state (task, last_fired_at, updated_at, failure)
VALUES (:task, NULL, :now, :failure)
ON CONFLICT (task) DO UPDATE SET updated_at = excluded.updated_at, failure = excluded.failure
"""

# --- outbox -------------------------------------------------------------------------------------

STAGE = """
INSERT INTO mcp_jobs_outbox (id, staged_at, request) VALUES (:id, :staged_at, :request)
"""
# (staged_at, id) is a total order: rows staged in one transaction share staged_at.
OUTBOX_CLAIM = f"""
UPDATE mcp_jobs_outbox SET claimed_by = :token, claim_expires_at = :expires
WHERE id IN (
    SELECT id FROM mcp_jobs_outbox
    WHERE published_at IS NULL AND (claim_expires_at IS NULL OR claim_expires_at <= :now)
    ORDER BY staged_at, id LIMIT :limit)
RETURNING {OUTBOX_COLUMNS}
"""
OUTBOX_OWNED = f"""
SELECT {OUTBOX_COLUMNS} FROM mcp_jobs_outbox
WHERE id = :id AND claimed_by = :token AND published_at IS NULL
"""
OUTBOX_PUBLISHED = """
UPDATE mcp_jobs_outbox SET published_at = :now, job_id = :job_id
WHERE id = :id AND published_at IS NULL
"""
OUTBOX_RELEASE = """
UPDATE mcp_jobs_outbox SET claimed_by = NULL, claim_expires_at = NULL
WHERE id = :id AND claimed_by = :token AND published_at IS NULL
"""
# Both on mcp_jobs_outbox_unpublished, which holds only the rows that wait: a bounded count, and
# the oldest as the index's first entry.
OUTBOX_WAITING = """
SELECT (SELECT count(*) FROM (SELECT 1 FROM mcp_jobs_outbox WHERE published_at IS NULL
                              LIMIT :limit)),
       (SELECT min(staged_at) FROM mcp_jobs_outbox WHERE published_at IS NULL)
"""
# Published rows past their keep, oldest first on mcp_jobs_outbox_published.
OUTBOX_FORGET_PUBLISHED = """
DELETE FROM mcp_jobs_outbox WHERE id IN (
    SELECT id FROM mcp_jobs_outbox INDEXED BY mcp_jobs_outbox_published
    WHERE published_at < :before ORDER BY published_at LIMIT :limit)
"""
