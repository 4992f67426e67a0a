"""A backfill write whose pass a pause holds says so (exploreY: `backfill --write --wait` ended
`settled: false` with no reason; only diagnose named the pause), as enqueue_job and
wait_for_job do: QUEUE_PAUSED for the pass's queue, JOB_PAUSED for the pass job, with the
resume for next_call."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from engine import Jobs, ManualClock, Worker
from engine.backfill import BackfillRegistry
from engine.backfill.pass_job import PASS_QUEUE
from engine.internal_jobs import PASS_JOB
from engine.testing.blocked import wait_all_tasks_blocked
from tests.backfill.support import Customers
from tests.mcp.conftest import OpenMcp

PAUSES = [({"queue": PASS_QUEUE}, "QUEUE_PAUSED"), ({"job": PASS_JOB}, "JOB_PAUSED")]


def _held(answer: dict[str, Any], code: str) -> dict[str, Any]:
    (notice,) = [n for n in answer.get("notices") or [] if n["code"] == code]
    assert notice["job_ids"] == [answer["start"]["job_id"]], notice
    assert notice["next_call"]["tool"] == "resume_queue", notice
    return notice


@pytest.mark.parametrize(("paused", "code"), PAUSES, ids=["queue", "job"])
async def test_a_write_whose_pass_a_pause_holds_says_so(
    jobs: Jobs,
    backfill_registry: BackfillRegistry,
    customers: Customers,
    open_mcp: OpenMcp,
    paused: dict[str, str],
    code: str,
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    await jobs.pause(**paused, reason="maintenance")
    async with open_mcp() as mcp:
        answer = await mcp.ok("run_backfill", {"name": "normalize_emails", "write": True})
        notice = _held(answer, code)
        await mcp.ok(notice["next_call"]["tool"], notice["next_call"]["arguments"])
    await Worker(jobs).run_until_idle()
    assert customers.remaining() == 0


@pytest.mark.parametrize(("paused", "code"), PAUSES, ids=["queue", "job"])
async def test_a_followed_write_whose_pass_a_pause_holds_says_so(
    jobs: Jobs,
    clock: ManualClock,
    backfill_registry: BackfillRegistry,
    customers: Customers,
    open_mcp: OpenMcp,
    paused: dict[str, str],
    code: str,
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    await jobs.pause(**paused, reason="maintenance")
    worker = Worker(jobs)
    answer: dict[str, Any] = {}
    async with open_mcp() as mcp:

        async def write() -> None:
            arguments = {"name": "normalize_emails", "write": True, "wait_seconds": 5}
            answer.update(await mcp.ok("run_backfill", arguments))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(write)
                while not answer:
                    await wait_all_tasks_blocked()
                    await worker.run_until_idle()
                    clock.advance(250)
    assert answer["settled"] is False
    _held(answer, code)
    assert customers.remaining() == 25
