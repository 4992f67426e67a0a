"""A refused insert on PostgreSQL: the insert answers only a count, and a second statement
(enqueue_holders) finds which rows were refused and who holds their keys. These tests act in the
gap between the two statements, where another process can settle a holder or take a key."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from engine import ManualClock
from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.sql import raw_queries
from tests.postgres.builders import request

Hook = Callable[[], Awaitable[None]]


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch, driver: PostgresDriver) -> list[str]:
    """The names of the enqueue statements the driver runs, in order."""
    names = {driver.db.q[n]: n for n in ("enqueue", "enqueue_one", "enqueue_holders")}
    ran: list[str] = []
    for method in ("fetch", "fetchval"):
        real = getattr(asyncpg.connection.Connection, method)

        async def wrapped(self: Any, query: str, *args: Any, _real: Any = real, **kw: Any) -> Any:
            if query in names:
                ran.append(names[query])
            return await _real(self, query, *args, **kw)

        monkeypatch.setattr(asyncpg.connection.Connection, method, wrapped)
    return ran


@pytest.fixture
def before_holders(monkeypatch: pytest.MonkeyPatch, driver: PostgresDriver) -> list[Hook]:
    """Hooks awaited once each, just before the driver's next enqueue_holders statement."""
    hooks: list[Hook] = []
    real = asyncpg.connection.Connection.fetch

    async def fetch(self: Any, query: str, *args: Any, **kw: Any) -> Any:
        if query == driver.db.q["enqueue_holders"]:
            while hooks:
                await hooks.pop(0)()
        return await real(self, query, *args, **kw)

    monkeypatch.setattr(asyncpg.connection.Connection, "fetch", fetch)
    return hooks


async def settle(sql: asyncpg.Connection[asyncpg.Record], job_id: str) -> None:
    await sql.execute("UPDATE mcp_jobs.jobs SET state = 'succeeded' WHERE id = $1", job_id)


async def test_a_batch_that_goes_in_whole_is_one_statement(
    driver: PostgresDriver, clock: ManualClock, statements: list[str]
) -> None:
    now = clock.now_ms()
    results = await driver.enqueue([request(now, key=f"k{n}") for n in range(5)])
    assert [r.deduped for r in results] == [False] * 5
    assert statements == ["enqueue"]


async def test_a_refused_single_item_looks_for_its_holder_without_inserting_again(
    driver: PostgresDriver, clock: ManualClock, statements: list[str]
) -> None:
    (held,) = await driver.enqueue([request(clock.now_ms(), key="k")])
    (again,) = await driver.enqueue([request(clock.now_ms(), key="k")])
    assert again.deduped and again.id == held.id
    assert statements == ["enqueue_one", "enqueue_one", "enqueue_holders"]


async def test_a_batch_with_a_held_key_answers_the_holder_and_inserts_the_rest(
    driver: PostgresDriver,
    clock: ManualClock,
    sql: asyncpg.Connection[asyncpg.Record],
    statements: list[str],
) -> None:
    now = clock.now_ms()
    (held,) = await driver.enqueue([request(now, key="held")])
    fresh, dup = await driver.enqueue([request(now, key="fresh"), request(now, key="held")])
    assert (fresh.deduped, dup.deduped, dup.id) == (False, True, held.id)
    assert statements == ["enqueue_one", "enqueue", "enqueue_holders"]
    assert await sql.fetchval("SELECT count(*) FROM mcp_jobs.jobs") == 2


async def test_a_holder_that_settles_before_the_lookup_frees_the_key_for_a_new_job(
    driver: PostgresDriver,
    clock: ManualClock,
    sql: asyncpg.Connection[asyncpg.Record],
    before_holders: list[Hook],
) -> None:
    now = clock.now_ms()
    (held,) = await driver.enqueue([request(now, key="k")])
    before_holders.append(lambda: settle(sql, held.id))
    wanted = request(now, key="k")
    (result,) = await driver.enqueue([wanted])
    assert not before_holders  # the lookup ran, after the holder settled
    assert (result.id, result.deduped) == (wanted.id, False)
    live = await sql.fetch("SELECT id FROM mcp_jobs.jobs WHERE state = 'ready'")
    assert [r["id"] for r in live] == [wanted.id]


async def test_a_row_of_the_batch_is_known_by_its_id_even_when_a_stranger_holds_its_key_by_then(
    driver: PostgresDriver,
    clock: ManualClock,
    sql: asyncpg.Connection[asyncpg.Record],
    before_holders: list[Hook],
) -> None:
    """Between the insert and the lookup, the batch's own row is claimed and settled and a
    stranger enqueues the same key: the row still answers as inserted, with its own id."""
    now = clock.now_ms()
    (held,) = await driver.enqueue([request(now, key="held")])
    ours = request(now, key="ours")
    stranger = request(now, key="ours")

    async def meanwhile() -> None:
        await settle(sql, ours.id)
        await driver.enqueue([stranger])

    before_holders.append(meanwhile)
    mine, dup = await driver.enqueue([ours, request(now, key="held")])
    assert (mine.id, mine.deduped) == (ours.id, False)
    assert (dup.id, dup.deduped) == (held.id, True)


def test_the_lookup_reads_the_documents_the_insert_reads() -> None:
    # Both statements decompose one pair of documents: the holders query must read the row
    # and shared arrays exactly as the insert does, or it would match rows to the wrong keys.
    queries = raw_queries()
    join = "JOIN jsonb_array_elements({}::jsonb) WITH ORDINALITY AS shared(g, n)"
    assert join.format("$3") in queries["enqueue"]
    assert join.format("$2") in queries["enqueue_holders"]
    for field in ("r->>0 AS id", "r->>2 AS idempotency_key", "g->>0 AS name", "g->>2 AS tenant_id"):
        assert field in queries["enqueue"] and field in queries["enqueue_holders"]
