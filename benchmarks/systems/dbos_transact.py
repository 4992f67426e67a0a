"""DBOS Transact: a queued workflow of 3 durable steps (and, for the SQLite line, a no-op one).

Settings: the system database on the shared server, a queue registered with
`worker_concurrency=16` and, as the issue asks, `polling_interval_sec=0.01` — DBOS queues poll
and have no wake-up, and the default interval is 1 s. Jobs are enqueued by a DBOS process that
listens to no queue, so nothing runs before the worker process launches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

import asyncpg
from dbos import DBOS, DBOSConfig

from benchmarks.systems.base import STEP_COUNT, Kind, Producer, System
from benchmarks.tally import Tally

QUEUE = "bench"
POLLING_S = 0.01
SETTLE_S = 30.0
SETTLE_POLL_S = 0.05
_tally: Tally | None = None


@DBOS.step()
async def bench_step(k: int) -> int:
    return k


@DBOS.workflow()
async def bench_steps(i: int) -> None:
    if _tally is None:
        raise RuntimeError("workflow outside run_worker")
    _tally.start(i)
    for k in range(STEP_COUNT):
        await bench_step(k)
    _tally.end(i)


@DBOS.workflow()
async def bench_noop(i: int) -> None:
    if _tally is None:
        raise RuntimeError("workflow outside run_worker")
    _tally.start(i)
    _tally.end(i)


_WORKFLOWS = {"noop": bench_noop, "steps": bench_steps}


def _launch(url: str, queues: list[str]) -> None:
    config: DBOSConfig = {"name": "bench", "system_database_url": url, "log_level": "WARNING"}
    DBOS(config=config)
    DBOS.listen_queues(queues)
    DBOS.launch()


class _DbosProducer(Producer):
    async def enqueue_one(self, kind: Kind, i: int) -> None:
        queue = await DBOS.retrieve_queue_async(QUEUE)
        if queue is None:
            raise RuntimeError("queue not registered; install() first")
        await queue.enqueue_async(_WORKFLOWS[kind], i)

    async def enqueue_many(self, kind: Kind, indexes: Sequence[int]) -> list[str]:
        # DBOS has no batch enqueue: one workflow start per job.
        queue = await DBOS.retrieve_queue_async(QUEUE)
        if queue is None:
            raise RuntimeError("queue not registered; install() first")
        handles = [await queue.enqueue_async(_WORKFLOWS[kind], i) for i in indexes]
        return [h.workflow_id for h in handles]

    async def close(self) -> None:
        await asyncio.to_thread(DBOS.destroy)


class DbosTransact(System):
    def settings(self, concurrency: int) -> dict[str, Any]:
        return {
            "version": version("dbos"),
            "queue": f"worker_concurrency={concurrency}, polling_interval_sec={POLLING_S}",
            "workflow": f"async workflow of {STEP_COUNT} @DBOS.step() calls",
            "loop": self.loop,
        }

    async def install(self, url: str, concurrency: int) -> None:
        await asyncio.to_thread(_launch, url, [])
        try:
            await DBOS.register_queue_async(
                QUEUE, worker_concurrency=concurrency, polling_interval_sec=POLLING_S
            )
        finally:
            await asyncio.to_thread(DBOS.destroy)

    async def producer(self, url: str) -> Producer:
        await asyncio.to_thread(_launch, url, [])
        return _DbosProducer()

    async def run_worker(self, url: str, kind: Kind, concurrency: int, tally: Tally) -> None:
        global _tally
        _tally = tally
        tally.begin()
        await asyncio.to_thread(_launch, url, [QUEUE])
        try:
            await tally.wait()
            # A body that has returned is not yet a recorded SUCCESS: DBOS has no graceful stop
            # that waits for that, and destroy() cancels what is still finishing. Wait (bounded)
            # for the last records, so the exactly-once check sees settled workflows.
            for _ in range(int(SETTLE_S / SETTLE_POLL_S)):
                if not await self.unfinished(url, kind):
                    break
                await asyncio.sleep(SETTLE_POLL_S)
        finally:
            await asyncio.to_thread(DBOS.destroy)

    async def unfinished(self, url: str, kind: Kind) -> int:
        conn = await asyncpg.connect(url)
        try:
            count: int = await conn.fetchval(
                "SELECT count(*) FROM dbos.workflow_status"
                " WHERE name LIKE $1 AND status <> 'SUCCESS'",
                f"%bench_{kind}",
            )
        finally:
            await conn.close()
        return count
