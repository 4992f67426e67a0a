"""A full batch that the relay could not publish at all (the jobs table refuses every insert: a
full disk, a lost connection) is followed by the relay's poll wait, not by claiming the same rows
again at once: rows handed back are not work done, and a relay that reclaims them without a wait
spins a core and writes a warning and an error per row on every turn until the cause is over."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from engine import JobRegistry, Jobs, ManualClock
from engine.driver_errors import StorageFullError
from engine.outbox import OutboxRelay
from tests.outbox.apptx import AppDatabase
from tests.outbox.test_relay import declare_item, stage_rows

TURNS = 4


async def test_a_full_batch_that_published_nothing_waits_before_the_next_claim(
    jobs: Jobs,
    registry: JobRegistry,
    app: AppDatabase,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    item = declare_item(registry)
    await stage_rows(jobs, app, clock, item, transactions=1, per_transaction=2)
    relay = OutboxRelay(jobs, batch_size=2, poll_ms=1_000)
    claim = relay.driver.outbox_claim
    claims: list[int] = []
    slept: list[int] = []

    async def counted_claim(*args: Any, **kwargs: Any) -> Any:
        claims.append(clock.now_ms())
        if len(claims) >= TURNS:  # spinning: stop it rather than hang the test
            relay.stop()
        return await claim(*args, **kwargs)

    async def refused(*args: Any, **kwargs: Any) -> Any:
        raise StorageFullError("test", "the jobs table", "no space left on device")

    async def sleep(ms: int) -> None:
        slept.append(ms)
        relay.stop()

    monkeypatch.setattr(relay.driver, "outbox_claim", counted_claim)
    monkeypatch.setattr(relay.driver, "outbox_publish", refused)
    monkeypatch.setattr(relay, "_sleep", sleep)
    with anyio.fail_after(10):
        await relay.run()

    assert len(claims) == 1, f"claimed {len(claims)} times without waiting"
    assert slept == [1_000]


async def test_a_full_batch_that_published_some_rows_goes_on_at_once(
    jobs: Jobs,
    registry: JobRegistry,
    app: AppDatabase,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    item = declare_item(registry)
    staged = await stage_rows(jobs, app, clock, item, transactions=1, per_transaction=2)
    bad = staged[0][1].outbox_id
    relay = OutboxRelay(jobs, batch_size=2, poll_ms=1_000)
    claim, publish = relay.driver.outbox_claim, relay.driver.outbox_publish
    claims: list[int] = []
    slept: list[int] = []

    async def counted_claim(*args: Any, **kwargs: Any) -> Any:
        claims.append(clock.now_ms())
        if len(claims) >= TURNS:
            relay.stop()
        return await claim(*args, **kwargs)

    async def one_refused(token: str, rows: list[Any]) -> Any:
        if any(row.id == bad for row in rows):
            raise StorageFullError("test", "the jobs table", "no space left on device")
        return await publish(token, rows)

    async def sleep(ms: int) -> None:
        slept.append(ms)
        relay.stop()

    monkeypatch.setattr(relay.driver, "outbox_claim", counted_claim)
    monkeypatch.setattr(relay.driver, "outbox_publish", one_refused)
    monkeypatch.setattr(relay, "_sleep", sleep)
    with anyio.fail_after(10):
        await relay.run()

    # The good row went out: the next claim follows at once, takes the bad row alone (a batch
    # short of full), and then the relay waits.
    assert len(claims) == 2 and slept == [1_000]
