"""PgQueuer with the settings its performance guide recommends.

From its docs: the schema from `install()` plus the recommended autovacuum settings
(`pgq autovac`), durability `durable` (the default), ONE dedicated asyncpg connection for the
QueueManager (`AsyncpgDriver`), and uvloop (what its `pgq run` CLI uses). Concurrency 16 is
`max_concurrent_tasks=16`, which the library requires to be at least twice `batch_size`, so
`batch_size=8`. Completed jobs leave the queue table for its log table, as PgQueuer always does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any, ClassVar, Literal

import asyncpg
from pgqueuer import AsyncpgDriver, Job, PgQueuer, Queries

from benchmarks.systems.base import Kind, Producer, System
from benchmarks.tally import Tally

ENTRYPOINT = "bench_noop"


class _PgQueuerProducer(Producer):
    def __init__(self, conn: asyncpg.Connection[Any]) -> None:
        self.conn = conn
        self.queries = Queries(AsyncpgDriver(conn))

    async def enqueue_one(self, kind: Kind, i: int) -> None:
        await self.queries.enqueue(ENTRYPOINT, str(i).encode(), 0)

    async def enqueue_many(self, kind: Kind, indexes: Sequence[int]) -> list[str]:
        n = len(indexes)
        ids = await self.queries.enqueue(
            [ENTRYPOINT] * n, [str(i).encode() for i in indexes], [0] * n
        )
        return [str(x) for x in ids]

    async def close(self) -> None:
        await self.conn.close()


class PgQueuerQueue(System):
    loop: ClassVar[Literal["asyncio", "uvloop"]] = "uvloop"

    def settings(self, concurrency: int) -> dict[str, Any]:
        return {
            "version": version("pgqueuer"),
            "driver": "AsyncpgDriver (one dedicated connection)",
            "run": f"batch_size={max(1, concurrency // 2)}, max_concurrent_tasks={concurrency}",
            "schema": "install() + optimize_autovacuum(), durability durable (default)",
            "loop": self.loop,
        }

    async def install(self, url: str, concurrency: int) -> None:
        conn = await asyncpg.connect(url)
        try:
            queries = Queries(AsyncpgDriver(conn))
            await queries.install()
            await queries.optimize_autovacuum()
        finally:
            await conn.close()

    async def producer(self, url: str) -> Producer:
        return _PgQueuerProducer(await asyncpg.connect(url))

    async def run_worker(self, url: str, kind: Kind, concurrency: int, tally: Tally) -> None:
        conn = await asyncpg.connect(url)
        try:
            pgq = PgQueuer(AsyncpgDriver(conn))

            @pgq.entrypoint(ENTRYPOINT)
            async def bench_noop(job: Job) -> None:
                i = int(job.payload or b"-1")
                tally.start(i)
                tally.end(i)

            tally.begin()
            worker = asyncio.create_task(
                pgq.run(batch_size=max(1, concurrency // 2), max_concurrent_tasks=concurrency)
            )
            done = asyncio.create_task(tally.wait())
            await asyncio.wait({worker, done}, return_when=asyncio.FIRST_COMPLETED)
            pgq.shutdown.set()
            await worker
            done.cancel()
        finally:
            await conn.close()

    async def unfinished(self, url: str, kind: Kind) -> int:
        conn = await asyncpg.connect(url)
        try:
            sizes = await Queries(AsyncpgDriver(conn)).queue_size()
        finally:
            await conn.close()
        return sum(s.count for s in sizes)
