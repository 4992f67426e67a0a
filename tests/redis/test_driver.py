"""What the kit cannot see of the Redis driver: its keys stay under the prefix and go with
retention, its scripts come back after the server forgot them, an unreachable server is a typed
error, and a bad URL is refused before anything connects."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, cast

import anyio
import pytest

from engine import JobRegistry, Jobs, ManualClock, Worker, connect
from engine.drivers import open_driver
from engine.drivers.base import AckWrite, StepWrite
from engine.drivers.urls import report_fix
from engine.errors import DatabaseUrlInvalidError, JobDuplicateError, JobsError
from engine.rate_limits import RateTake
from engine.retention import DAY_MS, DEFAULT_POLICY, Policy, plan
from schemas.errors import ErrorPayload
from schemas.jobs import EnqueueRequest, JobFilter, NackOptions
from schemas.progress import Progress
from schemas.steps import StepRecord

pytest.importorskip("redis", reason="the redis extra is not installed")

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from engine.drivers.redis import RedisDriver, claims
from engine.drivers.redis.codec import dedupe_field
from engine.testing.plugin import AppTransaction
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
from tests.support.fix_lines import run_fix
from tests.support.paced_clock import PacedClock

# Keys that outlive any one job: counters, the schema version, the queue names, the flag that
# says published outbox rows are indexed.
SHARED = {"version", "evseq", "queues", "workerseq", "obpub:built", "byindex:built"}


def _request(n: int, now: int) -> EnqueueRequest:
    return EnqueueRequest(
        id=f"{n:032x}",
        run_id=f"{1000 + n:032x}",
        name="work",
        queue="default",
        idempotency_key=f"k{n}",
        input={"n": n},
        run_at=now,
        max_attempts=3,
    )


async def _keys(driver: RedisDriver) -> set[str]:
    client = Redis.from_url(os.environ["MCP_JOBS_TEST_REDIS_URL"], decode_responses=True)
    try:
        found = {k async for k in client.scan_iter(match=f"{driver.prefix}*", count=1000)}
    finally:
        await client.aclose()
    return {k.removeprefix(driver.prefix) for k in found}


async def test_every_key_a_job_creates_goes_with_retention(jobs: Jobs, clock: ManualClock) -> None:
    driver = cast(RedisDriver, jobs.driver)
    await driver.enqueue([_request(1, clock.now_ms())])
    (claimed,) = await driver.claim("w", 1, 60_000)
    assert await driver.acquire_slots(claimed.record.id, [("job:work", 1)], 90_000) is None
    step = StepRecord(
        job_id=claimed.record.id,
        run_id=claimed.record.run_id,
        name="s",
        status="completed",
        started_at=clock.now_ms(),
    )
    assert await driver.save_steps_many([StepWrite(claimed.record.id, claimed.token, step)]) == [
        None
    ]
    error = ErrorPayload(code="JOB_FAILED", title="t", cause="boom", fix="fix", retryable=True)
    await driver.nack(claimed.record.id, claimed.token, NackOptions(error=error))
    (again,) = await driver.claim("w", 1, 60_000)
    assert await driver.ack_many([AckWrite(again.record.id, again.token, {"ok": True})]) == [None]
    assert {"job:" + claimed.record.id, "ev:" + claimed.record.id} <= await _keys(driver)

    clock.advance(2)
    pruned = await driver.prune(plan(Policy(1, 1, 1, 1), clock.now_ms()), 10)
    assert sum(c.rows for c in pruned) == 1
    assert await _keys(driver) <= SHARED


async def test_every_key_the_optional_capabilities_add_goes_with_retention(
    jobs: Jobs, clock: ManualClock
) -> None:
    # Progress, a waiter row, a rate reservation, a rerun's earlier run: all go with the job.
    driver = cast(RedisDriver, jobs.driver)
    await driver.enqueue([_request(1, clock.now_ms())])
    (claimed,) = await driver.claim("w", 1, 60_000)
    job_id, run_id = claimed.record.id, claimed.record.run_id
    now = clock.now_ms()
    steps = [
        StepWrite(
            job_id,
            claimed.token,
            StepRecord(job_id=job_id, run_id=run_id, name=name, status="completed", started_at=now),
        )
        for name in ("r", "s")
    ]
    assert await driver.save_steps_many(steps) == [None, None]
    progress = Progress(done=1, total=2, at=now, attempt=1)
    assert await driver.save_progress(job_id, claimed.token, progress)
    await driver.await_event(job_id, "signal", "k", None)
    takes = [RateTake("job:work", 1, 60_000, 1)]
    assert (await driver.take_rates(takes, now)).blocked_key is None
    assert (await driver.take_rates(takes, now, job_id)).blocked_key == "job:work"
    assert await driver.ack_many([AckWrite(job_id, claimed.token, None)]) == [None]
    rerun = await driver.rerun(job_id, None, "s", False, "ops", f"{2000:032x}")
    (again,) = await driver.claim("w", 1, 60_000)
    assert await driver.ack_many([AckWrite(job_id, again.token, None)]) == [None]
    await driver.pause("queue", "elsewhere", None, None, now)
    await driver.resume("queue", "elsewhere")
    owned = {"runs:" + job_id, "waiters", "rsv:" + job_id, "steps:" + rerun.run_id}
    assert owned <= await _keys(driver)

    clock.advance(2)
    pruned = await driver.prune(plan(Policy(1, 1, 1, 1), clock.now_ms()), 10)
    assert sum(c.rows for c in pruned) == 1
    # The rate key's TAT is the limit's, not the job's: it stays, as it does on SQL drivers.
    assert await _keys(driver) <= SHARED | {"rate:job:work", "ratekeys"}


async def test_scripts_are_loaded_again_after_the_server_forgot_them(
    jobs: Jobs, clock: ManualClock
) -> None:
    driver = cast(RedisDriver, jobs.driver)
    client = Redis.from_url(os.environ["MCP_JOBS_TEST_REDIS_URL"], decode_responses=True)
    try:
        await client.script_flush()
        await driver.enqueue([_request(1, clock.now_ms())])  # one call by SHA
        (claimed,) = await driver.claim("w", 1, 60_000)
        await client.script_flush()
        outcomes = await driver.ack_many([AckWrite(claimed.record.id, claimed.token, None)])
        assert outcomes == [None]  # pipelined calls by SHA
    finally:
        await client.aclose()
    assert (await driver.get(claimed.record.id)).state == "done"


async def test_an_unreachable_server_is_driver_unavailable(clock: ManualClock) -> None:
    driver = open_driver("redis://127.0.0.1:1/0", clock=clock, connect_timeout_s=0.5)
    try:
        with pytest.raises(JobsError) as raised:
            await driver.migrate()
    finally:
        await driver.close()
    assert raised.value.code == "DRIVER_UNAVAILABLE"
    # The server the driver was given, not whatever $MCP_JOBS_DATABASE_URL holds where it runs.
    assert raised.value.fix == "mcp-jobs db report --database-url redis://127.0.0.1:1/0"
    assert raised.value.__cause__ is not None  # the redis-py error, chained
    # Run as given: the report says what is wrong.
    output = await anyio.to_thread.run_sync(lambda: run_fix(raised.value.fix))
    assert "server: no answer from 127.0.0.1:1 (ConnectionError" in output


@pytest.mark.parametrize(
    ("asked", "said"),
    [
        ("/999", "the server has fewer databases than the number after the URL's host"),
        ("/0?username=no_such_user_{tag}", "the server refused the URL's user or password"),
    ],
)
async def test_a_url_the_server_refuses_is_database_url_invalid(
    clock: ManualClock, asked: str, said: str
) -> None:
    """A database number the server lacks, or a user it does not know, is refused the same way
    every time: not DRIVER_UNAVAILABLE, which an agent would retry and a worker wait on."""
    tag = os.urandom(4).hex()
    server = os.environ["MCP_JOBS_TEST_REDIS_URL"].split("://", 1)[1].split("/", 1)[0]
    url = f"redis://{server}{asked.format(tag=tag)}"
    driver = cast(RedisDriver, open_driver(url, clock=clock))
    try:
        with pytest.raises(JobsError) as raised:
            await driver.migrate()
        report = await driver.server_report()
    finally:
        await driver.close()
    error = raised.value
    assert (error.code, error.retryable) == ("DATABASE_URL_INVALID", False)
    assert isinstance(error, DatabaseUrlInvalidError) and error.answered  # serve keeps serving
    assert said in error.cause
    assert error.fix == report_fix(url)
    assert not report.reachable
    assert report.lines[0].startswith(f"server: {server} answered and refused (")
    assert report.lines[1].startswith(said)


async def test_a_key_another_program_overwrote_is_damage_named_by_a_fix_that_runs(
    database_url: str, clock: ManualClock
) -> None:
    driver = cast(RedisDriver, open_driver(database_url, clock=clock))
    try:
        await driver.migrate()
        client = driver._store.client  # pyright: ignore[reportPrivateUsage]
        await client.set(driver.prefix + "live", "not a set")  # the enqueue's SADD is refused
        with pytest.raises(JobsError) as raised:
            await driver.enqueue([_request(1, clock.now_ms())])
        # Terminal: waiting does not turn the string back into the set.
        error = raised.value
        assert (error.code, error.retryable) == ("STORE_DAMAGED", False)
        assert "WRONGTYPE" in error.cause and "another program" in error.cause
        # The test's URL with its ?prefix=: the report reads that prefix's keys.
        assert error.fix == report_fix(database_url)
        output = await anyio.to_thread.run_sync(lambda: run_fix(error.fix))
        assert f"key {driver.prefix}live: a string, where the driver keeps a set" in output
        assert f"prefix {driver.prefix}: another program writes under it" in output

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


async def test_a_job_hash_another_program_wrote_is_damage_named_in_lists_and_buried_on_claim(
    database_url: str, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A field of a job's hash that is not what the driver writes: reading that job is
    STORE_DAMAGED (not retried, naming the job); a list names it in its place and pages on; a
    claim that takes it settles it dead and hands out the jobs beside it (a worker would stop
    claiming at all, and a row left running would come back at every lease's end)."""
    driver = cast(RedisDriver, open_driver(database_url, clock=clock))
    try:
        await driver.migrate()
        await driver.enqueue([_request(n, clock.now_ms()) for n in (1, 2, 3)])
        client = driver._store.client  # pyright: ignore[reportPrivateUsage]
        first, damaged, third = (_request(n, 0).id for n in (1, 2, 3))
        await client.hset(f"{driver.prefix}job:{damaged}", "input", "not json")

        with pytest.raises(JobsError) as raised:
            await driver.get(damaged)
        error = raised.value
        assert (error.code, error.retryable) == ("STORE_DAMAGED", False)
        assert f"job {damaged}: JSONDecodeError" in error.cause
        assert "input: 'not json'" in run_fix(error.fix)  # the hash as stored
        assert await check_listed_in_place(driver, third, damaged, first) == error.fix
        assert await pages(driver, 1, ("ready",)) == [([third], []), ([], [damaged]), ([first], [])]

        await check_buried_on_claim(driver, damaged, [first, third])
        assert "claimed a job that cannot be read; it is dead now (STORE_DAMAGED)" in caplog.text
        shown = run_fix(error.fix)  # the row as stored: its input, and the damage as its error
        assert "input: 'not json'" in shown and "STORE_DAMAGED" in shown, shown
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
        request = _request(1, clock.now_ms())
        await driver.enqueue([request])
        (claimed,) = await driver.claim("w", 1, 60_000)
        step = StepRecord(
            job_id=request.id,
            run_id=request.run_id,
            name="reserve",
            status="completed",
            output=1,
            started_at=clock.now_ms(),
            attempts=1,
        )
        await driver.save_steps_many([StepWrite(request.id, claimed.token, step)])
        await driver.ack_many([AckWrite(request.id, claimed.token, None)])
        client = driver._store.client  # pyright: ignore[reportPrivateUsage]
        await client.hset(f"{driver.prefix}steps:{request.run_id}", "reserve", "not json")

        reads = [
            (f"job {request.id}, step 'reserve'", driver.load_trace(request.id)),
            (f"run {request.run_id}, step 'reserve'", driver.load_steps(request.run_id)),
            (
                f"job {request.id}, step 'reserve'",
                driver.rerun(request.id, None, "reserve", False, "ops", "f" * 32),
            ),
        ]
        for named, read in reads:
            with pytest.raises(JobsError) as raised:
                await read
            error = raised.value
            assert (error.code, error.retryable) == ("STORE_DAMAGED", False)
            assert f"{named}: " in error.cause, error.cause
            assert run_fix(error.fix) == "reserve: 'not json'\n"

        await client.delete(f"{driver.prefix}steps:{request.run_id}")
        events = f"{driver.prefix}ev:{request.id}"
        await client.zadd(events, {"999|not json": 999})
        with pytest.raises(JobsError) as raised:
            await driver.load_trace(request.id)
        error = raised.value
        assert (error.code, error.retryable) == ("STORE_DAMAGED", False)
        assert f"job {request.id}, event '#999': ValidationError" in error.cause, error.cause
        assert "'999|not json'" in run_fix(error.fix).splitlines()
        job = await driver.get(request.id)
        assert (job.state, job.run_id) == ("done", request.run_id)  # the rerun wrote nothing
    finally:
        await driver.close()


