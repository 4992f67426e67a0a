"""Checkout through the transactional outbox: the order row and its fulfilment job commit together.

The shop records a checkout in a table that lives in the JOBS database and stages `fulfil_order`
in the same transaction, so the job exists if and only if the checkout does. A checkout that fails
(here: an order number already taken) rolls back and leaves no job behind. The worker's in-process
relay publishes the staged job; nothing else has to run.
"""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from engine import Jobs, StagedJob
from engine.drivers.memory import MemoryDriver
from engine.drivers.postgres import PostgresDriver
from engine.drivers.sqlite import SqliteDriver, sqlite3  # the driver's own sqlite3 module
from examples.shop.jobs import OrderInput, fulfil_order

CHECKOUTS_TABLE = (
    "CREATE TABLE IF NOT EXISTS shop_checkouts ("
    "order_id INTEGER PRIMARY KEY, sku TEXT NOT NULL, quantity INTEGER NOT NULL)"
)
INSERT_SQLITE = "INSERT INTO shop_checkouts (order_id, sku, quantity) VALUES (?, ?, ?)"
INSERT_PG = "INSERT INTO shop_checkouts (order_id, sku, quantity) VALUES ($1, $2, $3)"


class OrderTakenError(Exception):
    """The order number is already checked out; the transaction rolled back and staged nothing."""


async def checkout(jobs: Jobs, order: OrderInput) -> StagedJob:
    """Record the checkout and stage its fulfilment in one transaction of the jobs database
    (on NATS, which has none over two keys, two writes in a safe order: `_checkout_nats`)."""
    driver = jobs.driver
    if isinstance(driver, SqliteDriver):
        return await _checkout_sqlite(jobs, driver.path, order)
    if isinstance(driver, PostgresDriver):
        return await _checkout_postgres(jobs, driver.url, order)
    if isinstance(driver, MemoryDriver):
        tx = driver.transaction()
        staged = await jobs.stage(tx, fulfil_order, order)
        driver.commit(tx)
        return staged
    if driver.kind == "redis":
        return await _checkout_redis(jobs, order)
    if driver.kind == "nats":
        return await _checkout_nats(jobs, order)
    raise TypeError(f"no checkout for the {driver.kind} driver")


async def _checkout_sqlite(jobs: Jobs, path: str, order: OrderInput) -> StagedJob:
    conn = sqlite3.connect(path, timeout=10, isolation_level=None)  # we say BEGIN ourselves
    try:
        conn.execute(CHECKOUTS_TABLE)
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(INSERT_SQLITE, (order.order_id, order.sku, order.quantity))
            staged = await jobs.stage(conn, fulfil_order, order)
        except sqlite3.IntegrityError as exc:
            conn.execute("ROLLBACK")
            raise OrderTakenError(f"order {order.order_id} is already checked out") from exc
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return staged
    finally:
        conn.close()


async def _checkout_postgres(jobs: Jobs, url: str, order: OrderInput) -> StagedJob:
    conn: asyncpg.Connection[Any] = await asyncpg.connect(url)
    try:
        await conn.execute(CHECKOUTS_TABLE)
        try:
            async with conn.transaction():
                await conn.execute(INSERT_PG, order.order_id, order.sku, order.quantity)
                return await jobs.stage(conn, fulfil_order, order)
        except asyncpg.UniqueViolationError as exc:
            raise OrderTakenError(f"order {order.order_id} is already checked out") from exc
    finally:
        await conn.close()


async def _checkout_redis(jobs: Jobs, order: OrderInput) -> StagedJob:
    """On Redis the checkout is a hash on the jobs server, written in the same MULTI/EXEC as the
    staged job; WATCH makes a concurrent checkout of the same order fail instead of overwrite."""
    from redis.exceptions import WatchError

    from engine.drivers.redis import RedisDriver

    driver = jobs.driver
    if not isinstance(driver, RedisDriver):
        raise TypeError(f"no checkout for the {driver.kind} driver")
    key = f"{driver.prefix}shop:checkout:{order.order_id}"
    async with driver.transaction() as tx:
        try:
            await tx.watch(key)
            if await tx.exists(key):
                raise OrderTakenError(f"order {order.order_id} is already checked out")
            tx.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
            tx.hset(key, mapping={"sku": order.sku, "quantity": order.quantity})
            staged = await jobs.stage(tx, fulfil_order, order)
            await tx.execute()
        except WatchError as exc:
            raise OrderTakenError(f"order {order.order_id} is already checked out") from exc
    return staged


async def _checkout_nats(jobs: Jobs, order: OrderInput) -> StagedJob:
    """On NATS the checkout is a create-only key in the jobs bucket, then the staged job commits.

    NATS has no transaction spanning two keys, so this is two writes, not one atomic step. What
    holds: a taken order stages nothing (its create fails before anything is staged), and a
    staged job always has its checkout. What does not: a crash between the two writes leaves a
    checkout whose job was never staged (the outbox cannot close that gap; PostgreSQL can)."""
    from engine.drivers.nats import NatsDriver

    driver = jobs.driver
    if not isinstance(driver, NatsDriver):
        raise TypeError(f"no checkout for the {driver.kind} driver")
    tx = driver.transaction()
    row = json.dumps({"sku": order.sku, "quantity": order.quantity}).encode()
    if await tx.store.write(f"shop.checkout.{order.order_id}", row, 0) is None:
        tx.rollback()
        raise OrderTakenError(f"order {order.order_id} is already checked out")
    staged = await jobs.stage(tx, fulfil_order, order)
    await tx.commit()
    return staged
