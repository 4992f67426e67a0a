"""A jobs database holding every state, written through the engine's own API.

What `seed` leaves (times on a manual clock started ten minutes before the wall clock, so every
seeded time is in the past for the dashboard, which reads the wall clock, and its `done` rows
fall inside the stats' recent window):

- mail: `DONE_GREETINGS` done, `READY_GREETINGS` ready, one delayed a day, one cancelled;
- orders: `ship_order` dead after three runs — steps reserve (1 attempt), charge (failed once,
  then completed), notify (failed twice) — and two `fulfil` suspended on a day-long sleep;
- billing: `charge_invoice` dead with JOB_FAILED, `render_invoice` dead with JOB_TIMEOUT, one
  `refund` failed;
- reports: paused, with `build_report` jobs waiting;
- imports: one `import_feed` running, held by the worker `WORKER_ID` (presence on the wall clock);
- the backfill `tag_invoices`, completed by its pass job.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field

from engine import JobRegistry, Jobs, ManualClock, Worker, connect
from engine.backfill import BackfillRegistry, Backfills
from engine.enqueue_items import Enqueue
from mcp_jobs.config import DEFAULT_ENVIRONMENT
from schemas.stats import WorkerInfo
from tests.browser.app_jobs import BACKFILL, declare

DONE_GREETINGS = 130
READY_GREETINGS = 4
DEAD_CHARGES = 3
DEAD_RENDERS = 2
SUSPENDED_ORDERS = 2
WAITING_REPORTS = 3
WORKER_ID = "browser-worker-1"
DAY_MS = 86_400_000
# Retry delays here are a second; a few rounds settle every retried job.
SETTLE_ROUNDS = 10


@dataclass
class Seeded:
    url: str
    ship_order: str = ""
    failed: str = ""
    cancelled: str = ""
    running: str = ""
    dead: list[str] = field(default_factory=list)
    every: list[str] = field(default_factory=list)


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


async def beat(jobs: Jobs, started_at: int | None = None) -> None:
    """The seeded worker's presence beat, on the wall clock: live for the dashboard now."""
    now = wall_ms()
    await jobs.driver.worker_seen(
        WorkerInfo(
            id=WORKER_ID,
            hostname=socket.gethostname(),
            pid=os.getpid(),
            queues=["imports"],
            concurrency=1,
            started_at=started_at or now,
            last_seen_at=now,
        )
    )


async def seed(url: str) -> Seeded:
    clock = ManualClock(wall_ms() - 10 * 60_000)
    registry, backfills = JobRegistry(), BackfillRegistry()
    declare(registry, backfills)
    jobs = await connect(url, clock=clock, registry=registry)
    try:
        return await _seed(jobs, clock, backfills, url)
    finally:
        await jobs.close()


async def _seed(jobs: Jobs, clock: ManualClock, backfills: BackfillRegistry, url: str) -> Seeded:
    out = Seeded(url)
    settled = [Enqueue("greet", {"user_id": n}) for n in range(1, DONE_GREETINGS + 1)]
    settled += [Enqueue("charge_invoice", {"invoice_id": n}) for n in range(DEAD_CHARGES)]
    settled += [Enqueue("render_invoice", {"invoice_id": n}) for n in range(DEAD_RENDERS)]
    settled += [Enqueue("fulfil", {"order_id": n}) for n in range(SUSPENDED_ORDERS)]
    results = await jobs.enqueue_many(settled)
    out.ship_order = (await jobs.enqueue("ship_order", {"order_id": 7})).id
    out.failed = (await jobs.enqueue("refund", {"invoice_id": 9})).id
    start = await Backfills(jobs, registry=backfills, environment=DEFAULT_ENVIRONMENT).write(
        BACKFILL, actor="seed"
    )
    pending = [r.id for r in results] + [out.ship_order, out.failed, start.job_id]

    worker = Worker(jobs, queues="*", scheduler=False, outbox_relay=False, prune=False)
    for _ in range(SETTLE_ROUNDS):
        await worker.run_until_idle()
        records = [await jobs.get(job_id) for job_id in pending]
        if not any(r.state in ("ready", "delayed", "running") for r in records):
            break
        clock.advance(2_000)
    else:
        raise AssertionError("the seeded jobs did not settle")
    out.dead = [r.id for r in records if r.state == "dead"]

    # Left waiting: nothing runs them from here on.
    for n in range(READY_GREETINGS):
        await jobs.enqueue("greet", {"user_id": 1000 + n})
    await jobs.enqueue("greet", {"user_id": 2000}, delay=DAY_MS / 1000)
    out.cancelled = (await jobs.enqueue("greet", {"user_id": 3000})).id
    await jobs.cancel(out.cancelled)
    for n in range(WAITING_REPORTS):
        await jobs.enqueue("build_report", {"user_id": n})
    await jobs.pause(queue="reports", actor="seed", reason="quarterly close")
    out.running = (await jobs.enqueue("import_feed", {"feed": "catalog"})).id
    (claimed,) = await jobs.driver.claim(WORKER_ID, 1, DAY_MS, ["imports"])
    assert claimed.record.id == out.running
    await beat(jobs)

    out.every = await all_ids(jobs)
    return out


async def all_ids(jobs: Jobs) -> list[str]:
    """Every job id, through the engine's own paging."""
    ids: list[str] = []
    cursor: str | None = None
    while True:
        page = await jobs.list(limit=100, cursor=cursor)
        ids += [r.id for r in page.jobs]
        cursor = page.next_cursor
        if cursor is None:
            return ids
