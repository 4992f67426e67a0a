"""A task counts as scheduled only while a worker that runs a scheduler declares it: a worker
started with `scheduler=False` fires nothing, so when every live worker is one, `describe_jobs`
shows the task not scheduled and `diagnose_queue` reports TASK_NOT_SCHEDULED. A worker without
a scheduler beside one with it must not hide the one that fires the task (their job rows are one
per job name, the last writer's)."""

from __future__ import annotations

from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Worker, job
from engine.tasks import task
from mcp_jobs.config import Settings
from mcp_jobs.operations.diagnose import diagnose_queue
from mcp_jobs.operations.jobs import describe_jobs
from mcp_jobs.operations.models import Finding
from mcp_jobs.operations.scope import Scope

APP = "shop.reports"
# Past the live-worker window (engine.descriptors.STALE_AFTER_MS): a worker silent this long is
# gone.
GONE_MS = 31_000


class At(BaseModel):
    at: int


def declare(registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: str(i.at), queue="reports", registry=registry)
    async def report(input: At, ctx: JobContext) -> None:
        pass

    task(
        name="hourly-report",
        cron="0 * * * *",
        tz="UTC",
        enqueue=lambda at: [(report, {"at": at})],
        registry=registry,
    )


def scope_of(jobs: Jobs) -> Scope:
    return Scope(jobs, Settings(), "diagnose_queue", "test", face="mcp")


async def not_scheduled(jobs: Jobs) -> list[Finding]:
    findings = (await diagnose_queue(scope_of(jobs))).findings or []
    return [f for f in findings if f.code == "TASK_NOT_SCHEDULED"]


async def scheduled(jobs: Jobs) -> bool | None:
    (view,) = (await describe_jobs(scope_of(jobs))).tasks or []
    return view.scheduled


async def test_a_task_only_workers_without_a_scheduler_declare_is_not_scheduled(
    jobs: Jobs, registry: JobRegistry
) -> None:
    declare(registry)
    worker = Worker(jobs, apps=[APP], scheduler=False)
    assert worker.scheduler is None  # it fires nothing
    await worker.publish_descriptors()
    assert await scheduled(jobs) is False
    (finding,) = await not_scheduled(jobs)
    assert '"hourly-report"' in finding.cause and "scheduler=False" in finding.cause


async def test_a_worker_without_a_scheduler_does_not_hide_the_one_that_schedules(
    jobs: Jobs, registry: JobRegistry
) -> None:
    declare(registry)
    firing = Worker(jobs, apps=[APP])
    assert firing.scheduler is not None
    await firing.publish_descriptors()
    # The other publishes the same job rows after it: the task is still fired by the first.
    await Worker(jobs, apps=[APP], scheduler=False).publish_descriptors()
    assert await scheduled(jobs) is True
    assert await not_scheduled(jobs) == []


async def test_once_the_scheduling_worker_is_gone_the_others_do_not_keep_the_task_scheduled(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    declare(registry)
    await Worker(jobs, apps=[APP]).publish_descriptors()
    clock.advance(GONE_MS)
    await Worker(jobs, apps=[APP], scheduler=False).publish_descriptors()
    assert await scheduled(jobs) is False
    assert len(await not_scheduled(jobs)) == 1
