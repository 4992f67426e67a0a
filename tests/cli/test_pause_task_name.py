"""`queues pause --job NAME` where NAME is a cron task's, not a job's: the pause holds nothing,
and its JOB_UNKNOWN notice says NAME is a task and that pausing the job it enqueues holds it,
with that command (the job read from the task's own jobs; before it fired, how to find it)."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, job
from engine.tasks import Scheduler, task
from mcp_jobs.cli import main
from mcp_jobs.config import Settings
from mcp_jobs.operations.models import Finding
from mcp_jobs.operations.pauses import pause_queue, resume_queue
from mcp_jobs.operations.scope import Scope
from tests.support.fix_lines import command_words

MINUTE = 60_000


class At(BaseModel):
    at: int


def _notice(notices: list[Finding] | None) -> Finding:
    (notice,) = notices or []
    return notice


async def test_pausing_a_task_name_says_which_job_to_pause(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    @job(idempotency_key=lambda i: str(i.at), queue="ticks", registry=registry)
    async def tick(input: At, ctx: JobContext) -> None:
        pass

    task(
        name="every-minute",
        cron="* * * * *",
        tz="UTC",
        enqueue=lambda at: [(tick, {"at": at})],
        registry=registry,
    )
    scope = Scope(jobs, Settings(), "queues pause", "test", face="cli")
    scheduler = Scheduler(jobs, holder="only")

    before = _notice((await pause_queue(scope, job="every-minute")).notices)
    assert before.code == "JOB_UNKNOWN" and "cron task" in before.cause
    assert command_words(before.fix)[:4] == ["mcp-jobs", "jobs", "describe", "every-minute"]
    await resume_queue(scope, job="every-minute")

    clock.advance(MINUTE)
    assert (await scheduler.round()).fired
    notice = _notice((await pause_queue(scope, job="every-minute")).notices)
    assert notice.code == "JOB_UNKNOWN" and "cron task" in notice.cause and '"tick"' in notice.cause
    assert command_words(notice.fix)[:5] == ["mcp-jobs", "queues", "pause", "--job", "tick"]
    assert notice.next_call is not None and notice.next_call.tool == "pause_queue"
    assert notice.next_call.arguments == {"job": "tick"}
    # The pause of the task's name is still in force, and the cause says how to lift it.
    assert "queues resume --job every-minute" in notice.cause


@pytest.mark.drivers("sqlite", reason="the CLI runs the fix line against the same file")
async def test_the_pause_it_offers_runs_as_given(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, database_url: str
) -> None:
    @job(idempotency_key=lambda i: str(i.at), queue="ticks", registry=registry)
    async def tick(input: At, ctx: JobContext) -> None:
        pass

    task(name="nightly", cron="* * * * *", tz="UTC", enqueue=lambda at: [(tick, {"at": at})],
         registry=registry)  # fmt: skip
    scheduler = Scheduler(jobs, holder="only")
    clock.advance(MINUTE)
    assert (await scheduler.round()).fired
    scope = Scope(jobs, Settings(database_url=database_url), "queues pause", "test", face="cli")
    notice = _notice((await pause_queue(scope, job="nightly")).notices)

    words = command_words(notice.fix)
    assert await anyio.to_thread.run_sync(lambda: main(words[1:])) == 0
    assert {(p.kind, p.name) for p in await jobs.pauses()} >= {("job", "tick")}
