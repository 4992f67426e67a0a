"""arq on the same Redis server, through its public API.

`create_pool` / `enqueue_job`, and one `Worker(functions=[...], max_jobs=16)` run with
`async_run()`. arq finds work by polling its queue (a sorted set) every `poll_delay`, 0.5 s by
default, with no wake-up: at the default a worker starts at most `max_jobs` jobs a poll, so a drain
of no-op jobs runs at about 32 jobs/s. As DBOS's polling interval is, it is set to 10 ms here.
arq has no batch enqueue: a batch is its jobs' `enqueue_job` calls, `BATCH_IN_FLIGHT` at a time
(each call holds a connection for its WATCH … MULTI/EXEC). Results are kept (`keep_result`
3600 s, the default), as mcp-jobs keeps its settled jobs. arq's own worker runs on asyncio
(`Worker.run` takes `asyncio.get_event_loop()`; its CLI installs no other loop).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit, urlunsplit

from arq import create_pool
from arq.connections import ArqRedis, RedisSettings
from arq.constants import default_queue_name, in_progress_key_prefix
from arq.worker import Worker, func

from benchmarks.systems.base import Kind, Producer, System
from benchmarks.tally import Tally

FUNCTION = "bench_noop"
POLL_DELAY_S = 0.01
BATCH_IN_FLIGHT = 16
STOP_LIMIT_S = 10.0


def _settings(url: str) -> RedisSettings:
    # The key space's `?prefix=` is mcp-jobs' option; arq's keys are fixed names.
    parts = urlsplit(url)
    return RedisSettings.from_dsn(urlunsplit(parts._replace(query="", fragment="")))


async def _end_poll_loop(worker: Worker, running: asyncio.Task[None]) -> None:
    """arq ends its poll loop by cancelling it. A cancel that lands inside a redis-py call can
    be swallowed there (seen here about one stop in ten, redis-py 8.1), and the loop then polls
    on forever: cancel again until it has ended, for at most `STOP_LIMIT_S`."""
    deadline = asyncio.get_running_loop().time() + STOP_LIMIT_S
    while not running.done():
        if asyncio.get_running_loop().time() > deadline:
            raise RuntimeError(f"arq's poll loop ignored cancellation for {STOP_LIMIT_S} s")
        if worker.main_task is not None:
            worker.main_task.cancel()
        await asyncio.wait({running}, timeout=0.05)
    with contextlib.suppress(asyncio.CancelledError):
        await running


class _ArqProducer(Producer):
    def __init__(self, pool: ArqRedis) -> None:
        self.pool = pool

    async def enqueue_one(self, kind: Kind, i: int) -> None:
        await self.pool.enqueue_job(FUNCTION, i)

    async def enqueue_many(self, kind: Kind, indexes: Sequence[int]) -> list[str]:
        gate = asyncio.Semaphore(BATCH_IN_FLIGHT)

        async def one(i: int) -> str:
            async with gate:
                job = await self.pool.enqueue_job(FUNCTION, i)
            if job is None:
                raise RuntimeError(f"arq refused job {i}: an id that already exists")
            return str(job.job_id)

        return list(await asyncio.gather(*(one(i) for i in indexes)))

    async def close(self) -> None:
        await self.pool.aclose(close_connection_pool=True)


class ArqQueue(System):
    loop: ClassVar[Literal["asyncio", "uvloop"]] = "asyncio"

    def settings(self, concurrency: int) -> dict[str, Any]:
        return {
            "version": version("arq"),
            "worker": f"Worker(max_jobs={concurrency}, poll_delay={POLL_DELAY_S})",
            "enqueue": f"enqueue_job; no batch API: {BATCH_IN_FLIGHT} calls in flight",
            "defaults": "keep_result 3600 s, job_timeout 300 s, pickle serializer",
            "loop": self.loop,
        }

    async def install(self, url: str, concurrency: int) -> None:
        # Nothing to create: arq's keys appear with the first job.
        pool = await create_pool(_settings(url))
        try:
            await pool.ping()
        finally:
            await pool.aclose(close_connection_pool=True)

    async def producer(self, url: str) -> Producer:
        return _ArqProducer(await create_pool(_settings(url)))

    async def run_worker(self, url: str, kind: Kind, concurrency: int, tally: Tally) -> None:
        async def bench_noop(ctx: dict[str, Any], i: int) -> None:
            tally.start(i)
            tally.end(i)

        worker = Worker(
            functions=[func(bench_noop, name=FUNCTION)],
            redis_settings=_settings(url),
            max_jobs=concurrency,
            poll_delay=POLL_DELAY_S,
            handle_signals=False,
        )
        tally.begin()
        running = asyncio.create_task(worker.async_run())
        done = asyncio.create_task(tally.wait())
        await asyncio.wait({running, done}, return_when=asyncio.FIRST_COMPLETED)
        # A graceful stop: take no more jobs, let the running ones finish their bookkeeping
        # (result, queue entry, in-progress key), then end the poll loop and close.
        worker.allow_pick_jobs = False
        await asyncio.gather(*worker.tasks.values())
        await _end_poll_loop(worker, running)
        await worker.close()
        done.cancel()

    async def unfinished(self, url: str, kind: Kind) -> int:
        pool = await create_pool(_settings(url))
        try:
            queued = await pool.zcard(default_queue_name)
            running = await pool.keys(in_progress_key_prefix + "*")
        finally:
            await pool.aclose(close_connection_pool=True)
        return int(queued) + len(running)
