"""One enqueue call happens at one instant: the client resolves `run_at` and the driver creates
the rows at the same clock reading, so a job due now is stored ready, never 1 ms "delayed"."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from engine import Enqueue, JobContext, JobRegistry, Jobs, ManualClock, job


class TickingClock(ManualClock):
    """A manual clock that moves 1 ms on every reading: two readings in one call always
    differ, so code that reads the clock twice is caught every time, not 1 call in 10."""

    def now_ms(self) -> int:
        now = super().now_ms()
        self.advance(1)
        return now


@pytest.fixture
def clock() -> ManualClock:
    return TickingClock()


class Item(BaseModel):
    n: int


@pytest.fixture(autouse=True)
def declared_jobs(registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: f"item:{i.n}", registry=registry)
    async def process(input: Item, ctx: JobContext) -> None:
        return None


@pytest.mark.parametrize("count", [1, 5, 300], ids=["one", "small-batch", "parts"])
async def test_a_job_due_now_is_stored_ready_at_the_instant_it_was_resolved(
    jobs: Jobs, count: int
) -> None:
    # 300 items go to the driver in parts (more than 128), where the driver read "now" before
    # the client did and stored the whole batch delayed.
    results = await jobs.enqueue_many([Enqueue("process", {"n": n}) for n in range(count)])
    assert {r.state for r in results} == {"ready"}
    for result in (results[0], results[-1]):
        record = await jobs.get(result.id)
        assert record.state == "ready"
        assert record.created_at == record.run_at


async def test_a_single_enqueue_is_created_at_the_instant_it_was_resolved(jobs: Jobs) -> None:
    result = await jobs.enqueue("process", {"n": 1})
    record = await jobs.get(result.id)
    assert (result.state, record.state) == ("ready", "ready")
    assert record.created_at == record.run_at
