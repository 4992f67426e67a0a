"""A task's claim (`task_claim`): the compare-and-set that lets one scheduler fire an occurrence."""

from __future__ import annotations

from engine import Jobs, ManualClock


async def test_a_claim_moves_the_last_fired_occurrence_only_from_the_value_read(
    jobs: Jobs, clock: ManualClock
) -> None:
    driver = jobs.driver
    assert await driver.task_claim("t", None, 100)  # no state yet: the first claim wins
    assert not await driver.task_claim("t", None, 100)  # a peer that read no state loses
    assert not await driver.task_claim("t", 50, 200)  # a stale read loses
    state = await driver.task_state("t")
    assert state is not None and state.last_fired_at == 100
    clock.advance(1_000)
    assert await driver.task_claim("t", 100, 200)
    assert await driver.task_claim("t", 200, 150)  # backwards too: a clock stepped back
    state = await driver.task_state("t")
    assert state is not None and (state.last_fired_at, state.updated_at) == (150, clock.now_ms())
    assert await driver.task_claim("other", None, 100)  # each task has its own state


# State an earlier version's scheduler wrote is claimed from too: each driver's own tests write
# it by hand (tests/support/earlier_task_state.py); the kit cannot reach a driver's storage.
