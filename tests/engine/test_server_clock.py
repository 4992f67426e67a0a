"""`ServerClock`: this machine's clock plus the offset last measured against the database server,
logged when it is, or stops being, worth an operator's attention."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio
import pytest

from engine.clock import (
    REMEASURE_MS,
    ManualClock,
    ServerClock,
    measure_offset,
    offset_words,
    server_clock,
)
from engine.testing.blocked import wait_all_tasks_blocked


def _server_at(
    local: ManualClock, server_ms: int, round_trip_ms: int
) -> Callable[[], Awaitable[int]]:
    """A read of the server's clock that takes `round_trip_ms` of `local`'s time."""

    async def read() -> int:
        local.advance(round_trip_ms)
        return server_ms

    return read


async def test_the_offset_is_taken_halfway_through_the_round_trip() -> None:
    local = ManualClock(1_000_000)
    offset, round_trip = await measure_offset(_server_at(local, 1_060_005, 10), local)
    assert (offset, round_trip) == (60_000, 10)  # read at 1_000_005 local


async def test_now_is_the_local_clock_moved_by_the_offset_and_sleeps_are_local(
    caplog: pytest.LogCaptureFixture,
) -> None:
    local = ManualClock(1_000_000)
    clock = ServerClock(local, "postgres")
    assert clock.now_ms() == 1_000_000 and not clock.measured
    with caplog.at_level(logging.WARNING, logger="engine.clock"):
        await clock.measure(_server_at(local, 880_002, 4))  # this machine 120 s fast
        assert clock.now_ms() == local.now_ms() - 120_000 and clock.measured
        await clock.measure(_server_at(local, 880_206, 4))  # 0.2 s more: not logged again
        await clock.measure(_server_at(local, local.now_ms() + 2, 4))  # set right
    assert [r.getMessage() for r in caplog.records] == [
        "postgres: " + offset_words(-120_000, 4),
        "postgres: " + offset_words(0, 4),
    ]
    assert "120.0 s ahead of the database server's" in caplog.records[0].getMessage()
    assert "agrees with the database server's" in caplog.records[1].getMessage()
    woke = anyio.Event()

    async def sleeper() -> None:
        await clock.sleep_ms(1_000)
        woke.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(sleeper)
            await wait_all_tasks_blocked()
            local.advance(999)
            await wait_all_tasks_blocked()
            assert not woke.is_set()
            local.advance(1)
    assert woke.is_set()


async def test_a_slow_round_trip_keeps_the_offset_measured_before() -> None:
    """A measure that took seconds (a pause, a loaded server) could be off by half of them: the
    offset before stands. The first measure is taken whatever it took (nothing stands)."""
    local = ManualClock(1_000_000)
    clock = ServerClock(local, "redis")
    await clock.measure(_server_at(local, 940_000, 3_000))  # read at 1_001_500: 61.5 s behind
    assert clock.offset_ms == -61_500
    await clock.measure(_server_at(local, local.now_ms() - 60_000 + 1, 2))
    assert clock.offset_ms == -60_000
    await clock.measure(_server_at(local, local.now_ms(), 5_000))  # slow: would say -2,500
    assert clock.offset_ms == -60_000


async def test_a_step_of_this_machines_clock_is_mended_by_the_next_measure() -> None:
    """An NTP step (or a VM resumed) moves the wall clock an hour: the next measure (a worker's
    beat, every 10 s) reads the server again; a step during a measure is not taken for one."""
    local = ManualClock(1_000_000)
    clock = ServerClock(local, "nats")
    await clock.measure(_server_at(local, 1_000_002, 4))
    assert clock.now_ms() == local.now_ms() == 1_000_004
    local.advance(3_600_000)
    await clock.measure(_server_at(local, 1_000_020, 4))
    # Read at 4_600_006 local, 2 ms before now.
    assert clock.now_ms() == 1_000_022 and clock.offset_ms == -3_599_986
    await clock.measure(_server_at(local, 1_000_030, -7_200_000))  # stepped back mid-measure
    assert clock.offset_ms == -3_599_986


async def test_a_clock_that_agrees_with_the_server_is_read_as_it_is() -> None:
    """Two processes on one machine measure the same server a millisecond apart: each reads
    this machine's clock as it is, so a job one enqueues for now is due now for the other."""
    local = ManualClock(1_000_000)
    clock = ServerClock(local, "postgres")
    await clock.measure(_server_at(local, 1_000_202, 4))  # 200 ms apart: within the window
    assert clock.offset_ms == 200 and clock.now_ms() == local.now_ms() == 1_000_004


def test_a_test_clock_is_not_read_as_a_server_does() -> None:
    manual = ManualClock()
    assert server_clock(manual, "postgres") is manual


def test_the_words_say_which_way_and_how_far() -> None:
    assert "reads 63.2 s behind the database server's" in offset_words(63_200, 2)
    assert "set it (NTP)" in offset_words(-5_000, 2)
    assert offset_words(249, 6) == (
        "this machine's clock agrees with the database server's (249 ms apart, measured to "
        "within 3 ms)"
    )
    assert "reads 0.6 s behind the database server's; mcp-jobs here follows" in offset_words(600, 6)


async def test_agree_measures_when_none_was_begun_or_a_minute_has_passed() -> None:
    """A process that neither migrates nor runs a worker (a producer, an operator) has no beat:
    its writes and reads measure the server first, and again after REMEASURE_MS."""
    local = ManualClock(1_000_000)
    clock = ServerClock(local, "postgres")
    await clock.agree()  # no driver has given it a way to read the server: nothing to do
    assert not clock.tried
    reads: list[int] = []

    async def keep() -> None:
        reads.append(local.now_ms())
        await clock.measure(_server_at(local, local.now_ms() - 120_000, 2))

    clock.keep = keep
    await clock.agree()
    assert reads == [1_000_000] and clock.now_ms() == local.now_ms() - 120_001
    local.advance(REMEASURE_MS - 10)
    await clock.agree()
    assert len(reads) == 1
    local.advance(10)
    await clock.agree()
    assert len(reads) == 2
    await clock.measure(_server_at(local, local.now_ms(), 2))  # a beat's measure counts too
    local.advance(REMEASURE_MS - 10)
    await clock.agree()
    assert len(reads) == 2


async def test_callers_that_find_the_first_measure_under_way_wait_for_it() -> None:
    """Enqueues begun at once in a fresh process: none reads the uncorrected clock."""
    local = ManualClock(1_000_000)
    clock = ServerClock(local, "redis")
    answered = anyio.Event()
    measures = 0

    async def slow_server() -> int:
        await answered.wait()
        return local.now_ms() + 120_000

    async def keep() -> None:
        nonlocal measures
        measures += 1
        await clock.measure(slow_server)

    clock.keep = keep
    seen: list[int] = []

    async def enqueue() -> None:
        await clock.agree()
        seen.append(clock.now_ms())

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(enqueue)
            await wait_all_tasks_blocked()
            assert seen == [] and measures == 1
            answered.set()
    assert measures == 1 and seen == [local.now_ms() + 120_000] * 3
