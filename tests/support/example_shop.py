"""The example shop's checkout and `mcp-jobs demo` on a server-backed driver's database: what the
Redis and NATS example tests check alike (each says in its own words what its checkout's two
writes promise)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from engine import Jobs, ManualClock, Worker, connect, default_registry
from examples.shop import OrderTakenError, checkout
from examples.shop.jobs import OrderInput

DEMO_BOUND_S = 55  # a bound on the whole run, never a pause


async def check_checkout(database_url: str, clock: ManualClock) -> None:
    """A checkout stages its job once; the same order taken again raises and stages nothing.
    (The caller points SHOP_DB at a file of its own.)"""
    jobs: Jobs = await connect(database_url, clock=clock, registry=default_registry)
    try:
        staged = await checkout(jobs, OrderInput(order_id=7, sku="mug", quantity=1))
        with pytest.raises(OrderTakenError):
            await checkout(jobs, OrderInput(order_id=7, sku="tea-black", quantity=2))
        relay = Worker(jobs, scheduler=False).outbox_relay
        assert relay is not None
        await relay.run_until_empty()
        (only,) = (await jobs.list(name="fulfil_order")).jobs
        assert only.id == staged.job_id and only.input["sku"] == "mug"
    finally:
        await jobs.close()


def check_demo(database_url: str, cwd: Path) -> None:
    """`mcp-jobs demo` on `database_url`, from `cwd`: rc 0, the database named, every step as
    expected, no null shown."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_JOBS_", "SHOP_"))}
    env["MCP_JOBS_DATABASE_URL"] = database_url
    env["PYTHONUNBUFFERED"] = "1"

    async def run() -> tuple[int, str, str]:
        with anyio.fail_after(DEMO_BOUND_S):
            done = await anyio.run_process(
                [sys.executable, "-m", "mcp_jobs.cli", "demo"], cwd=cwd, env=env, check=False
            )
        return done.returncode, done.stdout.decode(), done.stderr.decode()

    code, out, err = anyio.run(run)
    assert code == 0, out[-3000:] + err[-3000:]
    assert f"database {database_url}" in out.splitlines()[0]
    assert "demo finished: every step answered as expected." in out
    assert "null" not in out
