"""Cursors are opaque and checked on every driver: a list, a trace's steps and events, and a
backfill's runs each page with a cursor the engine encodes, and text that is not one of those
cursors — garbage, a cut or edited cursor, a cursor of another kind, the raw id an older version
handed out, one another job's trace or another backfill's runs handed out — is CURSOR_INVALID
(terminal, its next call the same call without the cursor), never a silent restart at page one
nor a page read from another list's position."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import pytest

from engine import Jobs, ManualClock
from engine.backfill import BackfillRegistry, Backfills
from engine.drivers.base import StepWrite
from engine.errors import CursorInvalidError, JobsError
from engine.testing.kit.test_backfill_ledger import _ledger
from engine.testing.kit.test_paging import _job_with_history, request
from schemas.errors import NextCall
from schemas.events import EventRecord
from schemas.steps import StepRecord
from schemas.trace import TraceQuery


def _edited(cursor: str) -> list[str]:
    """Near misses of a real cursor: cut, one character changed, another version tag, extended,
    a NUL appended; and text far longer than any cursor."""
    flipped = cursor[:-2] + ("A" if cursor[-2] != "A" else "B") + cursor[-1]
    return [cursor[:-3], flipped, "c2" + cursor[2:], cursor + "AAAA", cursor + "\x00", "é" * 50]


async def _refused(call: Awaitable[Any]) -> CursorInvalidError:
    with pytest.raises(JobsError) as raised:
        await call
    error = raised.value
    assert isinstance(error, CursorInvalidError), error
    assert error.code == "CURSOR_INVALID" and error.retryable is False
    return error


async def test_a_list_cursor_walks_the_pages_and_anything_else_is_cursor_invalid(
    jobs: Jobs, clock: ManualClock
) -> None:
    await jobs.driver.enqueue([request(n, run_at=clock.now_ms()) for n in range(1, 6)])
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = await jobs.list(queue="default", limit=2, cursor=cursor)
        seen += [j.id for j in page.jobs]
        if page.next_cursor is None:
            break
        assert page.next_cursor not in {j.id for j in page.jobs}  # opaque, not the id
        cursor = page.next_cursor
    assert seen == [f"job{n:04d}" for n in range(5, 0, -1)]

    real = (await jobs.list(state="ready", limit=2)).next_cursor
    assert real is not None
    steps = (await jobs.trace("job0001")).steps_cursor  # none: no steps; make one of another kind
    assert steps is None
    other_kind = await jobs.trace(await _job_with_history(jobs, clock, 3, 0), steps_limit=1)
    assert other_kind.steps_cursor is not None
    first_page = NextCall(tool="list_jobs", arguments={"state": "ready", "limit": 2})
    for bad in ["garbage", "job0003", *_edited(real)]:
        error = await _refused(jobs.list(state="ready", limit=2, cursor=bad))
        assert error.details == {
            "argument": "cursor",
            "expected": "the cursor of a previous answer",
        }
        # The fix is the same list from its first page: the tool call for a face, the Python
        # line for a caller of the client.
        assert error.next_call == first_page
        assert error.fix == 'await jobs.list(state="ready", limit=2)'
    # A cursor of another kind names the method that handed it out
    # (tests/engine/test_api_cursor_of_another_method.py).
    error = await _refused(jobs.list(state="ready", limit=2, cursor=other_kind.steps_cursor))
    assert error.details is not None and error.details["method"] == "jobs.trace"
    assert error.next_call == first_page
    assert error.fix == 'await jobs.list(state="ready", limit=2)'


async def test_a_list_cursor_goes_with_the_filters_of_the_call_that_returned_it(
    jobs: Jobs, clock: ManualClock
) -> None:
    """An agent that sends page 1's cursor without page 1's tenant (or with another state) was
    paged on through every tenant's jobs after that id, as if they were the tenant's: now it is
    CURSOR_INVALID, its fix the list it asked for from the first page. The limit may change from
    page to page, and the order the states are given in is no filter."""
    await jobs.driver.enqueue(
        [request(n, run_at=clock.now_ms(), tenant_id=f"t{n % 2}") for n in range(1, 7)]
    )
    first = await jobs.list(tenant_id="t1", state=["ready", "dead"], limit=1)
    cursor = first.next_cursor
    assert cursor is not None and [j.tenant_id for j in first.jobs] == ["t1"]
    same = await jobs.list(tenant_id="t1", state=["dead", "ready"], limit=5, cursor=cursor)
    assert [j.tenant_id for j in same.jobs] == ["t1", "t1"]
    for other in (
        {},
        {"tenant_id": "t0", "state": ["ready", "dead"]},
        {"tenant_id": "t1", "state": "ready"},
        {"tenant_id": "t1", "state": ["ready", "dead"], "queue": "default"},
    ):
        error = await _refused(jobs.list(**other, limit=1, cursor=cursor))
        assert "a cursor goes with the state, name, queue and tenant_id" in error.cause
        assert error.next_call == NextCall(tool="list_jobs", arguments={**other, "limit": 1})
    unfiltered = await jobs.list(limit=2)
    assert unfiltered.next_cursor is not None
    assert len((await jobs.list(limit=2, cursor=unfiltered.next_cursor)).jobs) == 2


async def test_a_trace_cursor_that_does_not_decode_is_cursor_invalid(
    jobs: Jobs, clock: ManualClock
) -> None:
    job_id = await _job_with_history(jobs, clock, steps=5, events=5)
    first = await jobs.trace(job_id, steps_limit=2, events_limit=2)
    assert first.steps_cursor is not None and first.events_cursor is not None
    # The real cursors walk on; each kind refuses the other's.
    assert (
        len((await jobs.trace(job_id, steps_limit=2, steps_cursor=first.steps_cursor)).steps) == 2
    )
    bad_steps = ["1.0", "x", first.events_cursor, *_edited(first.steps_cursor)]
    bad_events = ["3", "x", first.steps_cursor, *_edited(first.events_cursor)]
    newest = NextCall(tool="inspect_job", arguments={"job_id": job_id})
    for bad in bad_steps:
        error = await _refused(jobs.trace(job_id, steps_cursor=bad))
        assert (error.details or {})["argument"] == "steps_cursor" and error.next_call == newest
    for bad in bad_events:
        error = await _refused(jobs.trace(job_id, events_cursor=bad))
        assert (error.details or {})["argument"] == "events_cursor" and error.next_call == newest


async def test_a_runs_cursor_that_does_not_decode_is_cursor_invalid(jobs: Jobs) -> None:
    await _ledger(jobs)
    svc = Backfills(jobs, registry=BackfillRegistry(), environment="development")
    real = (await svc.runs_page("fill", limit=10)).runs_cursor
    assert real is not None
    assert len((await svc.runs_page("fill", limit=10, cursor=real)).runs) == 10
    for bad in ["x", "12.run1", "1001.run0003", *_edited(real)]:
        error = await _refused(svc.runs_page("fill", cursor=bad))
        # The method's parameter (`cursor`), not the MCP tool's (`runs_cursor`).
        assert (error.details or {})["argument"] == "cursor"
        assert error.next_call == NextCall(tool="list_backfills", arguments={"name": "fill"})


async def _second_job(jobs: Jobs, clock: ManualClock, steps: int, events: int) -> str:
    """job0002, claimed beside `_job_with_history`'s job0001, its history started later."""
    driver = jobs.driver
    await driver.enqueue([request(2, run_at=clock.now_ms())])
    (held,) = await driver.claim("w2", 1, 60_000)
    assert held.record.id == "job0002"
    for i in range(steps):
        started = clock.now_ms() + 1_000 + i
        step = StepRecord(
            job_id="job0002", run_id="run0002", name=f"b{i}", status="completed",
            output={"i": i}, started_at=started, finished_at=started,
        )  # fmt: skip
        (outcome,) = await driver.save_steps_many([StepWrite("job0002", held.token, step)])
        assert outcome is None
    for i in range(events):
        await driver.record_event(
            EventRecord(job_id="job0002", at=clock.now_ms() + 1_000 + i, kind="note", data={})
        )
    return "job0002"


