"""The memory driver's limiter slots keep only the keys some job holds: the walks over them (at
every heartbeat, settle and release) cost the keys held now, not every key ever computed."""

from __future__ import annotations

from engine import ManualClock
from engine.drivers.base import AckWrite
from engine.drivers.memory import MemoryDriver
from engine.retention import DEFAULT_POLICY, plan
from schemas.jobs import EnqueueRequest, NackOptions


def _request(n: int, now: int) -> EnqueueRequest:
    return EnqueueRequest(
        id=f"{n:032x}", run_id=f"{1000 + n:032x}", name="work", queue="q",
        idempotency_key=f"k{n}", input={}, run_at=now, max_attempts=1,
    )  # fmt: skip


async def test_a_key_no_job_holds_is_forgotten() -> None:
    clock = ManualClock(1_000_000)
    driver = MemoryDriver(clock)
    now = clock.now_ms()
    await driver.enqueue([_request(n, now) for n in range(4)])
    claimed = await driver.claim("w", 4, 60_000)
    for n, c in enumerate(claimed):
        caps = [(f"tenant:t{n}", 1), ("queue:q", 10)]
        assert await driver.acquire_slots(c.record.id, caps, now + 60_000) is None
    assert len(driver._slots) == 5  # pyright: ignore[reportPrivateUsage]
    # Released, acked, nacked dead (then pruned): each way a holder lets go.
    await driver.release_slots(claimed[0].record.id)
    await driver.ack_many([AckWrite(claimed[1].record.id, claimed[1].token, None)])
    await driver.nack(claimed[2].record.id, claimed[2].token, NackOptions(dead_letter=True))
    assert set(driver._slots) == {"tenant:t3", "queue:q"}  # pyright: ignore[reportPrivateUsage]
    await driver.ack_many([AckWrite(claimed[3].record.id, claimed[3].token, None)])
    assert driver._slots == {}  # pyright: ignore[reportPrivateUsage]
    clock.advance(60 * 86_400_000)
    assert await driver.prune(plan(DEFAULT_POLICY, clock.now_ms()), 100)
    assert driver._slots == {}  # pyright: ignore[reportPrivateUsage]
