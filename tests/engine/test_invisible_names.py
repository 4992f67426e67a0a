"""A job, queue or event name is declared in code, and shown in logs, tables and fix lines: one
holding an invisible format character (a zero-width space, a soft hyphen, a BOM) looks like
another name everywhere, so `ship\u200border` and `shiporder` were two jobs no reader could tell
apart. Such a name is refused (at a declaration JOB_DECLARATION_INVALID, else INVALID_ARGUMENT),
its fix or `nearest` the name without them. A
tenant or an idempotency key is app data whose real text may hold them: accepted as before."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, job
from engine.errors import InvalidArgumentError, JobDeclarationInvalidError

INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u00ad", "\ufeff", "\u2060"]


class Order(BaseModel):
    order_id: int


def _declare(registry: JobRegistry, name: str = "ship", queue: str = "orders") -> None:
    @job(
        name=name, queue=queue, idempotency_key=lambda i: f"o:\u200b{i.order_id}", registry=registry
    )
    async def ship(input: Order, ctx: JobContext) -> None:
        return None


@pytest.mark.parametrize("char", INVISIBLE)
def test_a_job_name_with_an_invisible_character_is_refused_with_the_name_without_it(
    char: str,
) -> None:
    with pytest.raises(JobDeclarationInvalidError) as raised:
        _declare(JobRegistry(), name=f"ship{char}order")
    assert not raised.value.retryable and "invisible format character" in raised.value.cause
    assert raised.value.fix is not None and 'name="shiporder"' in raised.value.fix
    _declare(JobRegistry(), name="shiporder")  # the mend declares


@pytest.mark.parametrize("char", INVISIBLE)
def test_a_queue_name_with_an_invisible_character_is_refused(char: str) -> None:
    with pytest.raises(JobDeclarationInvalidError) as raised:
        _declare(JobRegistry(), queue=f"or{char}ders")
    assert raised.value.fix is not None and 'queue="orders"' in raised.value.fix


async def test_an_event_name_with_an_invisible_character_is_refused(jobs: Jobs) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        await jobs.send_event("paid\u200b", key="o:1")
    assert raised.value.nearest == "paid"


async def test_a_tenant_and_a_key_may_hold_them(jobs: Jobs, registry: JobRegistry) -> None:
    _declare(registry)
    tenant = "Jos\u00e9\u200dS"
    done = await jobs.enqueue("ship", {"order_id": 1}, tenant_id=tenant)
    stored = await jobs.get(done.id, tenant_id=tenant)
    assert stored is not None and stored.idempotency_key == "o:\u200b1"
