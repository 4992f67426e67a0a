"""JOB_DUPLICATE for an `on_conflict="error"` item whose key an EARLIER item of the same
`enqueue_many` holds: the batch is refused whole, so no job of it exists. The error names the
two items' positions, and neither its fix nor its next call points at a job id never stored."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from engine import Enqueue, JobContext, JobRegistry, Jobs, JobsError, job
from engine.enqueue_items import FIRST_PART


class User(BaseModel):
    user_id: int


@pytest.fixture(autouse=True)
def declared(registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: f"user:{i.user_id}", registry=registry)
    async def welcome(input: User, ctx: JobContext) -> None:
        return None


async def _refused(jobs: Jobs, items: list[Enqueue]) -> JobsError:
    with pytest.raises(JobsError) as raised:
        await jobs.enqueue_many(items)
    assert (await jobs.list()).jobs == []
    return raised.value


@pytest.mark.parametrize("size", [3, FIRST_PART + 200])
async def test_a_duplicate_of_an_earlier_item_names_both_positions(jobs: Jobs, size: int) -> None:
    items = [Enqueue("welcome", {"user_id": n}) for n in range(size)]
    items[-1] = Enqueue("welcome", {"user_id": 1}, on_conflict="error")
    exc = await _refused(jobs, items)
    assert (exc.code, exc.retryable) == ("JOB_DUPLICATE", False)
    assert exc.details is not None and exc.details["items"] == [1, size - 1]
    assert "items[1]" in exc.cause and f"items[{size - 1}]" in exc.cause
    assert exc.next_call is None
    # No id in it names a job: the batch stored none.
    assert "job_id" not in exc.details
    # Its fix, done: the item dedupes into the earlier one's job.
    items[-1] = items[-1]._replace(on_conflict="dedupe")
    results = await jobs.enqueue_many(items)
    assert results[-1].deduped and results[-1].id == results[1].id


async def test_a_duplicate_of_a_stored_job_still_names_that_job(jobs: Jobs) -> None:
    held = await jobs.enqueue("welcome", {"user_id": 1})
    with pytest.raises(JobsError) as raised:
        await jobs.enqueue_many(
            [
                Enqueue("welcome", {"user_id": 2}),
                Enqueue("welcome", {"user_id": 1}, on_conflict="error"),
            ]
        )
    assert raised.value.code == "JOB_DUPLICATE"
    assert raised.value.details == {"job_id": held.id}
    assert (await jobs.get(held.id)).id == held.id
