"""`python -m benchmarks.rate_limit_hold --dsn …`: does a job rate limit hold across workers?
(#24: within 5% of its configured rate over a minute, with two workers.)

On one fresh database, a backlog larger than the minute can start is enqueued (untimed), then
two `Worker`s, each on a driver of its own (its own pool, as two machines would have), run a job
declared `rate_limit=RateLimit(--rate)` for `--seconds`. Each start is timed in the handler; the
achieved rate is the starts within `--seconds` of the first, divided by `--seconds`, and its
error is against the configured rate. Also reported: the starts per worker, the sheds, and the
sheds per job that started (a shed job reserves its start, so each is shed once at most), and
the largest number of starts in any 1/rate-second window and in any second (the bunching seen,
to compare with the declared burst and with rate + burst - 1).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from benchmarks.databases import add_database_arguments, dsn_missing, fresh_database
from engine import Enqueue, JobContext, JobRegistry, Worker, connect, job
from engine.observe import WorkerEvent
from engine.rate_limits import RateLimit

REGISTRY = JobRegistry()
# The handler's start times (wall clock: the rate is a wall-clock promise).
STARTS: list[float] = []


class Item(BaseModel):
    i: int


def _key(item: Item) -> str:
    return str(item.i)


def declare(rate: int, burst: int) -> None:
    @job(
        idempotency_key=_key,
        name="rate_limited",
        queue="bench",
        rate_limit=RateLimit(rate, per=1, burst=burst),
        registry=REGISTRY,
    )
    async def rate_limited(input: Item, ctx: JobContext) -> None:
        STARTS.append(time.time())


async def run(
    url: str, *, rate: int, burst: int, seconds: float, concurrency: int
) -> dict[str, Any]:
    declare(rate, burst)
    backlog = int(rate * seconds * 1.5) + 100
    jobs = await connect(url, registry=REGISTRY)
    try:
        for start in range(0, backlog, 1000):
            await jobs.enqueue_many(
                [
                    Enqueue("rate_limited", {"i": i})
                    for i in range(start, min(backlog, start + 1000))
                ]
            )
    finally:
        await jobs.close()
    sheds = 0
    per_worker: dict[str, int] = {}
    shed_jobs: dict[str, int] = {}
    started: list[str] = []

    def count(event: WorkerEvent) -> None:
        nonlocal sheds
        if event.kind == "shed" and event.cap_kind == "rate":
            sheds += 1
            shed_jobs[event.job_id] = shed_jobs.get(event.job_id, 0) + 1
        elif event.kind == "succeeded":
            per_worker[event.worker_id] = per_worker.get(event.worker_id, 0) + 1
            started.append(event.job_id)

    clients = [await connect(url, registry=REGISTRY) for _ in range(2)]
    workers = [
        Worker(c, concurrency=concurrency, listeners=[count], scheduler=False, prune=False)
        for c in clients
    ]
    try:
        for worker in workers:
            await worker.start()
        await asyncio.sleep(seconds + 2)
    finally:
        for worker in workers:
            await worker.stop()
        for client in clients:
            await client.close()
    every = sorted(STARTS)
    first = every[0]
    within = [t for t in every if t < first + seconds]
    achieved = len(within) / seconds
    # The most starts in any window of one interval (the GCRA's burst bound is `burst` there).
    interval, most, low = 1 / rate, 0, 0
    for high, t in enumerate(within):
        while t - within[low] >= interval:
            low += 1
        most = max(most, high - low + 1)
    # And in any one second (GCRA's bound there: rate + burst - 1).
    most_1s, low = 0, 0
    for high, t in enumerate(within):
        while t - within[low] >= 1:
            low += 1
        most_1s = max(most_1s, high - low + 1)
    started_sheds = [shed_jobs.get(j, 0) for j in started]
    return {
        "configured_per_s": rate,
        "burst": burst,
        "seconds": seconds,
        "backlog": backlog,
        "starts_within": len(within),
        "achieved_per_s": achieved,
        "error_pct": 100 * (achieved - rate) / rate,
        "starts_per_worker": sorted(per_worker.values()),
        "rate_sheds": sheds,
        "sheds_per_start": sheds / max(1, len(every)),
        "sheds_per_started_job": sum(started_sheds) / max(1, len(started)),
        "most_sheds_of_a_started_job": max(started_sheds, default=0),
        "most_starts_in_an_interval": most,
        "most_starts_in_a_second": most_1s,
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rate_limit_hold")
    add_database_arguments(parser)
    parser.add_argument("--rate", type=int, default=50, help="the job's limit, starts per second")
    parser.add_argument(
        "--burst",
        type=int,
        default=2,
        help="the limit's burst (1: strictly spaced, so each start's pickup lag is lost)",
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to measure")
    parser.add_argument("--concurrency", type=int, default=16, help="per worker")
    parser.add_argument("--json", type=Path, help="write the result here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if dsn_missing(args):
        return 2

    async def go() -> dict[str, Any]:
        async with fresh_database(args.dsn, args.backend, "rate_limit_hold") as url:
            return await run(
                url,
                rate=args.rate,
                burst=args.burst,
                seconds=args.seconds,
                concurrency=args.concurrency,
            )

    result = asyncio.run(go())
    result["backend"] = args.backend
    result["load_avg"] = os.getloadavg()[0]
    print(
        f"rate limit {result['configured_per_s']}/s burst {result['burst']}, two workers, "
        f"{result['seconds']:g} s: "
        f"{result['achieved_per_s']:.2f} starts/s ({result['error_pct']:+.2f}%), "
        f"per worker {result['starts_per_worker']}, {result['rate_sheds']} sheds "
        f"({result['sheds_per_start']:.1f} per start; {result['sheds_per_started_job']:.2f} per "
        f"job started, at most {result['most_sheds_of_a_started_job']}), at most "
        f"{result['most_starts_in_an_interval']} starts in one interval and "
        f"{result['most_starts_in_a_second']} in one second"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
