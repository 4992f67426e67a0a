"""The outbox over Redis: rows staged in the application's own MULTI/EXEC pipeline.

What it can promise: a row is staged atomically with the application's other Redis writes
queued on the same transactional pipeline, and published (enqueued and marked) in one script,
first writer wins. What it cannot: there is no shared transaction with an SQL database, so an
application whose state lives in PostgreSQL gets no atomicity from this outbox.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from redis.asyncio.client import Pipeline

from engine.drivers.damage import readable
from engine.drivers.redis.codec import pairs, request_from_json, request_json
from engine.drivers.redis.enqueue import enqueue
from engine.drivers.redis.scripts import OUTBOX_CLAIM_SCRIPT
from engine.drivers.redis.store import Store, Write
from engine.ids import new_ids
from engine.outbox_errors import OutboxNoTxError, OutboxTxKindError
from schemas.jobs import EnqueueRequest, EnqueueResult
from schemas.outbox import OutboxRow, OutboxWaiting

# How to stage through this driver: the fix of a value that is no transaction, or none open.
STAGE_LINE = "tx = jobs.driver.transaction(); await jobs.stage(tx, name, input); await tx.execute()"


def stage(store: Store, tx: Any, requests: Sequence[EnqueueRequest]) -> list[str]:
    """Queue the rows on `tx`, a transactional pipeline (`client.pipeline(transaction=True)`);
    they land when the application executes it."""
    if not isinstance(tx, Pipeline):
        raise OutboxTxKindError(
            "redis",
            tx,
            "a transactional pipeline (`jobs.driver.transaction()`, MULTI/EXEC)",
            STAGE_LINE,
        )
    if not tx.is_transaction:
        raise OutboxNoTxError("redis", STAGE_LINE)
    now = store.clock.now_ms()
    ids: list[str] = []
    for request, row_id in zip(requests, new_ids(len(requests), now), strict=True):
        tx.hset(
            store.keys.outbox_row(row_id),
            mapping={"id": row_id, "staged_at": now, "request": request_json(request)},
        )
        tx.zadd(store.keys.obq, {row_id: now})
        ids.append(row_id)
    return ids


def _row(fields: dict[str, str]) -> OutboxRow:
    def number(name: str) -> int | None:
        value = fields.get(name)
        return None if value is None else int(value)

    return OutboxRow(
        id=fields["id"],
        staged_at=int(fields["staged_at"]),
        request=request_from_json(fields["request"]),
        claimed_by=fields.get("claimed_by"),
        claim_expires_at=number("claim_expires_at"),
        published_at=number("published_at"),
        job_id=fields.get("job_id"),
    )


async def claim(store: Store, token: str, limit: int, lease_ms: int) -> list[OutboxRow]:
    if limit <= 0:
        return []
    args = [store.keys.prefix, token, limit, store.clock.now_ms(), lease_ms]
    found = [pairs(raw) for raw in await OUTBOX_CLAIM_SCRIPT(store.client, args)]
    # A row another program wrote stays claimed and comes back at its lease's end, as a row that
    # failed to publish does; the others go on.
    return readable(found, _row, lambda fields: f"outbox row {fields.get('id')!r}")


async def publish(store: Store, token: str, rows: Sequence[OutboxRow]) -> list[EnqueueResult]:
    now = store.clock.now_ms()
    return await enqueue(store, [r.request for r in rows], now, [r.id for r in rows], token)


async def waiting(store: Store, limit: int) -> OutboxWaiting:
    """`P obq` holds exactly the rows that wait, by staged_at: its size and its first score."""
    pipe = store.client.pipeline(transaction=False)
    pipe.zcard(store.keys.obq)
    pipe.zrange(store.keys.obq, 0, 0, withscores=True)
    count, first = cast(tuple[int, list[tuple[str, float]]], await pipe.execute())
    oldest = int(first[0][1]) if first else None
    return OutboxWaiting(count=min(count, limit), oldest_staged_at=oldest)


async def forget_published(store: Store, published_before: int, limit: int) -> int:
    """A published row is never written again, so reading the old ones and deleting them in a
    second round trip races with nothing."""
    if limit <= 0:
        return 0
    keys = store.keys
    ids = cast(
        list[str],
        await store.client.zrangebyscore(keys.obpub, "-inf", f"({published_before}", 0, limit),
    )
    if ids:
        pipe = store.client.pipeline(transaction=True)
        pipe.delete(*(keys.outbox_row(i) for i in ids))
        pipe.zrem(keys.obpub, *ids)
        await pipe.execute()
    return len(ids)


async def index_published(store: Store, *, fresh: bool) -> None:
    """Rows published before `P obpub` existed join it, once per database (a walk of the
    keyspace, so not at every connect; none on a `fresh` one, which holds no rows yet)."""
    keys = store.keys
    client = store.client
    if fresh:
        await client.set(keys.obpub_built, "1")
        return
    if await client.exists(keys.obpub_built):
        return
    async for key in client.scan_iter(match=f"{keys.outbox_row('')}*", count=1_000):
        fields = cast(list[str | None], await client.hmget(key, ["id", "published_at"]))
        if fields[0] is not None and fields[1] is not None:
            await client.zadd(keys.obpub, {fields[0]: int(fields[1])})
    await client.set(keys.obpub_built, "1")


async def release(store: Store, token: str, ids: Sequence[str]) -> None:
    writes = []
    for row_id in ids:
        key = store.keys.outbox_row(row_id)
        w = Write()
        w.guard_eq(key, "claimed_by", token)
        w.guards.append(["absent", key, "published_at"])
        w.op("HDEL", key, "claimed_by", "claim_expires_at")
        writes.append(w)
    await store.apply_many(writes)
