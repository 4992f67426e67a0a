"""Retention: a driver prunes exactly the settled rows `engine.retention` calls expired, oldest
first, in batches, with their steps and events, never a live row, one tenant's when asked; the
prune lease lets one pruner lead at a time. Events of no job go by the audit retention."""

from __future__ import annotations

import asyncio

from engine import Jobs, ManualClock
from engine.drivers.base import AckWrite, Driver, StepWrite
from engine.errors import JobNotFoundError
from engine.outbox import PUBLISHED_KEEP_MS
from engine.pruner import LEASE_NAME, Pruner
from engine.retention import (
    DAY_MS,
    DEFAULT_POLICY,
    Policy,
    PruneCount,
    Retention,
    plan,
    totals,
)
from engine.tasks.scheduler import lease_name
from engine.testing.kit.test_mirror import staging
from engine.testing.plugin import AppTransaction
from schemas.errors import ErrorPayload
from schemas.events import EventRecord
from schemas.jobs import EnqueueRequest, NackOptions
from schemas.states import JobState
from schemas.steps import StepRecord

_serial = 0


def _request(now: int, name: str, queue: str, tenant: str | None, run_at: int) -> EnqueueRequest:
    global _serial
    _serial += 1
    return EnqueueRequest(
        id=f"job{_serial:06d}",
        run_id=f"run{_serial:06d}",
        name=name,
        queue=queue,
        tenant_id=tenant,
        idempotency_key=f"k{_serial}",
        input={"n": _serial},
        run_at=run_at,
        max_attempts=3,
    )


def _error() -> ErrorPayload:
    return ErrorPayload(code="JOB_FAILED", title="t", cause="boom", fix="fix", retryable=False)


async def settle(
    driver: Driver,
    state: JobState,
    *,
    name: str = "work",
    queue: str = "default",
    tenant: str | None = None,
) -> EnqueueRequest:
    """One job settled in `state` at the clock's now, with a step and (but done) an event."""
    now = driver.clock.now_ms()
    request = _request(now, name, queue, tenant, now)
    await driver.enqueue([request])
    if state == "cancelled":
        await driver.cancel(request.id, None, "test")
        return request
    (claimed,) = await driver.claim("w", 1, 60_000, [queue])
    assert claimed.record.id == request.id
    step = StepRecord(
        job_id=request.id, run_id=request.run_id, name="s", status="completed", started_at=now
    )
    assert await driver.save_steps_many([StepWrite(request.id, claimed.token, step)]) == [None]
    if state == "done":
        assert await driver.ack_many([AckWrite(request.id, claimed.token, None)]) == [None]
    else:
        options = NackOptions(error=_error(), dead_letter=state == "dead", fail=state == "failed")
        await driver.nack(request.id, claimed.token, options)
    return request


async def exists(driver: Driver, job_id: str) -> bool:
    try:
        await driver.get(job_id)
    except JobNotFoundError:
        return False
    return True


def rows(counts: list[PruneCount]) -> int:
    return sum(c.rows for c in counts)


async def test_each_state_goes_one_ms_after_its_retention_and_not_at_it(
    jobs: Jobs, clock: ManualClock
) -> None:
    driver = jobs.driver
    settled = {state: await settle(driver, state) for state in ("done", "failed", "dead")}
    settled["cancelled"] = await settle(driver, "cancelled")
    start = clock.now_ms()

    async def prune_at(at: int) -> dict[str, int]:
        clock.set(at)
        cutoffs = plan(DEFAULT_POLICY, at)
        return totals(await driver.prune(cutoffs, 100))

    # Exactly at the cutoff (finished_at == now - keep) a row is kept.
    assert sum((await prune_at(start + 7 * DAY_MS)).values()) == 0
    assert await prune_at(start + 7 * DAY_MS + 1) == {
        "done": 1,
        "failed": 0,
        "dead": 0,
        "cancelled": 1,
    }
    assert sum((await prune_at(start + 30 * DAY_MS)).values()) == 0
    assert await prune_at(start + 30 * DAY_MS + 1) == {
        "done": 0,
        "failed": 1,
        "dead": 1,
        "cancelled": 0,
    }
    for request in settled.values():
        assert not await exists(driver, request.id)


