"""A large batch on PostgreSQL: each part is inserted while the client builds the next, in one
transaction (the rules every driver shares are in tests/parity/test_enqueue.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from asyncpg.transaction import Transaction
from pydantic import BaseModel

from engine import Enqueue, JobContext, JobRegistry, Jobs, ManualClock, connect, job
from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.enqueue import Enqueuer
from engine.errors import IdempotencyKeyFailedError


class User(BaseModel):
    user_id: int


@pytest.fixture
def events() -> list[str]:
    return []


@pytest.fixture
def on_key() -> list[Callable[[int], None]]:
    """Hooks the key function calls with each user id, as the client builds the item."""
    return []


@pytest.fixture
async def jobs(
    pg_url: str,
    clock: ManualClock,
    events: list[str],
    on_key: list[Callable[[int], None]],
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Jobs]:
    """A client whose key function and part inserts write to `events`, in the order they ran."""
    registry = JobRegistry()

    def key(user: User) -> str:
        events.append(f"key {user.user_id}")
        for hook in on_key:
            hook(user.user_id)
        return str(user.user_id)

    @job(name="sync_user", idempotency_key=key, registry=registry)
    async def sync_user(input: User, ctx: JobContext) -> None:
        return None

    real_insert = Enqueuer._insert

    async def insert(self: Enqueuer, conn: Any, unique: Any, *args: Any, **kw: Any) -> Any:
        events.append(f"insert {len(unique)}")
        return await real_insert(self, conn, unique, *args, **kw)

    monkeypatch.setattr(Enqueuer, "_insert", insert)
    client = await connect(pg_url, clock=clock, registry=registry)
    try:
        yield client
    finally:
        await client.close()


def batch(count: int) -> list[Enqueue]:
    return [Enqueue("sync_user", {"user_id": n}) for n in range(count)]


async def live(jobs: Jobs) -> int:
    return sum(s.ready for s in await jobs.stats())


async def test_a_part_goes_to_the_server_before_the_next_part_is_built(
    jobs: Jobs, events: list[str]
) -> None:
    results = await jobs.enqueue_many(batch(300))  # parts of 128 and 172
    assert len({r.id for r in results}) == 300
    assert [e for e in events if e.startswith("insert")] == ["insert 128", "insert 172"]
    # The first part's insert started before the second part's first key was computed, and
    # the second part's insert after its last one.
    assert events.index("insert 128") < events.index("key 128")
    assert events.index("insert 172") > events.index("key 299")
    assert await live(jobs) == 300


async def test_a_batch_cancelled_mid_flight_commits_nothing(
    jobs: Jobs, events: list[str], on_key: list[Callable[[int], None]]
) -> None:
    def cancel_at(user_id: int) -> None:
        if user_id == 200:  # in the second part, while the first is at the server
            task = asyncio.current_task()
            assert task is not None
            task.cancel()

    on_key.append(cancel_at)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.create_task(jobs.enqueue_many(batch(600)))
    assert "insert 128" in events
    on_key.clear()
    assert await live(jobs) == 0
    # The driver goes on: the same batch goes in whole.
    assert not any(r.deduped for r in await jobs.enqueue_many(batch(600)))
    assert await live(jobs) == 600


async def test_the_batch_runs_in_one_transaction_begun_before_its_first_part(
    jobs: Jobs, events: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real_start = Transaction.start

    async def start(self: Transaction) -> None:
        events.append("begin sent")
        await real_start(self)
        events.append("begin done")

    monkeypatch.setattr(Transaction, "start", start)
    await jobs.enqueue_many(batch(300))
    assert events.count("begin sent") == 1
    assert events.index("begin done") < events.index("insert 128")
    assert await live(jobs) == 300


async def test_a_refusal_in_a_late_part_rolls_back_and_keeps_the_connection(
    jobs: Jobs, on_key: list[Callable[[int], None]]
) -> None:
    def refuse(user_id: int) -> None:
        if user_id == 250:
            raise ValueError("no key for 250")

    on_key.append(refuse)
    with pytest.raises(IdempotencyKeyFailedError) as raised:
        await jobs.enqueue_many(batch(300))
    assert isinstance(raised.value.__cause__, ValueError)
    on_key.clear()
    assert await live(jobs) == 0
    driver = jobs.driver
    assert isinstance(driver, PostgresDriver)
    own = set(driver.db.general.all)
    assert not any(r.deduped for r in await jobs.enqueue_many(batch(300)))
    assert driver.db.general.all == own  # the same connections, none closed and reopened
    assert await live(jobs) == 300
