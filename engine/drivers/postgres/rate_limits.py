"""Rate limits on PostgreSQL (engine/rate_limits.py): one row per key, its GCRA TAT in epoch µs.

`TAKE` is one statement: it locks the rows of every key in key order (FOR UPDATE: a concurrent
taker waits and then reads the TAT the other one stored), judges each with GCRA, and moves every
TAT only when every key allows, so a start is taken under all its keys or none. Its arithmetic
is `rate_limits.take_all`'s, pinned by tests/postgres/test_rate_limits_agree.py. A key seen for
the first time gets its row from `SEED` (a TAT that allows at once) before the take runs again,
so two first takers still meet on one locked row. Neither is retried through a broken
connection: a take that may have committed must not take twice; a take the server rolled back
took nothing and is run again (`Connections.atomic`).

With a job id, `USE` first reads (and deletes, when it lets the job start or has expired) the
job's reservation; no other taker touches that row, since a claimed job has one worker. A take
that blocks then reserves in the same statement: the TATs move to the job's slot
(`take_all(reserve=True)`) and `rate_reservations` gets its row, good until `late_window_ms`
after the slot. Every take deletes reservations past their late_at (an index on it: nothing to
read when none is).
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from engine.drivers.damage import readable
from engine.drivers.postgres.connections import Connections
from engine.drivers.postgres.schema_version import Conn
from engine.drivers.postgres.sql import with_schema
from engine.rate_limits import (
    ADOPT_AFTER_MS,
    LATE_MIN_US,
    RateReservation,
    RateState,
    RateTake,
    RateVerdict,
    keys_of,
    prefix_end,
    stored_state,
    use_reservation,
)

_WANTED = """
    SELECT w.key, w.rate_limit, w.per_ms, w.burst, w.ord,
           w.per_ms * 1000 / w.rate_limit AS interval_us,
           (w.burst - 1) * (w.per_ms * 1000 / w.rate_limit) AS tolerance_us
      FROM unnest($1::text[], $2::int[], $3::bigint[], $4::int[]) WITH ORDINALITY
           AS w(key, rate_limit, per_ms, burst, ord)
"""

TAKE = f"""
WITH wanted AS ({_WANTED}),
locked AS (
    SELECT r.key, r.tat FROM {{schema}}.rate_limits r
     WHERE r.key = ANY($1::text[]) ORDER BY r.key FOR UPDATE
),
judged AS (
    SELECT w.*, greatest(l.tat, $5::bigint * 1000) AS cur, l.key IS NOT NULL AS stored
      FROM wanted w LEFT JOIN locked l ON l.key = w.key
),
counted AS (
    -- rate_limits.starts_allowed: how many starts ($7 at most) each key admits at once now.
    SELECT j.*, least($7::bigint, 1 + ($5::bigint * 1000 - (j.cur - j.tolerance_us))
                                      / j.interval_us) AS admits
      FROM judged j
),
verdict AS (
    SELECT bool_and(stored) AS complete,
           bool_and(cur - tolerance_us <= $5::bigint * 1000) AS allowed,
           min(admits) AS starts,
           max(greatest(cur - tolerance_us, $5::bigint * 1000)) AS slot_us,
           max(tolerance_us + greatest(interval_us, {LATE_MIN_US})) AS late_us
      FROM counted
),
taken AS (
    UPDATE {{schema}}.rate_limits r
       SET tat = greatest(j.cur, v.slot_us)
                 + j.interval_us * (CASE WHEN v.allowed THEN v.starts ELSE 1 END),
           rate_limit = j.rate_limit,
           per_ms = j.per_ms, burst = j.burst, updated_at = $5
      FROM judged j, verdict v
     WHERE r.key = j.key AND v.complete AND (v.allowed OR $6::text IS NOT NULL)
    RETURNING r.key
),
reserved AS (
    INSERT INTO {{schema}}.rate_reservations
           (job_id, slot_at, late_at, blocked_key, keys, reserved_at)
    SELECT $6::text, (v.slot_us + 999) / 1000, (v.slot_us + 999) / 1000 + (v.late_us + 999) / 1000,
           (SELECT j.key FROM judged j ORDER BY j.cur - j.tolerance_us DESC, j.ord LIMIT 1),
           array_to_string($1::text[], E'\\n'), $5
      FROM verdict v
     WHERE $6::text IS NOT NULL AND v.complete AND NOT v.allowed
    ON CONFLICT (job_id) DO UPDATE SET slot_at = excluded.slot_at, late_at = excluded.late_at,
        blocked_key = excluded.blocked_key, keys = excluded.keys,
        reserved_at = excluded.reserved_at
),
expired AS (
    -- SKIP LOCKED: a void reservation another take's USE is deleting (it waits for a key row
    -- this take holds) is that take's; waiting for it here deadlocked the two.
    DELETE FROM {{schema}}.rate_reservations WHERE job_id IN (
        SELECT job_id FROM {{schema}}.rate_reservations
         WHERE late_at < $5::bigint FOR UPDATE SKIP LOCKED
    )
)
SELECT j.key, j.cur - j.tolerance_us AS allow_at, v.complete, v.allowed, v.starts,
       (SELECT count(*) FROM taken) AS taken
  FROM judged j, verdict v
