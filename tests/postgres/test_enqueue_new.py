"""A large batch first goes in expecting all-new keys (`enqueue_new`, no conflict clause); a
held key fails that try, and the batch goes in again with the insert that skips held keys."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

from engine import ManualClock
from engine.drivers.postgres import PostgresDriver, enqueue
from engine.drivers.postgres.enqueue import Enqueuer
from engine.errors import InvalidArgumentError, JobDuplicateError
from schemas.jobs import EnqueueRequest
from tests.postgres.builders import request

Insert = tuple[bool, str]  # (new, how it ended: "ok" or the exception's class name)


@pytest.fixture
def inserts(monkeypatch: pytest.MonkeyPatch) -> list[Insert]:
    """Every part insert the driver runs: which statement, and how it ended."""
    seen: list[Insert] = []
    real_insert = Enqueuer._insert

    async def insert(self: Enqueuer, *args: Any, new: bool = False, **kw: Any) -> Any:
        try:
            result = await real_insert(self, *args, new=new, **kw)
        except Exception as exc:
            seen.append((new, type(exc).__name__))
            raise
        seen.append((new, "ok"))
        return result

    monkeypatch.setattr(Enqueuer, "_insert", insert)
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


@dataclass
class Case:
    """A driver on a fresh database, the inserts it runs, and a look at what it stored."""

    driver: PostgresDriver
    sql: asyncpg.Connection[asyncpg.Record]
    inserts: list[Insert]
    now: int

    def keys(self, *names: str, **kw: Any) -> list[EnqueueRequest]:
        return [request(self.now, key=name, **kw) for name in names]

    async def stored(self) -> list[str]:
        found = await self.sql.fetch(
            "SELECT idempotency_key FROM mcp_jobs.jobs ORDER BY idempotency_key"
        )
        return [row["idempotency_key"] for row in found]


@pytest.fixture
def case(
    driver: PostgresDriver,
    sql: asyncpg.Connection[asyncpg.Record],
    inserts: list[Insert],
    clock: ManualClock,
) -> Case:
    return Case(driver, sql, inserts, clock.now_ms())


async def test_a_batch_of_new_keys_goes_in_with_the_plain_insert(case: Case) -> None:
    results = await case.driver.enqueue_parts(Parts([case.keys("a", "b"), case.keys("c")]))
    assert [r.deduped for r in results] == [False, False, False]
    assert case.inserts == [(True, "ok"), (True, "ok")]
    assert await case.stored() == ["a", "b", "c"]


async def test_a_held_key_in_a_late_part_sends_the_batch_again_skipping_it(case: Case) -> None:
    (holder,) = await case.driver.enqueue(case.keys("held"))
    parts = Parts([case.keys("a", "b"), case.keys("c", "held"), case.keys("d")])
    results = await case.driver.enqueue_parts(parts)
    # The plain insert met the held key in the second part; everything went in again with the
    # insert that skips it, from the parts already built (each was built once).
    assert case.inserts == [(True, "ok"), (True, "UniqueViolationError")] + [(False, "ok")] * 3
    assert parts.built == 3
    assert [r.deduped for r in results] == [False, False, False, True, False]
    assert (results[3].id, results[3].run_id) == (holder.id, holder.run_id)
    # Nothing of the failed try stayed: one row per key.
    assert await case.stored() == ["a", "b", "c", "d", "held"]


async def test_after_a_held_key_the_next_batches_skip_held_keys_then_expect_new_again(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(enqueue, "_SKIPPING_BATCHES", 2)
    await case.driver.enqueue(case.keys("held"))
    await case.driver.enqueue_parts(Parts([case.keys("held", "x")]))
    case.inserts.clear()
    for name in ("y", "z", "w"):
        await case.driver.enqueue_parts(Parts([case.keys(name)]))
    assert case.inserts == [(False, "ok"), (False, "ok"), (True, "ok")]


async def test_a_held_key_under_on_conflict_error_is_still_refused_and_nothing_stays(
    case: Case,
) -> None:
    await case.driver.enqueue(case.keys("held"))
    with pytest.raises(JobDuplicateError):
        await case.driver.enqueue_parts(
            Parts([case.keys("a"), case.keys("held", on_conflict="error")])
        )
    assert (True, "UniqueViolationError") in case.inserts
    assert await case.stored() == ["held"]


async def test_a_unique_violation_of_another_index_is_not_taken_for_a_held_key(case: Case) -> None:
    (first,) = await case.driver.enqueue(case.keys("first"))
    with pytest.raises(InvalidArgumentError) as caught:
        await case.driver.enqueue_parts(Parts([case.keys("a"), case.keys("b", id=first.id)]))
    assert isinstance(caught.value.__cause__, asyncpg.UniqueViolationError)
    assert caught.value.__cause__.constraint_name == "jobs_pkey"
    assert case.inserts == [(True, "ok"), (True, "UniqueViolationError")]  # no second try
    assert await case.stored() == ["first"]