async def test_a_job_with_its_own_policy_is_pruned_by_it(jobs: Jobs, clock: ManualClock) -> None:
    driver = jobs.driver
    plain = await settle(driver, "done", name="plain")
    short = await settle(driver, "done", name="short")
    kept = await settle(driver, "done", name="kept")
    kept_dead = await settle(driver, "dead", name="kept")
    per_name = {
        "short": DEFAULT_POLICY._replace(done=DAY_MS),
        "kept": Policy(done=None, failed=None, dead=None, cancelled=None),
    }
    clock.advance(2 * DAY_MS)
    cutoffs = plan(DEFAULT_POLICY, clock.now_ms(), per_name=per_name)
    assert totals(await driver.prune_counts(cutoffs)) == {
        "done": 1,
        "failed": 0,
        "dead": 0,
        "cancelled": 0,
    }
    assert rows(await driver.prune(cutoffs, 100)) == 1
    assert not await exists(driver, short.id) and await exists(driver, plain.id)

    clock.advance(365 * DAY_MS)
    cutoffs = plan(DEFAULT_POLICY, clock.now_ms(), per_name=per_name)
    assert rows(await driver.prune(cutoffs, 100)) == 1
    assert not await exists(driver, plain.id)
    assert await exists(driver, kept.id) and await exists(driver, kept_dead.id)


async def test_a_prune_cut_short_by_its_limit_resumes_oldest_first_and_finishes(
    jobs: Jobs, clock: ManualClock
) -> None:
    driver = jobs.driver
    made = []
    for n in range(7):
        made.append(await settle(driver, "done" if n % 2 else "dead", queue=f"q{n % 2}"))
        clock.advance(1_000)
    cutoffs = plan(DEFAULT_POLICY, clock.now_ms(), older_than_ms=0)
    assert await driver.prune_counts(cutoffs) == [
        PruneCount("dead", "q0", 4),
        PruneCount("done", "q1", 3),
    ]
    first = await driver.prune(cutoffs, 3)
    assert rows(first) == 3
    # Oldest first: the three that finished first are gone, the other four remain.
    gone = [not await exists(driver, r.id) for r in made]
    assert gone == [True, True, True, False, False, False, False]
    assert rows(await driver.prune(cutoffs, 3)) == 3
    last = await driver.prune(cutoffs, 3)
    assert rows(last) == 1
    assert await driver.prune(cutoffs, 3) == []
    assert await driver.prune_counts(cutoffs) == []


async def test_live_rows_are_never_pruned(jobs: Jobs, clock: ManualClock) -> None:
    driver = jobs.driver
    old = await settle(driver, "done")
    now = clock.now_ms()
    ready = _request(now, "work", "live", None, now)
    delayed = _request(now, "work", "live", None, now + 10 * DAY_MS)
    running = _request(now, "work", "busy", None, now)
    await driver.enqueue([ready, delayed, running])
    (held,) = await driver.claim("w", 1, 100 * DAY_MS, ["busy"])
    parked = await driver.enqueue([_request(now, "work", "park", None, now)])
    (claimed,) = await driver.claim("w", 1, 60_000, ["park"])
    await driver.nack(parked[0].id, claimed.token, NackOptions(park=True, delay_ms=50 * DAY_MS))
    clock.advance(40 * DAY_MS)
    cutoffs = plan(DEFAULT_POLICY, clock.now_ms(), older_than_ms=0)
    assert totals(await driver.prune_counts(cutoffs))["done"] == 1
    assert rows(await driver.prune(cutoffs, 1000)) == 1
    assert not await exists(driver, old.id)
    states = [(await driver.get(i)).state for i in (ready.id, delayed.id, held.record.id)]
    assert states == ["ready", "delayed", "running"]
    assert (await driver.get(parked[0].id)).state == "suspended"


async def test_steps_and_events_go_with_their_job_and_others_stay(
    jobs: Jobs, clock: ManualClock
) -> None:
    driver = jobs.driver
    doomed = await settle(driver, "dead", name="old")
    clock.advance(DAY_MS)
    kept = await settle(driver, "dead", name="new")
    await driver.record_event(
        EventRecord(job_id=doomed.id, at=clock.now_ms(), kind="note", data={"x": 1})
    )
    cutoffs = plan(DEFAULT_POLICY, clock.now_ms() - DAY_MS + 1, older_than_ms=0)
    assert rows(await driver.prune(cutoffs, 100)) == 1
    assert await driver.load_steps(doomed.run_id) == []
    steps, events = await _trace(driver, kept.id)
    assert [s.name for s in steps] == ["s"] and [e.kind for e in events] == ["dead"]
    # A new job under the pruned job's id and run starts with no steps and no events.
    now = clock.now_ms()
    await driver.enqueue([doomed._replace(run_at=now, idempotency_key="again")])
    steps, events = await _trace(driver, doomed.id)
    assert steps == [] and events == []


