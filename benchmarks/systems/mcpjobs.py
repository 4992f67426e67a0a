"""mcp-jobs through its public API: `connect(url)`, `enqueue`/`enqueue_many`, `Worker(...).run()`.

One adapter, two lines in the table: the PostgreSQL driver and the SQLite driver. Jobs carry a
unique idempotency key (their index), so dedupe never merges two benchmark jobs. Every process
runs on uvloop, as `mcp-jobs worker` does when uvloop is installed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel

from benchmarks.systems.base import STEP_COUNT, Kind, Producer, System
from benchmarks.tally import Tally
from engine import Enqueue, JobContext, JobRegistry, Jobs, RateLimit, Worker, connect, job
from engine.claim_plan import PREFETCH_PER_SLOT
from engine.declare import JobDefinition
from engine.rules import PRIORITY_MAX
from engine.worker_process import tune_for_worker

QUEUE = "bench"
REGISTRY = JobRegistry()
# Set by `run_worker` in the one worker process; handlers report to it.
_tally: Tally | None = None


class Item(BaseModel):
    i: int


def _key(item: Item) -> str:
    return str(item.i)


def _current() -> Tally:
    if _tally is None:
        raise RuntimeError("a benchmark handler ran outside run_worker")
    return _tally


@job(registry=REGISTRY, name="bench_noop", queue=QUEUE, idempotency_key=_key)
async def bench_noop(input: Item, ctx: JobContext) -> None:
    tally = _current()
    tally.start(input.i)
    tally.end(input.i)


async def _step(k: int) -> int:
    return k


@job(registry=REGISTRY, name="bench_steps", queue=QUEUE, idempotency_key=_key)
async def bench_steps(input: Item, ctx: JobContext) -> None:
    tally = _current()
    tally.start(input.i)
    for k in range(STEP_COUNT):
        await ctx.step.run(f"step-{k}", _step, k)
    tally.end(input.i)


# The no-op job under a rate limit it never reaches: what taking from the limit costs a start.
@job(
    registry=REGISTRY,
    name="bench_noop_limited",
    queue=QUEUE,
    idempotency_key=_key,
    rate_limit=RateLimit(1_000_000, per=1, burst=1_000_000),
)
async def bench_noop_limited(input: Item, ctx: JobContext) -> None:
    tally = _current()
    tally.start(input.i)
    tally.end(input.i)


_JOBS = {"noop": bench_noop, "steps": bench_steps}
_LIMITED_JOBS = {**_JOBS, "noop": bench_noop_limited}


class _McpJobsProducer(Producer):
    def __init__(
        self, jobs: Jobs, priorities: bool, definitions: dict[str, JobDefinition[Item]]
    ) -> None:
        self.jobs = jobs
        self.definitions = definitions
        # Every priority in turn (0..10) instead of the default for all: the claim's rank order
        # then mixes head starts, which is what the priority variant measures.
        self.priorities = priorities

    def _priority(self, i: int) -> int | None:
        return i % (PRIORITY_MAX + 1) if self.priorities else None

    async def enqueue_one(self, kind: Kind, i: int) -> None:
        await self.jobs.enqueue(self.definitions[kind], Item(i=i), priority=self._priority(i))

    async def enqueue_many(self, kind: Kind, indexes: Sequence[int]) -> list[str]:
        definition = self.definitions[kind]
        results = await self.jobs.enqueue_many(
            [Enqueue(definition, Item(i=i), priority=self._priority(i)) for i in indexes]
        )
        return [r.id for r in results]

    async def close(self) -> None:
        await self.jobs.close()


class McpJobs(System):
    # What `mcp-jobs worker` runs on when uvloop is installed (mcp_jobs/cli/event_loop.py), as
    # PgQueuer runs on what its CLI takes.
    loop: ClassVar[Literal["asyncio", "uvloop"]] = "uvloop"
    priorities: ClassVar[bool] = False
    rate_limited: ClassVar[bool] = False

    def settings(self, concurrency: int) -> dict[str, Any]:
        return {
            "driver": self.backend,
            "worker": f"Worker(jobs, concurrency={concurrency}, queues=['{QUEUE}'])",
            "defaults": (
                f"lease 30 s, poll 500 ms, wake-up by the driver, "
                f"prefetch {PREFETCH_PER_SLOT * concurrency}"
            ),
            "loop": self.loop,
        }

    async def connect(self, url: str, *, migrate: bool = False) -> Jobs:
        return await connect(url, registry=REGISTRY, migrate=migrate)

    async def install(self, url: str, concurrency: int) -> None:
        jobs = await self.connect(url, migrate=True)
        await jobs.close()

    async def producer(self, url: str) -> Producer:
        definitions = _LIMITED_JOBS if self.rate_limited else _JOBS
        return _McpJobsProducer(await self.connect(url), self.priorities, definitions)

    async def run_worker(self, url: str, kind: Kind, concurrency: int, tally: Tally) -> None:
        global _tally
        _tally = tally
        jobs = await self.connect(url)
        try:
            worker = Worker(jobs, concurrency=concurrency, queues=[QUEUE])
            tune_for_worker()  # as `mcp-jobs worker` does in the process it owns
            tally.begin()
            running = asyncio.create_task(worker.run())
            await tally.wait()
            worker.stop()
            await running
        finally:
            await jobs.close()

    async def unfinished(self, url: str, kind: Kind) -> int:
        jobs = await self.connect(url)
        try:
            stats = await jobs.stats([QUEUE])
        finally:
            await jobs.close()
        return sum(
            s.ready + s.delayed + s.running + s.suspended + s.dead + s.failed + s.cancelled
            for s in stats
        )


class McpJobsPriorities(McpJobs):
    """mcp-jobs with every job enqueued at one of the eleven priorities, in turn."""

    priorities: ClassVar[bool] = True


class McpJobsRateLimited(McpJobs):
    """mcp-jobs with the no-op job under a rate limit it never reaches."""

    rate_limited: ClassVar[bool] = True
