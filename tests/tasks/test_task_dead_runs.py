"""A task that fires on time but whose jobs die is not healthy: `describe_jobs` says which of its
jobs died (read from the newest dead jobs, by the `task:<name>` they were enqueued by), and
`diagnose_queue` reports TASK_JOBS_DEAD, naming the task, when its last fired occurrence's job
is among them."""

from __future__ import annotations

from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Retry, Worker, job
from engine.tasks import Scheduler, task
from mcp_jobs.config import Settings
from mcp_jobs.operations.diagnose import diagnose_queue
from mcp_jobs.operations.jobs import describe_jobs
from mcp_jobs.operations.scope import Scope
from tests.support.fix_lines import command_words

MINUTE = 60_000


class At(BaseModel):
    at: int


async def test_a_task_whose_last_run_died_is_a_finding_naming_the_task(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    healthy = {"now": False}

    @job(idempotency_key=lambda i: str(i.at), queue="nightly", retry=Retry(attempts=1),
         registry=registry)  # fmt: skip
    async def import_prices(input: At, ctx: JobContext) -> None:
        if not healthy["now"]:
            raise RuntimeError("supplier feed down")

    task(
        name="price-import",
        cron="* * * * *",
        tz="UTC",
        enqueue=lambda at: [(import_prices, {"at": at})],
        registry=registry,
    )
    worker = Worker(jobs, apps=["shop.prices"])
    await worker.publish_descriptors()
    scheduler = Scheduler(jobs, holder="only")
    scope = Scope(jobs, Settings(), "diagnose_queue", "test", face="cli")

    clock.advance(MINUTE)
    assert (await scheduler.round()).fired
    await worker.run_until_idle()

    (view,) = (await describe_jobs(scope)).tasks or []
    dead = view.dead_runs
    assert dead is not None and dead.count == 1 and dead.last_fired is True
    assert dead.job == "import_prices" and dead.error_code is not None
    diagnosis = await diagnose_queue(scope)
    (finding,) = [f for f in diagnosis.findings or [] if f.code == "TASK_JOBS_DEAD"]
    assert finding.severity == "warning" and finding.queue == "nightly"
    assert '"price-import"' in finding.cause and "import_prices" in finding.cause
    assert finding.job_ids == [dead.job_id]
    assert command_words(finding.fix)[:4] == ["mcp-jobs", "jobs", "show", dead.job_id]
    # In the queue's own diagnosis too, where its dead letters are.
    nightly = await diagnose_queue(scope, "nightly")
    assert [f.code for f in nightly.findings or []].count("TASK_JOBS_DEAD") == 1

    healthy["now"] = True  # mended: the next run is done, so the last run no longer died
    await worker.publish_descriptors()
    clock.advance(MINUTE)
    assert (await scheduler.round()).fired
    await worker.run_until_idle()
    diagnosis = await diagnose_queue(scope)
    assert [f for f in diagnosis.findings or [] if f.code == "TASK_JOBS_DEAD"] == []
    (view,) = (await describe_jobs(scope)).tasks or []
    assert view.dead_runs is not None and view.dead_runs.last_fired is False
