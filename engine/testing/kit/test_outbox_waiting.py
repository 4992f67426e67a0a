"""Outbox rows as operators see them, and stage() handed no transaction of the driver's kind.

`outbox_waiting(limit)` answers how many staged rows wait to be published (counted up to
`limit`, so the read stays bounded however many wait) and when the oldest was staged: claimed
rows not yet published still wait; published ones do not. `outbox_stage` handed something that
is not the driver's kind of transaction (a string, another library's object) refuses it as
INVALID_ARGUMENT naming the type given, not as OUTBOX_NO_TX (which is for the right kind of
connection outside a transaction)."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Jobs, ManualClock
from engine.errors import InvalidArgumentError
from engine.testing.kit.test_mirror import staging
from engine.testing.plugin import AppTransaction
from schemas.jobs import EnqueueRequest
from schemas.outbox import OutboxWaiting

_serial = 0


def _request(now: int) -> EnqueueRequest:
    global _serial
    _serial += 1
    return EnqueueRequest(
        id=f"ob-job{_serial:06d}",
        run_id=f"ob-run{_serial:06d}",
        name="work",
        queue="default",
        idempotency_key=f"ob{_serial}",
        input={"n": _serial},
        run_at=now,
        max_attempts=3,
    )


async def test_waiting_rows_are_counted_up_to_a_bound_with_the_oldest(
    jobs: Jobs, clock: ManualClock, database_url: str, app_transaction: AppTransaction
) -> None:
    driver = jobs.driver
    stage = staging(driver, database_url, app_transaction)
    assert await driver.outbox_waiting(10) == OutboxWaiting(count=0, oldest_staged_at=None)
    first = clock.now_ms()
    await stage([_request(first) for _ in range(3)])
    clock.advance(5_000)
    await stage([_request(clock.now_ms()) for _ in range(2)])
    assert await driver.outbox_waiting(10) == OutboxWaiting(count=5, oldest_staged_at=first)
    assert (await driver.outbox_waiting(3)).count == 3  # bounded: "at least 3"

    claimed = await driver.outbox_claim("relay", "t1", 2, 60_000)
    assert await driver.outbox_waiting(10) == OutboxWaiting(count=5, oldest_staged_at=first)
    await driver.outbox_publish("t1", claimed)
    assert await driver.outbox_waiting(10) == OutboxWaiting(count=3, oldest_staged_at=first)

    rest = await driver.outbox_claim("relay", "t2", 10, 60_000)
    await driver.outbox_publish("t2", rest)
    assert await driver.outbox_waiting(10) == OutboxWaiting(count=0, oldest_staged_at=None)


@pytest.mark.parametrize("given", ["not a transaction", 42, object()], ids=["str", "int", "object"])
async def test_stage_given_no_transaction_of_the_drivers_kind_names_the_type(
    jobs: Jobs, clock: ManualClock, given: Any
) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        await jobs.driver.outbox_stage(given, [_request(clock.now_ms())])
    refused = caught.value
    assert refused.code == "INVALID_ARGUMENT" and refused.argument == "tx"
    kind = type(given).__qualname__
    assert refused.details is not None and refused.details["given_type"] == kind
    assert f"of type {kind}," in refused.cause and refused.expected in refused.cause
    assert "jobs.stage(tx, " in refused.fix or "jobs.stage(conn, " in refused.fix
    assert await jobs.driver.outbox_waiting(10) == OutboxWaiting(count=0, oldest_staged_at=None)
