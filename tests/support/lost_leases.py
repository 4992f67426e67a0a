"""A job whose lease ran out on each of its attempts, settled dead by the claim that found them
spent (engine.run_job): what a face showing its attempts is tested on."""

from __future__ import annotations

from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Retry, Worker, job

LEASE_MS = 30_000


class Item(BaseModel):
    n: int


async def lost_on_every_attempt(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, attempts: int = 3
) -> str:
    """The id of a job of `attempts` attempts, each claimed by a worker that then vanished (it
    never heartbeats nor settles), buried by the worker that claims it once more."""

    @job(idempotency_key=lambda i: f"i:{i.n}", retry=Retry(attempts=attempts), registry=registry)
    async def work(input: Item, ctx: JobContext) -> None:
        raise AssertionError("a claim past max_attempts never runs the body")

    queued = await jobs.enqueue(work, {"n": 1})
    for n in range(attempts):
        assert len(await jobs.driver.claim(f"vanished-{n}", 1, lease_ms=LEASE_MS)) == 1
        clock.advance(LEASE_MS)
    burier = Worker(jobs, worker_id="burier", scheduler=False, prune=False)
    assert await burier.run_until_idle() == 1
    return queued.id
