"""The child processes of the multi-process SQLite tests: `python -m tests.sqlite.proc_app ROLE`.

Roles: `migrate URL`; `enqueue URL FIRST COUNT`; `work URL LOGDIR TOTAL` (runs until TOTAL jobs
are done); `steps URL LOGDIR HANG LEASE_MS` (runs until the 3-step job is done; with HANG=1 it
stops inside step three, for the parent to SIGKILL). Every wait here observes a condition and is
bounded by the parent's timeout on the process.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, Worker, connect, job

REGISTRY = JobRegistry()
LOGDIR = Path(os.environ.get("PROC_APP_LOGDIR", "."))
HANG = os.environ.get("PROC_APP_HANG") == "1"

# Past any finish time: an interval that counts every settled row.
EVER = 2**62


class Count(BaseModel):
    n: int


class Steps(BaseModel):
    order: str


def _log(name: str, line: str) -> None:
    # One O_APPEND write per line: lines from several processes never interleave.
    fd = os.open(LOGDIR / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


@job(idempotency_key=lambda i: f"n:{i.n}", registry=REGISTRY)
async def count_me(input: Count, ctx: JobContext) -> None:
    _log(f"exec-{os.getpid()}.log", str(input.n))


@job(idempotency_key=lambda i: f"order:{i.order}", registry=REGISTRY)
async def three_steps(input: Steps, ctx: JobContext) -> str:
    pid = os.getpid()

    def step(name: str) -> str:
        _log("steps.log", f"{name} {pid}")
        return name

    await ctx.step.run("one", step, "one")
    await ctx.step.run("two", step, "two")

    async def three() -> str:
        _log("steps.log", f"three-start {pid}")
        if HANG:
            await anyio.sleep_forever()  # the parent kills this process here
        return step("three")

    return str(await ctx.step.run("three", three))


async def _run_until(jobs: Jobs, worker: Worker, finished: str) -> None:
    async def done() -> bool:
        if finished.startswith("total:"):
            # Every done row (the stats count only a recent window's newest 1,000).
            counts = await jobs.settled_counts(0, EVER)
            assert counts is not None  # SQLite counts them
            return sum(c.done for c in counts.values()) >= int(finished[len("total:") :])
        page = await jobs.list(name="three_steps", state="done")
        return bool(page.jobs)

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        while not await done():
            # Returns on the next commit by any process (or after 50 ms): re-check then.
            await jobs.driver.wait_for_work(50)
        await worker.drain()


async def main(argv: list[str]) -> None:
    role, url = argv[0], argv[1]
    jobs = await connect(url, registry=REGISTRY)
    try:
        if role == "enqueue":
            first, count = int(argv[2]), int(argv[3])
            for n in range(first, first + count):
                await jobs.enqueue(count_me, {"n": n})
        elif role == "work":
            worker = Worker(jobs, concurrency=8)
            await _run_until(jobs, worker, f"total:{argv[2]}")
        elif role == "steps":
            worker = Worker(jobs, concurrency=2, lease_ms=int(argv[2]))
            await _run_until(jobs, worker, "three_steps")
    finally:
        await jobs.close()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
