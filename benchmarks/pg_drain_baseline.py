"""Baseline: drain N no-op jobs with one Worker at concurrency C on PostgreSQL; prints jobs/s.

    python benchmarks/pg_drain_baseline.py postgresql://user@127.0.0.1:5432/postgres

The DSN names a server (any database on it): the script creates a throwaway database there,
migrates it, enqueues the jobs in batches, then times one Worker from start until every job has
succeeded, and drops the database. Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import time
from urllib.parse import urlsplit, urlunsplit

import anyio
import asyncpg
from pydantic import BaseModel

from engine import Enqueue, JobContext, JobRegistry, SystemClock, Worker, WorkerEvent, connect, job

registry = JobRegistry()


class Item(BaseModel):
    n: int


@job(idempotency_key=lambda i: f"noop:{i.n}", registry=registry)
async def noop(input: Item, ctx: JobContext) -> None:
    return None


def on_database(dsn: str, database: str) -> str:
    return urlunsplit(urlsplit(dsn)._replace(path=f"/{database}"))


async def drain(url: str, jobs_count: int, concurrency: int, batch: int) -> None:
    jobs = await connect(url, clock=SystemClock(), registry=registry)
    try:
        started = time.perf_counter()
        for first in range(0, jobs_count, batch):
            last = min(first + batch, jobs_count)
            await jobs.enqueue_many([Enqueue(noop, {"n": n}) for n in range(first, last)])
        enqueue_s = time.perf_counter() - started
        print(f"enqueue: {jobs_count} jobs in {enqueue_s:.2f} s = {jobs_count / enqueue_s:,.0f}/s")

        done = 0
        finished = anyio.Event()

        def count(event: WorkerEvent) -> None:
            nonlocal done
            if event.kind == "succeeded":
                done += 1
                if done == jobs_count:
                    finished.set()

        worker = Worker(jobs, concurrency=concurrency, listeners=[count])
        async with anyio.create_task_group() as tg:
            started = time.perf_counter()
            tg.start_soon(worker.run)
            await finished.wait()
            drain_s = time.perf_counter() - started
            worker.stop()
        stats = {s.queue: s for s in await jobs.stats()}
        print(
            f"drain:   {jobs_count} jobs at concurrency {concurrency} in {drain_s:.2f} s"
            f" = {jobs_count / drain_s:,.0f} jobs/s (done={stats['default'].done})"
        )
    finally:
        await jobs.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dsn", help="postgresql://… of the server to use")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--batch", type=int, default=1_000, help="jobs per enqueue_many")
    args = parser.parse_args()
    name = f"mcp_jobs_bench_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(args.dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')  # our own generated name
        try:
            await drain(on_database(args.dsn, name), args.jobs, args.concurrency, args.batch)
        finally:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


if __name__ == "__main__":
    asyncio.run(main())
