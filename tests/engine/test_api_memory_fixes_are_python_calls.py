"""On a `memory://` store the jobs live inside this process: an `mcp-jobs …` line run in a shell
(`--database-url memory://`) opens a new, empty store of its own, so a fix written as one cannot
do what it says. Through the Python API (`connect("memory://")`, or `Jobs` over the memory
driver) the fix is instead the call on the same `jobs` that does the same, and each one here is
run against that client; a command no call does is said in words that name a shared store."""

from __future__ import annotations

import ast
import logging
from typing import Any

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Retry, Worker, connect, job
from engine.driver_errors import DriverUnavailableError
from engine.drivers.memory import MemoryDriver
from engine.errors import JobNotFoundError, JobsError
from engine.fix_lines import as_raised
from engine.tasks.scheduler import Scheduler
from schemas.jobs import ClaimedJob, JobPage, JobRecord
from schemas.trace import JobTrace
from tests.tasks.test_scheduler_failure_log import MINUTE, declare_orphan, failure_lines

pytestmark = pytest.mark.drivers("memory", reason="the store is this process's memory")


class Order(BaseModel):
    order_id: int


async def run_fix(fix: str, jobs: Jobs) -> Any:
    """What the Python line `fix` answers, run against `jobs` (and nothing else in scope)."""
    assert "mcp-jobs" not in fix and "memory://" not in fix, fix
    code = compile(fix, "<fix>", "eval", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    return await eval(code, {"jobs": jobs})


async def refused(call: Any, code: str) -> JobsError:
    with pytest.raises(JobsError) as raised:
        await call
    assert raised.value.code == code, raised.value.to_payload()
    return raised.value


def declare(registry: JobRegistry) -> Any:
    @job(idempotency_key=lambda i: f"o:{i.order_id}", retry=Retry(attempts=1), registry=registry)
    async def ship(input: Order, ctx: JobContext) -> None:
        await ctx.step.run("pack", lambda: 1)
        if input.order_id < 0:
            raise RuntimeError("carrier down")

    return ship


async def test_a_failed_jobs_stored_fix_read_back_is_the_trace_call(
    jobs: Jobs, registry: JobRegistry
) -> None:
    ship = declare(registry)
    made = await jobs.enqueue(ship, {"order_id": -1})
    await Worker(jobs, prune=False).run_until_idle()
    record = await jobs.get(made.id)
    assert record.state == "dead" and record.last_error is not None
    fix = record.last_error.fix
    listed = (await jobs.list(state="dead")).jobs[0].last_error
    traced = (await jobs.trace(made.id)).job.last_error
    assert listed is not None and traced is not None and listed.fix == traced.fix == fix
    shown = await run_fix(fix, jobs)
    assert isinstance(shown, JobTrace) and shown.job.id == made.id


async def test_each_refusal_of_the_client_runs_as_a_call_on_it(
    jobs: Jobs, registry: JobRegistry
) -> None:
    ship = declare(registry)
    made = await jobs.enqueue(ship, {"order_id": 1})
    # JOB_NOT_FOUND: the listing, of this store (which holds the job).
    fix = (await refused(jobs.get("nosuch"), "JOB_NOT_FOUND")).fix
    listed = await run_fix(fix, jobs)
    assert isinstance(listed, JobPage) and [j.id for j in listed.jobs] == [made.id]
    # JOB_UNKNOWN: the descriptions of what this client enqueues.
    for call in (jobs.describe("nosuch"), jobs.enqueue("nosuch", {})):
        fix = (await refused(call, "JOB_UNKNOWN")).fix
        assert [d.name for d in await run_fix(fix, jobs)] == ["ship"]
    # JOB_DUPLICATE: the live job it names.
    twice = jobs.enqueue(ship, {"order_id": 1}, on_conflict="error")
    fix = (await refused(twice, "JOB_DUPLICATE")).fix
    assert (await run_fix(fix, jobs)).job.id == made.id
    # JOB_NOT_RETRYABLE of a cancelled job: the retry that takes it, which requeues it.
    await jobs.cancel(made.id)
    fix = (await refused(jobs.retry(made.id), "JOB_NOT_RETRYABLE")).fix
    retried = await run_fix(fix, jobs)
    assert isinstance(retried, JobRecord) and retried.state == "ready"
    # JOB_NOT_CANCELLABLE of a settled one: the job, shown.
    await Worker(jobs, prune=False).run_until_idle()
    fix = (await refused(jobs.cancel(made.id), "JOB_NOT_CANCELLABLE")).fix
    assert (await run_fix(fix, jobs)).job.state == "done"


async def test_a_reruns_refusals_run_as_calls(jobs: Jobs, registry: JobRegistry) -> None:
    ship = declare(registry)
    made = await jobs.enqueue(ship, {"order_id": -2})
    await Worker(jobs, prune=False).run_until_idle()
    # STEP_UNKNOWN with the step it likely meant: the rerun from it, which starts a new run.
    fix = (await refused(jobs.retry(made.id, from_step="pakc"), "STEP_UNKNOWN")).fix
    rerun = await run_fix(fix, jobs)
    assert isinstance(rerun, JobRecord) and rerun.rerun_of is not None
    # RUN_NOT_FOUND: the run a rerun left behind, its steps.
    fix = (await refused(jobs.run_steps(made.id, "nosuch"), "RUN_NOT_FOUND")).fix
    assert [s.name for s in await run_fix(fix, jobs)] == ["pack"]


async def test_a_command_no_call_does_is_said_in_words(jobs: Jobs) -> None:
    context = jobs.fix_context
    for bare in ("mcp-jobs db prune", "mcp-jobs backfill nightly --json", "mcp-jobs db report"):
        line = as_raised(context, bare)
        assert bare in line and "memory://" in line and "sqlite:///" in line, line
        assert not line.startswith("mcp-jobs"), line
        assert as_raised(context, line) == line  # written twice, nothing changes
    # Not a command on this store: a server of its own, another database, or no command.
    for kept in (
        "mcp-jobs serve",
        "mcp-jobs jobs ls --json --database-url sqlite:///tmp/other.db",
        "export MCP_JOBS_ENV=staging",
    ):
        assert as_raised(context, kept) == kept


async def test_an_error_a_worker_raises_is_a_call(jobs: Jobs) -> None:
    async def claim(*args: object, **kwargs: object) -> list[ClaimedJob]:
        raise JobNotFoundError("gone")

    jobs.driver.claim = claim  # type: ignore[method-assign]
    with pytest.raises(JobNotFoundError) as raised:
        await Worker(jobs, queues="*").run_until_idle()
    assert isinstance(await run_fix(raised.value.fix, jobs), JobPage)


async def test_a_driver_errors_default_fix_is_the_migrate_call(jobs: Jobs) -> None:
    async def broken() -> None:
        raise DriverUnavailableError("memory", "down")

    jobs.driver.migrate = broken  # type: ignore[method-assign]
    with pytest.raises(DriverUnavailableError) as raised:
        await jobs.migrate()
    assert raised.value.fix == "await jobs.migrate()"


async def test_a_client_made_over_the_memory_driver_writes_calls_too(
    clock: ManualClock, registry: JobRegistry
) -> None:
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    ship = declare(registry)
    made = await jobs.enqueue(ship, {"order_id": -3})
    await Worker(jobs, prune=False).run_until_idle()
    error = (await jobs.get(made.id)).last_error
    assert error is not None
    assert (await run_fix(error.fix, jobs)).job.id == made.id
    fix = (await refused(jobs.get("nosuch"), "JOB_NOT_FOUND")).fix
    assert isinstance(await run_fix(fix, jobs), JobPage)


async def test_the_schedulers_logged_fix_is_a_call(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    declare_orphan(registry)
    scheduler = Scheduler(jobs, holder="only")
    await scheduler.round()
    clock.advance(MINUTE)
    with caplog.at_level(logging.ERROR, "mcp_jobs.scheduler"):
        await scheduler.round()
    (line,) = failure_lines(caplog)
    message = line.getMessage()
    assert "mcp-jobs" not in message and "(fix: await jobs.describe())" in message, message


@pytest.mark.parametrize(
    ("command", "call"),
    [
        (["jobs", "ls", "--json"], "await jobs.list()"),
        (
            ["jobs", "ls", "--state", "dead", "--state=failed", "--queue", "q", "--limit", "5"],
            'await jobs.list(state=["dead", "failed"], queue="q", limit=5)',
        ),
        (["jobs", "ls", "--tenant-id", "acme", "--json"], 'await jobs.list(tenant_id="acme")'),
        (["jobs", "show", "j1", "--json"], 'await jobs.trace("j1")'),
        (["jobs", "show", "j1", "--run-id", "r1"], 'await jobs.run_steps("j1", "r1")'),
        (
            ["jobs", "retry", "j1", "--include-cancelled"],
            'await jobs.retry("j1", include_cancelled=True)',
        ),
        (["jobs", "retry", "j1", "--from-step", "a b"], 'await jobs.retry("j1", from_step="a b")'),
        (["jobs", "cancel", "--", "-j"], 'await jobs.cancel("-j")'),
        (["jobs", "describe", "--json"], "await jobs.describe()"),
        (["jobs", "describe", "ship"], 'await jobs.describe("ship")'),
        (["jobs", "stats", "--queues", "a", "b"], 'await jobs.stats(["a", "b"])'),
        (["queues", "ls"], "await jobs.pauses()"),
        (
            ["queues", "pause", "mail", "--reason", "x"],
            'await jobs.pause(queue="mail", reason="x")',
        ),
        (["queues", "resume", "--job", "ship"], 'await jobs.resume(job="ship")'),
        (
            ["events", "send", "paid", "o1", "--payload", '{"a": 1}'],
            'await jobs.send_event("paid", "o1", {"a": 1})',
        ),
        (["db", "migrate"], "await jobs.migrate()"),
        (["jobs", "ls", "--database-url", "memory://", "--app", "shop"], "await jobs.list()"),
        (["jobs", "show", "j1", "--tenant", "acme"], 'await jobs.trace("j1", tenant_id="acme")'),
        # No call does these, or not with these options.
        (["db", "prune"], None),
        (["jobs", "diagnose"], None),
        (["jobs", "describe", "--limit", "3"], None),
        (["jobs", "show"], None),
        (["jobs", "ls", "--limit", "many"], None),
        (["events", "send", "paid", "o1", "--payload", "{"], None),
    ],
)
def test_each_command_maps_to_its_call(command: list[str], call: str | None) -> None:
    from engine.client_calls import python_call

    assert python_call(command) == call


def test_a_name_in_a_call_is_the_literal_of_that_name() -> None:
    from engine.client_calls import python_call

    for odd in ('we\'ird "name"', "tab\tand\nnewline", "\u00e9\U0001f600", "\ud800"):
        line = python_call(["jobs", "show", odd])
        assert line is not None and "\n" not in line
        assert ast.literal_eval(line.removeprefix("await jobs.trace(")[:-1]) == odd


async def test_connect_memory_keeps_the_flag_out(registry: JobRegistry) -> None:
    jobs = await connect("memory://", registry=registry)
    try:
        error = await refused(jobs.get("nosuch"), "JOB_NOT_FOUND")
    finally:
        await jobs.close()
    assert error.fix == "await jobs.list()"
