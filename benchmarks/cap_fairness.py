"""`python -m benchmarks.cap_fairness --dsn …`: do concurrency caps hold back only their own jobs?

Two runs on one fresh database, one worker (concurrency 16), real clock:
- tenant: `--backlog` ready jobs of tenant `big` (bodies of `--tenant-body-ms`) behind a
  per-tenant cap of 2, then 20 jobs of tenant `small`. Reported: how long after its enqueue
  small's first job started, and how many of small's and big's started within `--seconds`.
- queue: `--queue-jobs` jobs (bodies of 50 ms) behind a queue cap of 3: the wall time to run
  them all, against the cap's own bound (jobs × 50 ms ÷ 3).
Both count the sheds (jobs claimed over a cap and handed back).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from benchmarks.databases import add_database_arguments, dsn_missing, fresh_database
from engine import Enqueue, JobContext, JobRegistry, Limits, Worker, connect, job
from engine.observe import WorkerEvent

QUEUE_BODY_S = 0.05
QUEUE_CAP = 3
SMALL_JOBS = 20


class Item(BaseModel):
    i: int


def _key(item: Item) -> str:
    return str(item.i)


class Sheds:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, event: WorkerEvent) -> None:
        if event.kind == "shed":
            self.count += 1


async def tenant_run(url: str, backlog: int, body_s: float, seconds: float) -> dict[str, Any]:
    registry = JobRegistry()
    starts: dict[str, list[float]] = {"big": [], "small": []}

    @job(idempotency_key=_key, name="per_tenant", registry=registry)
    async def per_tenant(input: Item, ctx: JobContext) -> None:
        starts[ctx.tenant_id or ""].append(time.monotonic())
        await asyncio.sleep(body_s)

    jobs = await connect(url, registry=registry)
    sheds = Sheds()
    try:
        for start in range(0, backlog, 1000):
            end = min(backlog, start + 1000)
            await jobs.enqueue_many(
                [Enqueue(per_tenant, {"i": i}, tenant_id="big") for i in range(start, end)]
            )
        enqueued = time.monotonic()
        await jobs.enqueue_many(
            [Enqueue(per_tenant, {"i": backlog + i}, tenant_id="small") for i in range(SMALL_JOBS)]
        )
        worker = Worker(
            jobs,
            concurrency=16,
            limits=Limits(per_tenant=2),
            listeners=[sheds],
            scheduler=False,
            prune=False,
        )
        await worker.start()
        await asyncio.sleep(seconds)
        await worker.stop()
    finally:
        await jobs.close()
    small = [t for t in starts["small"] if t < enqueued + seconds]
    return {
        "backlog": backlog,
        "seconds": seconds,
        "small_first_start_s": round(small[0] - enqueued, 3) if small else None,
        "small_started": len(small),
        "big_started": len([t for t in starts["big"] if t < enqueued + seconds]),
        "sheds": sheds.count,
    }


async def queue_run(url: str, count: int, deadline_s: float) -> dict[str, Any]:
    registry = JobRegistry()
    finished: list[float] = []
    all_ran = asyncio.Event()

    @job(idempotency_key=_key, name="per_queue", queue="capped", registry=registry)
    async def per_queue(input: Item, ctx: JobContext) -> None:
        await asyncio.sleep(QUEUE_BODY_S)
        finished.append(time.monotonic())
        if len(finished) >= count:
            all_ran.set()

    jobs = await connect(url, registry=registry)
    sheds = Sheds()
    try:
        await jobs.enqueue_many([Enqueue(per_queue, {"i": i}) for i in range(count)])
        worker = Worker(
            jobs,
            concurrency=16,
            limits=Limits(per_queue={"capped": QUEUE_CAP}),
            listeners=[sheds],
            scheduler=False,
            prune=False,
        )
        began = time.monotonic()
        await worker.start()
        with contextlib.suppress(TimeoutError):  # reported as the jobs that ran
            await asyncio.wait_for(all_ran.wait(), deadline_s)
        await worker.stop()
    finally:
        await jobs.close()
    return {
        "jobs": count,
        "ran": len(finished),
        "wall_s": round(finished[-1] - began, 2) if finished else None,
        "bound_s": round(count * QUEUE_BODY_S / QUEUE_CAP, 2),
        "sheds": sheds.count,
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cap_fairness")
    add_database_arguments(parser)
    parser.add_argument("--backlog", type=int, default=10_000, help="tenant big's ready jobs")
    parser.add_argument("--tenant-body-ms", type=int, default=200, help="each tenant job's body")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the tenant run lasts")
    parser.add_argument("--queue-jobs", type=int, default=300, help="jobs behind the queue cap")
    parser.add_argument("--json", type=Path, help="write the result here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if dsn_missing(args):
        return 2

    async def go() -> dict[str, Any]:
        async with fresh_database(args.dsn, args.backend, "cap_fairness_tenant") as url:
            tenant = await tenant_run(url, args.backlog, args.tenant_body_ms / 1000, args.seconds)
        async with fresh_database(args.dsn, args.backend, "cap_fairness_queue") as url:
            queue = await queue_run(url, args.queue_jobs, deadline_s=120)
        return {"tenant": tenant, "queue": queue}

    result = asyncio.run(go())
    result["backend"] = args.backend
    result["load_avg"] = os.getloadavg()[0]
    t, q = result["tenant"], result["queue"]
    print(
        f"tenant cap 2 behind {t['backlog']} of big's jobs: small's first start "
        f"{t['small_first_start_s']} s after its enqueue, {t['small_started']}/{SMALL_JOBS} of "
        f"small's and {t['big_started']} of big's started in {t['seconds']:g} s, "
        f"{t['sheds']} sheds; queue cap {QUEUE_CAP}: {q['ran']}/{q['jobs']} jobs of "
        f"{QUEUE_BODY_S * 1000:g} ms in {q['wall_s']} s (bound {q['bound_s']} s), "
        f"{q['sheds']} sheds"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
