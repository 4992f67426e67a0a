"""What the kit cannot see of the Redis driver: its keys stay under the prefix and go with
retention, its scripts come back after the server forgot them, a settle is held through a
server out of memory or dropped connections, and the stats and the pruner read in bounded
chunks. What it makes of its URL: test_urls.py; of keys another program wrote: test_damaged.py."""

from __future__ import annotations

import os
from typing import Any, cast

import anyio
import pytest

from engine import Jobs, ManualClock
from engine.drivers import open_driver
from engine.drivers.base import AckWrite, StepWrite
from engine.drivers.urls import report_fix
from engine.errors import JobsError
from engine.rate_limits import RateTake
from engine.retention import DAY_MS, DEFAULT_POLICY, Policy, plan
from schemas.errors import ErrorPayload
from schemas.jobs import JobFilter, NackOptions
from schemas.progress import Progress
from schemas.steps import StepRecord

pytest.importorskip("redis", reason="the redis extra is not installed")

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from engine.drivers.redis import RedisDriver, claims
from engine.testing.requests import numbered as request
from tests.support.fix_lines import run_fix
from tests.support.paced_clock import PacedClock

# Keys that outlive any one job: counters, the schema version, the queue names, the flag that
# says published outbox rows are indexed.
SHARED = {"version", "evseq", "queues", "workerseq", "obpub:built", "byindex:built"}


async def _keys(driver: RedisDriver) -> set[str]:
    client = Redis.from_url(os.environ["MCP_JOBS_TEST_REDIS_URL"], decode_responses=True)
    try:
        found = {k async for k in client.scan_iter(match=f"{driver.prefix}*", count=1000)}
    finally:
        await client.aclose()
    return {k.removeprefix(driver.prefix) for k in found}


async def test_every_key_a_job_creates_goes_with_retention(jobs: Jobs, clock: ManualClock) -> None:
    driver = cast(RedisDriver, jobs.driver)
    await driver.enqueue([request(1, clock.now_ms())])
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
    await driver.enqueue([request(1, clock.now_ms())])
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
        await driver.enqueue([request(1, clock.now_ms())])  # one call by SHA
        (claimed,) = await driver.claim("w", 1, 60_000)
        await client.script_flush()
        outcomes = await driver.ack_many([AckWrite(claimed.record.id, claimed.token, None)])
        assert outcomes == [None]  # pipelined calls by SHA
    finally:
        await client.aclose()
    assert (await driver.get(claimed.record.id)).state == "done"


async def test_a_server_out_of_memory_is_storage_full_and_keeps_what_it_held(
    database_url: str, clock: ManualClock
) -> None:
    driver = cast(RedisDriver, open_driver(database_url, clock=clock))
    client = driver._store.client  # pyright: ignore[reportPrivateUsage]
    await driver.migrate()
    (kept,) = await driver.enqueue([request(1, clock.now_ms())])
    was = await client.config_get("maxmemory*")
    try:
        used = int((await client.info("memory"))["used_memory"])
        await client.config_set("maxmemory-policy", "noeviction")
        await client.config_set("maxmemory", str(max(1, used // 2)))
        with pytest.raises(JobsError) as raised:
            await driver.enqueue([request(n, clock.now_ms()) for n in range(2, 12)])
    finally:
        await client.config_set("maxmemory", was["maxmemory"])
        await client.config_set("maxmemory-policy", was["maxmemory-policy"])
    try:
        error = raised.value
        assert error.code == "STORAGE_FULL" and error.retryable
        # Its fix raises maxmemory (run as printed in test_full_store.py, on a server of its
        # own); the report shows the memory.
        assert 'config_set("maxmemory", sys.argv[2])' in error.fix and error.fix.endswith("mb")
        report = report_fix(database_url)
        assert "memory: " in await anyio.to_thread.run_sync(lambda: run_fix(report))
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
        await driver.enqueue([request(1, clock.now_ms())])
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
        await driver.enqueue([request(1, clock.now_ms())])
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
        await driver.enqueue([request(1, clock.now_ms()), request(2, clock.now_ms())])
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
        await driver.enqueue([request(1, clock.now_ms())])
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
    await driver.enqueue([request(n, start) for n in range(60)])
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
    await driver.enqueue([request(n, start) for n in range(10)])
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
