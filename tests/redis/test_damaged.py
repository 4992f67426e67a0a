"""What another program wrote under the Redis driver's keys: a key of another type, a job hash,
step, event, worker, pause, task state, rate key, descriptor, outbox row, backfill run, inbound
event or dedupe field the driver did not write is named as damage by a fix that runs, or passed
over, and never stops the rest."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import anyio
import pytest

from engine import JobRegistry, Jobs, ManualClock, Worker, connect
from engine.drivers import open_driver
from engine.drivers.base import AckWrite, StepWrite
from engine.drivers.urls import report_fix
from engine.errors import JobDuplicateError, JobsError
from engine.retention import DAY_MS
from schemas.steps import StepRecord

pytest.importorskip("redis", reason="the redis extra is not installed")

from engine.drivers.redis import RedisDriver
from engine.drivers.redis.codec import dedupe_field
from engine.drivers.redis.report import named
from engine.testing.plugin import AppTransaction
from engine.testing.requests import numbered as request
from tests.mcp.support import declare_app
from tests.support.damaged_ledgers import (
    LEASE,
    Overwrite,
    check_a_wait_fails_on_a_damaged_event,
    check_ledger_row_is_damage,
    check_outbox_passes_over,
    check_pause_details_left_out,
    check_presence_passes_over,
    check_pruner_forgets_a_damaged_descriptor,
    check_rate_limits_go_on,
    check_scheduler_goes_on,
    declare_waiter,
)
from tests.support.damaged_rows import check_buried_on_claim, check_listed_in_place, pages
from tests.support.earlier_task_state import check_a_claim_continues_from
from tests.support.fix_lines import run_fix


async def test_a_key_another_program_overwrote_is_damage_named_by_a_fix_that_runs(
    database_url: str, clock: ManualClock
) -> None:
    driver = cast(RedisDriver, open_driver(database_url, clock=clock))
    try:
        await driver.migrate()
        client = driver._store.client  # pyright: ignore[reportPrivateUsage]
        await client.set(driver.prefix + "live", "not a set")  # the enqueue's SADD is refused
        with pytest.raises(JobsError) as raised:
            await driver.enqueue([request(1, clock.now_ms())])
        # Terminal: waiting does not turn the string back into the set.
        error = raised.value
        assert (error.code, error.retryable) == ("STORE_DAMAGED", False)
        assert "WRONGTYPE" in error.cause and "another program" in error.cause
        # The test's URL with its ?prefix=: the report reads that prefix's keys.
        assert error.fix == report_fix(database_url)
        output = await anyio.to_thread.run_sync(lambda: run_fix(error.fix))
        assert f"key {driver.prefix}live: a string, where the driver keeps a set" in output
        assert f"{named(driver.prefix)}: another program writes under it" in output

        # The version key too: the report does not take it for a store never migrated.
        await client.delete(driver.prefix + "version")
        await client.hset(driver.prefix + "version", "v", "1")
        output = await anyio.to_thread.run_sync(lambda: run_fix(error.fix))
        assert f"key {driver.prefix}version: a hash, where the driver keeps a string" in output
        assert "no jobs stored yet" not in output
        await client.delete(driver.prefix + "live", driver.prefix + "version")
    finally:
        await driver.close()
    assert report_fix("redis://app:s3cret@cache:6379/0") == (
        'mcp-jobs db report --database-url "$MCP_JOBS_DATABASE_URL"'
    )


# A field another program set, what reading the job says of it, and the line of the fix that
# shows it as stored (after the claim): a value that is not JSON, and counts no job can have
# (it ran with attempt -4, or went dead as if its lease had expired on each of its 0 attempts).
HAND_EDITS = [
    ("input", "not json", "JSONDecodeError", "input: 'not json'"),
    (
        "max_attempts",
        "0",
        "max_attempts: Input should be greater than or equal to 1",
        "max_attempts: '0'",
    ),
    ("attempt", "-5", "attempt: Input should be greater than or equal to 0", "attempt: '-4'"),
]


@pytest.mark.parametrize(("field", "value", "cause", "stored"), HAND_EDITS)
async def test_a_job_hash_another_program_wrote_is_damage_named_in_lists_and_buried_on_claim(
    database_url: str,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
    field: str,
    value: str,
    cause: str,
    stored: str,
) -> None:
    """A field of a job's hash that is not what the driver writes: reading that job is
    STORE_DAMAGED (not retried, naming the job); a list names it in its place and pages on; a
    claim that takes it settles it dead and hands out the jobs beside it (a worker would stop
    claiming at all, and a row left running would come back at every lease's end)."""
    driver = cast(RedisDriver, open_driver(database_url, clock=clock))
    try:
        await driver.migrate()
        await driver.enqueue([request(n, clock.now_ms()) for n in (1, 2, 3)])
        client = driver._store.client  # pyright: ignore[reportPrivateUsage]
        first, damaged, third = (request(n, 0).id for n in (1, 2, 3))
        await client.hset(f"{driver.prefix}job:{damaged}", field, value)

        with pytest.raises(JobsError) as raised:
            await driver.get(damaged)
        error = raised.value
        assert (error.code, error.retryable) == ("STORE_DAMAGED", False)
        assert f"job {damaged}: " in error.cause and cause in error.cause, error.cause
        assert f"{field}: '{value}'" in run_fix(error.fix)  # the hash as stored
        assert await check_listed_in_place(driver, third, damaged, first) == error.fix
        assert await pages(driver, 1, ("ready",)) == [([third], []), ([], [damaged]), ([first], [])]

        await check_buried_on_claim(driver, damaged, [first, third])
        assert "claimed a job that cannot be read; it is dead now (STORE_DAMAGED)" in caplog.text
        shown = run_fix(error.fix)  # the row as stored, and the damage as its error
        assert stored in shown and "STORE_DAMAGED" in shown, shown
        # Groups short of the failing set (an older build's rows): the stats count the rows one
        # by one, the buried one among them, from the fields a claim's burial left readable.
        await client.delete(f"{driver.prefix}failgroups")
        for tenant in (None, "nobody"):
            dead = {s.queue: s.dead for s in await driver.stats(None, tenant_id=tenant)}
            assert dead.get("default", 0) == (1 if tenant is None else 0), dead
        await client.delete(f"{driver.prefix}job:{damaged}")
    finally:
        await driver.close()


async def test_a_step_or_event_another_program_wrote_is_damage_named_with_its_job(
    database_url: str, clock: ManualClock
) -> None:
    """A step's value or an event's member that is not what the driver writes: the job's
    trace, its run's steps and a rerun from the step are STORE_DAMAGED (not retried) naming
    the job, or the run where the caller knows only the run (a replay), and the step or event;
    the fix prints them as stored. The job's own hash reads as before."""
    driver = cast(RedisDriver, open_driver(database_url, clock=clock))
    try:
        await driver.migrate()
        made = request(1, clock.now_ms())
        await driver.enqueue([made])
        (claimed,) = await driver.claim("w", 1, 60_000)
        step = StepRecord(
            job_id=made.id,
            run_id=made.run_id,
            name="reserve",
            status="completed",
            output=1,
            started_at=clock.now_ms(),
            attempts=1,
        )
        await driver.save_steps_many([StepWrite(made.id, claimed.token, step)])
        await driver.ack_many([AckWrite(made.id, claimed.token, None)])
        client = driver._store.client  # pyright: ignore[reportPrivateUsage]
        await client.hset(f"{driver.prefix}steps:{made.run_id}", "reserve", "not json")

        reads = [
            (f"job {made.id}, step 'reserve'", driver.load_trace(made.id)),
            (f"run {made.run_id}, step 'reserve'", driver.load_steps(made.run_id)),
            (
                f"job {made.id}, step 'reserve'",
                driver.rerun(made.id, None, "reserve", False, "ops", "f" * 32),
            ),
        ]
        for named, read in reads:
            with pytest.raises(JobsError) as raised:
                await read
            error = raised.value
            assert (error.code, error.retryable) == ("STORE_DAMAGED", False)
            assert f"{named}: " in error.cause, error.cause
            assert run_fix(error.fix) == "reserve: 'not json'\n"

        await client.delete(f"{driver.prefix}steps:{made.run_id}")
        events = f"{driver.prefix}ev:{made.id}"
        await client.zadd(events, {"999|not json": 999})
        with pytest.raises(JobsError) as raised:
            await driver.load_trace(made.id)
        error = raised.value
        assert (error.code, error.retryable) == ("STORE_DAMAGED", False)
        assert f"job {made.id}, event '#999': ValidationError" in error.cause, error.cause
        assert "'999|not json'" in run_fix(error.fix).splitlines()
        job = await driver.get(made.id)
        assert (job.state, job.run_id) == ("done", made.run_id)  # the rerun wrote nothing
    finally:
        await driver.close()


async def test_a_replay_that_meets_a_damaged_step_fails_the_job_for_good(
    database_url: str, clock: ManualClock, registry: JobRegistry
) -> None:
    """A replay reads its run's steps by the run alone: a value another program wrote there
    fails the job for good (retrying would read it again), naming the run and the step, with
    the fix that prints them; other jobs run."""
    declare_app(registry)  # "fulfil" reserves, then sleeps 10 s; "greet"
    jobs = await connect(database_url, clock=clock, registry=registry)
    try:
        order = await jobs.enqueue("fulfil", {"order_id": 7})
        await Worker(jobs).run_until_idle()
        run_id = (await jobs.get(order.id)).run_id
        driver = cast(RedisDriver, jobs.driver)
        await driver._store.client.hset(  # pyright: ignore[reportPrivateUsage]
            f"{driver.prefix}steps:{run_id}", "reserve", "not json"
        )
        greeting = await jobs.enqueue("greet", {"user_id": 1})
        clock.advance(10_000)
        await Worker(jobs).run_until_idle()

        assert (await jobs.get(greeting.id)).state == "done"
        failed = await jobs.get(order.id)
        error = failed.last_error
        assert failed.state == "failed" and error is not None, failed
        assert error.code == "STORE_DAMAGED" and not error.retryable
        assert f"run {run_id}, step 'reserve'" in error.cause, error.cause
        assert "reserve: 'not json'" in run_fix(error.fix).splitlines()  # beside "settle"
    finally:
        await jobs.close()


@pytest.fixture
def redis_driver(jobs: Jobs) -> RedisDriver:
    return cast(RedisDriver, jobs.driver)


def _hset(driver: RedisDriver, key: Callable[[str], str], field: Callable[[str], str]) -> Overwrite:
    """Another program's HSET of a value the driver never writes."""

    async def overwrite(row_id: str) -> None:
        client = driver._store.client  # pyright: ignore[reportPrivateUsage]
        await client.hset(key(row_id), field(row_id), "not json")

    return overwrite


async def test_a_worker_row_another_program_wrote_is_passed_over_and_dropped_at_a_beat(
    redis_driver: RedisDriver, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    keys = redis_driver._store.keys  # pyright: ignore[reportPrivateUsage]
    overwrite = _hset(redis_driver, lambda _: keys.workers, lambda worker_id: worker_id)
    await check_presence_passes_over(redis_driver, clock.now_ms(), overwrite, caplog)


async def test_a_pause_another_program_wrote_still_holds_and_resuming_lifts_it(
    redis_driver: RedisDriver, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    keys = redis_driver._store.keys  # pyright: ignore[reportPrivateUsage]
    overwrite = _hset(redis_driver, lambda _: keys.pauses, lambda queue: f"queue:{queue}")
    stray = _hset(redis_driver, lambda _: keys.pauses, lambda name: f"no-kind:{name}")
    await check_pause_details_left_out(
        redis_driver, clock.now_ms(), overwrite, caplog, lambda: stray("x")
    )


async def test_a_task_state_and_leases_another_program_wrote_leave_the_scheduler_going(
    jobs: Jobs,
    registry: JobRegistry,
    redis_driver: RedisDriver,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    keys = redis_driver._store.keys  # pyright: ignore[reportPrivateUsage]

    async def spoil(task: str) -> None:
        client = redis_driver._store.client  # pyright: ignore[reportPrivateUsage]
        await client.hset(keys.tasks, task, "abc")
        await client.hset(keys.leaders, LEASE, "abc")

    await check_scheduler_goes_on(jobs, registry, clock.advance, spoil, caplog)


async def test_a_task_state_an_earlier_version_wrote_is_claimed_from(
    redis_driver: RedisDriver,
) -> None:
    keys = redis_driver._store.keys  # pyright: ignore[reportPrivateUsage]
    client = redis_driver._store.client  # pyright: ignore[reportPrivateUsage]
    await client.hset(keys.tasks, "t", "100|5")  # "<last fired>|<updated>", as it wrote
    await check_a_claim_continues_from(redis_driver, "t", 100)


async def test_a_rate_key_and_reservation_another_program_wrote_leave_the_jobs_running(
    jobs: Jobs, registry: JobRegistry, redis_driver: RedisDriver, clock: ManualClock
) -> None:
    keys = redis_driver._store.keys  # pyright: ignore[reportPrivateUsage]
    client = redis_driver._store.client  # pyright: ignore[reportPrivateUsage]

    def spoil(key: Callable[[str], str]) -> Overwrite:
        async def overwrite(name: str) -> None:
            await client.set(key(name), "not json")

        return overwrite

    await check_rate_limits_go_on(
        jobs, registry, clock.advance, spoil(keys.rate), spoil(keys.reservation)
    )
    await client.set(keys.rate("job:limited"), "[]")
    assert await redis_driver.forget_idle_rates(0, 10) == 1  # no take can read it


async def test_a_descriptor_another_program_wrote_is_forgotten_by_the_pruner(
    jobs: Jobs, registry: JobRegistry, redis_driver: RedisDriver, clock: ManualClock
) -> None:
    keys = redis_driver._store.keys  # pyright: ignore[reportPrivateUsage]
    spoil = _hset(redis_driver, lambda _: keys.desc, lambda name: name)
    await check_pruner_forgets_a_damaged_descriptor(jobs, registry, clock.advance, spoil)


async def test_an_outbox_row_another_program_wrote_is_passed_over(
    redis_driver: RedisDriver,
    database_url: str,
    app_transaction: AppTransaction,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    keys = redis_driver._store.keys  # pyright: ignore[reportPrivateUsage]
    overwrite = _hset(redis_driver, keys.outbox_row, lambda _: "request")
    requests = [request(n, clock.now_ms()) for n in (1, 2)]
    await check_outbox_passes_over(
        redis_driver,
        database_url,
        app_transaction,
        requests,
        overwrite,
        caplog,
        clock.advance,
    )


async def test_a_backfill_run_another_program_wrote_is_damage_named_by_its_run(
    redis_driver: RedisDriver, clock: ManualClock
) -> None:
    keys = redis_driver._store.keys  # pyright: ignore[reportPrivateUsage]
    overwrite = _hset(redis_driver, lambda _: keys.backfills, lambda run_id: run_id)
    error = await check_ledger_row_is_damage(redis_driver, clock.now_ms(), overwrite)
    assert run_fix(error.fix) == "'not json'\n"


async def test_an_inbound_event_another_program_wrote_fails_its_waiter_for_good(
    jobs: Jobs, registry: JobRegistry, redis_driver: RedisDriver, clock: ManualClock
) -> None:
    keys = redis_driver._store.keys  # pyright: ignore[reportPrivateUsage]
    overwrite = _hset(redis_driver, lambda _: keys.inbound, lambda event_id: event_id)
    error = await check_a_wait_fails_on_a_damaged_event(jobs, registry, overwrite)
    assert run_fix(error.fix) == "'not json'\n"
    # The pruner, past the event's window, removes it without reading where it was sent.
    assert await redis_driver.prune_events(clock.now_ms() + 30 * DAY_MS) == 1


async def test_a_dedupe_field_another_program_wrote_is_set_right_to_its_live_job(
    jobs: Jobs, registry: JobRegistry, redis_driver: RedisDriver
) -> None:
    """A dedupe field naming no live job: an enqueue of its key answers the live job that holds
    it (before: a bare TypeError, and with on_conflict='error' a duplicate naming the stray
    id), and once no job holds it the next enqueue, or a retry, takes the key."""
    waiter = declare_waiter(registry)
    first = await jobs.get((await jobs.enqueue(waiter, {"order_id": 7})).id)
    store = redis_driver._store  # pyright: ignore[reportPrivateUsage]
    field = dedupe_field(first.name, None, first.idempotency_key)

    async def spoil() -> None:
        await store.client.hset(store.keys.dedupe, field, "stray")

    await spoil()
    again = await jobs.enqueue(waiter, {"order_id": 7})
    assert (again.id, again.deduped) == (first.id, True)
    assert await store.client.hget(store.keys.dedupe, field) == first.id
    await spoil()
    with pytest.raises(JobDuplicateError) as refused:
        await jobs.enqueue(waiter, {"order_id": 7}, on_conflict="error")
    assert refused.value.details["job_id"] == first.id
    assert (await jobs.cancel(first.id)).state == "cancelled"
    await spoil()
    second = await jobs.enqueue(waiter, {"order_id": 7})
    assert (second.id != first.id, second.deduped) == (True, False)
    await spoil()
    with pytest.raises(JobDuplicateError) as held:
        await jobs.retry(first.id, include_cancelled=True)
    assert held.value.details["job_id"] == second.id
    assert (await jobs.cancel(second.id)).state == "cancelled"
    await spoil()
    assert (await jobs.retry(first.id, include_cancelled=True)).state == "ready"
    assert await store.client.hget(store.keys.dedupe, field) == first.id
