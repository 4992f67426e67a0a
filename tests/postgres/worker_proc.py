"""A worker PROCESS for the fault tests: `python -m tests.postgres.worker_proc URL LOG [options]`.

Its jobs append one line per execution to LOG (O_APPEND, one write per line, so lines from
concurrent jobs never interleave), which is how a test counts what really ran. SIGTERM drains it.
With `--block-step3` the three-step job hangs inside its third step, for a test to SIGKILL it.
"""

from __future__ import annotations

import argparse
import os
import signal

import anyio
from pydantic import BaseModel

from engine import JobContext, JobRegistry, SystemClock, Worker, connect, job

registry = JobRegistry()
LOG_PATH = ""
BLOCK_STEP3 = False
NOOP_SLEEP_S = 0.0


class Item(BaseModel):
    n: int


def record(line: str) -> None:
    fd = os.open(LOG_PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


@job(idempotency_key=lambda i: f"noop:{i.n}", registry=registry)
async def noop(input: Item, ctx: JobContext) -> None:
    if NOOP_SLEEP_S:
        await anyio.sleep(NOOP_SLEEP_S)
    record(f"ran {ctx.job_id}")


@job(idempotency_key=lambda i: f"three:{i.n}", registry=registry)
async def three_steps(input: Item, ctx: JobContext) -> str:
    await ctx.step.run("one", record, "step one")
    await ctx.step.run("two", record, "step two")

    async def third() -> str:
        if BLOCK_STEP3:
            record("step three started")
            await anyio.sleep(3600)  # killed here
        record("step three")
        return "three"

    result: str = await ctx.step.run("three", third)
    return result


async def main() -> None:
    global LOG_PATH, BLOCK_STEP3, NOOP_SLEEP_S
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("log")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--lease-ms", type=int, default=2_000)
    parser.add_argument("--poll-ms", type=int, default=100)
    parser.add_argument("--noop-sleep-ms", type=int, default=0)
    parser.add_argument("--block-step3", action="store_true")
    args = parser.parse_args()
    LOG_PATH, BLOCK_STEP3 = args.log, args.block_step3
    NOOP_SLEEP_S = args.noop_sleep_ms / 1000
    jobs = await connect(args.url, clock=SystemClock(), registry=registry)
    worker = Worker(
        jobs,
        concurrency=args.concurrency,
        lease_ms=args.lease_ms,
        poll_ms=args.poll_ms,
        drain_ms=5_000,
    )
    async with anyio.create_task_group() as tg:

        async def stop_on_sigterm() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM) as signals:
                async for _ in signals:
                    worker.stop()
                    return

        tg.start_soon(stop_on_sigterm)
        record("worker up")
        await worker.run()
        tg.cancel_scope.cancel()
    await jobs.close()


if __name__ == "__main__":
    anyio.run(main)