"""

# A TAT of 0 is "never taken": greatest(0, now) is now, as `gcra` treats a key never stored.
SEED = f"""
INSERT INTO {{schema}}.rate_limits (key, tat, rate_limit, per_ms, burst, updated_at)
SELECT w.key, 0, w.rate_limit, w.per_ms, w.burst, $5::bigint FROM ({_WANTED}) w
ON CONFLICT (key) DO NOTHING
"""

# The job's reservation, deleted unless it holds the job back (`use_reservation`): used from its
# slot on, or void (slot_at <= now covers both). Only a row this statement deleted is used: one
# adopted meanwhile (ADOPT, which locks it first) is gone, and the job takes afresh.
USE = """
WITH used AS (
    DELETE FROM {schema}.rate_reservations WHERE job_id = $1 AND slot_at <= $2
    RETURNING job_id, slot_at, late_at, blocked_key, keys
)
SELECT * FROM used
UNION ALL
SELECT job_id, slot_at, late_at, blocked_key, keys FROM {schema}.rate_reservations
 WHERE job_id = $1 AND slot_at > $2
"""

# A fresh take first starts on an overdue slot over the same keys (`adoptable`), if one is there.
ADOPT = """
DELETE FROM {schema}.rate_reservations WHERE job_id = (
    SELECT job_id FROM {schema}.rate_reservations
     WHERE keys = $1 AND slot_at <= $2 AND late_at >= $3
     ORDER BY slot_at LIMIT 1 FOR UPDATE SKIP LOCKED
)
RETURNING job_id
"""

RESERVATIONS = """
SELECT job_id, slot_at, late_at, blocked_key, keys FROM {schema}.rate_reservations
 ORDER BY slot_at, job_id LIMIT $1
"""

STATES = """
SELECT key, tat, rate_limit, per_ms, burst FROM {schema}.rate_limits
 WHERE key >= $2 AND ($3::text IS NULL OR key < $3)
 ORDER BY key LIMIT $1
"""

# A key a take holds locked is being used: skipped, not waited for.
FORGET_IDLE = """
DELETE FROM {schema}.rate_limits
 WHERE key IN (SELECT key FROM {schema}.rate_limits WHERE tat < $1
                LIMIT $2 FOR UPDATE SKIP LOCKED)
"""


async def take(
    db: Connections, takes: Sequence[RateTake], now: int, job_id: str | None, up_to: int = 1
) -> RateVerdict:
    take_q, seed_q = with_schema(TAKE, db.schema), with_schema(SEED, db.schema)
    args = (
        [t.key for t in takes],
        [t.limit for t in takes],
        [t.per_ms for t in takes],
        [t.burst for t in takes],
        now,
    )

    # One transaction, committed without waiting for its WAL flush: rate state is advisory, so
    # a crash that loses its last few hundred ms of takes lets at most that much through again,
    # and a take is on the path of every start.
    async def once(conn: Conn) -> RateVerdict | list[asyncpg.Record]:
        async with conn.transaction():
            await conn.execute("SET LOCAL synchronous_commit = off")
            if job_id is not None:
                row = await conn.fetchrow(with_schema(USE, db.schema), job_id, now)
                held = use_reservation(None if row is None else RateReservation(*row), now)
                if held is not None:
                    return held
                adopt_q = with_schema(ADOPT, db.schema)
                if await conn.fetchrow(adopt_q, keys_of(takes), now - ADOPT_AFTER_MS, now):
                    return RateVerdict(None, now)
            rows = await conn.fetch(take_q, *args, job_id, up_to)
            if rows and not rows[0]["complete"]:
                await conn.execute(seed_q, *args)
                rows = await conn.fetch(take_q, *args, job_id, up_to)
            return rows

    taken = await db.atomic(once)
    if isinstance(taken, RateVerdict):
        return taken
    rows = taken
    if not rows:
        return RateVerdict(None, now)
    if rows[0]["allowed"]:
        return RateVerdict(None, now, rows[0]["starts"] - 1)
    allow_at = {row["key"]: row["allow_at"] for row in rows}
    # The key that holds the start back the longest, the first of `takes` on a tie (take_all).
    blocked, latest = None, now * 1000
    for t in takes:
        if allow_at[t.key] > latest:
            blocked, latest = t.key, allow_at[t.key]
    return RateVerdict(blocked, -(-latest // 1000))


async def states(db: Connections, limit: int, prefix: str) -> list[RateState]:
    q = with_schema(STATES, db.schema)
    rows = await db.idempotent(lambda c: c.fetch(q, limit, prefix, prefix_end(prefix)))
    # A rate of 0 another program wrote would divide by zero in every stats read: passed over.
    return readable(rows, lambda r: stored_state(tuple(r.values())), lambda r: f"rate key {r[0]!r}")


async def forget_idle(db: Connections, tat_before: int, limit: int) -> int:
    q = with_schema(FORGET_IDLE, db.schema)
    # Idempotent: run twice, it deletes idle keys either way.
    status = await db.idempotent(lambda c: c.execute(q, tat_before, limit))
    return int(status.split()[-1])


async def reservations(db: Connections, limit: int) -> list[RateReservation]:
    q = with_schema(RESERVATIONS, db.schema)
    rows = await db.idempotent(lambda c: c.fetch(q, limit))
    return [RateReservation(*row) for row in rows]
