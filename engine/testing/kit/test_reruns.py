"""Rerun from a step (engine/reruns.py): a new run linked to the old one; the completed steps
before the named step replay from their stored results, that step and the rest run again; the
old run's steps stay readable; refusals are typed; a plain retry is unchanged."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Retry, Worker, connect, job
from engine.drivers.base import RERUNS
from engine.errors import JobNotFoundError, JobsError
from engine.fix_lines import as_raised
from engine.retention import DAY_MS, Policy, plan
from schemas.jobs import JobRecord


class Order(BaseModel):
    order_id: int


@pytest.fixture(autouse=True)
def offers_reruns(jobs: Jobs) -> None:
    # Optional capability (engine/drivers/base.py): a driver without it is not held to this.
    if not RERUNS.offered_by(jobs.driver):
        pytest.skip(f"the {jobs.driver.kind} driver keeps no reruns")


class Three:
    """A job of three steps, a, b and c, counting each step's runs; c fails while told to."""

    def __init__(self, registry: JobRegistry) -> None:
        self.ran = {"a": 0, "b": 0, "c": 0}
        self.failing = True

        def step(name: str) -> Any:
            def body(order_id: int) -> str:
                self.ran[name] += 1
                if name == "c" and self.failing:
                    raise RuntimeError("carrier down")
                return f"{name}{order_id}:{self.ran[name]}"

            return body

        @job(
            idempotency_key=lambda i: f"o:{i.order_id}",
            retry=Retry(attempts=1),
            registry=registry,
        )
        async def three(input: Order, ctx: JobContext) -> list[str]:
            a = await ctx.step.run("a", step("a"), input.order_id)
            b = await ctx.step.run("b", step("b"), input.order_id)
            c = await ctx.step.run("c", step("c"), input.order_id)
            return [a, b, c]

        self.job = three


async def _dead(
    jobs: Jobs, three: Three, order_id: int = 1, tenant_id: str | None = None
) -> JobRecord:
    r = await jobs.enqueue(three.job, {"order_id": order_id}, tenant_id=tenant_id)
    await Worker(jobs).run_until_idle()
    record = await jobs.get(r.id)
    assert record.state == "dead" and three.ran == {"a": 1, "b": 1, "c": 1}
    return record


