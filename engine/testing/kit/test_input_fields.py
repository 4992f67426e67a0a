"""A job's input model decides about unknown fields (issue #22 item 3): refused at enqueue by
default (JOB_INPUT_INVALID naming them, nothing stored), kept or dropped when the model's
`extra` says so, and input stored before the rule (with a field the model lacks) still runs."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from engine import JobContext, JobRegistry, Jobs, ManualClock, Worker, job
from engine.errors import JobInputInvalidError
from schemas.jobs import EnqueueRequest


class Order(BaseModel):
    order_id: int


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    order_id: int


class Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")
    order_id: int


SEEN: list[Any] = []


@pytest.fixture(autouse=True)
def declared(registry: JobRegistry) -> None:
    SEEN.clear()

    @job(idempotency_key=lambda i: f"o:{i.order_id}", registry=registry)
    async def ship(input: Order, ctx: JobContext) -> None:
        SEEN.append(input)

    @job(idempotency_key=lambda i: f"l:{i.order_id}", registry=registry)
    async def loose(input: Loose, ctx: JobContext) -> None:
        SEEN.append(input)

    @job(idempotency_key=lambda i: f"n:{i.order_id}", registry=registry)
    async def lenient(input: Lenient, ctx: JobContext) -> None:
        SEEN.append(input)


async def test_an_unknown_field_is_refused_by_default(jobs: Jobs) -> None:
    with pytest.raises(JobInputInvalidError) as raised:
        await jobs.enqueue("ship", {"order_id": 1, "priority": 5})
    (error,) = (raised.value.details or {})["errors"]
    assert error["loc"] == ["priority"] and error["type"] == "extra_forbidden"
    assert "priority" in raised.value.cause
    assert (await jobs.list()).jobs == []
    (described,) = await jobs.describe("ship")
    assert described.input_schema["additionalProperties"] is False
    # A model instance is taken as it is.
    await jobs.enqueue("ship", Order(order_id=1))


async def test_the_models_own_extra_setting_is_honoured(jobs: Jobs) -> None:
    await jobs.enqueue("loose", {"order_id": 1, "priority": 5})
    await jobs.enqueue("lenient", {"order_id": 2, "priority": 5})
    stored = {j.name: j.input for j in (await jobs.list()).jobs}
    assert stored == {"loose": {"order_id": 1, "priority": 5}, "lenient": {"order_id": 2}}
    assert (await jobs.describe("loose"))[0].input_schema["additionalProperties"] is True
    assert "additionalProperties" not in (await jobs.describe("lenient"))[0].input_schema


async def test_input_stored_with_a_field_the_model_lacks_still_runs(
    jobs: Jobs, clock: ManualClock
) -> None:
    # As an older version (or a producer before this rule) stored it.
    await jobs.driver.enqueue(
        [
            EnqueueRequest(
                id="a" * 32, run_id="b" * 32, name="ship", queue="default",
                idempotency_key="o:7", input={"order_id": 7, "priority": 5},
                run_at=clock.now_ms(), max_attempts=1,
            )
        ]
    )  # fmt: skip
    await Worker(jobs).run_until_idle()
    assert (await jobs.get("a" * 32)).state == "done"
    # Decoded with the model as declared: the stored extra field is dropped, not refused.
    (ran,) = SEEN
    assert type(ran) is Order and ran.order_id == 7