async def _trace(driver: Driver, job_id: str) -> tuple[list[StepRecord], list[EventRecord]]:
    trace = await driver.load_trace(job_id)
    return list(trace.steps), list(trace.events)


async def test_a_tenant_prune_takes_only_that_tenants_rows(jobs: Jobs, clock: ManualClock) -> None:
    driver = jobs.driver
    a = await settle(driver, "done", tenant="a")
    b = await settle(driver, "done", tenant="b")
    none = await settle(driver, "done")
    clock.advance(DAY_MS)
    cutoffs = plan(DEFAULT_POLICY, clock.now_ms(), older_than_ms=0)
    assert rows(await driver.prune_counts(cutoffs, "a")) == 1
    assert rows(await driver.prune(cutoffs, 100, "a")) == 1
    assert not await exists(driver, a.id)
    assert await exists(driver, b.id) and await exists(driver, none.id)


async def test_two_pruners_at_once_never_take_or_count_a_row_twice(
    jobs: Jobs, clock: ManualClock
) -> None:
    driver = jobs.driver
    for _ in range(40):
        await settle(driver, "done")
    clock.advance(DAY_MS)
    cutoffs = plan(DEFAULT_POLICY, clock.now_ms(), older_than_ms=0)
    taken = 0
    while True:
        got = await asyncio.gather(*(driver.prune(cutoffs, 7) for _ in range(3)))
        step = sum(rows(g) for g in got)
        if step == 0:
            break
        taken += step
    assert taken == 40
    assert await driver.prune_counts(cutoffs) == []


async def test_one_leader_per_lease_name_until_it_expires_or_is_handed_back(
    jobs: Jobs, clock: ManualClock
) -> None:
    driver = jobs.driver
    assert await driver.lead("prune", "a", 1_000)
    assert not await driver.lead("prune", "b", 1_000)
    assert await driver.lead("other", "b", 1_000)  # another name is another lease
    clock.advance(999)
    assert await driver.lead("prune", "a", 1_000)  # renewed
    clock.advance(1_000)
    assert await driver.lead("prune", "b", 1_000)  # a's lease ran out
    assert not await driver.lead("prune", "a", 1_000)
    assert await driver.lead("prune", "b", 0)  # handed back
    assert await driver.lead("prune", "a", 1_000)
    assert await driver.lead(lease_name("prune"), "s", 1_000)  # a task's lease is its own


async def test_of_two_workers_pruners_one_leads_and_prunes_in_batches(
    jobs: Jobs, clock: ManualClock
) -> None:
    driver = jobs.driver
    for _ in range(12):
        await settle(driver, "done")
    clock.advance(8 * DAY_MS)
    first = Pruner(jobs, holder="w1", batch_size=5, interval_ms=60_000, pause_ms=0, environ={})
    second = Pruner(jobs, holder="w2", batch_size=5, interval_ms=60_000, pause_ms=0, environ={})
    one = await first.pass_once()
    two = await second.pass_once()
    assert one.leader and not two.leader
    assert one.by_state()["done"] == 12 and one.batches == 3
    assert two.pruned == []
    assert await driver.lead(LEASE_NAME, "w1", 60_000)  # still w1's


