"""A rerun from a step, an outbox publish and a rate-limit take each write several rows in one
transaction. When the server rolls it back at its LAST statement (40001, 40P01, 55P03), every
row before it goes too, and the driver runs the whole transaction again: one call leaves what
one successful call leaves (steps copied once, one audit event, one job per staged row, a rate
taken once), as the enqueue, claim, settle and operator paths do (test_rollbacks.py,
test_operator_rollbacks.py)."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Retry, Worker, job
from engine.rate_limits import RateTake
from tests.postgres.builders import request
from tests.postgres.conftest import DriverFactory
from tests.postgres.refusals import ROLLED_BACK, refuse, refused_so_far
from tests.postgres.waiting import CountingClock, pumped

ACTOR = "operator@test"


class Nothing(BaseModel):
    pass


async def _count(sql: asyncpg.Connection[asyncpg.Record], query: str, *args: Any) -> int:
    return int(await sql.fetchval(query, *args))


@pytest.mark.parametrize("sqlstate", ROLLED_BACK)
async def test_a_rerun_rolled_back_at_its_last_write_copies_its_steps_once(
    make_driver: DriverFactory,
    clock: ManualClock,
    sql: asyncpg.Connection[asyncpg.Record],
    sqlstate: str,
) -> None:
    retry = CountingClock()
    driver = await make_driver(retry_clock=retry, listen=False)
    registry = JobRegistry()
    jobs = Jobs(driver, registry=registry, clock=clock)

    @job(idempotency_key=lambda i: "one", retry=Retry(attempts=1), registry=registry)
    async def three(input: Nothing, ctx: JobContext) -> None:
        await ctx.step.run("a", lambda: 1)
        await ctx.step.run("b", lambda: 2)
        raise RuntimeError("carrier down")

    enqueued = await jobs.enqueue(three, {})
    await Worker(jobs, outbox_relay=False).run_until_idle()
    dead = await jobs.get(enqueued.id)
    assert dead.state == "dead"

    # The rerun's last statement records it in `reruns`: by then the kept step is copied, the
    # row requeued and the audit event written, all in the transaction the server rolls back.
    await refuse(sql, "INSERT", sqlstate, times=2, table="reruns")
    rerun = await pumped(retry, lambda: jobs.retry(dead.id, from_step="b", actor=ACTOR))
    assert (rerun.state, rerun.rerun_of) == ("ready", dead.run_id)
    assert await refused_so_far(sql) == 3  # two refusals, then the rerun that went through

    copied = await sql.fetch(
        "SELECT name FROM mcp_jobs.steps WHERE run_id = $1 ORDER BY seq", rerun.run_id
    )
    assert [r["name"] for r in copied] == ["a"]
    assert await _count(sql, "SELECT count(*) FROM mcp_jobs.reruns WHERE job_id = $1", dead.id) == 1
    requeued = await sql.fetch(
        "SELECT actor, data->>'run_id' AS run_id FROM mcp_jobs.events"
        " WHERE job_id = $1 AND kind = 'requeued'",
        dead.id,
    )
    assert [(r["actor"], r["run_id"]) for r in requeued] == [(ACTOR, rerun.run_id)]
    # The run it went through with is the one stored: no run of a rolled-back try is left.
    runs = await sql.fetch("SELECT DISTINCT run_id FROM mcp_jobs.steps WHERE job_id = $1", dead.id)
    assert {r["run_id"] for r in runs} == {dead.run_id, rerun.run_id}


@pytest.mark.parametrize("sqlstate", ROLLED_BACK)
async def test_an_outbox_publish_rolled_back_at_its_stamp_enqueues_each_row_once(
    make_driver: DriverFactory,
    clock: ManualClock,
    sql: asyncpg.Connection[asyncpg.Record],
    sqlstate: str,
) -> None:
    retry = CountingClock()
    driver = await make_driver(retry_clock=retry, listen=False)
    now = clock.now_ms()
    async with sql.transaction():
        staged = await driver.outbox_stage(sql, [request(now, key="a"), request(now, key="b")])
    rows = await driver.outbox_claim("relay", "token", 10, 60_000)
    assert sorted(r.id for r in rows) == sorted(staged)

    # The publish enqueues the rows' jobs, then stamps the rows published: refuse the stamp.
    await refuse(sql, "UPDATE", sqlstate, times=2, table="outbox")
    results = await pumped(retry, lambda: driver.outbox_publish("token", rows))
    assert await refused_so_far(sql) == 3
    assert [r.deduped for r in results] == [False, False]

    found = await sql.fetch(
        "SELECT id, idempotency_key FROM mcp_jobs.jobs ORDER BY idempotency_key"
    )
    assert [r["idempotency_key"] for r in found] == ["a", "b"]
    assert sorted(r["id"] for r in found) == sorted(r.id for r in results)
    published = await sql.fetch(
        "SELECT id, job_id FROM mcp_jobs.outbox WHERE published_at IS NOT NULL ORDER BY id"
    )
    assert sorted((r["id"], r["job_id"]) for r in published) == sorted(
        zip(staged, [r.id for r in results], strict=True)
    )


@pytest.mark.parametrize("sqlstate", ROLLED_BACK)
async def test_a_rate_take_rolled_back_after_seeding_its_key_takes_once(
    make_driver: DriverFactory,
    clock: ManualClock,
    sql: asyncpg.Connection[asyncpg.Record],
    sqlstate: str,
) -> None:
    retry = CountingClock()
    driver = await make_driver(retry_clock=retry, listen=False)
    rate = RateTake("job:mail", 2, 60_000, 1)  # two a minute: one start moves the TAT 30 s
    now = clock.now_ms()
    # A key's first take finds no row (the take statement, let through), seeds one, and takes
    # again: refuse that second take, so the seeded row must go with the rollback.
    await refuse(sql, "UPDATE", sqlstate, times=2, table="rate_limits", after=1)
    verdict = await pumped(retry, lambda: driver.take_rates([rate], now))
    assert verdict.blocked_key is None
    assert await refused_so_far(sql) == 5  # let through, refused twice, then seed and take

    (state,) = await driver.rate_states(10)
    assert state.key == rate.key
    # Taken once: the TAT stands one emission interval (30 s) past now, not two or three.
    assert state.tat == (now + 30_000) * 1000
    # A second start within the interval is held, as after exactly one take.
    held = await driver.take_rates([rate], now)
    assert held.blocked_key == rate.key
