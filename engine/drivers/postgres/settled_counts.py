"""Settled counts on PostgreSQL (engine/settled_counts.py): one grouped read of the settled
index `(state, finished_at, id) INCLUDE (queue, tenant_id)`, an index-only range scan under each
settled state (`python -m benchmarks.settled_counts` prints the plan). A read: safe to run
again."""

from __future__ import annotations

from engine.drivers.postgres.connections import Connections
from engine.settled_counts import from_rows
from schemas.stats import SettledCount

# One range per state, each spelt `state = '<literal>'`: an `IN` list equal to the partial
# index's predicate is implied by it, so the planner drops it from the index condition and
# `finished_at` is then no longer a prefix (a seq scan); an equality stays a prefix.
COUNT = """
SELECT queue, state, count(*) FROM {schema}.jobs
 WHERE state = 'done' AND finished_at >= $1 AND finished_at < $2
   AND ($3::text IS NULL OR tenant_id = $3) GROUP BY queue, state
UNION ALL
SELECT queue, state, count(*) FROM {schema}.jobs
 WHERE state = 'failed' AND finished_at >= $1 AND finished_at < $2
   AND ($3::text IS NULL OR tenant_id = $3) GROUP BY queue, state
UNION ALL
SELECT queue, state, count(*) FROM {schema}.jobs
 WHERE state = 'dead' AND finished_at >= $1 AND finished_at < $2
   AND ($3::text IS NULL OR tenant_id = $3) GROUP BY queue, state
UNION ALL
SELECT queue, state, count(*) FROM {schema}.jobs
 WHERE state = 'cancelled' AND finished_at >= $1 AND finished_at < $2
   AND ($3::text IS NULL OR tenant_id = $3) GROUP BY queue, state
"""


async def settled_counts(
    db: Connections, since_ms: int, until_ms: int, tenant_id: str | None
) -> dict[str, SettledCount]:
    sql = COUNT.format(schema=db.schema)
    rows = await db.idempotent(lambda c: c.fetch(sql, since_ms, until_ms, tenant_id))
    return from_rows((r[0], r[1], r[2]) for r in rows)
