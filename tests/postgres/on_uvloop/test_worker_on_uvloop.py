"""The PostgreSQL driver and the worker on uvloop, the loop `mcp-jobs worker` takes when it is
installed: a batch in parts, a single enqueue woken by LISTEN/NOTIFY, durable steps and acks."""

from __future__ import annotations

import asyncio

import anyio
from pydantic import BaseModel

from engine import Enqueue, JobContext, JobRegistry, Worker, connect, job


class Item(BaseModel):
    n: int


async def test_jobs_with_steps_run_to_done_on_uvloop(pg_url: str) -> None:
    assert type(asyncio.get_running_loop()).__module__.startswith("uvloop")
    registry = JobRegistry()
    finished: set[int] = set()
    everything_ran = anyio.Event()
    count = 301

    async def double(n: int) -> int:
        return 2 * n

    @job(registry=registry, name="double_twice", idempotency_key=lambda item: str(item.n))
    async def double_twice(input: Item, ctx: JobContext) -> int:
        once = await ctx.step.run("once", double, input.n)
        twice: int = await ctx.step.run("twice", double, once)
        finished.add(input.n)
        if len(finished) == count:
            everything_ran.set()
        return twice

    jobs = await connect(pg_url, registry=registry, migrate=True)
    try:
        worker = Worker(jobs, concurrency=8, scheduler=False, outbox_relay=False)
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            # 300 in parts (the pipelined transaction), then one alone, picked up by its wake-up.
            made = await jobs.enqueue_many([Enqueue(double_twice, Item(n=n)) for n in range(300)])
            made.append(await jobs.enqueue(double_twice, Item(n=300)))
            with anyio.fail_after(30):
                await everything_ran.wait()
            worker.stop()
        for result in (made[0], made[-1]):
            record = await jobs.get(result.id)
            assert record.state == "done"
        assert (await jobs.get(made[-1].id)).output == 1200
        trace = await jobs.trace(made[7].id)
        assert [(s.name, s.output) for s in trace.steps] == [("once", 14), ("twice", 28)]
    finally:
        await jobs.close()
