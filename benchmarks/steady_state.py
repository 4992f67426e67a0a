"""`python -m benchmarks.steady_state --dsn …`: a queue at steady state keeps a bounded table.
(#21: enqueue rate = completion rate for 10 minutes with a retention of 1 minute.)

In one process, on one fresh database: a producer enqueues `--rate` jobs a second (in batches
every 100 ms) for `--minutes`, while one `Worker` (its own pruner on, every state kept
`--retain-s`, a pass every `--prune-every-s`) runs them; each job writes one step. Every
`--sample-s` the run prints the rows in the jobs and steps tables, what was enqueued and run so
far, and what the pruner deleted. The table should level off near rate × (retention + interval)
rather than grow with the run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncpg
from pydantic import BaseModel

from benchmarks import history
from benchmarks.databases import add_database_arguments, dsn_missing, fresh_database
from engine import Enqueue, JobContext, JobRegistry, Jobs, Worker, connect, job
from engine.pruner import PrunePass
from engine.retention import PRUNE_EVERY_ENV, Retention

REGISTRY = JobRegistry()
_ran = 0


class Item(BaseModel):
    i: int


def _key(item: Item) -> str:
    return str(item.i)


async def _one(k: int) -> int:
    return k


@job(registry=REGISTRY, name="steady", queue="steady", idempotency_key=_key)
async def steady(input: Item, ctx: JobContext) -> None:
    global _ran
    await ctx.step.run("one", _one, input.i)
    _ran += 1


async def _counts(url: str) -> tuple[int, int]:
    if url.startswith("sqlite"):
        db = sqlite3.connect(history.sqlite_path(url), timeout=30)
        try:
            jobs = db.execute("SELECT count(*) FROM mcp_jobs_jobs").fetchone()[0]
            steps = db.execute("SELECT count(*) FROM mcp_jobs_steps").fetchone()[0]
        finally:
            db.close()
        return int(jobs), int(steps)
    conn = await asyncpg.connect(url)
    try:
        jobs = await conn.fetchval("SELECT count(*) FROM mcp_jobs.jobs")
        steps = await conn.fetchval("SELECT count(*) FROM mcp_jobs.steps")
    finally:
        await conn.close()
    return int(jobs), int(steps)


async def run(
    url: str,
    *,
    rate: int,
    seconds: float,
    retain_s: int,
    concurrency: int,
    sample_s: float,
    echo: Any = print,
) -> list[dict[str, Any]]:
    jobs: Jobs = await connect(url, registry=REGISTRY, migrate=True)
    keep = f"{retain_s}s"
    worker = Worker(
        jobs,
        concurrency=concurrency,
        retention=Retention(done=keep, failed=keep, dead=keep, cancelled=keep),
        prune=True,
        scheduler=False,
        outbox_relay=False,
    )
    pruned = 0

    def heard(report: PrunePass) -> None:
        nonlocal pruned
        pruned += sum(report.by_state().values())

    if worker.pruner is None:
        raise RuntimeError("the worker has no pruner")
    worker.pruner.add_listener(heard)
    samples: list[dict[str, Any]] = []
    enqueued = 0
    started = time.monotonic()

    async def produce() -> None:
        nonlocal enqueued
        per_tick = max(1, rate // 10)
        tick = 0
        while time.monotonic() - started < seconds:
            tick += 1
            items = [Enqueue(steady, Item(i=enqueued + k)) for k in range(per_tick)]
            await jobs.enqueue_many(items)
            enqueued += per_tick
            delay = started + tick * 0.1 - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)

    async def sample() -> None:
        at = time.monotonic() - started
        rows, steps = await _counts(url)
        row = {
            "t_s": round(at),
            "jobs_rows": rows,
            "steps_rows": steps,
            "enqueued": enqueued,
            "ran": _ran,
            "pruned": pruned,
        }
        samples.append(row)
        echo(
            f"t={row['t_s']:5d}s  jobs rows {rows:8,}  steps rows {steps:8,}  "
            f"enqueued {enqueued:9,}  ran {_ran:9,}  pruned {pruned:9,}"
        )

    try:
        async with worker:
            producer = asyncio.create_task(produce())
            while not producer.done():
                await asyncio.sleep(min(sample_s, max(0.0, seconds - (time.monotonic() - started))))
                await sample()
            await producer
    finally:
        await jobs.close()
    return samples


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.steady_state")
    add_database_arguments(parser)
    parser.add_argument("--rate", type=int, default=500, help="jobs enqueued a second")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--retain-s", type=int, default=60, help="retention of every state")
    parser.add_argument("--prune-every-s", type=int, default=10, help="the pruner's interval")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--sample-s", type=float, default=30.0)
    parser.add_argument("--json", type=Path, help="write the samples here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if dsn_missing(args):
        return 2
    # The worker's pruner reads its interval from the environment, as `mcp-jobs worker` does.
    os.environ[PRUNE_EVERY_ENV] = f"{args.prune_every_s}s"

    async def go() -> list[dict[str, Any]]:
        async with fresh_database(args.dsn, args.backend, "steady_state") as url:
            return await run(
                url,
                rate=args.rate,
                seconds=args.minutes * 60,
                retain_s=args.retain_s,
                concurrency=args.concurrency,
                sample_s=args.sample_s,
            )

    try:
        import uvloop
    except ImportError:
        samples = asyncio.run(go())
    else:
        samples = uvloop.run(go())
    if args.json:
        meta = {k: v for k, v in vars(args).items() if k not in ("dsn", "json")}
        args.json.write_text(json.dumps({"meta": meta, "samples": samples}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
