"""Procrastinate (psycopg 3 connector) with its documented defaults.

Settings from its docs: `PsycopgConnector(conninfo=…)`, an async task, `defer_async` /
`batch_defer_async`, `run_worker_async(concurrency=16)` with LISTEN/NOTIFY on (the default) and
jobs kept after completion (`delete_jobs="never"`, the default). The connection pool is sized
so it is never the bottleneck (`max_size = concurrency + 2`: one LISTEN, one fetch, one per job).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

import asyncpg
import procrastinate

from benchmarks.systems.base import Kind, Producer, System
from benchmarks.tally import Tally

QUEUE = "bench"
_tally: Tally | None = None


def _app(url: str, pool_max: int) -> tuple[procrastinate.App, Any]:
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(conninfo=url, min_size=1, max_size=pool_max)
    )

    @app.task(name="bench_noop", queue=QUEUE)
    async def bench_noop(i: int) -> None:
        if _tally is None:
            raise RuntimeError("handler outside run_worker")
        _tally.start(i)
        _tally.end(i)

    return app, bench_noop


class _ProcrastinateProducer(Producer):
    def __init__(self, app: procrastinate.App, task: Any) -> None:
        self.app = app
        self.task = task

    async def enqueue_one(self, kind: Kind, i: int) -> None:
        await self.task.defer_async(i=i)

    async def enqueue_many(self, kind: Kind, indexes: Sequence[int]) -> list[str]:
        ids: list[int] = await self.task.batch_defer_async(*({"i": i} for i in indexes))
        return [str(x) for x in ids]

    async def close(self) -> None:
        await self.app.connector.close_async()


class ProcrastinateQueue(System):
    def settings(self, concurrency: int) -> dict[str, Any]:
        return {
            "version": version("procrastinate"),
            "connector": f"PsycopgConnector (pool max_size={concurrency + 2})",
            "worker": f"run_worker_async(concurrency={concurrency}), listen_notify=True",
            "delete_jobs": "never (default)",
            "loop": self.loop,
        }

    async def install(self, url: str, concurrency: int) -> None:
        app, _ = _app(url, 2)
        async with app.open_async():
            await app.schema_manager.apply_schema_async()

    async def producer(self, url: str) -> Producer:
        app, task = _app(url, 2)
        await app.open_async()
        return _ProcrastinateProducer(app, task)

    async def run_worker(self, url: str, kind: Kind, concurrency: int, tally: Tally) -> None:
        global _tally
        _tally = tally
        app, _ = _app(url, concurrency + 2)
        async with app.open_async():
            tally.begin()
            worker = asyncio.create_task(
                app.run_worker_async(
                    queues=[QUEUE], concurrency=concurrency, install_signal_handlers=False
                )
            )
            done = asyncio.create_task(tally.wait())
            await asyncio.wait({worker, done}, return_when=asyncio.FIRST_COMPLETED)
            # Cancelling `run_worker_async` is its documented graceful stop.
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker
            done.cancel()

    async def unfinished(self, url: str, kind: Kind) -> int:
        conn = await asyncpg.connect(url)
        try:
            count: int = await conn.fetchval(
                "SELECT count(*) FROM procrastinate_jobs WHERE status <> 'succeeded'"
            )
        finally:
            await conn.close()
        return count
