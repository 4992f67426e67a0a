"""Published job descriptors on PostgreSQL (engine/descriptors.py): one row per job name.

A publish is one set-wise upsert (`unnest` of parallel arrays), so a worker's whole list costs
one statement and the last writer wins per name. Every statement is safe to repeat, so each runs
through `Connections.idempotent`.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.descriptors import decode, encode, forgettable, stamped
from engine.drivers.postgres.connections import Connections
from engine.drivers.postgres.sql import with_schema
from schemas.descriptor import JobDescriptor

# A publish that adds a name or changes a version NOTIFYs the changes channel ($6) once, for
# readers that follow the descriptor list (engine/changes.py); a worker's periodic republish of
# the same versions does not. `old` reads the rows as they were before this statement's upsert.
_PUBLISH = """
WITH old AS (
    SELECT name, version FROM {schema}.descriptors WHERE name = ANY($1::text[])
),
up AS (
    INSERT INTO {schema}.descriptors AS d (name, version, published_by, published_at, descriptor)
    SELECT n, v, $3, $4, t::jsonb
      FROM unnest($1::text[], $2::text[], $5::text[]) AS u(n, v, t)
    ON CONFLICT (name) DO UPDATE SET
        version = excluded.version,
        published_by = excluded.published_by,
        published_at = excluded.published_at,
        descriptor = excluded.descriptor
)
SELECT pg_notify($6::text, '')
 WHERE EXISTS (SELECT 1
                 FROM unnest($1::text[], $2::text[]) AS u(n, v)
                 LEFT JOIN old ON old.name = u.n
                WHERE old.version IS DISTINCT FROM u.v)
"""
_ALL = "SELECT name, descriptor::text AS body FROM {schema}.descriptors ORDER BY name"
_ONE = "SELECT name, descriptor::text AS body FROM {schema}.descriptors WHERE name = $1"
_FORGET = "DELETE FROM {schema}.descriptors WHERE published_at < $1"
_STORED = "SELECT name, descriptor::text AS body, published_at FROM {schema}.descriptors"
# Only the row as read: one a worker published again meanwhile stays.
_FORGET_ONE = "DELETE FROM {schema}.descriptors WHERE name = $1 AND published_at = $2"


async def publish(
    db: Connections, worker_id: str, descriptors: Sequence[JobDescriptor], now: int
) -> None:
    if not descriptors:
        return
    kept = [stamped(d, worker_id, now) for d in descriptors]
    args = (
        [d.name for d in kept],
        [d.version or "" for d in kept],
        worker_id,
        now,
        [encode(d) for d in kept],
        db.changes_channel,
    )
    sql = with_schema(_PUBLISH, db.schema)
    await db.idempotent(lambda c: c.execute(sql, *args))


async def published(db: Connections, name: str | None) -> list[JobDescriptor]:
    if name is None:
        sql = with_schema(_ALL, db.schema)
        found = await db.idempotent(lambda c: c.fetch(sql))
    else:
        sql = with_schema(_ONE, db.schema)
        found = await db.idempotent(lambda c: c.fetch(sql, name))
    return [decode(row["name"], row["body"]) for row in found]


async def forget(db: Connections, published_before: int) -> int:
    sql = with_schema(_FORGET, db.schema)
    status: str = await db.idempotent(lambda c: c.execute(sql, published_before))
    gone = int(status.rsplit(" ", 1)[-1])
    # The rest, read whole (a row per job name): one another program wrote goes too.
    rows = await db.idempotent(lambda c: c.fetch(with_schema(_STORED, db.schema)))
    doomed = [r for r in rows if forgettable(r["name"], r["body"], published_before)]
    if doomed:
        one = with_schema(_FORGET_ONE, db.schema)
        pairs = [(r["name"], r["published_at"]) for r in doomed]
        await db.idempotent(lambda c: c.executemany(one, pairs))
    return gone + len(doomed)
