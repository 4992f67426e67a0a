"""A worker PROCESS for the fault tests of every server-backed driver:
`python -m tests.support.fault_worker URL LOG [...]` (started by `worker_processes.worker_process`).

Its jobs append one line per execution to LOG ("ran ID ATTEMPT"), and one per ack the server
answered ("acked ID"); O_APPEND, one write per line, so lines from concurrent jobs never
interleave: that is how a test counts what really ran and what was acknowledged. SIGTERM drains it.
With `--block-step N` the three-step job hangs inside its step N, for a test to SIGKILL it.
"""

from __future__ import annotations

import argparse
import os
import signal

import anyio
from pydantic import BaseModel

from engine import JobContext, JobRegistry, SystemClock, Worker, connect, job
from engine.observe import WorkerEvent

registry = JobRegistry()
LOG_PATH = ""
BLOCK_STEP = 0
NOOP_SLEEP_S = 0.0
STEP_WORDS = ("one", "two", "three")


class Item(BaseModel):
    n: int


def acked(event: WorkerEvent) -> None:
    # Emitted only after the ack's reply came back: the server had the job done by then.
    if event.kind == "succeeded":
        record(f"acked {event.job_id}")


def record(line: str) -> str:
    fd = os.open(LOG_PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)
    return line


@job(idempotency_key=lambda i: f"noop:{i.n}", registry=registry)
async def noop(input: Item, ctx: JobContext) -> None:
    if NOOP_SLEEP_S:
        await anyio.sleep(NOOP_SLEEP_S)
    record(f"ran {ctx.job_id} {ctx.attempt}")


@job(idempotency_key=lambda i: f"three:{i.n}", registry=registry)
async def three_steps(input: Item, ctx: JobContext) -> str:
    done = []
    for number, word in enumerate(STEP_WORDS, start=1):

        async def step(number: int = number, word: str = word) -> str:
            if number == BLOCK_STEP:
                record(f"step {word} started")
                await anyio.sleep(3600)  # killed here
            return record(f"step {word} {input.n}")

        done.append(await ctx.step.run(word, step))
    return " | ".join(done)


async def main() -> None:
    global LOG_PATH, BLOCK_STEP, NOOP_SLEEP_S
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("log")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--lease-ms", type=int, default=2_000)
    parser.add_argument("--poll-ms", type=int, default=100)
    parser.add_argument("--noop-sleep-ms", type=int, default=0)
    parser.add_argument("--block-step", type=int, default=0, choices=range(4))
    args = parser.parse_args()
    LOG_PATH, BLOCK_STEP = args.log, args.block_step
    NOOP_SLEEP_S = args.noop_sleep_ms / 1000
    jobs = await connect(args.url, clock=SystemClock(), registry=registry)
    worker = Worker(
        jobs,
        concurrency=args.concurrency,
        lease_ms=args.lease_ms,
        poll_ms=args.poll_ms,
        drain_ms=5_000,
        listeners=[acked],
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
