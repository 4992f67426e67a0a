"""A body raising SystemExit (argparse's `parser.error`) or a stray CancelledError fails that
job alone: the worker and the jobs beside it run on."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Retry, Worker, job
from engine.drivers.memory import MemoryDriver
from engine.testing.blocked import wait_all_tasks_blocked


class Item(BaseModel):
    n: int


def _exit() -> None:
    sys.exit(2)


def _stray_cancel() -> None:
    raise asyncio.CancelledError()


async def _cancelled_child() -> None:
    child = asyncio.get_running_loop().create_task(asyncio.Event().wait())
    child.cancel()
    await child  # the child's cancellation, re-raised in this body: not the worker's


def declare(registry: JobRegistry, raises: Callable[[], object]) -> anyio.Event:
    """`doomed` raises through `raises`; `sibling` waits for the returned event, then ends."""
    release = anyio.Event()

    @job(idempotency_key=lambda i: str(i.n), registry=registry, retry=Retry(attempts=1))
    async def doomed(input: Item, ctx: JobContext) -> None:
        outcome = raises()
        if asyncio.iscoroutine(outcome):
            await outcome

    @job(idempotency_key=lambda i: str(i.n), registry=registry)
    async def sibling(input: Item, ctx: JobContext) -> str:
        await release.wait()
        return "ok"

    return release


@pytest.mark.parametrize(
    ("raises", "named"),
    [
        (_exit, "SystemExit"),
        (_stray_cancel, "CancelledError"),
        (_cancelled_child, "CancelledError"),
    ],
)
async def test_a_body_that_exits_or_cancels_itself_fails_alone(
    clock: ManualClock, registry: JobRegistry, raises: Callable[[], object], named: str
) -> None:
    release = declare(registry, raises)
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    worker = Worker(jobs, prune=False)
    with anyio.fail_after(10):
        await worker.start()
        sibling = await jobs.enqueue("sibling", {"n": 1})
        doomed = await jobs.enqueue("doomed", {"n": 1})
        while (await jobs.get(doomed.id)).state == "ready" or worker.in_flight > 1:
            await wait_all_tasks_blocked()
        failed = await jobs.get(doomed.id)
        assert failed.state == "dead" and failed.last_error is not None
        assert failed.last_error.code == "JOB_FAILED" and named in failed.last_error.cause
        # The worker is still up: the sibling finishes, and a new job runs.
        release.set()
        later = await jobs.enqueue("sibling", {"n": 2})
        while (await jobs.get(later.id)).state != "done":
            await wait_all_tasks_blocked()
        await worker.stop()
    assert (await jobs.get(sibling.id)).state == "done"
