"""What the kit cannot see of the NATS driver: racing processes (each its own connection) make
one job of one key, claim one job once, share caps and hold each lease once; a wake-up reaches
another process's idle worker without polling; a crashed enqueue's intent is rolled forward;
retention leaves no key of a job behind; a bad URL is refused before anything connects."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.lowlevel
import pytest

from engine import JobRegistry, Jobs, ManualClock, Worker
from engine.drivers import open_driver
from engine.drivers.base import AckWrite, StepWrite
from engine.drivers.urls import migrate_fix
from engine.errors import JobDuplicateError, JobsError
from engine.ids import new_id
from engine.pruner import Pruner
from engine.retention import DEFAULT_AUDIT_MS, Policy, plan
from engine.rules import dedupe_key
from schemas.errors import ErrorPayload
from schemas.jobs import JobFilter, NackOptions
from schemas.steps import StepRecord

pytest.importorskip("nats", reason="the nats extra is not installed")

import nats.errors

from engine.drivers.nats import NatsDriver, keys
from engine.drivers.nats import enqueue as enqueue_module
from engine.drivers.nats.codec import JobDoc, dumps, encode_doc
from engine.drivers.nats.rate_limits import KEYS_KEPT
from engine.rate_limits import RateTake
from engine.rules import new_record
from engine.testing.plugin import AppTransaction
from engine.testing.requests import numbered as _request
from tests.support.damaged_ledgers import (
    LEASE,
    Overwrite,
    check_caps_go_on,
    check_ledger_row_is_damage,
    check_outbox_passes_over,
    check_pause_details_left_out,
    check_presence_passes_over,
    check_pruner_forgets_a_damaged_descriptor,
    check_rate_limits_go_on,
    check_scheduler_goes_on,
    declare_waiter,
)
from tests.support.damaged_rows import pages
from tests.support.earlier_task_state import check_a_claim_continues_from
from tests.support.fix_lines import run_fix
from tests.support.paced_clock import PacedClock
from tests.support.ports import free_port

# Keys that outlive any one job.
SHARED = {"version"}
RACERS = 50


@pytest.fixture
async def drivers(
    jobs: Jobs, database_url: str, clock: ManualClock
) -> AsyncIterator[list[NatsDriver]]:
    """Five more drivers on the same bucket, each with its own connection (as processes)."""
    opened = [cast(NatsDriver, open_driver(database_url, clock=clock)) for _ in range(5)]
    for driver in opened:
        await driver.migrate()
    try:
        yield opened
    finally:
        for driver in opened:
            await driver.close()


async def _keys(driver: NatsDriver) -> set[str]:
    store = await driver._open()
    try:
        return set(await store.kv.keys())
    except Exception as exc:  # nats-py raises NoKeysError for an empty bucket
        if type(exc).__name__ == "NoKeysError":
            return set()
        raise


async def test_fifty_racing_enqueues_of_one_key_make_one_job(
    drivers: list[NatsDriver], clock: ManualClock
) -> None:
    now = clock.now_ms()
    requests = [_request(n, now, key="same") for n in range(RACERS)]
    with anyio.fail_after(30):
        results = await asyncio.gather(
            *(drivers[n % len(drivers)].enqueue([r]) for n, r in enumerate(requests))
        )
    flat = [r for (r,) in results]
    assert len({r.id for r in flat}) == 1
    assert sum(not r.deduped for r in flat) == 1
    page = await drivers[0].list_jobs(JobFilter(limit=100))
    assert [j.id for j in page.jobs] == [flat[0].id]


async def test_racing_claimants_take_one_job_once(
    drivers: list[NatsDriver], clock: ManualClock
) -> None:
    await drivers[0].enqueue([_request(1, clock.now_ms())])
    with anyio.fail_after(30):
        claims = await asyncio.gather(*(d.claim(f"w{n}", 1, 60_000) for n, d in enumerate(drivers)))
    assert sum(len(c) for c in claims) == 1


async def test_a_cap_of_one_admits_one_process(
    drivers: list[NatsDriver], clock: ManualClock
) -> None:
    expires = clock.now_ms() + 60_000
    with anyio.fail_after(30):
        outcomes = await asyncio.gather(
            *(d.acquire_slots(f"job{n}", [("job:work", 1)], expires) for n, d in enumerate(drivers))
        )
    assert sorted(outcomes, key=str) == [None] + ["job:work"] * (len(drivers) - 1)


async def test_one_process_holds_each_lease(drivers: list[NatsDriver]) -> None:
    with anyio.fail_after(30):
        led = await asyncio.gather(
            *(d.lead("task:t", f"s{n}", 60_000) for n, d in enumerate(drivers))
        )
    assert sum(led) == 1


async def test_an_enqueue_in_one_process_wakes_an_idle_worker_in_another(
    drivers: list[NatsDriver], clock: ManualClock
) -> None:
    idle, other = drivers[0], drivers[1]
    await idle.wait_for_work(0)  # consume anything pending
    with anyio.fail_after(10):
        # The manual clock never moves: only the server's push can end this wait.
        async with anyio.create_task_group() as tg:
            woke = anyio.Event()

            async def wait() -> None:
                await idle.wait_for_work(3_600_000)
                woke.set()

            tg.start_soon(wait)
            await anyio.lowlevel.checkpoint()  # the waiter is waiting before the enqueue
            await other.enqueue([_request(7, clock.now_ms())])
            await woke.wait()


async def test_a_crashed_enqueues_intent_is_rolled_forward_not_lost(
    jobs: Jobs, clock: ManualClock
) -> None:
    driver = cast(NatsDriver, jobs.driver)
    store = await driver._open()
    # What an enqueuer that died between its two writes leaves: the index key, no job.
    crashed = JobDoc(new_record(_request(1, clock.now_ms(), key="k"), clock.now_ms()))
    index = keys.dedupe(dedupe_key("work", None, "k"))
    await store.kv.create(
        index, dumps({"id": crashed.record.id, "doc": encode_doc(crashed).decode(), "base": 0})
    )
    (result,) = await driver.enqueue([_request(2, clock.now_ms(), key="k")])
    assert result.deduped and result.id == crashed.record.id
    assert (await driver.get(crashed.record.id)).state == "ready"


async def test_every_key_a_job_creates_goes_with_retention(jobs: Jobs, clock: ManualClock) -> None:
    driver = cast(NatsDriver, jobs.driver)
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
    await driver.await_event(claimed.record.id, "paid", "1", None)
    error = ErrorPayload(code="JOB_FAILED", title="t", cause="boom", fix="fix", retryable=True)
    await driver.nack(claimed.record.id, claimed.token, NackOptions(error=error))
    (again,) = await driver.claim("w", 1, 60_000)
    assert await driver.ack_many([AckWrite(again.record.id, again.token, {"ok": True})]) == [None]
    assert keys.job(claimed.record.id) in await _keys(driver)

    clock.advance(2)
    pruned = await driver.prune(plan(Policy(1, 1, 1, 1), clock.now_ms()), 10)
    assert sum(c.rows for c in pruned) == 1
    assert await _keys(driver) <= SHARED


async def test_a_stale_holder_cannot_settle_after_another_claims(
    jobs: Jobs, drivers: list[NatsDriver], clock: ManualClock
) -> None:
    await drivers[0].enqueue([_request(1, clock.now_ms())])
    (first,) = await drivers[0].claim("w1", 1, 1_000)
    clock.advance(1_001)
    (second,) = await drivers[1].claim("w2", 1, 60_000)
    (outcome,) = await drivers[0].ack_many([AckWrite(first.record.id, first.token, None)])
    assert isinstance(outcome, JobsError) and outcome.code == "JOB_SLOT_LOST"
    assert await drivers[1].ack_many([AckWrite(second.record.id, second.token, None)]) == [None]


@pytest.mark.parametrize(
    "url",
    [
        "nats://",
        "nats:///bucket",
        "nats://127.0.0.1:4222/bad.bucket",
        "nats://127.0.0.1:4222/b?replicas=9",
        "nats://127.0.0.1:4222/b?storage=disk",
    ],
)
def test_a_bad_url_is_refused_before_connecting(url: str) -> None:
    with pytest.raises(JobsError) as caught:
        open_driver(url, clock=ManualClock())
    assert caught.value.code == "DATABASE_URL_INVALID"


async def test_an_unreachable_server_is_a_typed_error(caplog: pytest.LogCaptureFixture) -> None:
    """Its cause names the refusal, and the log says it once: nats-py's own callback logged a
    traceback on every try, five a second."""
    url = f"nats://127.0.0.1:{free_port()}/b"
    driver = open_driver(url, clock=ManualClock(), connect_timeout_s=0.5)
    caplog.set_level(logging.DEBUG, logger="mcp_jobs.nats")
    with pytest.raises(JobsError) as caught:
        await driver.migrate()
    assert caught.value.code == "DRIVER_UNAVAILABLE"
    assert "ConnectionRefusedError" in caught.value.cause
    logged = [r for r in caplog.records if r.name.startswith("nats") or "NATS" in r.getMessage()]
    assert [r.getMessage().split(" (")[0] for r in logged] == ["NATS connection failed"]
    assert all(r.exc_info is None for r in logged)
    # Never connected, it reconnects nothing: the error says it all (test_outage_messages.py).
    assert logged[0].levelno == logging.DEBUG
    # The server the driver was given (the bare command would read the default SQLite file),
    # and the report says it does not answer.
    assert caught.value.fix == f"mcp-jobs db report --database-url {url}"
    output = await anyio.to_thread.run_sync(lambda: run_fix(caught.value.fix))
    assert output.startswith(f"server: no answer from {url.rpartition('/')[0]} (")


async def test_the_migrate_fix_runs_as_given_from_anywhere(database_url: str) -> None:
    fix = migrate_fix(database_url)
    bin_dir = Path(sys.executable).parent
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    with tempfile.TemporaryDirectory() as elsewhere:
        with anyio.fail_after(60):
            ran = await anyio.run_process(["bash", "-c", fix], cwd=elsewhere, env=env, check=False)
        assert ran.returncode == 0, ran.stderr.decode()
        assert not os.listdir(elsewhere)  # no SQLite file was made instead
    assert migrate_fix("nats://s3cret@broker:4222/jobs") == (
        'mcp-jobs db migrate --database-url "$MCP_JOBS_DATABASE_URL"'
    )


async def test_a_pruned_job_is_not_brought_back_by_its_stale_intent(
    jobs: Jobs, clock: ManualClock
) -> None:
    """An enqueuer that read the index key just before retention removed it and its job must
    not roll the job's intent forward: a job id is never written after its delete."""
    driver = cast(NatsDriver, jobs.driver)
    store = await driver._open()
    (made,) = await driver.enqueue([_request(1, clock.now_ms(), key="k")])
    index = keys.dedupe(dedupe_key("work", None, "k"))
    stale = (await store.kv.get(index)).value
    (claimed,) = await driver.claim("w", 1, 60_000)
    await driver.ack_many([AckWrite(claimed.record.id, claimed.token, None)])
    clock.advance(2)
    await driver.prune(plan(Policy(1, 1, 1, 1), clock.now_ms()), 10)
    # What that enqueuer goes on to do with the index value it read.
    assert stale is not None
    assert await enqueue_module._holder(store, index, stale) is None
    with pytest.raises(JobsError) as gone:
        await driver.get(made.id)
    assert gone.value.code == "JOB_NOT_FOUND"


