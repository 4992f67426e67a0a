"""A task's state as a scheduler of an earlier version wrote it (its `task_fired`, since removed
from the drivers): during a rolling deploy this version's scheduler claims on from it. Each
driver's test writes that state by hand, in that version's form, then runs this check."""

from __future__ import annotations

from engine.drivers.base import SchedulerState


async def check_a_claim_continues_from(driver: SchedulerState, task: str, last: int) -> None:
    """`task` was last fired at `last` by an earlier version: a scheduler that read no state
    loses its claim, one that read `last` wins it."""
    assert not await driver.task_claim(task, None, last + 100)
    assert await driver.task_claim(task, last, last + 100)
    state = await driver.task_state(task)
    assert state is not None and (state.last_fired_at, state.failure) == (last + 100, None)
