"""`Worker(limits=Limits(per_queue=...))` refuses a cap of a queue the worker does not claim,
as `mcp-jobs worker --per-queue` does (one rule, engine.limits.caps_claimed): taken, the cap
meant for `emails` and keyed `emials` capped nothing and said nothing."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, Limits, Worker, job
from engine.errors import InvalidArgumentError

pytestmark = pytest.mark.drivers("memory", reason="refused at construction, before any driver")


class Mail(BaseModel):
    n: int


@pytest.fixture(autouse=True)
def mail_job(registry: JobRegistry) -> None:
    @job(registry=registry, queue="emails", idempotency_key=lambda i: str(i.n))
    async def send(input: Mail, ctx: JobContext) -> None: ...


def _refusal(jobs: Jobs, **options: Any) -> InvalidArgumentError:
    with pytest.raises(InvalidArgumentError) as raised:
        Worker(jobs, scheduler=False, prune=False, **options)
    return raised.value


def _mended(fix: str) -> Limits:
    limits = eval(fix, {"Limits": Limits})  # the fix runs as given
    assert isinstance(limits, Limits)
    return limits


async def test_a_slip_of_a_claimed_queue_is_refused_with_the_queue_meant(jobs: Jobs) -> None:
    refused = _refusal(jobs, limits=Limits(per_queue={"emials": 3}))
    assert (refused.code, refused.argument, refused.nearest) == (
        "INVALID_ARGUMENT",
        "per_queue key",
        "emails",
    )
    assert refused.fix == "Limits(per_queue={'emails': 3})"
    Worker(jobs, scheduler=False, prune=False, limits=_mended(refused.fix))


async def test_a_queue_never_claimed_is_refused_and_left_out_of_the_fix(jobs: Jobs) -> None:
    limits = Limits(per_queue={"emails": 2, "reports": 3})
    refused = _refusal(jobs, limits=limits)
    assert refused.fix == "Limits(per_queue={'emails': 2})"
    Worker(jobs, scheduler=False, prune=False, limits=_mended(refused.fix))


async def test_the_queues_named_are_the_ones_claimed(jobs: Jobs) -> None:
    limits = Limits(per_queue={"emails": 2})
    refused = _refusal(jobs, queues=["reports"], limits=limits)
    assert "(reports)" in refused.expected
    Worker(jobs, queues=["reports", "emails"], limits=limits, scheduler=False, prune=False)


async def test_a_worker_claiming_every_queue_takes_any_queues_cap(jobs: Jobs) -> None:
    worker = Worker(jobs, queues="*", limits=Limits(per_queue={"other": 3}), scheduler=False)
    assert worker.limits.per_queue == {"other": 3}