async def test_rerun_from_a_middle_step_replays_the_steps_before_it(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    three = Three(registry)
    dead = await _dead(jobs, three)
    old_steps = (await jobs.trace(dead.id)).steps
    clock.advance(5_000)
    three.failing = False

    rerun = await jobs.retry(dead.id, from_step="b", actor="ops")
    assert rerun.run_id != dead.run_id and rerun.rerun_of == dead.run_id
    assert (rerun.state, rerun.attempt, rerun.output) == ("ready", 0, None)
    assert rerun.queued_at == rerun.run_at == clock.now_ms()
    assert await jobs.get(dead.id) == rerun
    # Only "a" came along, with its stored result, before anything ran.
    copied = await jobs.run_steps(dead.id, rerun.run_id)
    assert [(s.name, s.status, s.output) for s in copied] == [("a", "completed", "a1:1")]

    await Worker(jobs).run_until_idle()
    done = await jobs.get(dead.id)
    assert done.state == "done" and done.output == ["a1:1", "b1:2", "c1:2"]
    assert three.ran == {"a": 1, "b": 2, "c": 2}  # a replayed, b and c ran again
    assert (done.run_id, done.rerun_of) == (rerun.run_id, dead.run_id)

    # The old run stays stored and readable by its id; the new one holds all three steps.
    assert await jobs.run_steps(dead.id, dead.run_id) == old_steps
    assert [s.status for s in old_steps] == ["completed", "completed", "failed"]
    assert [s.name for s in (await jobs.trace(dead.id)).steps] == ["a", "b", "c"]
    events = [e for e in (await jobs.trace(dead.id)).events if e.kind == "requeued"]
    assert [(e.actor, e.data) for e in events] == [
        (
            "ops",
            {
                "from": "dead",
                "from_step": "b",
                "previous_run_id": dead.run_id,
                "run_id": rerun.run_id,
            },
        )
    ]


async def test_a_done_job_reruns_from_its_first_step(jobs: Jobs, registry: JobRegistry) -> None:
    three = Three(registry)
    three.failing = False
    r = await jobs.enqueue(three.job, {"order_id": 2})
    await Worker(jobs).run_until_idle()
    first = await jobs.get(r.id)
    assert first.state == "done" and first.output == ["a2:1", "b2:1", "c2:1"]

    rerun = await jobs.retry(r.id, from_step="a")
    assert rerun.rerun_of == first.run_id and rerun.output is None
    assert await jobs.run_steps(r.id, rerun.run_id) == []
    await Worker(jobs).run_until_idle()
    again = await jobs.get(r.id)
    assert again.state == "done" and again.output == ["a2:2", "b2:2", "c2:2"]
    assert three.ran == {"a": 2, "b": 2, "c": 2}

    # A rerun of a rerun links to the run just before it.
    third = await jobs.retry(r.id, from_step="c")
    assert third.rerun_of == rerun.run_id
    assert [s.name for s in await jobs.run_steps(r.id, third.run_id)] == ["a", "b"]


async def test_the_failed_step_itself_is_a_rerun_point(jobs: Jobs, registry: JobRegistry) -> None:
    three = Three(registry)
    dead = await _dead(jobs, three)
    three.failing = False
    rerun = await jobs.retry(dead.id, from_step="c")
    assert [s.name for s in await jobs.run_steps(dead.id, rerun.run_id)] == ["a", "b"]
    await Worker(jobs).run_until_idle()
    assert (await jobs.get(dead.id)).state == "done"
    assert three.ran == {"a": 1, "b": 1, "c": 2}


async def test_an_unknown_step_is_refused_with_the_run_s_steps(
    jobs: Jobs, registry: JobRegistry
) -> None:
    dead = await _dead(jobs, Three(registry))
    with pytest.raises(JobsError) as raised:
        await jobs.retry(dead.id, from_step="ship")
    error = raised.value
    assert error.code == "STEP_UNKNOWN" and not error.retryable
    assert "a, b, c" in error.cause and '"ship"' in error.cause
    # A rerun is a write: none is proposed for a name that stands for no step; the job is read.
    assert error.fix == as_raised(jobs.fix_context, f"mcp-jobs jobs show {dead.id} --json")
    assert error.next_call is not None and error.next_call.tool == "inspect_job"
    assert await jobs.get(dead.id) == dead  # nothing changed


async def test_a_step_after_one_that_did_not_complete_is_refused(
    jobs: Jobs, registry: JobRegistry
) -> None:
    ran: list[str] = []

    @job(idempotency_key=lambda i: f"o:{i.order_id}", retry=Retry(attempts=1), registry=registry)
    async def lenient(input: Order, ctx: JobContext) -> None:
        try:
            await ctx.step.run("flaky", lambda: 1 / 0)
        except ZeroDivisionError:
            ran.append("caught")
        await ctx.step.run("after", lambda: ran.append("after"))

    r = await jobs.enqueue(lenient, {"order_id": 1})
    await Worker(jobs).run_until_idle()
    assert (await jobs.get(r.id)).state == "done"
    with pytest.raises(JobsError) as raised:
        await jobs.retry(r.id, from_step="after")
    assert raised.value.code == "STEP_NOT_RERUNNABLE" and not raised.value.retryable
    fix = f"mcp-jobs jobs retry {r.id} --from-step flaky"
    assert raised.value.fix == as_raised(jobs.fix_context, fix)
    assert (await jobs.get(r.id)).state == "done"


async def test_a_live_job_is_not_rerun(jobs: Jobs, registry: JobRegistry) -> None:
    three = Three(registry)
    r = await jobs.enqueue(three.job, {"order_id": 3})
    with pytest.raises(JobsError) as raised:
        await jobs.retry(r.id, from_step="a")
    assert raised.value.code == "JOB_NOT_RETRYABLE"
    assert "failed, dead or done" in raised.value.cause


async def test_a_cancelled_job_reruns_only_when_asked(jobs: Jobs, registry: JobRegistry) -> None:
    three = Three(registry)
    dead = await _dead(jobs, three)
    rerun = await jobs.retry(dead.id, from_step="b")
    await jobs.cancel(dead.id)
    with pytest.raises(JobsError) as raised:
        await jobs.retry(dead.id, from_step="a")
    assert raised.value.code == "JOB_NOT_RETRYABLE"
    # The cancelled run never ran: its steps are the copied "a" alone, so "a" is its point.
    again = await jobs.retry(dead.id, from_step="a", include_cancelled=True)
    assert again.rerun_of == rerun.run_id


async def test_tenant_scope_holds(jobs: Jobs, registry: JobRegistry) -> None:
    dead = await _dead(jobs, Three(registry), tenant_id="acme")
    with pytest.raises(JobsError) as raised:
        await jobs.retry(dead.id, from_step="b", tenant_id="globex")
    assert raised.value.code == "JOB_NOT_FOUND"
    with pytest.raises(JobsError) as raised:
        await jobs.run_steps(dead.id, dead.run_id, tenant_id="globex")
    assert raised.value.code == "JOB_NOT_FOUND"
    rerun = await jobs.retry(dead.id, from_step="b", tenant_id="acme")
    assert rerun.tenant_id == "acme" and rerun.rerun_of == dead.run_id
    assert len(await jobs.run_steps(dead.id, dead.run_id, tenant_id="acme")) == 3


async def test_without_from_step_a_retry_keeps_the_run(jobs: Jobs, registry: JobRegistry) -> None:
    three = Three(registry)
    dead = await _dead(jobs, three)
    three.failing = False
    retried = await jobs.retry(dead.id)
    assert retried.run_id == dead.run_id and retried.rerun_of is None
    await Worker(jobs).run_until_idle()
    assert three.ran == {"a": 1, "b": 1, "c": 2}


async def test_another_run_s_steps_are_not_read_through_this_job(
    jobs: Jobs, registry: JobRegistry
) -> None:
    three = Three(registry)
    one = await _dead(jobs, three, 1)
    three.ran = {"a": 0, "b": 0, "c": 0}
    two = await _dead(jobs, three, 2)
    # Neither another job's run nor a run id no job had reads as a run with no steps.
    for wrong in (two.run_id, "nosuch"):
        with pytest.raises(JobsError) as refused:
            await jobs.run_steps(one.id, wrong)
        assert refused.value.code == "RUN_NOT_FOUND" and not refused.value.retryable
        assert (refused.value.details or {}).get("runs") == [one.run_id]


async def test_two_processes_rerun_one_job_once(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, database_url: str
) -> None:
    dead = await _dead(jobs, Three(registry))
    other = await connect(database_url, clock=clock, registry=JobRegistry())
    try:
        try:
            await other.get(dead.id)
            rival = other  # a second driver instance on the same database
        except JobNotFoundError:
            rival = jobs  # a database of one process: two concurrent calls on it
        outcomes = await asyncio.gather(
            jobs.retry(dead.id, from_step="b"),
            rival.retry(dead.id, from_step="c"),
            return_exceptions=True,
        )
    finally:
        await other.close()
    made = [o for o in outcomes if isinstance(o, JobRecord)]
    refused = [o for o in outcomes if isinstance(o, JobsError)]
    assert len(made) == 1 and [e.code for e in refused] == ["JOB_NOT_RETRYABLE"]
    record = await jobs.get(dead.id)
    assert record == made[0] and record.rerun_of == dead.run_id
    (event,) = [e for e in (await jobs.trace(dead.id)).events if e.kind == "requeued"]
    assert event.data is not None and event.data["run_id"] == record.run_id
    kept = [s.name for s in await jobs.run_steps(dead.id, record.run_id)]
    assert kept == {"b": ["a"], "c": ["a", "b"]}[event.data["from_step"]]


async def test_pruning_a_rerun_job_takes_every_run_s_steps(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    three = Three(registry)
    dead = await _dead(jobs, three)
    three.failing = False
    first = await jobs.retry(dead.id, from_step="b")
    await Worker(jobs).run_until_idle()
    second = await jobs.retry(dead.id, from_step="c")
    await Worker(jobs).run_until_idle()
    assert (await jobs.get(dead.id)).state == "done"
    runs = (dead.run_id, first.run_id, second.run_id)
    assert [len(await jobs.run_steps(dead.id, r)) for r in runs] == [3, 3, 3]
    clock.advance(DAY_MS * 365)
    pruned = await jobs.driver.prune(plan(Policy(1, 1, 1, 1), clock.now_ms()), 100)
    assert sum(p.rows for p in pruned) == 1
    assert [await jobs.driver.load_steps(r) for r in runs] == [[], [], []]
