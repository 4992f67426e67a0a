"""Waiting for an event (engine/inbound_events.py): a wait parks like a sleep until a matching
send wakes it or its timeout passes (a typed outcome either way); events are stored for a
window, broadcast to every waiter, scoped to a tenant, and wake jobs across processes."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from engine import EventOutcome, JobContext, JobRegistry, Jobs, ManualClock, Retry, Worker, job
from engine.client import connect
from engine.drivers.base import EVENTS, require
from engine.errors import InvalidArgumentError
from engine.inbound_events import DEFAULT_EVENT_WINDOW_MS

HOUR_MS = 3_600_000


class Order(BaseModel):
    order_id: int
    twin: int = 0  # a second job waiting for the same order's event


@pytest.fixture(autouse=True)
def offers_events(jobs: Jobs) -> None:
    # Optional capability (engine/drivers/base.py): a driver without it is not held to this.
    if not EVENTS.offered_by(jobs.driver):
        pytest.skip(f"the {jobs.driver.kind} driver keeps no inbound events")


def _declare_waiter(registry: JobRegistry, timeout: float = 3600) -> Any:
    @job(
        idempotency_key=lambda i: f"o:{i.order_id}:{i.twin}",
        retry=Retry(attempts=1),
        registry=registry,
    )
    async def await_payment(input: Order, ctx: JobContext) -> dict[str, Any]:
        outcome = await ctx.step.wait_for_event(
            "payment.settled", match=str(input.order_id), timeout=timeout
        )
        assert isinstance(outcome, EventOutcome)
        return outcome.model_dump(mode="json")

    return await_payment


async def test_a_wait_parks_without_an_attempt_and_a_send_resumes_it_with_the_payload(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    waiter = _declare_waiter(registry)
    r = await jobs.enqueue(waiter, {"order_id": 7})
    worker = Worker(jobs)
    await worker.run_until_idle()
    record = await jobs.get(r.id)
    # Like a sleep (rule 7): suspended, no attempt burned, so a 1-attempt job can wait.
    assert (record.state, record.attempt, record.last_error) == ("suspended", 0, None)
    (step,) = (await jobs.trace(r.id)).steps
    assert (step.name, step.status) == ("event:payment.settled", "waiting")
    assert step.output["event"] == "payment.settled" and step.output["key"] == "7"
    assert step.output["timeout_at"] == clock.now_ms() + HOUR_MS
    clock.advance(5_000)
    assert await worker.run_until_idle() == 0  # nothing sent: still waiting

    sent = await jobs.send_event("payment.settled", "7", {"amount": 42})
    assert sent.woken == 1
    # Due from the send: queued then too, not at the wait's timeout an hour on (exploreZ).
    woken = await jobs.get(r.id)
    assert (woken.run_at, woken.queued_at) == (clock.now_ms(), clock.now_ms())
    assert await worker.run_until_idle() == 1
    record = await jobs.get(r.id)
    assert (record.state, record.attempt) == ("done", 1)
    assert record.output == {
        "received": True,
        "event_id": sent.event_id,
        "payload": {"amount": 42},
        "key": "7",
        "sent_at": clock.now_ms(),
        "timed_out_at": None,
    }


async def test_an_event_sent_before_the_wait_is_received_at_once(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    waiter = _declare_waiter(registry)
    sent = await jobs.send_event("payment.settled", "8", "paid")
    assert sent.woken == 0
    clock.advance(DEFAULT_EVENT_WINDOW_MS - 1)  # still inside the window
    r = await jobs.enqueue(waiter, {"order_id": 8})
    assert await Worker(jobs).run_until_idle() == 1
    record = await jobs.get(r.id)
    assert record.state == "done"
    assert record.output["received"] is True and record.output["payload"] == "paid"


async def test_an_event_older_than_the_window_is_not_received_and_the_wait_times_out(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    waiter = _declare_waiter(registry, timeout=60)
    await jobs.send_event("payment.settled", "9", "too early")
    clock.advance(DEFAULT_EVENT_WINDOW_MS)
    r = await jobs.enqueue(waiter, {"order_id": 9})
    worker = Worker(jobs)
    await worker.run_until_idle()
    assert (await jobs.get(r.id)).state == "suspended"
    clock.advance(59_999)
    assert await worker.run_until_idle() == 0
    clock.advance(1)
    assert await worker.run_until_idle() == 1
    record = await jobs.get(r.id)
    # A timeout is an outcome, not an exception: the job returns it and is done.
    assert (record.state, record.attempt) == ("done", 1)
    assert record.output["received"] is False
    assert record.output["timed_out_at"] == clock.now_ms()
    assert record.output["payload"] is None


async def test_a_shorter_event_window_lets_an_early_event_lapse(
    database_url: str, registry: JobRegistry, clock: ManualClock
) -> None:
    jobs = await connect(database_url, clock=clock, registry=registry, event_window=10)
    try:
        waiter = _declare_waiter(registry, timeout=0)
        await jobs.send_event("payment.settled", "1")
        clock.advance(10_000)
        r = await jobs.enqueue(waiter, {"order_id": 1})
        await Worker(jobs).run_until_idle()
        assert (await jobs.get(r.id)).output["received"] is False
    finally:
        await jobs.close()


async def test_events_are_broadcast_and_scoped_to_their_tenant(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    waiter = _declare_waiter(registry)
    ours = [
        await jobs.enqueue(waiter, {"order_id": 1}, tenant_id="acme"),
        await jobs.enqueue(waiter, {"order_id": 2}, tenant_id="acme"),
    ]
    theirs = await jobs.enqueue(waiter, {"order_id": 1}, tenant_id="globex")
    bare = await jobs.enqueue(waiter, {"order_id": 1})
    worker = Worker(jobs)
    await worker.run_until_idle()

    sent = await jobs.send_event("payment.settled", "1", {"t": "acme"}, tenant_id="acme")
    assert sent.woken == 1  # acme's job for key 1 only: not globex's, not the tenantless one
    assert await worker.run_until_idle() == 1
    assert (await jobs.get(ours[0].id)).output["payload"] == {"t": "acme"}
    for other in (ours[1], theirs, bare):
        assert (await jobs.get(other.id)).state == "suspended"

    # A tenantless event reaches tenantless waits only; every one of them (not consumed).
    second = await jobs.enqueue(waiter, {"order_id": 1, "twin": 1})
    await worker.run_until_idle()
    sent = await jobs.send_event("payment.settled", "1", "plain")
    assert sent.woken == 2
    assert await worker.run_until_idle() == 2
    for done in (bare, second):
        record = await jobs.get(done.id)
        assert record.output["payload"] == "plain" and record.output["event_id"] == sent.event_id
    assert (await jobs.get(theirs.id)).state == "suspended"


async def test_a_later_wait_in_the_run_receives_only_a_later_event(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    @job(idempotency_key=lambda i: f"o:{i.order_id}", registry=registry)
    async def two_ticks(input: Order, ctx: JobContext) -> list[Any]:
        first = await ctx.step.wait_for_event("tick", match="k", timeout=60, step="first")
        second = await ctx.step.wait_for_event("tick", match="k", timeout=60, step="second")
        return [first.payload, second.payload]

    await jobs.send_event("tick", "k", 1)
    clock.advance(1)
    r = await jobs.enqueue(two_ticks, {"order_id": 1})
    worker = Worker(jobs)
    await worker.run_until_idle()
    assert (await jobs.get(r.id)).state == "suspended"  # the first event is spent on `first`
    clock.advance(1)
    assert (await jobs.send_event("tick", "k", 2)).woken == 1
    await worker.run_until_idle()
    record = await jobs.get(r.id)
    assert (record.state, record.output) == ("done", [1, 2])


async def test_two_waits_under_one_step_name_fail_the_run(
    jobs: Jobs, registry: JobRegistry
) -> None:
    @job(idempotency_key=lambda i: f"o:{i.order_id}", registry=registry)
    async def twice(input: Order, ctx: JobContext) -> None:
        await ctx.step.wait_for_event("tick", match="a", timeout=0)
        await ctx.step.wait_for_event("tick", match="b", timeout=0)

    r = await jobs.enqueue(twice, {"order_id": 1})
    await Worker(jobs).run_until_idle()
    record = await jobs.get(r.id)
    assert record.state == "failed"
    assert record.last_error is not None and record.last_error.code == "STEP_DUPLICATE"


@pytest.mark.parametrize(
    ("name", "key", "payload"),
    [
        ("", "k", None),
        ("n", "", None),
        ("n", 1, None),
        ("n\x00", "k", None),
        ("n", "k", float("nan")),
    ],
)
async def test_send_refuses_values_out_of_bounds(
    jobs: Jobs, name: Any, key: Any, payload: Any
) -> None:
    with pytest.raises(InvalidArgumentError):
        await jobs.send_event(name, key, payload)


async def test_expired_events_are_pruned(jobs: Jobs, clock: ManualClock) -> None:
    store = require(jobs.driver, EVENTS)
    await jobs.send_event("tick", "k", 1)
    clock.advance(HOUR_MS)
    await jobs.send_event("tick", "k", 2)
    # The first event's window has closed, the second's has not.
    assert await store.prune_events(clock.now_ms() + DEFAULT_EVENT_WINDOW_MS - HOUR_MS) == 1
    found = await store.first_event("tick", "k", None, 0, None)
    assert found is not None and found.payload == 2


async def test_a_send_from_another_driver_instance_wakes_the_waiting_job(
    jobs: Jobs, second_jobs: Jobs, registry: JobRegistry
) -> None:
    waiter = _declare_waiter(registry)
    r = await jobs.enqueue(waiter, {"order_id": 3})
    worker = Worker(jobs)
    await worker.run_until_idle()
    sent = await second_jobs.send_event("payment.settled", "3", {"from": "other"})
    assert sent.woken == 1
    assert await worker.run_until_idle() == 1
    assert (await jobs.get(r.id)).output["payload"] == {"from": "other"}


async def test_a_send_between_the_look_and_the_park_is_not_lost(
    jobs: Jobs, registry: JobRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The send commits while the job still runs (it wakes nothing: the job is not suspended);
    the look run_job makes after the park commits finds it and wakes the job."""
    waiter = _declare_waiter(registry)
    r = await jobs.enqueue(waiter, {"order_id": 4})
    store = require(jobs.driver, EVENTS)
    look = store.first_event
    woken: list[int] = []

    async def look_then_send(*args: Any) -> Any:
        found = await look(*args)
        if not woken:
            woken.append((await jobs.send_event("payment.settled", "4", "raced")).woken)
        return found

    monkeypatch.setattr(store, "first_event", look_then_send)
    worker = Worker(jobs)
    await worker.run_until_idle()
    assert woken == [0]  # the job was running when the event was stored
    record = await jobs.get(r.id)
    assert record.state in ("suspended", "done")
    await worker.run_until_idle()
    record = await jobs.get(r.id)
    assert record.state == "done" and record.output["payload"] == "raced"


async def test_a_waiter_woken_alone_is_queued_from_then(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    """The store's one-job wake (a send that raced the wait's registration) moves queued_at
    with run_at, as the send's wake does."""
    waiter = _declare_waiter(registry)
    r = await jobs.enqueue(waiter, {"order_id": 9})
    await Worker(jobs).run_until_idle()
    clock.advance(5_000)
    assert await require(jobs.driver, EVENTS).wake_waiter(r.id, clock.now_ms())
    woken = await jobs.get(r.id)
    assert (woken.state, woken.run_at, woken.queued_at) == (
        "suspended",
        clock.now_ms(),
        clock.now_ms(),
    )
