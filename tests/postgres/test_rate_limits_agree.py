"""The rate-limit take PostgreSQL computes in SQL (engine/drivers/postgres/rate_limits.py) agrees
with its home, engine.rate_limits.take_all, on the boundary cases: a start exactly at its
allowed time, a µs before it, a TAT far behind now, an interval that does not divide evenly, a
burst, and several keys where one blocks — plain and reserving (a job's take that blocks takes
its slot and stores a reservation). Also two concurrent takers of one new key."""

from __future__ import annotations

import asyncio
import itertools

import anyio
import asyncpg

from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.rate_limits import TAKE
from engine.drivers.postgres.sql import with_schema
from engine.rate_limits import (
    RateTake,
    RateVerdict,
    interval_us,
    late_window_ms,
    take_all,
    tolerance_us,
)
from tests.postgres.conftest import DriverFactory

NOW = 1_767_225_600_000
RATES = [RateTake("job:a", 3, 1000, 1), RateTake("queue:q", 7, 60_000, 3)]


def _tats(take: RateTake) -> list[int | None]:
    """Stored TATs around the boundary of a start at NOW."""
    edge = NOW * 1000 + tolerance_us(take.limit, take.per_ms, take.burst)
    step = interval_us(take.limit, take.per_ms)
    return [None, 0, edge - 1, edge, edge + 1, edge + step, NOW * 1000 - step]


async def _seed(sql: asyncpg.Connection[asyncpg.Record], tats: dict[str, int]) -> None:
    await sql.execute("DELETE FROM mcp_jobs.rate_limits")
    await sql.execute("DELETE FROM mcp_jobs.rate_reservations")
    for key, tat in tats.items():
        await sql.execute(
            "INSERT INTO mcp_jobs.rate_limits VALUES ($1, $2, 1, 1000, 1, 0)", key, tat
        )


async def _stored(sql: asyncpg.Connection[asyncpg.Record]) -> dict[str, int]:
    return {
        r["key"]: r["tat"] for r in await sql.fetch("SELECT key, tat FROM mcp_jobs.rate_limits")
    }


