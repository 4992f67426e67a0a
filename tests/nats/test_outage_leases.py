"""After an outage, running jobs keep their leases one lease longer (as on PostgreSQL): a claim
by a process that saw the server go away takes over no expired lease until one lease after its
first claim that succeeds, so a settle held through the outage lands instead of the job running
again. On a server this test starts and SIGKILLs itself (skipped, with the reason, when no
nats-server binary is installed)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from engine import ManualClock
from engine.driver_errors import DriverUnavailableError
from engine.drivers.base import AckWrite
from schemas.jobs import EnqueueRequest
from tests.nats.server import NatsServer, binary_or_skip
from tests.support.answering import answered

pytest.importorskip("nats", reason="the nats extra is not installed")

from engine.drivers.nats import NatsDriver

LEASE_MS = 30_000


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    started = NatsServer(binary_or_skip(), tmp_path / "store", name="outage")
    started.start()
    try:
        yield started
    finally:
        started.stop()


def _request(n: int, now: int) -> EnqueueRequest:
    return EnqueueRequest(
        id=f"{n + 1:032x}",
        run_id=f"{100 + n:032x}",
        name="work",
        queue="default",
        idempotency_key=f"k{n}",
        input={"n": n},
        run_at=now,
        max_attempts=5,
    )


async def test_after_an_outage_held_leases_are_taken_over_one_lease_later(
    server: NatsServer,
) -> None:
    clock = ManualClock()
    driver = NatsDriver(f"{server.url}/outage", clock=clock, connect_timeout_s=1.0)
    try:
        await driver.migrate()
        await driver.enqueue([_request(0, clock.now_ms()), _request(1, clock.now_ms())])
        held = await driver.claim("holder", 2, LEASE_MS)
        assert len(held) == 2

        server.kill()
        with anyio.fail_after(30), pytest.raises(DriverUnavailableError):
            await driver.claim("other", 2, LEASE_MS)
        await asyncio.to_thread(server.start)
        clock.advance(LEASE_MS + 1)  # the outage outlasted the leases

        # The first claim after the outage leaves the expired leases to their holders.
        assert await answered(lambda: driver.claim("other", 2, LEASE_MS)) == []
        done = AckWrite(held[0].record.id, held[0].token, {"ok": True})
        assert await answered(lambda: driver.ack_many([done])) == [None]
        assert await driver.claim("other", 2, LEASE_MS) == []

        # One lease later, a holder that never came back loses its job as usual (rule 13).
        clock.advance(LEASE_MS)
        taken = await driver.claim("other", 2, LEASE_MS)
        assert [c.record.id for c in taken] == [held[1].record.id]
        assert (await driver.get(held[0].record.id)).state == "done"
    finally:
        await driver.close()
