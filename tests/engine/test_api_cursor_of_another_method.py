"""A cursor one method of the Python API handed out, given to another (a `jobs.list` page's to
`jobs.trace(steps_cursor=...)`, a steps cursor as `events_cursor`, a list's to a backfill's
runs): CURSOR_INVALID that names the method and argument it came from, whose fix is the first
page of the method it was given to, a Python line that runs. A cursor of the right method that
does not decode is the plain CURSOR_INVALID, its fix the same kind of line."""

from __future__ import annotations

import ast
from typing import Any

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, Worker, job, paging
from engine.backfill import Backfills
from engine.backfill.ledger import RunsPage
from engine.errors import CursorInvalidError, JobsError
from schemas.jobs import JobFilter, JobPage
from schemas.trace import JobTrace

pytestmark = pytest.mark.drivers("memory", "sqlite", reason="cursors are checked before a read")


class Order(BaseModel):
    order_id: int


async def run_fix(fix: str, jobs: Jobs) -> Any:
    """What the Python line `fix` answers, run against `jobs` (and `Backfills`)."""
    code = compile(fix, "<fix>", "eval", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    return await eval(code, {"jobs": jobs, "Backfills": Backfills})


async def refused(call: Any) -> CursorInvalidError:
    with pytest.raises(JobsError) as raised:
        await call
    error = raised.value
    assert isinstance(error, CursorInvalidError) and error.code == "CURSOR_INVALID"
    assert not error.retryable
    return error


def named(error: JobsError, method: str, argument: str) -> None:
    assert error.details is not None
    assert (error.details["method"], error.details["method_argument"]) == (method, argument)
    assert f"{method} handed out (its {argument})" in error.cause, error.cause


async def two_done(jobs: Jobs, registry: JobRegistry) -> str:
    """Two done jobs of two steps each; the id of the newest."""

    @job(idempotency_key=lambda i: str(i.order_id), registry=registry)
    async def ship(input: Order, ctx: JobContext) -> None:
        await ctx.step.run("pack", lambda: 1)
        await ctx.step.run("send", lambda: 2)

    await jobs.enqueue(ship, {"order_id": 1})
    made = await jobs.enqueue(ship, {"order_id": 2})
    await Worker(jobs, prune=False).run_until_idle()
    return made.id


async def test_a_list_cursor_given_to_trace_names_list(jobs: Jobs, registry: JobRegistry) -> None:
    job_id = await two_done(jobs, registry)
    cursor = (await jobs.list(state="done", limit=1)).next_cursor
    assert cursor is not None
    given = [jobs.trace(job_id, steps_cursor=cursor), jobs.trace(job_id, events_cursor=cursor)]
    for call in given:
        error = await refused(call)
        named(error, "jobs.list", "cursor")
        assert error.fix == f'await jobs.trace("{job_id}")'
        shown = await run_fix(error.fix, jobs)
        assert isinstance(shown, JobTrace) and shown.job.id == job_id


async def test_a_trace_cursor_given_to_list_names_trace(jobs: Jobs, registry: JobRegistry) -> None:
    job_id = await two_done(jobs, registry)
    steps = (await jobs.trace(job_id, steps_limit=1)).steps_cursor
    events = paging.event_cursor(job_id, 7)  # (one an events page hands out: a done job has few)
    assert steps is not None
    error = await refused(jobs.list(state="done", limit=1, cursor=steps))
    named(error, "jobs.trace", "steps_cursor")
    assert error.fix == 'await jobs.list(state="done", limit=1)'
    first = await run_fix(error.fix, jobs)
    assert isinstance(first, JobPage) and [j.id for j in first.jobs] == [job_id]
    # One argument's cursor given as the other's: the same method, named by its argument.
    error = await refused(jobs.trace(job_id, steps_cursor=events))
    named(error, "jobs.trace", "events_cursor")
    assert (await run_fix(error.fix, jobs)).job.id == job_id
    error = await refused(jobs.trace(job_id, events_cursor=steps))
    named(error, "jobs.trace", "steps_cursor")


async def test_a_backfills_runs_cursor_and_a_list_cursor_name_each_other(jobs: Jobs) -> None:
    runs = paging.runs_cursor(1, "r1", "nightly")
    error = await refused(jobs.list(cursor=runs))
    named(error, "Backfills.runs_page", "cursor")
    assert error.fix == "await jobs.list()"
    assert isinstance(await run_fix(error.fix, jobs), JobPage)
    listed = paging.list_cursor("0" * 32, JobFilter(limit=1))
    error = await refused(Backfills(jobs).runs_page("nightly", cursor=listed))
    named(error, "jobs.list", "cursor")
    assert error.fix == 'await Backfills(jobs).runs_page("nightly")'
    assert isinstance(await run_fix(error.fix, jobs), RunsPage)


async def test_a_cursor_of_the_right_method_that_does_not_decode_stays_plain(jobs: Jobs) -> None:
    # A list cursor sent with other filters than the call that returned it.
    other = paging.list_cursor("0" * 32, JobFilter(queue="q", limit=1))
    error = await refused(jobs.list(queue="r", cursor=other))
    assert type(error) is CursorInvalidError and "method" not in (error.details or {})
    garbage = await refused(jobs.trace("0" * 32, steps_cursor="c1.AAAA"))
    assert type(garbage) is CursorInvalidError
    # Its fix, for a caller of the client, is the first page as the Python line that asks it
    # (the faces get the tool call, and the CLI its command).
    assert error.fix == 'await jobs.list(queue="r")', error.fix
    assert isinstance(await run_fix(error.fix, jobs), JobPage)
    assert garbage.fix == f'await jobs.trace("{"0" * 32}")', garbage.fix
