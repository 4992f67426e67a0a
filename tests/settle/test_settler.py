"""Group commit above the driver (engine/settle.py): concurrent settles share one set-wise call,
each caller gets its own outcome, a cancelled queued caller never runs, and a caller's
cancellation never interrupts a flush carrying others' items."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import anyio
import pytest

from engine.driver_errors import DriverUnavailableError
from engine.drivers.base import AckWrite, Driver, StepWrite
from engine.errors import JobsError, JobSlotLostError
from engine.settle import MAX_BATCH, GroupCommit, Settler
from engine.testing.blocked import wait_all_tasks_blocked
from schemas.steps import StepRecord


class FakeDriver:
    """Just the two set-wise writes: records each call; a token "stale" is refused; an
    optional gate holds the first call in flight."""

    kind = "fake"

    def __init__(self) -> None:
        self.acks: list[list[str]] = []
        self.steps: list[list[tuple[str, str]]] = []
        self.gate: anyio.Event | None = None
        self.fail: Exception | None = None

    async def _hold(self, calls: int) -> None:
        if self.gate is not None and calls == 1:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail

    async def ack_many(self, writes: Sequence[AckWrite]) -> list[JobsError | None]:
        self.acks.append([w.job_id for w in writes])
        await self._hold(len(self.acks))
        return [JobSlotLostError(w.job_id) if w.token == "stale" else None for w in writes]

    async def save_steps_many(self, writes: Sequence[StepWrite]) -> list[JobsError | None]:
        self.steps.append([(w.job_id, w.step.name) for w in writes])
        await self._hold(len(self.steps))
        return [JobSlotLostError(w.job_id) if w.token == "stale" else None for w in writes]


def _step(job_id: str, name: str) -> StepRecord:
    return StepRecord(
        job_id=job_id,
        run_id=f"run-{job_id}",
        name=name,
        status="completed",
        output=None,
        started_at=0,
        finished_at=0,
        attempts=1,
    )


def _settler(driver: FakeDriver) -> Settler:
    return Settler(cast(Driver, driver))  # a fake with only the two writes the Settler uses


async def test_queued_acks_share_the_next_flush_and_keep_their_own_outcome() -> None:
    driver = FakeDriver()
    driver.gate = anyio.Event()
    settler = _settler(driver)
    outcomes: dict[str, str] = {}

    async def ack(job_id: str, token: str) -> None:
        try:
            await settler.ack(job_id, token, None)
            outcomes[job_id] = "ok"
        except JobSlotLostError as exc:
            assert exc.code == JobSlotLostError.code
            outcomes[job_id] = "lost"

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ack, "a", "t")
            await wait_all_tasks_blocked()
            for job_id, token in (("b", "stale"), ("c", "t"), ("d", "t")):
                tg.start_soon(ack, job_id, token)
            await wait_all_tasks_blocked()
            driver.gate.set()
    # One flush in flight at a time; the queued calls went together.
    assert driver.acks == [["a"], ["b", "c", "d"]]
    assert outcomes == {"a": "ok", "b": "lost", "c": "ok", "d": "ok"}


async def test_two_writes_of_one_step_never_share_a_flush() -> None:
    driver = FakeDriver()
    driver.gate = anyio.Event()
    settler = _settler(driver)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(settler.save_step, "j0", "t", _step("j0", "a"))
            await wait_all_tasks_blocked()
            for job_id, name in (("j1", "a"), ("j2", "a"), ("j2", "a"), ("j2", "b")):
                tg.start_soon(settler.save_step, job_id, "t", _step(job_id, name))
            await wait_all_tasks_blocked()
            driver.gate.set()
    assert driver.steps == [[("j0", "a")], [("j1", "a"), ("j2", "a"), ("j2", "b")], [("j2", "a")]]


async def test_a_call_cancelled_while_queued_never_runs() -> None:
    driver = FakeDriver()
    driver.gate = anyio.Event()
    settler = _settler(driver)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(settler.ack, "a", "t", None)
            await wait_all_tasks_blocked()
            with anyio.CancelScope() as scope:
                scope.cancel()
                await settler.ack("b", "t", None)
            tg.start_soon(settler.ack, "c", "t", None)
            await wait_all_tasks_blocked()
            driver.gate.set()
    assert driver.acks == [["a"], ["c"]]


async def test_a_caller_cancelled_mid_flush_does_not_interrupt_its_batch() -> None:
    driver = FakeDriver()
    driver.gate = anyio.Event()
    settler = _settler(driver)
    done: list[str] = []

    async def ack(job_id: str) -> None:
        await settler.ack(job_id, "t", None)
        done.append(job_id)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as scope:
                tg.start_soon(ack, "other")
                await wait_all_tasks_blocked()
                scope.cancel()
                with pytest.raises(anyio.get_cancelled_exc_class()):
                    await settler.ack("mine", "t", None)
            driver.gate.set()
        await settler.idle()
    assert done == ["other"]
    assert driver.acks == [["other"]]


async def test_a_whole_call_failure_reaches_every_caller_of_the_batch() -> None:
    driver = FakeDriver()
    driver.fail = DriverUnavailableError("fake", "down")
    settler = _settler(driver)
    codes: list[str] = []

    async def ack(job_id: str) -> None:
        try:
            await settler.ack(job_id, "t", None)
        except JobsError as exc:
            codes.append(exc.code)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for job_id in "abc":
                tg.start_soon(ack, job_id)
    assert codes == [DriverUnavailableError.code] * 3


async def test_a_flush_carries_at_most_max_batch_items() -> None:
    sizes: list[int] = []
    release = anyio.Event()

    async def flush(values: Sequence[int]) -> list[None]:
        sizes.append(len(values))
        if len(sizes) == 1:
            await release.wait()
        return [None] * len(values)

    queue: GroupCommit[int, None] = GroupCommit(flush)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(queue.submit, -1, -1)
            await wait_all_tasks_blocked()
            for n in range(MAX_BATCH + 3):
                tg.start_soon(queue.submit, n, n)
            await wait_all_tasks_blocked()
            release.set()
    assert sizes == [1, MAX_BATCH, 3]
