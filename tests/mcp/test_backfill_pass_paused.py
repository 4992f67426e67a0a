"""A backfill write whose pass a pause holds says so (exploreY: `backfill --write --wait` ended
`settled: false` with no reason; only diagnose named the pause), as enqueue_job and
wait_for_job do: QUEUE_PAUSED for the pass's queue, JOB_PAUSED for the pass job, with the
resume for next_call."""

from __future__ import annotations

import pytest

from engine import Jobs, ManualClock, Worker
from engine.backfill import BackfillRegistry
from engine.backfill.pass_job import PASS_QUEUE
from engine.internal_jobs import PASS_JOB
from tests.backfill.support import Customers
from tests.mcp.conftest import OpenMcp
from tests.mcp.test_backfill_tools import _followed_write


@pytest.mark.parametrize("followed", [False, True], ids=["write", "followed write"])
@pytest.mark.parametrize(
    ("paused", "code"),
    [({"queue": PASS_QUEUE}, "QUEUE_PAUSED"), ({"job": PASS_JOB}, "JOB_PAUSED")],
    ids=["queue", "job"],
)
async def test_a_write_whose_pass_a_pause_holds_says_so(
    jobs: Jobs,
    clock: ManualClock,
    backfill_registry: BackfillRegistry,
    customers: Customers,
    open_mcp: OpenMcp,
    paused: dict[str, str],
    code: str,
    followed: bool,
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    await jobs.pause(**paused, reason="maintenance")
    worker = Worker(jobs)
    async with open_mcp() as mcp:
        if followed:
            answer = await _followed_write(mcp, worker, clock)
            assert answer["settled"] is False and customers.remaining() == 25
        else:
            answer = await mcp.ok("run_backfill", {"name": "normalize_emails", "write": True})
        (notice,) = [n for n in answer.get("notices") or [] if n["code"] == code]
        assert notice["job_ids"] == [answer["start"]["job_id"]], notice
        call = notice["next_call"]
        assert call["tool"] == "resume_queue", notice
        await mcp.ok(call["tool"], call["arguments"])
    await worker.run_until_idle()
    assert customers.remaining() == 0
