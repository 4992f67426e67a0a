"""`retry_job from_step` on a cancelled job: JOB_NOT_RETRYABLE's fix and next_call keep the step
the caller asked to rerun from (they were a plain retry in the same run, which is not what was
asked), and the next_call, issued, is that rerun."""

from __future__ import annotations

from engine import Jobs, ManualClock, Worker
from mcp_jobs.config import Settings
from tests.mcp.conftest import OpenMcp
from tests.support.fix_lines import command_words


async def test_a_rerun_of_a_cancelled_job_is_fixed_as_a_rerun_from_the_same_step(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    made = await jobs.enqueue("fulfil", {"order_id": 1})
    await Worker(jobs).run_until_idle()  # "reserve" stored, asleep in "settle"
    await jobs.cancel(made.id)
    old_run = (await jobs.get(made.id)).run_id
    async with open_mcp(Settings(database_url="sqlite:///shop.db")) as mcp:
        asked = {"job_id": made.id, "from_step": "reserve"}
        refused = await mcp.fails("retry_job", asked, "JOB_NOT_RETRYABLE")
        assert refused["next_call"] == {
            "tool": "retry_job",
            "arguments": {**asked, "include_cancelled": True},
        }
        words = command_words(refused["fix"])
        assert words[:4] == ["mcp-jobs", "jobs", "retry", made.id]
        assert "--include-cancelled" in words
        assert words[words.index("--from-step") + 1] == "reserve"
        rerun = await mcp.ok("retry_job", refused["next_call"]["arguments"])
    assert rerun["rerun_of"] == old_run and rerun["job"]["state"] == "ready"
