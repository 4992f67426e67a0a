"""A large batch first goes in expecting all-new keys (`enqueue_new`, no conflict clause); a
held key fails that try, and the batch goes in again with the insert that skips held keys."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import asyncpg
import pytest

from engine import ManualClock
from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres import jobs as pg_jobs
from engine.drivers.postgres.jobs import PgJobs
from engine.errors import DriverUnavailableError, JobDuplicateError
from schemas.jobs import EnqueueRequest
from tests.postgres.builders import request

Insert = tuple[bool, str]  # (new, how it ended: "ok" or the exception's class name)


@pytest.fixture
def inserts(monkeypatch: pytest.MonkeyPatch) -> list[Insert]:
    """Every part insert the driver runs: which statement, and how it ended."""
    seen: list[Insert] = []
    real_insert = PgJobs._insert

    async def insert(self: PgJobs, *args: Any, new: bool = False, **kw: Any) -> Any:
        try:
            result = await real_insert(self, *args, new=new, **kw)
        except Exception as exc:
            seen.append((new, type(exc).__name__))
            raise
        seen.append((new, "ok"))
        return result

    monkeypatch.setattr(PgJobs, "_insert", insert)
    return seen


class Parts:
    """Parts of a batch, built on demand like the client builds them; counts each build."""

    def __init__(self, parts: Sequence[Sequence[EnqueueRequest]]) -> None:
        self.parts = parts
        self.built = 0

    def __iter__(self) -> Iterator[Sequence[EnqueueRequest]]:
        for part in self.parts:
            self.built += 1
            yield part


def keys(now: int, *names: str, **kw: Any) -> list[EnqueueRequest]:
    return [request(now, key=name, **kw) for name in names]


async def stored(sql: asyncpg.Connection[asyncpg.Record]) -> list[str]:
    found = await sql.fetch("SELECT idempotency_key FROM mcp_jobs.jobs ORDER BY idempotency_key")
    return [row["idempotency_key"] for row in found]


async def test_a_batch_of_new_keys_goes_in_with_the_plain_insert(
    driver: PostgresDriver,
    clock: ManualClock,
    sql: asyncpg.Connection[asyncpg.Record],
    inserts: list[Insert],
) -> None:
    now = clock.now_ms()
    results = await driver.enqueue_parts(Parts([keys(now, "a", "b"), keys(now, "c")]))
    assert [r.deduped for r in results] == [False, False, False]
    assert inserts == [(True, "ok"), (True, "ok")]
    assert await stored(sql) == ["a", "b", "c"]


async def test_a_held_key_in_a_late_part_sends_the_batch_again_skipping_it(
    driver: PostgresDriver,
    clock: ManualClock,
    sql: asyncpg.Connection[asyncpg.Record],
    inserts: list[Insert],
) -> None:
    now = clock.now_ms()
    (holder,) = await driver.enqueue(keys(now, "held"))
    parts = Parts([keys(now, "a", "b"), keys(now, "c", "held"), keys(now, "d")])
    results = await driver.enqueue_parts(parts)
    # The plain insert met the held key in the second part; everything went in again with the
    # insert that skips it, from the parts already built (each was built once).
    assert inserts == [(True, "ok"), (True, "UniqueViolationError")] + [(False, "ok")] * 3
    assert parts.built == 3
    assert [r.deduped for r in results] == [False, False, False, True, False]
    assert (results[3].id, results[3].run_id) == (holder.id, holder.run_id)
    # Nothing of the failed try stayed: one row per key.
    assert await stored(sql) == ["a", "b", "c", "d", "held"]


async def test_after_a_held_key_the_next_batches_skip_held_keys_then_expect_new_again(
    driver: PostgresDriver,
    clock: ManualClock,
    inserts: list[Insert],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pg_jobs, "_SKIPPING_BATCHES", 2)
    now = clock.now_ms()
    await driver.enqueue(keys(now, "held"))
    await driver.enqueue_parts(Parts([keys(now, "held", "x")]))
    inserts.clear()
    for name in ("y", "z", "w"):
        await driver.enqueue_parts(Parts([keys(now, name)]))
    assert inserts == [(False, "ok"), (False, "ok"), (True, "ok")]


async def test_a_held_key_under_on_conflict_error_is_still_refused_and_nothing_stays(
    driver: PostgresDriver,
    clock: ManualClock,
    sql: asyncpg.Connection[asyncpg.Record],
    inserts: list[Insert],
) -> None:
    now = clock.now_ms()
    await driver.enqueue(keys(now, "held"))
    with pytest.raises(JobDuplicateError):
        await driver.enqueue_parts(Parts([keys(now, "a"), keys(now, "held", on_conflict="error")]))
    assert (True, "UniqueViolationError") in inserts
    assert await stored(sql) == ["held"]


async def test_a_unique_violation_of_another_index_is_not_taken_for_a_held_key(
    driver: PostgresDriver,
    clock: ManualClock,
    sql: asyncpg.Connection[asyncpg.Record],
    inserts: list[Insert],
) -> None:
    now = clock.now_ms()
    (first,) = await driver.enqueue(keys(now, "first"))
    with pytest.raises(DriverUnavailableError) as caught:
        await driver.enqueue_parts(Parts([keys(now, "a"), keys(now, "b", id=first.id)]))
    assert isinstance(caught.value.__cause__, asyncpg.UniqueViolationError)
    assert caught.value.__cause__.constraint_name == "jobs_pkey"
    assert inserts == [(True, "ok"), (True, "UniqueViolationError")]  # no second try
    assert await stored(sql) == ["first"]
