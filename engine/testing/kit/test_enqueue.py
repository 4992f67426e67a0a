"""Enqueue and dedupe rules every driver shares (DESIGN rules 2 and 3)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from engine import Enqueue, JobContext, JobRegistry, Jobs, ManualClock, Worker, job
from engine.errors import JobsError


class User(BaseModel):
    user_id: int


class Invoice(BaseModel):
    invoice_id: int
    amount: int = 0


def declare(registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: f"user:{i.user_id}", registry=registry)
    async def send_welcome(input: User, ctx: JobContext) -> None:
        return None

    @job(idempotency_key=lambda i: f"user:{i.user_id}", registry=registry)
    async def provision_workspace(input: User, ctx: JobContext) -> None:
        return None

    @job(
        idempotency_key=lambda i: f"invoice:{i.invoice_id}",
        tenant_required=True,
        registry=registry,
    )
    async def charge_invoice(input: Invoice, ctx: JobContext) -> None:
        return None

    @job(idempotency_key=_key_unless_negative, registry=registry)
    async def import_user(input: User, ctx: JobContext) -> None:
        return None


class NoKeyError(Exception):
    pass


def _key_unless_negative(user: User) -> str:
    if user.user_id < 0:
        raise NoKeyError(f"no key for user {user.user_id}")
    return f"user:{user.user_id}"


async def live_count(jobs: Jobs) -> int:
    return sum(s.ready + s.delayed + s.running + s.suspended for s in await jobs.stats())


@pytest.fixture(autouse=True)
def declared_jobs(registry: JobRegistry) -> None:
    declare(registry)


async def test_two_jobs_with_one_natural_key_both_run(jobs: Jobs) -> None:
    # Rule 2: the namespace includes the name. Keyed by the key alone, the second swallowed
    # the first and the workspace was never provisioned.
    a = await jobs.enqueue("send_welcome", {"user_id": 42})
    b = await jobs.enqueue("provision_workspace", {"user_id": 42})
    assert a.id != b.id
    assert not a.deduped and not b.deduped


async def test_two_tenants_with_one_key_get_two_jobs(jobs: Jobs) -> None:
    # Rule 2: the namespace includes the tenant. Name-only handed tenant B tenant A's job id.
    a = await jobs.enqueue("charge_invoice", {"invoice_id": 1001}, tenant_id="acme")
    b = await jobs.enqueue("charge_invoice", {"invoice_id": 1001}, tenant_id="globex")
    assert a.id != b.id
    assert not b.deduped
    assert (await jobs.get(b.id)).tenant_id == "globex"


async def test_one_tenant_twice_dedupes_to_the_same_id(jobs: Jobs) -> None:
    a = await jobs.enqueue("charge_invoice", {"invoice_id": 7, "amount": 1}, tenant_id="acme")
    b = await jobs.enqueue("charge_invoice", {"invoice_id": 7, "amount": 2}, tenant_id="acme")
    assert b.deduped and b.id == a.id and b.run_id == a.run_id
    page = await jobs.list(name="charge_invoice")
    assert [j.id for j in page.jobs] == [a.id]


async def test_tenantless_enqueues_dedupe(jobs: Jobs) -> None:
    # coalesce(tenant_id, ''): a null tenant must not make every row its own namespace.
    a = await jobs.enqueue("send_welcome", {"user_id": 5})
    b = await jobs.enqueue("send_welcome", {"user_id": 5})
    assert b.deduped and b.id == a.id


async def test_on_conflict_error_raises_job_duplicate(jobs: Jobs) -> None:
    a = await jobs.enqueue("send_welcome", {"user_id": 9})
    with pytest.raises(JobsError) as raised:
        await jobs.enqueue("send_welcome", {"user_id": 9}, on_conflict="error")
    assert raised.value.code == "JOB_DUPLICATE"
    assert raised.value.details == {"job_id": a.id}


async def test_a_completed_row_does_not_block_a_new_enqueue(
    jobs: Jobs, registry: JobRegistry
) -> None:
    # Rule 3: completed rows stay for history; only a LIVE row holds the key.
    first = await jobs.enqueue("send_welcome", {"user_id": 1})
    assert await Worker(jobs).run_until_idle() == 1
    assert (await jobs.get(first.id)).state == "done"
    second = await jobs.enqueue("send_welcome", {"user_id": 1})
    assert not second.deduped and second.id != first.id


async def test_a_running_row_still_holds_the_key(jobs: Jobs) -> None:
    first = await jobs.enqueue("send_welcome", {"user_id": 3})
    claimed = await jobs.driver.claim("w1", 10, 30_000)
    assert [c.record.id for c in claimed] == [first.id]
    again = await jobs.enqueue("send_welcome", {"user_id": 3})
    assert again.deduped and again.id == first.id


async def test_enqueue_many_applies_the_rule_per_item(jobs: Jobs) -> None:
    existing = await jobs.enqueue("send_welcome", {"user_id": 1})
    results = await jobs.enqueue_many(
        [
            Enqueue("send_welcome", {"user_id": 1}),
            Enqueue("send_welcome", {"user_id": 2}),
            Enqueue("send_welcome", {"user_id": 2}),
            Enqueue("provision_workspace", {"user_id": 2}),
            Enqueue("charge_invoice", {"invoice_id": 1}, tenant_id="a"),
            Enqueue("charge_invoice", {"invoice_id": 1}, tenant_id="b"),
        ]
    )
    assert [r.deduped for r in results] == [True, False, True, False, False, False]
    assert results[0].id == existing.id
    assert results[2].id == results[1].id
    assert len({r.id for r in results}) == 5
    assert len((await jobs.list(limit=100)).jobs) == 5


async def test_enqueue_many_with_a_conflict_in_error_mode_writes_nothing(jobs: Jobs) -> None:
    await jobs.enqueue("send_welcome", {"user_id": 1})
    with pytest.raises(JobsError) as raised:
        await jobs.enqueue_many(
            [
                Enqueue("send_welcome", {"user_id": 77}),
                Enqueue("send_welcome", {"user_id": 1}, on_conflict="error"),
            ]
        )
    assert raised.value.code == "JOB_DUPLICATE"
    assert len((await jobs.list()).jobs) == 1


async def test_enqueue_many_with_one_invalid_item_writes_nothing(jobs: Jobs) -> None:
    with pytest.raises(JobsError) as raised:
        await jobs.enqueue_many(
            [Enqueue("send_welcome", {"user_id": 1}), Enqueue("send_welcome", {"user_id": "x"})]
        )
    assert raised.value.code == "JOB_INPUT_INVALID"
    assert (await jobs.list()).jobs == []


# A batch of more than one part (the client builds 128 items, then 256, then 512...): the
# PostgreSQL driver inserts each part while the next is built, in one transaction.
LARGE = 700


async def test_a_batch_of_several_parts_applies_the_rule_across_them(jobs: Jobs) -> None:
    existing = await jobs.enqueue("send_welcome", {"user_id": 3})
    items = [Enqueue("send_welcome", {"user_id": n}) for n in range(LARGE)]
    items[600] = Enqueue("send_welcome", {"user_id": 5})  # its key first appeared in part 1
    results = await jobs.enqueue_many(items)
    assert len(results) == LARGE
    assert results[3].deduped and results[3].id == existing.id
    assert results[600].deduped and results[600].id == results[5].id
    assert sum(r.deduped for r in results) == 2
    assert await live_count(jobs) == LARGE - 1  # 699 distinct keys, one of them held already
    job = await jobs.get(results[699].id)
    assert (job.name, job.input) == ("send_welcome", {"user_id": 699})


async def test_an_invalid_item_in_a_late_part_writes_nothing(jobs: Jobs) -> None:
    items = [Enqueue("send_welcome", {"user_id": n}) for n in range(LARGE)]
    items[650] = Enqueue("send_welcome", {"user_id": "x"})
    with pytest.raises(JobsError) as raised:
        await jobs.enqueue_many(items)
    assert raised.value.code == "JOB_INPUT_INVALID"
    assert await live_count(jobs) == 0
    # The refusal left the driver in good order: the batch goes in once fixed.
    items[650] = Enqueue("send_welcome", {"user_id": 650})
    assert not any(r.deduped for r in await jobs.enqueue_many(items))
    assert await live_count(jobs) == LARGE


async def test_a_duplicate_in_error_mode_in_a_late_part_writes_nothing(jobs: Jobs) -> None:
    held = await jobs.enqueue("send_welcome", {"user_id": 10_000})
    items = [Enqueue("send_welcome", {"user_id": n}) for n in range(LARGE)]
    items[-1] = Enqueue("send_welcome", {"user_id": 10_000}, on_conflict="error")
    with pytest.raises(JobsError) as raised:
        await jobs.enqueue_many(items)
    assert raised.value.code == "JOB_DUPLICATE"
    assert raised.value.details is not None and held.id in str(raised.value.details)
    assert await live_count(jobs) == 1


async def test_a_key_function_error_in_a_late_part_is_idempotency_key_failed(jobs: Jobs) -> None:
    items = [Enqueue("import_user", {"user_id": n}) for n in range(LARGE)]
    items[500] = Enqueue("import_user", {"user_id": -1})
    with pytest.raises(JobsError) as raised:
        await jobs.enqueue_many(items)
    assert raised.value.code == "IDEMPOTENCY_KEY_FAILED"
    assert isinstance(raised.value.__cause__, NoKeyError)
    assert await live_count(jobs) == 0


async def test_invalid_input_names_the_field(jobs: Jobs) -> None:
    with pytest.raises(JobsError) as raised:
        await jobs.enqueue("send_welcome", {"user_id": "not a number"})
    assert raised.value.code == "JOB_INPUT_INVALID"
    assert raised.value.details is not None
    assert raised.value.details["errors"][0]["loc"] == ["user_id"]


async def test_unknown_job_name_is_refused(jobs: Jobs) -> None:
    with pytest.raises(JobsError) as raised:
        await jobs.enqueue("nope", {})
    assert raised.value.code == "JOB_UNKNOWN"
    assert raised.value.next_call is not None
    assert raised.value.next_call.tool == "describe_jobs"


async def test_tenant_required_job_refuses_a_tenantless_enqueue(jobs: Jobs) -> None:
    with pytest.raises(JobsError) as raised:
        await jobs.enqueue("charge_invoice", {"invoice_id": 1})
    assert raised.value.code == "JOB_TENANT_REQUIRED"
    # The fix is a Python caller's line (it named an MCP call with "{...}" for input).
    assert raised.value.fix.startswith('await jobs.enqueue("charge_invoice", input, tenant_id=')
    assert (await jobs.list()).jobs == []


async def test_delay_makes_a_delayed_job_that_is_claimed_only_when_due(
    jobs: Jobs, clock: ManualClock
) -> None:
    r = await jobs.enqueue("send_welcome", {"user_id": 1}, delay=60)
    assert r.state == "delayed"
    assert await jobs.driver.claim("w", 10, 30_000) == []
    (stats,) = await jobs.stats()
    assert (stats.delayed, stats.ready) == (1, 0)
    clock.advance(60_000)
    (stats,) = await jobs.stats()
    assert (stats.delayed, stats.ready) == (0, 1)
    claimed = await jobs.driver.claim("w", 10, 30_000)
    assert [c.record.id for c in claimed] == [r.id]


async def test_run_at_and_delay_together_are_refused(jobs: Jobs, clock: ManualClock) -> None:
    with pytest.raises(JobsError) as raised:
        await jobs.enqueue("send_welcome", {"user_id": 1}, delay=1, run_at=clock.now_ms())
    assert raised.value.code == "INVALID_ARGUMENT"


async def test_claim_order_is_run_at_then_id(jobs: Jobs, clock: ManualClock) -> None:
    late = await jobs.enqueue("send_welcome", {"user_id": 1}, run_at=clock.now_ms() - 10)
    early = await jobs.enqueue("send_welcome", {"user_id": 2}, run_at=clock.now_ms() - 20)
    same_a = await jobs.enqueue("send_welcome", {"user_id": 3}, run_at=clock.now_ms() - 10)
    claimed = await jobs.driver.claim("w", 10, 30_000)
    assert [c.record.id for c in claimed] == [early.id, late.id, same_a.id]


async def test_list_pages_with_a_cursor_and_filters(jobs: Jobs) -> None:
    ids = [(await jobs.enqueue("send_welcome", {"user_id": n})).id for n in range(5)]
    await jobs.enqueue("charge_invoice", {"invoice_id": 1}, tenant_id="acme")
    first = await jobs.list(name="send_welcome", limit=2)
    second = await jobs.list(name="send_welcome", limit=2, cursor=first.next_cursor)
    third = await jobs.list(name="send_welcome", limit=2, cursor=second.next_cursor)
    seen = [j.id for j in first.jobs + second.jobs + third.jobs]
    assert seen == sorted(ids, reverse=True)
    assert third.next_cursor is None
    only_acme = await jobs.list(tenant_id="acme")
    assert [j.name for j in only_acme.jobs] == ["charge_invoice"]
    assert len((await jobs.list(state="ready", limit=100)).jobs) == 6
    with pytest.raises(JobsError) as raised:
        await jobs.list(limit=0)
    assert raised.value.code == "INVALID_ARGUMENT"
