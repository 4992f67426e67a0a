"""Pauses (engine/pauses.py): a paused queue or job name is not claimed; held jobs stay waiting
and keep counting (like a shed, rule 7); running jobs finish; pause and resume are idempotent."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, job
from engine.drivers.base import PAUSES, AckWrite
from engine.errors import JobsError

LEASE_MS = 60_000


class Item(BaseModel):
    n: int


@pytest.fixture(autouse=True)
def offers_pauses(jobs: Jobs) -> None:
    # Optional capability (engine/drivers/base.py): a driver without it is not held to this.
    if not PAUSES.offered_by(jobs.driver):
        pytest.skip(f"the {jobs.driver.kind} driver keeps no pauses")


def _declare(registry: JobRegistry) -> tuple[object, object]:
    @job(idempotency_key=lambda i: f"a:{i.n}", queue="alpha", registry=registry)
    async def in_alpha(input: Item, ctx: JobContext) -> None:
        return None

    @job(idempotency_key=lambda i: f"b:{i.n}", queue="beta", registry=registry)
    async def in_beta(input: Item, ctx: JobContext) -> None:
        return None

    return in_alpha, in_beta


async def _claimed_names(jobs: Jobs, queues: list[str] | None = None) -> list[str]:
    claimed = await jobs.driver.claim("w1", 10, LEASE_MS, queues)
    return sorted(c.record.name for c in claimed)


async def test_a_paused_queue_is_not_claimed_until_resumed(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    in_alpha, in_beta = _declare(registry)
    await jobs.enqueue(in_alpha, {"n": 1})  # type: ignore[arg-type]
    await jobs.enqueue(in_alpha, {"n": 2})  # type: ignore[arg-type]
    await jobs.enqueue(in_beta, {"n": 1})  # type: ignore[arg-type]
    paused = await jobs.pause(queue="alpha", actor="ops", reason="deploy")
    assert paused.already_paused is False
    made = paused.pause
    assert (made.kind, made.name, made.paused_by) == ("queue", "alpha", "ops")
    assert paused.pause.reason == "deploy" and paused.pause.paused_at == clock.now_ms()

    assert await _claimed_names(jobs) == ["in_beta"]
    assert await _claimed_names(jobs, ["alpha"]) == []  # the queue-restricted claim too
    clock.advance(30_000)
    stats = {s.queue: s for s in await jobs.stats()}
    # Held, not parked: still ready, still ageing, so depth and age alerts keep firing.
    assert stats["alpha"].ready == 2 and stats["alpha"].oldest_ready_ms >= 30_000
    assert stats["alpha"].suspended == 0

    lifted = await jobs.resume(queue="alpha")
    assert lifted is not None and lifted.paused_by == "ops"
    assert await _claimed_names(jobs) == ["in_alpha", "in_alpha"]


async def test_a_paused_job_name_is_not_claimed_in_any_queue_until_resumed(
    jobs: Jobs, registry: JobRegistry
) -> None:
    in_alpha, in_beta = _declare(registry)
    await jobs.enqueue(in_alpha, {"n": 1})  # type: ignore[arg-type]
    await jobs.enqueue(in_beta, {"n": 1})  # type: ignore[arg-type]
    await jobs.pause(job="in_beta")
    assert await _claimed_names(jobs) == ["in_alpha"]
    assert await _claimed_names(jobs, ["beta"]) == []
    (beta,) = await jobs.stats(["beta"])
    assert beta.ready == 1
    assert await jobs.resume(job="in_beta") is not None
    assert await _claimed_names(jobs) == ["in_beta"]


async def test_a_running_job_finishes_and_an_expired_lease_waits_for_the_resume(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    in_alpha, _ = _declare(registry)
    first = await jobs.enqueue(in_alpha, {"n": 1})  # type: ignore[arg-type]
    second = await jobs.enqueue(in_alpha, {"n": 2})  # type: ignore[arg-type]
    claimed = await jobs.driver.claim("w1", 2, LEASE_MS)
    held = {c.record.id: c for c in claimed}
    await jobs.pause(queue="alpha")
    # A job running when the pause came settles as usual.
    (outcome,) = await jobs.driver.ack_many([AckWrite(first.id, held[first.id].token, None)])
    assert outcome is None
    assert (await jobs.get(first.id)).state == "done"
    # The other one's worker died: taking it over would start it again, so it waits too.
    clock.advance(LEASE_MS + 1)
    assert await jobs.driver.claim("w2", 10, LEASE_MS) == []
    await jobs.resume(queue="alpha")
    (taken,) = await jobs.driver.claim("w2", 10, LEASE_MS)
    assert taken.record.id == second.id and taken.record.attempt == 2


async def test_pause_and_resume_are_idempotent(jobs: Jobs, clock: ManualClock) -> None:
    first = await jobs.pause(queue="alpha", actor="alice")
    clock.advance(1_000)
    again = await jobs.pause(queue="alpha", actor="bob", reason="later")
    # The first pause stands: its actor and time say who to ask.
    assert again.already_paused is True and again.pause == first.pause
    await jobs.pause(job="in_beta", actor="carol")
    listed = await jobs.pauses()
    assert [(p.kind, p.name, p.paused_by) for p in listed] == [
        ("job", "in_beta", "carol"),
        ("queue", "alpha", "alice"),
    ]
    assert await jobs.resume(queue="alpha") == first.pause
    assert await jobs.resume(queue="alpha") is None
    assert await jobs.resume(queue="never-paused") is None
    assert [p.name for p in await jobs.pauses()] == ["in_beta"]


@pytest.mark.parametrize(
    "arguments",
    [{}, {"queue": "alpha", "job": "in_beta"}, {"queue": ""}, {"job": "x" * 201}],
)
async def test_a_pause_names_exactly_one_queue_or_job_within_bounds(
    jobs: Jobs, arguments: dict[str, str]
) -> None:
    with pytest.raises(JobsError) as raised:
        await jobs.pause(**arguments)
    assert raised.value.code == "INVALID_ARGUMENT"
    with pytest.raises(JobsError):
        await jobs.resume(**arguments)
    assert await jobs.pauses() == []
