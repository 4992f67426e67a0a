"""An operator's cancel that lands while a job's step runs stops it at that step's write (the
write is refused: the job is no longer running) — and the worker says `cancelled`, as for a
cancel its heartbeat carried. It said `lease_lost` (a warning: "another worker may run it"),
which sent whoever read the log after a worker fault that never happened."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, Worker, job
from engine.observe import WorkerEvent


class Item(BaseModel):
    n: int


@pytest.mark.parametrize("step_or_ack", ["step", "ack"])
async def test_a_cancel_during_a_step_is_reported_as_cancelled(
    jobs: Jobs, registry: JobRegistry, step_or_ack: str
) -> None:
    entered, release = anyio.Event(), anyio.Event()

    async def wait_for_release() -> int:
        entered.set()
        await release.wait()
        return 1

    @job(name="slow", idempotency_key=lambda i: str(i.n), registry=registry)
    async def slow(input: Item, ctx: JobContext) -> int:
        if step_or_ack == "step":
            return int(await ctx.step.run("wait", wait_for_release))
        return await wait_for_release()

    enqueued = await jobs.enqueue(slow, {"n": 1})
    events: list[WorkerEvent] = []
    worker = Worker(jobs, lease_ms=30_000, scheduler=False, outbox_relay=False, prune=False)
    worker.add_listener(events.append)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run_until_idle)
            await entered.wait()
            await jobs.cancel(enqueued.id, actor="test")
            release.set()  # the step's (or the result's) write is refused now

    assert (await jobs.get(enqueued.id)).state == "cancelled"
    kinds = [e.kind for e in events if e.job_id == enqueued.id]
    assert "lease_lost" not in kinds, kinds
    assert kinds[-1] == "cancelled", kinds