async def test_published_outbox_rows_go_a_week_after_and_waiting_ones_stay(
    jobs: Jobs, clock: ManualClock, database_url: str, app_transaction: AppTransaction
) -> None:
    """A published row is deleted once its `published_at` is before the bound (oldest first, a
    batch at most); an unpublished one never is, and is claimed and published as before. The
    pruner's pass deletes rows published `PUBLISHED_KEEP_MS` ago."""
    driver = jobs.driver
    stage = staging(driver, database_url, app_transaction)
    now = clock.now_ms()
    await stage([_request(now, f"o{n}", "q", None, now) for n in range(7)])
    first = await driver.outbox_claim("relay", "t1", 3, 60_000)
    await driver.outbox_publish("t1", first)
    published_at = clock.now_ms()
    clock.advance(1_000)
    second = await driver.outbox_claim("relay", "t2", 2, 60_000)
    await driver.outbox_publish("t2", second)
    assert await driver.outbox_forget_published(published_at, 100) == 0  # strictly before
    assert await driver.outbox_forget_published(published_at + 1, 2) == 2
    assert await driver.outbox_forget_published(published_at + 1, 100) == 1
    # The two waiting rows are still there, and publish.
    rest = await driver.outbox_claim("relay", "t3", 10, 60_000)
    assert len(rest) == 2 and not {r.id for r in rest} & {r.id for r in [*first, *second]}
    await driver.outbox_publish("t3", rest)
    pruner = Pruner(jobs, holder="w1", batch_size=1, pause_ms=0, environ={})
    clock.advance(PUBLISHED_KEEP_MS + 1)
    await pruner.pass_once()  # the two published a week and a ms ago go
    assert await driver.outbox_forget_published(clock.now_ms() + 1, 100) == 0
    assert await driver.outbox_claim("relay", "t4", 10, 60_000) == []


async def test_events_of_no_job_go_oldest_first_a_batch_at_a_time_and_a_jobs_events_stay(
    jobs: Jobs, clock: ManualClock
) -> None:
    """`forget_jobless_events` takes the events with no job recorded strictly before the bound,
    oldest `at` first (not in the order written), at most `limit`; an event naming a job, its
    own or one not stored here, is never taken (a job's go with it)."""
    driver = jobs.driver
    job = await settle(driver, "dead")
    t0 = clock.now_ms()
    for n, at in enumerate((t0 + 20, t0, t0 + 30, t0 + 10)):
        await driver.record_event(EventRecord(job_id=None, at=at, kind="mcp.call", data={"n": n}))
    for job_id in (job.id, "job-not-stored"):
        await driver.record_event(EventRecord(job_id=job_id, at=t0 - DAY_MS, kind="mcp.call"))
    assert await driver.count_jobless_events(t0) == 0  # strictly before
    assert await driver.count_jobless_events(t0 + 25) == 3
    assert await driver.forget_jobless_events(t0, 100) == 0
    assert await driver.forget_jobless_events(t0 + 25, 2) == 2  # t0 and t0 + 10
    assert await driver.count_jobless_events(t0 + 15) == 0
    assert await driver.count_jobless_events(t0 + 25) == 1
    assert await driver.forget_jobless_events(t0 + 25, 100) == 1
    assert await driver.forget_jobless_events(t0 + 25, 100) == 0
    assert await driver.count_jobless_events(t0 + 31) == 1  # the young one stays
    _, events = await _trace(driver, job.id)
    assert [e.kind for e in events] == ["dead", "mcp.call"]


async def test_the_pruner_forgets_events_of_no_job_90_days_on_unless_set_otherwise(
    jobs: Jobs, clock: ManualClock
) -> None:
    """Each pass deletes the events of no job older than the audit retention (90 days by
    default; `Retention(audit=...)` in code, `MCP_JOBS_RETAIN_AUDIT` over it), in batches;
    "forever" keeps them."""
    driver = jobs.driver

    async def pass_with(retention: Retention | None, environ: dict[str, str]) -> int:
        pruner = Pruner(
            jobs, retention=retention, holder="w1", batch_size=1, pause_ms=0, environ=environ
        )
        await pruner.pass_once()
        return await driver.count_jobless_events(clock.now_ms() + 1)

    async def record(count: int) -> int:
        at = clock.now_ms()
        for n in range(count):
            await driver.record_event(
                EventRecord(job_id=None, at=at, kind="mcp.call", data={"n": n})
            )
        return at

    start = await record(3)
    clock.set(start + 2 * DAY_MS + 1)
    assert await pass_with(None, {"MCP_JOBS_RETAIN_AUDIT": "forever"}) == 3
    assert await pass_with(Retention(audit="forever"), {}) == 3
    assert await pass_with(Retention(audit="1d"), {"MCP_JOBS_RETAIN_AUDIT": "forever"}) == 3
    assert await pass_with(Retention(audit="2d"), {}) == 0
    again = await record(3)
    clock.set(again + 90 * DAY_MS)
    assert await pass_with(None, {}) == 3  # exactly 90 days old: kept
    clock.advance(1)
    assert await pass_with(None, {}) == 0
