"""The example shop's checkout uses the outbox: a job exists if and only if the checkout commits."""

from __future__ import annotations

import pytest

from engine import Jobs, Worker, default_registry
from examples.shop import OrderTakenError, checkout
from examples.shop.jobs import OrderInput


@pytest.fixture
def shop_jobs(jobs: Jobs, monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> Jobs:
    monkeypatch.setenv("SHOP_DB", f"{tmp_path}/shop.db")
    monkeypatch.setenv("SHOP_SETTLE_SECONDS", "0")
    return Jobs(jobs.driver, registry=default_registry, clock=jobs.clock)


async def test_a_checkout_publishes_exactly_one_fulfilment(shop_jobs: Jobs) -> None:
    staged = await checkout(shop_jobs, OrderInput(order_id=1, sku="tea-green", quantity=1))
    assert (await shop_jobs.list()).jobs == []  # staged, not yet published
    worker = Worker(shop_jobs, scheduler=False)
    assert worker.outbox_relay is not None
    await worker.outbox_relay.run_until_empty()
    (published,) = (await shop_jobs.list(name="fulfil_order")).jobs
    assert published.id == staged.job_id


@pytest.mark.drivers("sqlite", "postgres", reason="the memory driver has no app tables")
async def test_a_checkout_that_rolls_back_leaves_no_job(shop_jobs: Jobs) -> None:
    await checkout(shop_jobs, OrderInput(order_id=7, sku="mug", quantity=1))
    with pytest.raises(OrderTakenError):
        await checkout(shop_jobs, OrderInput(order_id=7, sku="tea-black", quantity=2))
    relay = Worker(shop_jobs, scheduler=False).outbox_relay
    assert relay is not None
    await relay.run_until_empty()
    (only,) = (await shop_jobs.list(name="fulfil_order")).jobs
    assert only.input["sku"] == "mug"
