"""Wake-ups: LISTEN/NOTIFY wakes an idle driver at once; without LISTEN, waits end on the clock.

The manual clock never moves unless a test moves it, so a wait that ends without an advance was
ended by a notification, not by a timer."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import asyncpg

from engine import ManualClock
from engine.drivers.postgres import PostgresDriver
from tests.postgres.builders import request
from tests.postgres.conftest import DriverFactory
from tests.postgres.waiting import eventually

HOUR_MS = 3_600_000


async def listening(driver: PostgresDriver) -> None:
    """Listen, and consume the wake-up that coming up leaves pending (so that only a later
    notification can end the next wait)."""
    assert await driver.start_listening()
    with anyio.fail_after(5):
        await driver.wait_for_work(0)


async def wait_in_background(driver: PostgresDriver, tg: anyio.abc.TaskGroup) -> anyio.Event:
    woke = anyio.Event()

    async def wait() -> None:
        await driver.wait_for_work(HOUR_MS)
        woke.set()

    tg.start_soon(wait)
    return woke


async def test_an_enqueue_on_another_connection_wakes_a_waiting_driver(
    make_driver: DriverFactory, clock: ManualClock
) -> None:
    waiter = await make_driver()
    other = await make_driver()  # its own pool: the wake-up has to cross the server
    await listening(waiter)
    async with anyio.create_task_group() as tg:
        woke = await wait_in_background(waiter, tg)
        await other.enqueue([request(clock.now_ms())])
        with anyio.fail_after(5):
            await woke.wait()


async def test_only_an_enqueue_that_inserts_notifies(
    driver: PostgresDriver, clock: ManualClock, pg_url: str
) -> None:
    heard: list[str] = []
    changed = anyio.Event()

    def on_notify(conn: object, pid: int, channel: str, payload: object) -> None:
        nonlocal changed
        heard.append(str(payload))
        changed.set()
        changed = anyio.Event()

    async def until(n: int) -> None:
        with anyio.fail_after(5):
            while len(heard) < n:
                await changed.wait()

    listener: asyncpg.Connection[asyncpg.Record] = await asyncpg.connect(pg_url)
    try:
        await listener.add_listener(driver.db.channel, on_notify)
        await driver.enqueue([request(clock.now_ms(), key="held")])
        await until(1)
        await driver.enqueue([request(clock.now_ms(), key="held")])  # deduped: nothing new
        # Notifications arrive in commit order: one sent after the dedupe committed comes after
        # anything the dedupe sent.
        await listener.execute("SELECT pg_notify($1, 'marker')", driver.db.channel)
        await until(2)
        assert heard == ["", "marker"]
        # A batch of many inserted rows sends one notification, not one per row.
        await driver.enqueue([request(clock.now_ms(), key=f"k{i}") for i in range(50)])
        await listener.execute("SELECT pg_notify($1, 'marker')", driver.db.channel)
        await until(4)
        assert heard == ["", "marker", "", "marker"]
    finally:
        await listener.close()


async def test_without_listen_the_wait_ends_on_the_injected_clock(
    make_driver: DriverFactory, clock: ManualClock
) -> None:
    waiter = await make_driver(listen=False)
    other = await make_driver()
    assert not await waiter.start_listening()
    async with anyio.create_task_group() as tg:
        woke = await wait_in_background(waiter, tg)
        await other.enqueue([request(clock.now_ms())])
        await anyio.lowlevel.checkpoint()
        assert not woke.is_set()
        clock.advance(HOUR_MS)  # the poll interval, in the driver's clock
        with anyio.fail_after(5):
            await woke.wait()


async def test_a_wake_up_between_a_claim_and_the_wait_is_not_lost(
    make_driver: DriverFactory, clock: ManualClock
) -> None:
    worker = await make_driver()
    other = await make_driver()
    await listening(worker)
    assert await worker.claim("w", 10, 1000) == []
    (r,) = await other.enqueue([request(clock.now_ms())])
    # The notification may land before the worker starts waiting; it must still end the wait.
    await eventually(lambda: worker.signal.count >= 2)
    with anyio.fail_after(5):  # the frozen clock cannot end it: only the missed wake-up can
        await worker.wait_for_work(HOUR_MS)
    assert [c.record.id for c in await worker.claim("w", 10, 1000)] == [r.id]


async def test_the_listener_comes_back_after_the_server_drops_it(
    make_driver: DriverFactory, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    waiter = await make_driver()
    other = await make_driver()
    assert await waiter.start_listening()
    dropped = await sql.fetchval(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
        " WHERE datname = current_database() AND query LIKE 'LISTEN%'"
    )
    assert dropped == 1
    await eventually(lambda: not waiter._listener.up)
    # The drop itself woke waiters (anything enqueued meanwhile went unheard)...
    assert waiter.signal.count == 2
    # ...and the next wait listens again.
    await listening(waiter)
    async with anyio.create_task_group() as tg:
        woke = await wait_in_background(waiter, tg)
        await other.enqueue([request(clock.now_ms())])
        with anyio.fail_after(5):
            await woke.wait()
