"""A job parked on an event name stored before the name rule (a control character in it)
resumes: the rule is checked on a new wait only, so its wait runs on to its timeout instead of
failing the job on every resume."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Worker, inbound_events, job
from engine.errors import InvalidArgumentError


class Order(BaseModel):
    n: int


async def test_a_wait_stored_before_the_rule_runs_on_to_its_timeout(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []

    @job(name="awaits", idempotency_key=lambda i: str(i.n), registry=registry)
    async def awaits(input: Order, ctx: JobContext) -> None:
        outcome = await ctx.step.wait_for_event("paid\tlate", match="k", timeout=60)
        seen.append(outcome.received)

    enqueued = await jobs.enqueue(awaits, {"n": 1})
    worker = Worker(jobs, scheduler=False, outbox_relay=False, prune=False)
    with monkeypatch.context() as older:  # the version before the rule took any name
        older.setattr(inbound_events, "checked_name", lambda name: name)
        with anyio.fail_after(10):
            await worker.run_until_idle()
    assert (await jobs.get(enqueued.id)).state == "suspended"  # parked on the wait
    with pytest.raises(InvalidArgumentError):  # a new wait on that name is refused
        inbound_events.checked_name("paid\tlate")

    clock.advance(61_000)
    with anyio.fail_after(10):
        await worker.run_until_idle()
    assert seen == [False]
    assert (await jobs.get(enqueued.id)).state == "done"