async def test_one_key_agrees_with_take_all(
    driver: PostgresDriver, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    for take in RATES:
        for tat in _tats(take):
            tats = {} if tat is None else {take.key: tat}
            await _seed(sql, tats)
            expected, new = take_all(tats, [take], NOW)
            assert await driver.take_rates([take], NOW) == expected, (take, tat)
            # Taken: the new TAT is stored; refused: nothing moved.
            assert await _stored(sql) == (new or tats), (take, tat)


async def test_several_keys_agree_all_or_nothing(
    driver: PostgresDriver, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    a, q = RATES
    for tat_a, tat_q in itertools.product(_tats(a), _tats(q)):
        tats = {k: t for k, t in ((a.key, tat_a), (q.key, tat_q)) if t is not None}
        await _seed(sql, {a.key: tats.get(a.key, 0), q.key: tats.get(q.key, 0)})
        full = {a.key: tats.get(a.key, 0), q.key: tats.get(q.key, 0)}
        expected, new = take_all(full, [a, q], NOW)
        assert await driver.take_rates([a, q], NOW) == expected, (tat_a, tat_q)
        assert await _stored(sql) == (new or full), (tat_a, tat_q)


async def test_reserving_takes_agree_and_store_the_slot(
    driver: PostgresDriver, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    a, q = RATES
    for tat_a, tat_q in itertools.product(_tats(a), _tats(q)):
        full = {a.key: tat_a or 0, q.key: tat_q or 0}
        await _seed(sql, full)
        expected, new = take_all(full, [a, q], NOW, reserve=True)
        assert await driver.take_rates([a, q], NOW, "job-1") == expected, (tat_a, tat_q)
        assert await _stored(sql) == new, (tat_a, tat_q)
        slot, late = expected.next_start_at, expected.next_start_at + late_window_ms([a, q])
        held = (
            []
            if expected.blocked_key is None
            else [("job-1", slot, late, expected[0], f"{a.key}\n{q.key}")]
        )
        assert [tuple(r) for r in await driver.rate_reservations(5)] == held, (tat_a, tat_q)
        if held:
            # Claimed again at its slot: started from the reservation, nothing taken again.
            assert await driver.take_rates([a, q], slot - 1, "job-1") == expected
            assert await driver.take_rates([a, q], slot, "job-1") == RateVerdict(None, slot)
            assert await _stored(sql) == new and await driver.rate_reservations(5) == []


async def test_two_first_takers_of_a_new_key_admit_one(make_driver: DriverFactory) -> None:
    one, two = await make_driver(), await make_driver()
    take = [RateTake("job:new", 1, 60_000, 1)]
    verdicts = await asyncio.gather(one.take_rates(take, NOW), two.take_rates(take, NOW))
    assert sorted(v.blocked_key is None for v in verdicts) == [False, True]


async def test_taking_several_starts_at_once_agrees_with_take_all(
    driver: PostgresDriver, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    """`up_to`: as many starts as every key admits now (rate_limits.starts_allowed), the TATs
    moved by that many intervals, the extra ones answered as `spare`."""
    wide = RateTake("job:w", 10, 1000, 8)  # a burst of 8: several starts at once
    for up_to in (1, 2, 5, 8, 20):
        for tat_w, tat_q in itertools.product(_tats(wide), _tats(RATES[1])):
            full = {wide.key: tat_w or 0, RATES[1].key: tat_q or 0}
            await _seed(sql, full)
            expected, new = take_all(full, [wide, RATES[1]], NOW, up_to=up_to)
            got = await driver.take_rates([wide, RATES[1]], NOW, None, up_to)
            assert got == expected, (up_to, tat_w, tat_q)
            assert await _stored(sql) == (new or full), (up_to, tat_w, tat_q)
    await _seed(sql, {})
    verdict = await driver.take_rates([wide], NOW, None, 20)
    assert verdict == (None, NOW, 7)  # a fresh key: its whole burst, no more


async def test_a_take_sweeping_void_reservations_passes_over_one_another_take_is_deleting(
    driver: PostgresDriver, pg_url: str, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    """A job's take deletes its own void reservation (USE), then waits for the key's row that a
    second take holds, whose sweep of void reservations waited for that deleted row: the two
    deadlocked, a second lost to deadlock_timeout each time (keyed limits, many workers)."""
    take = RateTake("job:a", 5, 1000, 1)
    await _seed(sql, {take.key: NOW * 1000})
    await sql.execute(
        "INSERT INTO mcp_jobs.rate_reservations (job_id, slot_at, late_at, blocked_key, keys, "
        "reserved_at) VALUES ('late', $1, $1, 'job:a', 'job:a', 0)",
        NOW - 1000,
    )
    using = await asyncpg.connect(pg_url)
    holding = await asyncpg.connect(pg_url)
    try:
        await using.execute("BEGIN")
        await using.execute("DELETE FROM mcp_jobs.rate_reservations WHERE job_id = 'late'")
        lock = "SELECT tat FROM mcp_jobs.rate_limits WHERE key = 'job:a' FOR UPDATE"
        await holding.execute("BEGIN")
        await holding.execute(lock)
        waiting = asyncio.ensure_future(using.execute(lock))
        waited = "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1"
        with anyio.fail_after(10):  # its lock request is queued behind `holding`
            while not await sql.fetchval(waited, using.get_server_pid()):
                pass
        args = ([take.key], [take.limit], [take.per_ms], [take.burst], NOW)
        with anyio.fail_after(10):
            taken = await holding.fetch(with_schema(TAKE, "mcp_jobs"), *args, "other", 1)
        assert not waiting.done()
        await holding.execute("COMMIT")
        with anyio.fail_after(10):
            await waiting
        await using.execute("COMMIT")
    finally:
        await using.close()
        await holding.close()
    assert taken[0]["complete"] and taken[0]["allowed"]
