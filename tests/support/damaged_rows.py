"""What a driver answers around a job row another program wrote (STORE_DAMAGED): a list names
the row in its place and pages on past it; a claim that takes it settles it dead, the damage
its error, and hands out the jobs claimed with it."""

from __future__ import annotations

from engine.drivers.base import Driver
from schemas.jobs import JobFilter, JobState

MAX_PAGES = 50  # a walk that does not end is a cursor that does not move


async def pages(
    driver: Driver, limit: int, states: tuple[JobState, ...] | None = None
) -> list[tuple[list[str], list[str]]]:
    """Every page of the driver's list, newest first: (its job ids, its damaged rows' ids)."""
    seen: list[tuple[list[str], list[str]]] = []
    cursor = None
    for _ in range(MAX_PAGES):
        page = await driver.list_jobs(JobFilter(states=states, limit=limit, cursor=cursor))
        seen.append(([j.id for j in page.jobs], [d.id for d in page.damaged]))
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor
    raise AssertionError(f"the list did not end within {MAX_PAGES} pages: {seen}")


async def check_listed_in_place(driver: Driver, newest: str, damaged: str, oldest: str) -> str:
    """Three jobs, the middle one damaged: one page names it beside the others, pages of one
    walk past it, and a list of its state finds it too. Answers the damaged row's fix."""
    whole = await driver.list_jobs(JobFilter(limit=10))
    assert [j.id for j in whole.jobs] == [newest, oldest]
    (named,) = whole.damaged
    assert named.id == damaged and f"job {damaged}" in named.cause, named
    assert whole.next_cursor is None
    walked = [([newest], []), ([], [damaged]), ([oldest], [])]
    assert await pages(driver, 1) == walked
    return named.fix


async def check_buried_on_claim(driver: Driver, damaged: str, others: list[str]) -> None:
    """A claim takes every due job: the readable ones are handed out, the damaged one is dead
    with STORE_DAMAGED and is not claimed again."""
    claimed = await driver.claim("w", 10, 60_000)
    assert sorted(c.record.id for c in claimed) == sorted(others)
    assert await pages(driver, 10, ("dead",)) == [([], [damaged])]
    assert await pages(driver, 10, ("running",)) == [(sorted(others, reverse=True), [])]
    stats = {s.queue: s for s in await driver.stats(None)}
    assert stats["default"].dead == 1, stats
    assert await driver.claim("w", 10, 60_000) == []
