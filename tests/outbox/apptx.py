"""The application's own transaction, per driver: what `jobs.stage(tx, ...)` is handed.

An `AppDatabase` stands for the app: its own connection to the same database, its own table
(`app_orders`), and a transaction that writes an order and stages a job together. Postgres is
an asyncpg connection in `conn.transaction()`, SQLite a sqlite3 connection after an explicit
`BEGIN`, and the memory driver its `driver.transaction()` with the orders kept beside it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

from engine import Jobs
from engine.drivers.memory import MemoryDriver, MemoryTransaction
from engine.drivers.sqlite.library import sqlite3

SQLITE_PREFIX = "sqlite:///"


class AppTx:
    """One open application transaction. `handle` is what `stage()` takes."""

    def __init__(self, app: AppDatabase, handle: Any) -> None:
        self.app = app
        self.handle = handle
        self._orders: list[str] = []

    async def insert_order(self, order_id: str) -> None:
        kind = self.app.kind
        if kind == "postgres":
            await self.handle.execute("INSERT INTO app_orders (id) VALUES ($1)", order_id)
        elif kind == "sqlite":
            self.handle.execute("INSERT INTO app_orders (id) VALUES (?)", (order_id,))
        else:
            self._orders.append(order_id)

    async def commit(self) -> None:
        await self.app.end(self, commit=True)

    async def rollback(self) -> None:
        await self.app.end(self, commit=False)


class AppDatabase:
    """The application's side of the database the jobs live in."""

    def __init__(self, jobs: Jobs, database_url: str) -> None:
        self.jobs = jobs
        self.url = database_url
        self.kind = jobs.driver.kind
        self._pg: Any = None
        self._pg_tx: Any = None
        self._sqlite: sqlite3.Connection | None = None
        self._memory_orders: list[str] = []

    async def open(self) -> None:
        if self.kind == "postgres":
            import asyncpg

            self._pg = await asyncpg.connect(self.url)
            await self._pg.execute("CREATE TABLE IF NOT EXISTS app_orders (id text PRIMARY KEY)")
        elif self.kind == "sqlite":
            # isolation_level=None: no implicit BEGIN; the app (this helper) opens its own.
            self._sqlite = sqlite3.connect(self.url[len(SQLITE_PREFIX) :], isolation_level=None)
            self._sqlite.execute("PRAGMA busy_timeout = 5000")
            self._sqlite.execute("CREATE TABLE IF NOT EXISTS app_orders (id TEXT PRIMARY KEY)")

    async def close(self) -> None:
        if self._pg is not None:
            await self._pg.close()
        if self._sqlite is not None:
            self._sqlite.close()

    @property
    def memory(self) -> MemoryDriver:
        return cast(MemoryDriver, self.jobs.driver)

    async def begin(self) -> AppTx:
        if self.kind == "postgres":
            self._pg_tx = self._pg.transaction()
            await self._pg_tx.start()
            return AppTx(self, self._pg)
        if self.kind == "sqlite":
            assert self._sqlite is not None
            self._sqlite.execute("BEGIN")
            return AppTx(self, self._sqlite)
        return AppTx(self, self.memory.transaction())

    async def end(self, tx: AppTx, *, commit: bool) -> None:
        if self.kind == "postgres":
            await (self._pg_tx.commit() if commit else self._pg_tx.rollback())
        elif self.kind == "sqlite":
            assert self._sqlite is not None
            self._sqlite.execute("COMMIT" if commit else "ROLLBACK")
        else:
            handle = cast(MemoryTransaction, tx.handle)
            if commit:
                self.memory.commit(handle)
                self._memory_orders.extend(tx._orders)
            else:
                self.memory.rollback(handle)

    async def no_transaction(self) -> Any:
        """A handle of the right type that is NOT inside a transaction."""
        if self.kind == "postgres":
            return self._pg
        if self.kind == "sqlite":
            return self._sqlite
        done = self.memory.transaction()
        self.memory.commit(done)
        return done

    async def orders(self) -> list[str]:
        if self.kind == "postgres":
            return [r["id"] for r in await self._pg.fetch("SELECT id FROM app_orders ORDER BY id")]
        if self.kind == "sqlite":
            assert self._sqlite is not None
            return [r[0] for r in self._sqlite.execute("SELECT id FROM app_orders ORDER BY id")]
        return sorted(self._memory_orders)


@asynccontextmanager
async def app_database(jobs: Jobs, database_url: str) -> AsyncIterator[AppDatabase]:
    app = AppDatabase(jobs, database_url)
    await app.open()
    try:
        yield app
    finally:
        await app.close()