async def test_a_relay_claim_decodes_only_the_rows_still_waiting(
    jobs: Jobs, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The outbox keeps published rows for a week; a claim (every relay poll) tells them from the
    waiting ones by their stored bytes and decodes only the waiting ones."""
    from engine.drivers.nats import outbox

    driver = cast(NatsDriver, jobs.driver)
    now = clock.now_ms()
    tx = driver.transaction()
    await driver.outbox_stage(tx, [_request(n, now) for n in range(40)])
    await tx.commit()
    published = await driver.outbox_claim("relay", "t1", 38, 60_000)
    await driver.outbox_publish("t1", published)
    decoded = 0
    real = outbox._row  # pyright: ignore[reportPrivateUsage]

    def counting(raw: bytes) -> Any:
        nonlocal decoded
        decoded += 1
        return real(raw)

    monkeypatch.setattr(outbox, "_row", counting)
    waiting = await driver.outbox_claim("relay", "t2", 10, 60_000)
    assert len(waiting) == 2 and not {r.id for r in waiting} & {r.id for r in published}
    assert decoded == 2
    # Published rows are still found by the week's retention.
    assert await driver.outbox_forget_published(clock.now_ms() + 1, 100) == 38


def _timing_out(store: Any, times: int) -> list[str]:
    """The store's compare-and-sets time out `times` times (the server away), then go through."""
    real = store.kv.update
    tried: list[str] = []

    async def update(key: str, value: bytes, last: int | None = None) -> int:
        tried.append(key)
        if len(tried) <= times:
            raise nats.errors.TimeoutError
        return int(await real(key, value, last=last))

    store.kv.update = update
    return tried


async def test_a_settle_is_held_while_the_server_is_away(
    database_url: str, clock: ManualClock
) -> None:
    """An ack whose write times out (a server restarting) is tried again, 50 ms doubling,
    until it lands; given up, its finished job would run again after its lease."""
    paced = PacedClock()
    driver = cast(NatsDriver, open_driver(database_url, clock=clock, retry_clock=paced))
    try:
        await driver.migrate()
        await driver.enqueue([_request(1, clock.now_ms())])
        (claimed,) = await driver.claim("w", 1, 60_000)
        tried = _timing_out(await driver._open(), 3)
        outcomes = await driver.ack_many([AckWrite(claimed.record.id, claimed.token, None)])
        assert (outcomes, len(tried), paced.pauses) == ([None], 4, [50, 100, 200])
        assert (await driver.get(claimed.record.id)).state == "done"
    finally:
        await driver.close()


@contextlib.contextmanager
def _reply_lost(store: Any) -> Iterator[list[str]]:
    """The store's first compare-and-set is written, then its reply is lost (a timeout), and
    this process's replica hears of no write until the block ends (a watch that lags)."""
    real_update, real_apply = store.kv.update, store.replica.apply
    tried: list[str] = []
    held_back: list[tuple[str, int, bytes | None]] = []

    async def update(key: str, value: bytes, last: int | None = None) -> int:
        tried.append(key)
        revision = int(await real_update(key, value, last=last))
        if len(tried) == 1:
            raise nats.errors.TimeoutError
        return revision

    store.kv.update = update
    store.replica.apply = lambda key, revision, raw: held_back.append((key, revision, raw))
    try:
        yield tried
    finally:
        store.kv.update, store.replica.apply = real_update, real_apply
        for key, revision, raw in held_back:
            real_apply(key, revision, raw)


async def test_a_settle_whose_reply_was_lost_succeeds_when_tried_again(
    database_url: str, clock: ManualClock
) -> None:
    """The try after one that landed finds its own settle: the ack succeeds and the nack answers
    the row it left, as on PostgreSQL. Without that the finished job was reported lost. The try
    reads the server's copy, not the replica's, which may not hold the lost write yet: one
    write, not a second that is sure to conflict."""
    paced = PacedClock()
    driver = cast(NatsDriver, open_driver(database_url, clock=clock, retry_clock=paced))
    try:
        await driver.migrate()
        await driver.enqueue([_request(1, clock.now_ms()), _request(2, clock.now_ms())])
        first, second = await driver.claim("w", 2, 60_000)
        store = await driver._open()  # pyright: ignore[reportPrivateUsage]
        with _reply_lost(store) as tried:
            outcomes = await driver.ack_many([AckWrite(first.record.id, first.token, {"ok": 1})])
        assert (outcomes, len(tried), paced.pauses) == ([None], 1, [50])
        record = await driver.get(first.record.id)
        assert (record.state, record.output) == ("done", {"ok": 1})

        failure = ErrorPayload(code="JOB_FAILED", title="t", cause="c", fix="f", retryable=False)
        options = NackOptions(error=failure, fail=True)
        with _reply_lost(store) as tried:
            nacked = await driver.nack(second.record.id, second.token, options)
        assert (nacked.state, len(tried)) == ("failed", 1)

        # Only the token that settled it, and only on a try after one that may have landed.
        stale = await driver.ack_many([AckWrite(first.record.id, second.token, None)])
        assert [e.code if e else None for e in stale] == ["JOB_SLOT_LOST"]
        twice = await driver.ack_many([AckWrite(first.record.id, first.token, None)])
        assert [e.code if e else None for e in twice] == ["JOB_SLOT_LOST"]
    finally:
        await driver.close()


async def test_a_held_settle_fails_typed_at_its_deadline_and_a_refusal_is_not_held(
    database_url: str, clock: ManualClock
) -> None:
    paced = PacedClock()
    driver = cast(
        NatsDriver,
        open_driver(database_url, clock=clock, retry_clock=paced, settle_retry_ms=1_000),
    )
    try:
        await driver.migrate()
        await driver.enqueue([_request(1, clock.now_ms())])
        (claimed,) = await driver.claim("w", 1, 60_000)
        # A stale token is a refusal, not an outage: answered at once, never held.
        (stale,) = await driver.ack_many([AckWrite(claimed.record.id, "not-the-token", None)])
        assert stale is not None and stale.code == "JOB_SLOT_LOST" and paced.pauses == []
        _timing_out(await driver._open(), 1_000)
        with pytest.raises(JobsError) as raised:
            await driver.ack_many([AckWrite(claimed.record.id, claimed.token, None)])
        assert raised.value.code == "DRIVER_UNAVAILABLE"
        # The last try goes at the deadline itself.
        assert (paced.pauses, paced.now) == ([50, 100, 200, 400, 250], 1_000)
    finally:
        await driver.close()
    reopened = cast(NatsDriver, open_driver(database_url, clock=clock))
    try:
        assert (await reopened.get(claimed.record.id)).state == "running"
    finally:
        await reopened.close()


async def test_a_job_key_another_program_wrote_is_damage_and_the_rest_goes_on(
    database_url: str, clock: ManualClock
) -> None:
    """A value the driver did not write under a job's key: reading that job is STORE_DAMAGED
    (not retried) with a fix that shows the value; every other job is listed and claimed, and
    the replica's watch, which the value used to end, follows on."""
    writer = cast(NatsDriver, open_driver(database_url, clock=clock))
    reader = cast(NatsDriver, open_driver(database_url, clock=clock))
    try:
        await writer.migrate()
        first = (await writer.enqueue([_request(1, clock.now_ms())]))[0].id
        store = await writer._open()  # pyright: ignore[reportPrivateUsage]
        await store.kv.put(keys.job("job9999"), b"not a job document")
        second = (await writer.enqueue([_request(2, clock.now_ms())]))[0].id

        listed = await reader.list_jobs(JobFilter(limit=10))
        assert sorted(j.id for j in listed.jobs) == [first, second]
        # Named in an unfiltered list, in its place (the newest id), with the key's fix; a
        # filtered list cannot tell whether it would match.
        (named,) = listed.damaged
        assert named.id == "job9999" and "job.job9999 holds a value" in named.cause
        assert await pages(reader, 1) == [([], ["job9999"]), ([second], []), ([first], [])]
        ready = await reader.list_jobs(JobFilter(states=("ready",), limit=10))
        assert sorted(j.id for j in ready.jobs) == [first, second] and ready.damaged == []
        claimed = await reader.claim("w", 5, 60_000)
        assert sorted(c.record.id for c in claimed) == [first, second]
        replica = (await reader._open()).replica  # pyright: ignore[reportPrivateUsage]
        assert replica._task is not None and not replica._task.done()  # pyright: ignore

        with pytest.raises(JobsError) as raised:
            await reader.get("job9999")
        error = raised.value
        assert (error.code, error.retryable) == ("STORE_DAMAGED", False)
        assert "job.job9999 holds a value that is not what the driver writes" in error.cause
        output = await anyio.to_thread.run_sync(lambda: run_fix(error.fix))
        assert "job.job9999 in" in output and "not a job document" in output
        assert named.fix == error.fix

        await store.kv.delete(keys.job("job9999"))  # mended: the lists no longer name it
        assert (await reader.list_jobs(JobFilter(limit=10))).damaged == []
    finally:
        await writer.close()
        await reader.close()


@pytest.mark.parametrize(("field", "value"), [("max_attempts", 0), ("attempt", -5)])
async def test_counts_no_job_can_have_are_damage_and_the_rest_goes_on(
    nats_driver: NatsDriver, clock: ManualClock, field: str, value: int
) -> None:
    """A job document whose count another program set to one no job can have: it ran with
    attempt -4, or went dead as if its lease had expired on each of its 0 attempts. Now it is
    damage naming the field, and the jobs beside it are claimed."""
    made = await nats_driver.enqueue([_request(n, clock.now_ms()) for n in (1, 2, 3)])
    first, damaged, third = (m.id for m in made)
    store = await nats_driver._open()  # pyright: ignore[reportPrivateUsage]
    entry = await store.kv.get(keys.job(damaged))
    assert entry.value is not None
    doc = json.loads(entry.value)
    doc["record"][field] = value
    await store.kv.put(keys.job(damaged), dumps(doc))

    with pytest.raises(JobsError) as raised:
        await nats_driver.get(damaged)
    error = raised.value
    assert (error.code, error.retryable) == ("STORE_DAMAGED", False)
    assert f"{field}: Input should be greater than or equal to" in error.cause, error.cause
    claimed = await nats_driver.claim("w", 5, 60_000)
    assert sorted(c.record.id for c in claimed) == sorted([first, third])
    output = await anyio.to_thread.run_sync(lambda: run_fix(error.fix))
    assert f'"{field}":{value}' in output, output


@pytest.fixture
def nats_driver(jobs: Jobs) -> NatsDriver:
    return cast(NatsDriver, jobs.driver)


def _put(driver: NatsDriver, key: Callable[[str], str], value: bytes) -> Overwrite:
    """Another program's put of a value the driver never writes."""

    async def overwrite(row_id: str) -> None:
        store = await driver._open()  # pyright: ignore[reportPrivateUsage]
        await store.kv.put(key(row_id), value)

    return overwrite


async def test_a_worker_key_another_program_wrote_is_passed_over_and_dropped_at_a_beat(
    nats_driver: NatsDriver, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    overwrite = _put(nats_driver, keys.worker, b"not json")
    await check_presence_passes_over(nats_driver, clock.now_ms(), overwrite, caplog)


async def test_an_outbox_key_another_program_wrote_is_passed_over(
    nats_driver: NatsDriver,
    database_url: str,
    app_transaction: AppTransaction,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Unpublished by the look of it, so the claim decodes it.
    overwrite = _put(nats_driver, keys.outbox, b'{"published_at":null,"request":"not json"}')
    requests = [_request(n, clock.now_ms()) for n in (1, 2)]
    await check_outbox_passes_over(
        nats_driver, database_url, app_transaction, requests, overwrite, caplog, clock.advance
    )


async def test_a_backfill_key_another_program_wrote_is_damage_named_by_its_run(
    nats_driver: NatsDriver, clock: ManualClock
) -> None:
    overwrite = _put(nats_driver, keys.backfill, b"not json")
    error = await check_ledger_row_is_damage(nats_driver, clock.now_ms(), overwrite)
    assert "not json" in run_fix(error.fix)


async def test_an_inbound_key_another_program_wrote_is_passed_over(
    jobs: Jobs,
    registry: JobRegistry,
    nats_driver: NatsDriver,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The replica cannot tell which wait such a value was meant for: each wait passes it over
    (logged once), so does the pruner, and the job waiting resumes with the next event."""
    waiter = declare_waiter(registry)
    enqueued = await jobs.enqueue(waiter, {"order_id": 7})
    worker = Worker(jobs)
    await worker.run_until_idle()
    sent = await jobs.send_event("paid", "7", {"amount": 1})
    await _put(nats_driver, keys.inbound, b"not json")(sent.event_id)
    await worker.run_until_idle()
    assert (await jobs.get(enqueued.id)).state == "suspended"
    assert "cannot be read" in caplog.text
    assert await nats_driver.prune_events(clock.now_ms()) == 0
    await jobs.send_event("paid", "7", {"amount": 2})
    await worker.run_until_idle()
    done = await jobs.get(enqueued.id)
    assert (done.state, done.output) == ("done", {"amount": 2})


async def test_a_pause_key_another_program_wrote_still_holds_and_claims_go_on(
    nats_driver: NatsDriver, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A claim reads what a pause holds from its key, not its value: a value the driver never
    writes there neither stops every claim (as it did) nor lifts the pause."""
    now = clock.now_ms()
    held, free = _request(1, now), _request(2, now)._replace(queue="other")
    await nats_driver.enqueue([held, free])
    await nats_driver.pause("queue", "default", "ops", None, now)
    await _put(nats_driver, lambda _: keys.pause("queue", "default"), b"not json")("")
    await _put(nats_driver, lambda _: "pause.bogus.eA==", b"{}")("")  # no pause this build writes
    claimed = await nats_driver.claim("w", 10, 60_000)
    assert [c.record.id for c in claimed] == [free.id]
    assert await nats_driver.claim("w", 10, 60_000) == []  # the held job stays held
    assert "pause key 'pause.bogus.eA==' cannot be read" in caplog.text


async def test_a_pause_another_program_wrote_still_shows_and_resuming_lifts_it(
    nats_driver: NatsDriver, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    overwrite = _put(nats_driver, lambda queue: keys.pause("queue", queue), b"not json")
    stray = _put(nats_driver, lambda _: "pause.bogus.eQ==", b"{}")
    await check_pause_details_left_out(
        nats_driver, clock.now_ms(), overwrite, caplog, lambda: stray("")
    )


async def test_a_task_state_and_leases_another_program_wrote_leave_the_scheduler_going(
    jobs: Jobs,
    registry: JobRegistry,
    nats_driver: NatsDriver,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def spoil(task: str) -> None:
        await _put(nats_driver, keys.task, b"not json")(task)
        await _put(nats_driver, keys.lead, b"[]")(LEASE)

    await check_scheduler_goes_on(jobs, registry, clock.advance, spoil, caplog)


async def test_a_task_state_an_earlier_version_wrote_is_claimed_from(
    nats_driver: NatsDriver,
) -> None:
    # As it wrote before failures were stored: no `failure` field.
    state = b'{"task": "t", "last_fired_at": 100, "updated_at": 5}'
    await _put(nats_driver, keys.task, state)("t")
    await check_a_claim_continues_from(nats_driver, "t", 100)


async def test_a_rate_key_and_reservation_another_program_wrote_leave_the_jobs_running(
    jobs: Jobs, registry: JobRegistry, nats_driver: NatsDriver, clock: ManualClock
) -> None:
    """Every key and reservation shares one document: an entry another program wrote is
    passed over, and so is a document that is no object."""
    store = nats_driver._store  # pyright: ignore[reportPrivateUsage]

    def spoil(part: str) -> Overwrite:
        async def overwrite(name: str) -> None:
            entry = await store.fresh("rates")
            assert entry is not None
            document = json.loads(entry.raw)
            document[part][name] = "not a list"
            await store.kv.put("rates", json.dumps(document).encode())

        return overwrite

    await check_rate_limits_go_on(
        jobs, registry, clock.advance, spoil("rates"), spoil("reservations")
    )
    await store.kv.put("rates", b"not json")
    assert await nats_driver.rate_states(10, "") == []


async def test_the_rate_document_keeps_the_keys_whose_time_is_ahead(
    nats_driver: NatsDriver, clock: ManualClock
) -> None:
    """Every take decodes and rewrites the one document, so a key per customer ever served
    made each take slower than the last (a soak of 2,000 jobs of distinct customers ran at 1.5
    jobs a second). Past `KEYS_KEPT` keys a take drops those whose TAT has passed, which GCRA
    reads as none; a key still holding a start back is kept."""
    slow = RateTake("tenant:slow", 1, 3_600_000, 1)
    assert (await nats_driver.take_rates([slow], clock.now_ms())).blocked_key is None
    for n in range(2 * KEYS_KEPT):
        verdict = await nats_driver.take_rates(
            [RateTake(f"job:ship:c{n}", 1000, 1000, 1)], clock.now_ms()
        )
        assert verdict.blocked_key is None
        clock.advance(2)  # each customer's TAT (1 ms ahead) has passed by the next take
    held = {s.key for s in await nats_driver.rate_states(10 * KEYS_KEPT, "")}
    assert len(held) <= KEYS_KEPT + 1 and "tenant:slow" in held, len(held)
    assert (await nats_driver.take_rates([slow], clock.now_ms())).blocked_key == "tenant:slow"


@pytest.mark.parametrize("stored", [b"not json", b'{"job:capped": {"gone": "abc"}}'])
async def test_a_cap_holder_another_program_wrote_holds_nothing(
    jobs: Jobs, registry: JobRegistry, nats_driver: NatsDriver, stored: bytes
) -> None:
    await check_caps_go_on(jobs, registry, _put(nats_driver, lambda _: "slots", stored))


async def test_a_descriptor_another_program_wrote_is_forgotten_by_the_pruner(
    jobs: Jobs, registry: JobRegistry, nats_driver: NatsDriver, clock: ManualClock
) -> None:
    spoil = _put(nats_driver, keys.descriptor, b"[1]")
    await check_pruner_forgets_a_damaged_descriptor(jobs, registry, clock.advance, spoil)


async def test_an_audit_event_and_the_pruner_record_another_program_wrote_leave_it_going(
    jobs: Jobs, nats_driver: NatsDriver, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """An old event key of no job and the pruner's record of delete markers, each holding a
    value the driver never writes: the pass forgets the one and writes the other anew. Before,
    the pass raised a bare error, which ended the worker running the pruner."""
    store = nats_driver._store  # pyright: ignore[reportPrivateUsage]
    stray = keys.loose_event(clock.now_ms(), new_id())
    await store.kv.put(stray, b"not json")
    await store.kv.put(keys.TOMBSTONES, b"not json")
    clock.advance(DEFAULT_AUDIT_MS + 1)
    assert (await Pruner(jobs).pass_once()).leader
    assert await store.fresh(stray) is None
    record = await store.fresh(keys.TOMBSTONES)
    assert record is not None and set(json.loads(record.raw)) == {"cursor", "marks"}
    assert f"event key {stray!r} cannot be read" in caplog.text


async def test_a_dedupe_key_another_program_wrote_lets_its_job_settle_and_the_key_be_taken(
    jobs: Jobs, registry: JobRegistry, nats_driver: NatsDriver, caplog: pytest.LogCaptureFixture
) -> None:
    """A job's dedupe key holding a value the driver never writes names no holder: while its
    job is live, an enqueue of the key finds the job without it and answers it (before, the
    key was taken as stale and a second live job of the key was stored); the job settles
    (before, its settle raised, so it stayed running, back at each lease's end), and the next
    enqueue of the key replaces it."""
    waiter = declare_waiter(registry)  # any job of the registry: it waits for an event
    first = await jobs.get((await jobs.enqueue(waiter, {"order_id": 7})).id)
    dkey = keys.dedupe(dedupe_key(first.name, None, first.idempotency_key))
    await _put(nats_driver, lambda _: dkey, b"not json")("")
    again = await jobs.enqueue(waiter, {"order_id": 7})
    assert (again.id, again.deduped) == (first.id, True)
    with pytest.raises(JobDuplicateError) as refused:
        await jobs.enqueue(waiter, {"order_id": 7}, on_conflict="error")
    assert refused.value.details["job_id"] == first.id
    assert (await jobs.cancel(first.id)).state == "cancelled"
    second = await jobs.enqueue(waiter, {"order_id": 7})
    assert (second.id != first.id, second.deduped) == (True, False)
    assert f"dedupe key {dkey!r} cannot be read" in caplog.text


async def test_a_wait_key_another_program_wrote_matches_no_event_and_others_are_woken(
    jobs: Jobs, registry: JobRegistry, nats_driver: NatsDriver
) -> None:
    waiter = declare_waiter(registry)
    spoiled = await jobs.enqueue(waiter, {"order_id": 1})
    woken = await jobs.enqueue(waiter, {"order_id": 2})
    await Worker(jobs).run_until_idle()
    await _put(nats_driver, keys.waiter, b"not json")(spoiled.id)
    await jobs.send_event("paid", "2", {"amount": 5})
    await Worker(jobs).run_until_idle()
    assert (await jobs.get(woken.id)).state == "done"
    assert (await jobs.get(spoiled.id)).state == "suspended"
