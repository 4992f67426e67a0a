"""A job's own progress (engine/progress.py) in the MCP answers: inspect_job and list_jobs show
it (absent until the job reports), wait_for_job's notifications carry the job's numbers, and a
pinned tenant sees only its own jobs' reports."""

from __future__ import annotations

import anyio
import pytest

from engine import Jobs, ManualClock
from engine.drivers.base import PROGRESS
from engine.instants import iso
from mcp_jobs.config import Settings
from mcp_jobs.operations.jobs import WAIT_POLL_MS
from schemas.progress import Progress
from tests.mcp.conftest import OpenMcp


async def _report(jobs: Jobs, job_id: str, token: str, progress: Progress) -> None:
    store = jobs.driver
    assert isinstance(store, PROGRESS.protocol)
    assert await store.save_progress(job_id, token, progress) is True


async def test_inspect_and_list_show_a_jobs_progress_once_it_reports(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    r = await jobs.enqueue("greet", {"user_id": 1})
    quiet = await jobs.enqueue("greet", {"user_id": 2})
    (claimed,) = [c for c in await jobs.driver.claim("w-1", 2, 60_000) if c.record.id == r.id]
    at = clock.now_ms()
    await _report(
        jobs, r.id, claimed.token, Progress(done=3, total=10, message="copying", at=at, attempt=1)
    )
    async with open_mcp() as mcp:
        inspected = await mcp.ok("inspect_job", {"job_id": r.id})
        assert inspected["job"]["progress"] == {
            "done": 3,
            "total": 10,
            "message": "copying",
            "at": at,
            "at_iso": iso(at),
            "attempt": 1,
        }
        listed = {j["id"]: j for j in (await mcp.ok("list_jobs"))["jobs"]}
        assert listed[r.id]["progress"]["done"] == 3 and listed[r.id]["progress"]["total"] == 10
        assert "progress" not in listed[quiet.id]  # absent, not null, for a job that never reported
        assert "progress" not in (await mcp.ok("inspect_job", {"job_id": quiet.id}))["job"]

        await jobs.settler.ack(r.id, claimed.token, {"greeted": 1})
        done = await mcp.ok("inspect_job", {"job_id": r.id})
        assert done["job"]["state"] == "done" and done["job"]["progress"]["done"] == 3


async def test_wait_for_job_notifies_the_jobs_own_numbers(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = await jobs.enqueue("greet", {"user_id": 1})
    (claimed,) = await jobs.driver.claim("w-1", 1, 60_000)
    first = Progress(done=3, total=10, message="copying", at=clock.now_ms(), attempt=1)
    await _report(jobs, r.id, claimed.token, first)
    notes: list[tuple[float, float | None, str | None]] = []
    polls = Polls(clock, monkeypatch)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append((progress, total, message))

    async with open_mcp() as mcp:
        answer: dict[str, object] = {}

        async def wait() -> None:
            arguments = {"job_id": r.id, "timeout_seconds": 30}
            answer.update(await mcp.ok("wait_for_job", arguments, progress_callback=on_progress))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await polls.asleep()
                for _ in range(2):  # polls that find the same report again say nothing new
                    await polls.poll()
                second = Progress(done=7, total=10, message=None, at=clock.now_ms(), attempt=1)
                await _report(jobs, r.id, claimed.token, second)
                await polls.poll()
                await jobs.settler.ack(r.id, claimed.token, {"greeted": 1})
                polls.wake()  # the last poll finds the job settled and answers
    assert answer["settled"] is True
    job = answer["job"]
    assert isinstance(job, dict) and job["progress"]["done"] == 7
    (one, two, end) = notes
    assert one[:2] == (3, 10) and one[2] is not None and one[2].endswith(": copying")
    assert two[:2] == (7, 10) and two[2] is not None and "copying" not in two[2]
    assert end == (10, 10, "done")  # the job is done: the last one reaches its total


async def test_wait_for_job_invents_no_total_and_ends_at_the_jobs(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = await jobs.enqueue("greet", {"user_id": 1})
    notes: list[tuple[float, float | None, str | None]] = []
    polls = Polls(clock, monkeypatch)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append((progress, total, message))

    async with open_mcp() as mcp:
        answer: dict[str, object] = {}

        async def wait() -> None:
            arguments = {"job_id": r.id, "timeout_seconds": 30}
            answer.update(await mcp.ok("wait_for_job", arguments, progress_callback=on_progress))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await polls.asleep()  # it has seen the job ready, before any report
                (claimed,) = await jobs.driver.claim("w-1", 1, 60_000)
                last = Progress(done=5, total=6, message="copying", at=clock.now_ms(), attempt=1)
                await _report(jobs, r.id, claimed.token, last)
                await polls.poll()
                await jobs.settler.ack(r.id, claimed.token, {"greeted": 1})
                polls.wake()
    assert answer["settled"] is True
    before = notes[0]
    assert before[1] is None, notes  # the job has given no total yet: none is invented
    assert [n[0] for n in notes] == sorted(n[0] for n in notes), notes  # MCP: it only grows
    assert notes[-2][:2] == (5, 6), notes
    assert notes[-1][:2] == (6, 6) and notes[-1][2] is not None, notes  # done reaches the total
    assert notes[-1][2].startswith("done"), notes


class Polls:
    """wait_for_job's polls, one at a time. The clock moves only between the test's writes, so
    each poll reads after the write before it, whatever its reads cost on the driver (a poll's
    notification goes out before its sleep)."""

    def __init__(self, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
        self._clock = clock
        self._asleep = anyio.Event()
        sleep = clock.sleep_ms

        async def watched(ms: int) -> None:
            if ms == WAIT_POLL_MS:
                self._asleep.set()
            await sleep(ms)

        monkeypatch.setattr(clock, "sleep_ms", watched)

    async def asleep(self) -> None:
        """Until the waiting call has polled and sleeps."""
        await self._asleep.wait()
        self._asleep = anyio.Event()

    def wake(self) -> None:
        self._clock.advance(WAIT_POLL_MS)

    async def poll(self) -> None:
        """One more poll, done before this returns."""
        self.wake()
        await self.asleep()


async def test_a_pinned_tenant_sees_no_other_tenants_progress(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    mine = await jobs.enqueue("receipt", {"order_id": 1}, tenant_id="acme")
    theirs = await jobs.enqueue("receipt", {"order_id": 2}, tenant_id="other")
    for claimed in await jobs.driver.claim("w-1", 2, 60_000):
        value = Progress(done=1, total=2, message=claimed.record.tenant_id, at=0, attempt=1)
        await _report(jobs, claimed.record.id, claimed.token, value)
    async with open_mcp(Settings(tenant="acme")) as mcp:
        listed = (await mcp.ok("list_jobs"))["jobs"]
        assert [(j["id"], j["progress"]["message"]) for j in listed] == [(mine.id, "acme")]
        await mcp.fails("inspect_job", {"job_id": theirs.id}, "JOB_NOT_FOUND")