async def test_a_server_out_of_memory_is_storage_full_and_keeps_what_it_held(
    database_url: str, clock: ManualClock
) -> None:
    driver = cast(RedisDriver, open_driver(database_url, clock=clock))
    client = driver._store.client  # pyright: ignore[reportPrivateUsage]
    await driver.migrate()
    (kept,) = await driver.enqueue([_request(1, clock.now_ms())])
    was = await client.config_get("maxmemory*")
    try:
        used = int((await client.info("memory"))["used_memory"])
        await client.config_set("maxmemory-policy", "noeviction")
        await client.config_set("maxmemory", str(max(1, used // 2)))
        with pytest.raises(JobsError) as raised:
            await driver.enqueue([_request(n, clock.now_ms()) for n in range(2, 12)])
    finally:
        await client.config_set("maxmemory", was["maxmemory"])
        await client.config_set("maxmemory-policy", was["maxmemory-policy"])
    try:
        error = raised.value
        assert error.code == "STORAGE_FULL" and error.retryable
        assert error.fix == report_fix(database_url)
        assert "memory: " in await anyio.to_thread.run_sync(lambda: run_fix(error.fix))
        # Nothing of the refused batch went in; what was stored stays.
        page = await driver.list_jobs(JobFilter(limit=20))
        assert [j.id for j in page.jobs] == [kept.id]
    finally:
        await driver.close()


async def test_a_settle_is_held_while_the_server_is_out_of_memory(
    database_url: str, clock: ManualClock
) -> None:
    """An ack refused at `maxmemory` is tried again, as through a dropped connection, and
    lands once memory is freed (here after the second pause); given up, its job would run
    twice."""
    driver = cast(RedisDriver, open_driver(database_url, clock=clock, retry_clock=PacedClock()))
    client = driver._store.client  # pyright: ignore[reportPrivateUsage]
    was = await client.config_get("maxmemory*")

    async def free() -> None:
        await client.config_set("maxmemory", was["maxmemory"])
        await client.config_set("maxmemory-policy", was["maxmemory-policy"])

    try:
        await driver.migrate()
        await driver.enqueue([_request(1, clock.now_ms())])
        (claimed,) = await driver.claim("w", 1, 60_000)
        paced = PacedClock(then=(2, free))
        driver._retry_clock = paced  # pyright: ignore[reportPrivateUsage]
        used = int((await client.info("memory"))["used_memory"])
        await client.config_set("maxmemory-policy", "noeviction")
        await client.config_set("maxmemory", str(max(1, used // 2)))
        outcomes = await driver.ack_many([AckWrite(claimed.record.id, claimed.token, None)])
        assert (outcomes, paced.pauses) == ([None], [50, 100])
        assert (await driver.get(claimed.record.id)).state == "done"
    finally:
        await free()
        await driver.close()


def _dropping(driver: RedisDriver, drops: int) -> list[int]:
    """The driver's pipelines lose their connection `drops` times, then reach the server."""
    real = driver._store.pipelined
    sent: list[int] = []

    async def flaky(script: Any, calls: Any) -> list[Any]:
        sent.append(len(calls))
        if len(sent) <= drops:
            raise RedisConnectionError("Connection closed by server.")
        return await real(script, calls)

    driver._store.pipelined = flaky  # type: ignore[method-assign]
    return sent


async def test_a_settle_is_held_through_dropped_connections(
    database_url: str, clock: ManualClock
) -> None:
    """A connection cut under an ack (redis-py's own retries spent) does not give the ack up:
    it is tried again, 50 ms doubling, until it lands; given up, its job would run twice."""
    paced = PacedClock()
    driver = cast(RedisDriver, open_driver(database_url, clock=clock, retry_clock=paced))
    try:
        await driver.migrate()
        await driver.enqueue([_request(1, clock.now_ms())])
        (claimed,) = await driver.claim("w", 1, 60_000)
        sent = _dropping(driver, 4)
        outcomes = await driver.ack_many([AckWrite(claimed.record.id, claimed.token, None)])
        assert (outcomes, len(sent), paced.pauses) == ([None], 5, [50, 100, 200, 400])
        assert (await driver.get(claimed.record.id)).state == "done"
    finally:
        await driver.close()


def _reply_lost(driver: RedisDriver, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The first ack pipeline and the first NACK script reach the server and run, then lose
    their connection before the reply: the settle landed, and its caller cannot know it."""
    real_pipelined = driver._store.pipelined  # pyright: ignore[reportPrivateUsage]
    real_nack = claims.NACK_SCRIPT
    sent: list[int] = []

    async def lossy(run: Any, *args: Any) -> Any:
        sent.append(1)
        answer = await run(*args)
        if len(sent) == 1:
            raise RedisConnectionError("Connection closed by server.")
        return answer

    driver._store.pipelined = lambda *a: lossy(real_pipelined, *a)  # type: ignore[method-assign]
    monkeypatch.setattr(claims, "NACK_SCRIPT", lambda *a: lossy(real_nack, *a))
    return sent


async def test_a_settle_whose_reply_was_lost_succeeds_when_tried_again(
    database_url: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The try after one that landed finds its own settle: the ack succeeds and the nack answers
    the row it left, as on PostgreSQL. Without that the finished job was reported lost."""
    paced = PacedClock()
    driver = cast(RedisDriver, open_driver(database_url, clock=clock, retry_clock=paced))
    try:
        await driver.migrate()
        await driver.enqueue([_request(1, clock.now_ms()), _request(2, clock.now_ms())])
        first, second = await driver.claim("w", 2, 60_000)
        sent = _reply_lost(driver, monkeypatch)
        outcomes = await driver.ack_many([AckWrite(first.record.id, first.token, {"ok": 1})])
        assert (outcomes, len(sent), paced.pauses) == ([None], 2, [50])
        record = await driver.get(first.record.id)
        assert (record.state, record.output) == ("done", {"ok": 1})

        sent.clear()
        failure = ErrorPayload(code="JOB_FAILED", title="t", cause="c", fix="f", retryable=False)
        options = NackOptions(error=failure, fail=True)
        nacked = await driver.nack(second.record.id, second.token, options)
        assert (nacked.state, len(sent)) == ("failed", 2)

        # Only the token that settled it, and only on a try after one that may have landed.
        stale = await driver.ack_many([AckWrite(first.record.id, second.token, None)])
        assert [type(e).__name__ for e in stale] == ["JobSlotLostError"]
        twice = await driver.ack_many([AckWrite(first.record.id, first.token, None)])
        assert [type(e).__name__ for e in twice] == ["JobSlotLostError"]
    finally:
        await driver.close()


async def test_a_held_settle_fails_typed_at_its_deadline(
    database_url: str, clock: ManualClock
) -> None:
    paced = PacedClock()
    driver = cast(
        RedisDriver,
        open_driver(database_url, clock=clock, retry_clock=paced, settle_retry_ms=1_000),
    )
    try:
        await driver.migrate()
        await driver.enqueue([_request(1, clock.now_ms())])
        (claimed,) = await driver.claim("w", 1, 60_000)
        sent = _dropping(driver, 1_000)
        with pytest.raises(JobsError) as raised:
            await driver.ack_many([AckWrite(claimed.record.id, claimed.token, None)])
        assert raised.value.code == "DRIVER_UNAVAILABLE"
        # The last try goes at the deadline itself.
        assert (paced.pauses, paced.now, len(sent)) == ([50, 100, 200, 400, 250], 1_000, 6)
        assert (await driver.get(claimed.record.id)).state == "running"
    finally:
        await driver.close()


@pytest.mark.parametrize("bad", [-1, 1.5, True, "5", 86_400_001])
def test_a_settle_hold_that_is_not_a_whole_span_is_refused(bad: object) -> None:
    with pytest.raises(JobsError) as raised:
        open_driver("redis://127.0.0.1:1/0", settle_retry_ms=bad)
    assert raised.value.code == "INVALID_ARGUMENT"
    assert "settle_retry_ms" in raised.value.cause


@pytest.mark.parametrize(
    "url", ["redis://", "redis://localhost/zero", "redis://localhost:6379/0/extra"]
)
def test_a_url_redis_could_not_use_is_refused_before_connecting(url: str) -> None:
    with pytest.raises(JobsError) as raised:
        open_driver(url)
    assert raised.value.code == "DATABASE_URL_INVALID"
    assert isinstance(raised.value, DatabaseUrlInvalidError) and not raised.value.answered


def test_the_prefix_comes_from_the_url_or_the_option() -> None:
    assert cast(RedisDriver, open_driver("redis://localhost/0?prefix=app:")).prefix == "app:"
    given = open_driver("redis://localhost/0", prefix="other:")
    assert cast(RedisDriver, given).prefix == "other:"
    assert cast(RedisDriver, open_driver("rediss://localhost/0")).prefix == "mcp-jobs:"


async def test_stats_walk_the_recent_window_a_chunk_at_a_time_and_stop_past_the_cap(
    jobs: Jobs, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recent done rows are read newest first, a chunk at a time: a run of equal finish
    times (one ack batch) spans chunks without a row lost or read twice, and the walk stops at
    the first row of a state past the cap that is older than its cap-th newest. The counts are
    rules.queue_stats's; the rows read are the cap and its ties, not history, whatever the
    filter."""
    from engine import rules
    from engine.drivers.redis import recent_settled

    monkeypatch.setattr(rules, "RECENT_SETTLED_CAP", 4)
    monkeypatch.setattr(recent_settled, "CHUNK", 2)
    driver = cast(RedisDriver, jobs.driver)
    start = clock.now_ms()
    await driver.enqueue([_request(n, start) for n in range(60)])
    held = {c.record.id: c.token for c in await driver.claim("w", 60, 600_000)}
    ids = sorted(held)
    # 50 rows of history at a ms each, then batches of 3, 5 and 2 sharing a time each.
    batches = [[i] for i in ids[:50]] + [ids[50:53], ids[53:58], ids[58:60]]
    for at, batch in enumerate(batches):
        clock.set(start + at)
        await driver.ack_many([AckWrite(i, held[i], None) for i in batch])
    read: list[int] = []
    script = recent_settled.RECENT_SCRIPT

    async def counted(client: Any, args: Any) -> Any:
        out = await script(client, args)
        read.append(int(out[0]))
        return out

    monkeypatch.setattr(recent_settled, "RECENT_SCRIPT", counted)
    (stats,) = await driver.stats()
    # The 4th newest is in the batch of 5: the window holds it and the batch of 2.
    assert (stats.done, stats.settled_window_ms) == (7, 1)
    records = [await driver.get(i, None) for i in ids]
    assert [stats] == rules.queue_stats(records, clock.now_ms())
    # The walk stops at the first row past the cap older than the 4th newest.
    assert sum(read) == 7, read
    # The window is the whole history's: a filter that matches no row reads no more, and the
    # queue reads as it does among all.
    read.clear()
    assert await driver.stats(tenant_id="nobody") == []
    assert sum(read) == 7, read
    (named,) = await driver.stats(["default"])
    assert (named.done, named.settled_window_ms) == (7, 1)


async def test_a_prune_pass_reads_no_row_that_every_rule_keeps(
    jobs: Jobs, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The settled rows are walked oldest first only up to Cutoffs.latest: a pass over a history
    its rules keep costs nothing, however long that history is."""
    driver = cast(RedisDriver, jobs.driver)
    store = driver._store  # pyright: ignore[reportPrivateUsage]
    start = clock.now_ms()
    await driver.enqueue([_request(n, start) for n in range(10)])
    held = {c.record.id: c.token for c in await driver.claim("w", 10, 30 * DAY_MS)}
    ids = sorted(held)
    for n, job_id in enumerate(ids):  # finished a day apart
        clock.set(start + n * DAY_MS)
        await driver.ack_many([AckWrite(job_id, held[job_id], None)])
    clock.set(start + 12 * DAY_MS)
    read: list[str] = []
    walk = store.zrangebyscore

    async def counted(key: str, upper: str, offset: int, num: int) -> list[str]:
        found = await walk(key, upper, offset, num)
        read.extend(found)
        return found

    monkeypatch.setattr(store, "zrangebyscore", counted)
    # Done is kept 7 days: the rows of days 0-4 go, and those of days 5-9 are not even read.
    pruned = await driver.prune(plan(DEFAULT_POLICY, clock.now_ms()), 100)
    assert sum(c.rows for c in pruned) == 5
    assert sorted(read) == ids[:5]
    read.clear()
    assert await driver.prune(plan(DEFAULT_POLICY, clock.now_ms()), 100) == []
    assert read == []


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
        await client.hset(keys.sched, "scheduler", "first|abc")
        await client.hset(keys.leaders, LEASE, "abc")

    await check_scheduler_goes_on(jobs, registry, clock.advance, spoil, caplog)


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
    requests = [_request(n, clock.now_ms()) for n in (1, 2)]
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
