"""`Worker(limits=Limits(per_queue=..., rate_per_queue=...))` refuses a cap or rate of a queue the
worker does not claim, as `mcp-jobs worker --per-queue` does (one rule,
engine.limits.queue_limits_claimed): taken, the cap or rate meant for `emails` and keyed `emials`
limited nothing and said nothing."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, Limits, RateLimit, Worker, job
from engine.errors import VALUE_LEFT_OUT, InvalidArgumentError

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


def _mended_with_rates(fix: str) -> Limits:
    limits = eval(fix, {"Limits": Limits, "RateLimit": RateLimit})  # the fix runs as given
    assert isinstance(limits, Limits)
    return limits


async def test_a_slip_in_rate_per_queue_is_refused_with_the_queue_meant(jobs: Jobs) -> None:
    """The same rule as per_queue's: taken, the rate meant for `emails` paced nothing."""
    rate = RateLimit(100, per=1)
    refused = _refusal(jobs, limits=Limits(rate_per_queue={"emials": rate}))
    assert (refused.code, refused.argument, refused.nearest) == (
        "INVALID_ARGUMENT",
        "rate_per_queue key",
        "emails",
    )
    assert "a queue this worker claims (emails)" in refused.expected
    mended = _mended_with_rates(refused.fix)
    assert mended.rate_per_queue == {"emails": rate}
    Worker(jobs, scheduler=False, prune=False, limits=mended)


async def test_a_rate_of_a_queue_never_claimed_is_left_out_of_the_fix(jobs: Jobs) -> None:
    keep, other = RateLimit(5, per=60), RateLimit(1)
    limits = Limits(rate_per_queue={"emails": keep, "reports": other})
    refused = _refusal(jobs, limits=limits)
    assert (refused.argument, refused.nearest) == ("rate_per_queue key", VALUE_LEFT_OUT)
    assert _mended_with_rates(refused.fix).rate_per_queue == {"emails": keep}
    Worker(jobs, queues=["emails", "reports"], limits=limits, scheduler=False, prune=False)


async def test_the_fix_keeps_every_other_limit_and_mends_both_queue_fields(jobs: Jobs) -> None:
    """A fix that printed only the refused field would lift the other limits set; one that mended
    only the first slip would be refused again for the next."""
    rate = RateLimit(10, per=1, burst=2)
    limits = Limits(
        global_cap=50,
        per_queue={"emials": 3},
        per_tenant=2,
        tenant_overrides={"acme": 20},
        rate_per_queue={"emails ": rate},
        rate_per_tenant=RateLimit(20),
        rate_tenant_overrides={"acme": RateLimit(200)},
    )
    refused = _refusal(jobs, limits=limits)
    assert (refused.argument, refused.value) == ("per_queue key", "emials")
    mended = _mended_with_rates(refused.fix)
    assert mended == Limits(
        global_cap=50,
        per_queue={"emails": 3},
        per_tenant=2,
        tenant_overrides={"acme": 20},
        rate_per_queue={"emails": rate},
        rate_per_tenant=RateLimit(20),
        rate_tenant_overrides={"acme": RateLimit(200)},
    )
    Worker(jobs, scheduler=False, prune=False, limits=mended)


async def test_tenant_limits_are_not_queues_and_are_taken_as_given(jobs: Jobs) -> None:
    limits = Limits(
        per_tenant=2,
        tenant_overrides={"emials": 3},
        rate_per_tenant=RateLimit(1),
        rate_tenant_overrides={"reports": RateLimit(2)},
    )
    assert Worker(jobs, scheduler=False, prune=False, limits=limits).limits == limits


async def test_a_worker_claiming_every_queue_takes_any_queues_rate(jobs: Jobs) -> None:
    limits = Limits(rate_per_queue={"other": RateLimit(3)})
    worker = Worker(jobs, queues="*", limits=limits, scheduler=False, prune=False)
    assert worker.limits.rate_per_queue == {"other": RateLimit(3)}
