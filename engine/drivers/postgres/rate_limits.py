"""Rate limits on PostgreSQL (engine/rate_limits.py): one row per key, its GCRA TAT in epoch µs.

`TAKE` is one statement: it locks the rows of every key in key order (FOR UPDATE: a concurrent
taker waits and then reads the TAT the other one stored), judges each with GCRA, and moves every
TAT only when every key allows, so a start is taken under all its keys or none. Its arithmetic
is `rate_limits.take_all`'s, pinned by tests/postgres/test_rate_limits_agree.py. A key seen for
the first time gets its row from `SEED` (a TAT that allows at once) before the take runs again,
so two first takers still meet on one locked row. Neither is retried through a broken
connection: a take that may have committed must not take twice.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.drivers.postgres.connections import Connections
from engine.drivers.postgres.sql import with_schema
from engine.rate_limits import RateState, RateTake, RateVerdict

_WANTED = """
    SELECT w.key, w.rate_limit, w.per_ms, w.burst,
           w.per_ms * 1000 / w.rate_limit AS interval_us,
           (w.burst - 1) * (w.per_ms * 1000 / w.rate_limit) AS tolerance_us
      FROM unnest($1::text[], $2::int[], $3::bigint[], $4::int[])
           AS w(key, rate_limit, per_ms, burst)
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
verdict AS (
    SELECT bool_and(stored) AS complete,
           bool_and(cur - tolerance_us <= $5::bigint * 1000) AS allowed
      FROM judged
),
taken AS (
    UPDATE {{schema}}.rate_limits r
       SET tat = j.cur + j.interval_us, rate_limit = j.rate_limit, per_ms = j.per_ms,
           burst = j.burst, updated_at = $5
      FROM judged j, verdict v
     WHERE r.key = j.key AND v.complete AND v.allowed
    RETURNING r.key
)
SELECT j.key, j.cur - j.tolerance_us AS allow_at, v.complete, v.allowed,
       (SELECT count(*) FROM taken) AS taken
  FROM judged j, verdict v
"""

# A TAT of 0 is "never taken": greatest(0, now) is now, as `gcra` treats a key never stored.
SEED = f"""
INSERT INTO {{schema}}.rate_limits (key, tat, rate_limit, per_ms, burst, updated_at)
SELECT w.key, 0, w.rate_limit, w.per_ms, w.burst, $5::bigint FROM ({_WANTED}) w
ON CONFLICT (key) DO NOTHING
"""

STATES = """
SELECT key, tat, rate_limit, per_ms, burst FROM {schema}.rate_limits ORDER BY key LIMIT $1
"""


async def take(db: Connections, takes: Sequence[RateTake], now: int) -> RateVerdict:
    take_q, seed_q = with_schema(TAKE, db.schema), with_schema(SEED, db.schema)
    args = (
        [t.key for t in takes],
        [t.limit for t in takes],
        [t.per_ms for t in takes],
        [t.burst for t in takes],
        now,
    )
    async with db.conn() as conn:
        rows = await conn.fetch(take_q, *args)
        if rows and not rows[0]["complete"]:
            await conn.execute(seed_q, *args)
            rows = await conn.fetch(take_q, *args)
    if not rows or rows[0]["allowed"]:
        return RateVerdict(None, now)
    allow_at = {row["key"]: row["allow_at"] for row in rows}
    # The key that holds the start back the longest, the first of `takes` on a tie (take_all).
    blocked, latest = None, now * 1000
    for t in takes:
        if allow_at[t.key] > latest:
            blocked, latest = t.key, allow_at[t.key]
    return RateVerdict(blocked, -(-latest // 1000))


async def states(db: Connections, limit: int) -> list[RateState]:
    q = with_schema(STATES, db.schema)
    rows = await db.idempotent(lambda c: c.fetch(q, limit))
    return [RateState(r["key"], r["tat"], r["rate_limit"], r["per_ms"], r["burst"]) for r in rows]