async def test_a_trace_cursor_goes_with_the_job_whose_page_handed_it_out(
    jobs: Jobs, clock: ManualClock
) -> None:
    """Job A's steps or events cursor sent with job B's id answered B's history from A's
    position (no steps of B's three, or the wrong ones): now CURSOR_INVALID, its fix B's first
    page, and the driver refuses it too; on A it pages on."""
    a = await _job_with_history(jobs, clock, steps=5, events=5)
    b = await _second_job(jobs, clock, steps=3, events=3)
    first = await jobs.trace(a, steps_limit=2, events_limit=2)
    assert first.steps_cursor is not None and first.events_cursor is not None
    b_first = NextCall(tool="inspect_job", arguments={"job_id": b})
    each: list[dict[str, Any]] = [
        {"steps_cursor": first.steps_cursor},
        {"events_cursor": first.events_cursor},
    ]
    for given in each:
        error = await _refused(jobs.trace(b, **given))
        assert (error.details or {})["argument"] in given and error.next_call == b_first
        assert error.fix == f'await jobs.trace("{b}")'
        assert "a cursor goes with the job_id" in error.cause
        with pytest.raises(CursorInvalidError):
            await jobs.driver.load_trace(b, None, TraceQuery(**given))
        on_a = await jobs.trace(a, steps_limit=2, events_limit=2, **given)
        assert (len(on_a.steps), len(on_a.events)) == (2, 2)
    whole = await jobs.trace(b)
    assert [s.name for s in whole.steps] == ["b0", "b1", "b2"] and len(whole.events) == 3


async def test_a_runs_cursor_goes_with_the_backfill_whose_page_handed_it_out(jobs: Jobs) -> None:
    """A runs cursor of "fill" sent for "other" paged other's ledger from fill's position (none
    of its five newer rows): now CURSOR_INVALID, its fix other's first page."""
    await _ledger(jobs)
    svc = Backfills(jobs, registry=BackfillRegistry(), environment="development")
    real = (await svc.runs_page("fill", limit=10)).runs_cursor
    assert real is not None
    error = await _refused(svc.runs_page("other", limit=10, cursor=real))
    assert (error.details or {})["argument"] == "cursor"
    assert error.next_call == NextCall(tool="list_backfills", arguments={"name": "other"})
    assert "a cursor goes with the name" in error.cause
    assert len((await svc.runs_page("other")).runs) == 5
    assert len((await svc.runs_page("fill", limit=10, cursor=real)).runs) == 10
