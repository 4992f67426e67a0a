"""A write lock another process held longer than a lease ran finished bodies again: the holder's
ack waited behind the lock, its lease ran out meanwhile, and at the release a claim (another
worker's, or the holder's own next one) took the job over first. Now SQLite keeps PostgreSQL's
and Redis's rule (engine/drivers/lease_grace.py): a process whose write was kept from the lock
for a whole busy timeout takes over no expired lease until one lease after its first claim that
goes through, so the holder's held ack lands first; a holder that never comes back still loses
its job one lease later. The lock is held by a real process, as a worker meets it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from engine import ManualClock
from engine.driver_errors import DriverUnavailableError
from engine.drivers.base import AckWrite
from engine.drivers.sqlite import SqliteDriver
from engine.drivers.sqlite import connection as executor
from engine.errors import JobSlotLostError
from schemas.stats import WorkerInfo
from tests.sqlite.enqueues import START, request
from tests.sqlite.test_lock_holder_named import held

LEASE_MS = 30_000
BUSY_MS = 20  # the drivers' busy timeout: a real wait on the holding process, kept short


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor, "_backoff", lambda attempt: None)  # no real sleep per round


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
async def drivers(tmp_path: Path, clock: ManualClock) -> AsyncIterator[list[SqliteDriver]]:
    """Two processes' drivers on one file (each its own connection and its own grace)."""
    path = str(tmp_path / "jobs.db")
    opened = [SqliteDriver(path, clock=clock, busy_timeout_ms=BUSY_MS) for _ in range(2)]
    await opened[0].migrate()
    yield opened
    for driver in opened:
        await driver.close()


async def _two_held(driver: SqliteDriver) -> list[AckWrite]:
    """Jobs 1 and 2 claimed by "holder": the acks it would write."""
    await driver.enqueue([request(1), request(2)])
    claimed = await driver.claim("holder", 2, LEASE_MS)
    assert len(claimed) == 2
    return [AckWrite(c.record.id, c.token, {"ok": True}) for c in claimed]


async def _spared_then_taken_over(
    claimer: SqliteDriver, holder: SqliteDriver, clock: ManualClock, acks: list[AckWrite]
) -> None:
    clock.advance(LEASE_MS + 1)  # the lock outlasted the leases
    # The first claim after the lock leaves the expired leases to their holders ...
    assert await claimer.claim("other", 2, LEASE_MS) == []
    # ... so the holder's held ack counts, and the body it finished does not run again.
    assert await holder.ack_many(acks[:1]) == [None]
    clock.advance(LEASE_MS - 1)
    assert await claimer.claim("other", 2, LEASE_MS) == []
    # One lease after that claim, a holder that never came back loses its job as usual.
    clock.advance(1)
    taken = await claimer.claim("other", 2, LEASE_MS)
    assert [c.record.id for c in taken] == [acks[1].job_id]
    assert taken[0].record.attempt == 2
    assert (await holder.get(acks[0].job_id)).state == "done"
    assert isinstance((await holder.ack_many(acks[1:]))[0], JobSlotLostError)


async def test_the_holders_own_claims_spare_its_leases_after_its_ack_met_the_lock(
    tmp_path: Path, drivers: list[SqliteDriver], clock: ManualClock
) -> None:
    holder = drivers[0]
    acks = await _two_held(holder)
    with held(tmp_path / "jobs.db"), anyio.fail_after(30):
        with pytest.raises(DriverUnavailableError) as raised:
            await holder.ack_many(acks[:1])
        assert raised.value.retryable  # the worker holds it and tries again (until_written)
    await _spared_then_taken_over(holder, holder, clock, acks)


async def test_another_process_whose_presence_beat_met_the_lock_spares_them(
    tmp_path: Path, drivers: list[SqliteDriver], clock: ManualClock
) -> None:
    holder, other = drivers
    acks = await _two_held(holder)
    beat = WorkerInfo(
        id="other",
        hostname="h",
        pid=1,
        queues=None,
        concurrency=1,
        started_at=START,
        last_seen_at=START,
    )
    # Not a claim: whatever write of the process met the lock, its claims spare the leases.
    with held(tmp_path / "jobs.db"), anyio.fail_after(30), pytest.raises(DriverUnavailableError):
        await other.worker_seen(beat)
    await _spared_then_taken_over(other, holder, clock, acks)


async def test_a_claim_that_waited_out_the_lock_itself_takes_over_none(
    tmp_path: Path,
    drivers: list[SqliteDriver],
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    holder, other = drivers
    acks = await _two_held(holder)
    clock.advance(LEASE_MS + 1)
    with held(tmp_path / "jobs.db") as proc, anyio.fail_after(30):
        # The lock is let go after the claim's first busy timeout: its next try goes through.
        monkeypatch.setattr(executor, "_backoff", lambda attempt: proc.communicate(timeout=30))
        assert await other.claim("other", 2, LEASE_MS) == []
    assert await holder.ack_many(acks[:1]) == [None]


async def test_without_a_lock_an_expired_lease_is_taken_over_at_once(
    drivers: list[SqliteDriver], clock: ManualClock
) -> None:
    holder, other = drivers
    acks = await _two_held(holder)
    clock.advance(LEASE_MS + 1)
    taken = await other.claim("other", 2, LEASE_MS)
    assert sorted(c.record.id for c in taken) == sorted(a.job_id for a in acks)
