"""A program whose `asyncio.run(main())` returns with a worker still started: asyncio cancels every
task left, the worker's and its jobs' at once. The job in flight goes back ready with no attempt
spent, as after `stop()`, rather than staying `running` until its lease runs out."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import BaseModel

from engine import JobContext, JobRegistry, Worker, connect, job


class Item(BaseModel):
    n: int


def test_returning_from_asyncio_run_with_a_worker_started_hands_its_job_back(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    registry = JobRegistry()
    started: list[int] = []

    async def main() -> str:
        began = asyncio.Event()

        @job(name="held", idempotency_key=lambda i: str(i.n), registry=registry)
        async def held(input: Item, ctx: JobContext) -> None:
            started.append(input.n)
            began.set()
            await asyncio.Event().wait()  # never set: only the program's end stops it

        jobs = await connect(url, registry=registry)
        enqueued = await jobs.enqueue(held, {"n": 1})
        await Worker(jobs, concurrency=1).start()
        await asyncio.wait_for(began.wait(), 10)
        return enqueued.id  # neither stopped nor closed

    job_id = asyncio.run(main())

    async def look() -> tuple[str, int]:
        jobs = await connect(url, registry=registry)
        try:
            record = await jobs.get(job_id)
            return record.state, record.attempt
        finally:
            await jobs.close()

    assert started == [1]
    assert asyncio.run(look()) == ("ready", 0)
