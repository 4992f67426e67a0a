"""`run_until_idle()` returns when the jobs table refuses the staged rows it publishes (a full
disk, a lost connection): it raises that typed error, rather than claim the same rows again at
once for as long as the cause lasts (on the memory driver, with no await that yields, a spin no
`fail_after` could end). The rows stay waiting and go out once the cause is over."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from engine import JobRegistry, Jobs, ManualClock, Worker
from engine.driver_errors import StorageFullError
from tests.outbox.apptx import AppDatabase
from tests.outbox.test_relay import declare_item, stage_rows

SPINNING = 10


class Spinning(Exception):
    """Raised from the claim once the relay claimed far more often than rows were staged."""


async def test_run_until_idle_raises_the_refusal_instead_of_reclaiming_refused_rows(
    jobs: Jobs,
    registry: JobRegistry,
    app: AppDatabase,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran = anyio.Event()
    item = declare_item(registry, ran)
    await stage_rows(jobs, app, clock, item, transactions=2, per_transaction=1)
    claim, publish = jobs.driver.outbox_claim, jobs.driver.outbox_publish
    claims: list[int] = []

    async def counted_claim(*args: Any, **kwargs: Any) -> Any:
        claims.append(clock.now_ms())
        if len(claims) > SPINNING:
            raise Spinning(f"claimed {len(claims)} times for 2 staged rows")
        return await claim(*args, **kwargs)

    async def refused(*args: Any, **kwargs: Any) -> Any:
        raise StorageFullError("test", "the jobs table", "no space left on device")

    monkeypatch.setattr(jobs.driver, "outbox_claim", counted_claim)
    monkeypatch.setattr(jobs.driver, "outbox_publish", refused)
    with anyio.fail_after(10), pytest.raises(StorageFullError):
        await Worker(jobs, scheduler=False).run_until_idle()
    assert len(claims) == 1 and not ran.is_set()

    # The cause is over: the rows were handed back, not lost, and go out now.
    monkeypatch.setattr(jobs.driver, "outbox_publish", publish)
    with anyio.fail_after(10):
        await Worker(jobs, scheduler=False).run_until_idle()
    assert ran.is_set()
    assert (await jobs.driver.outbox_waiting(10)).count == 0
