"""Every rule the Redis driver computes in a Lua script agrees with its home in engine.rules, case
by case on a real server: which rows a claim takes, and the nack / ack / heartbeat / cancel /
retry transitions (settle_scripts.py) with the events they write. Each case compares the hash
the script stored with the rule's record, and the indexes the script moved it into with the
ones transitions.transition (the Python-built write) gives the same record."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest

from engine import Jobs, ManualClock, rules
from engine.drivers.base import AckWrite
from engine.errors import JobsError
from engine.retry import Retry, retry_delay_ms
from schemas.errors import ErrorPayload
from schemas.jobs import EnqueueRequest, JobRecord, NackOptions
from schemas.states import JOB_STATES, JobState

pytest.importorskip("redis", reason="the redis extra is not installed")

from engine.drivers.redis import RedisDriver
from engine.drivers.redis.codec import dedupe_field, failing_group
from engine.drivers.redis.store import Store
from engine.drivers.redis.transitions import transition

_serial = itertools.count()


def _store(driver: RedisDriver) -> Store:
    return cast(Store, driver._store)  # pyright: ignore[reportPrivateUsage]


def _request(now: int, key: str, *, max_attempts: int = 3, priority: int = 0) -> EnqueueRequest:
    n = next(_serial)
    return EnqueueRequest(
        id=f"{n:032x}",
        run_id=f"{10_000 + n:032x}",
        name="work",
        queue="default",
        tenant_id="t",
        idempotency_key=key,
        input={"key": key},
        run_at=now,
        max_attempts=max_attempts,
        priority=priority,
    )


def failure(cause: str = "boom") -> ErrorPayload:
    return ErrorPayload(
        code="JOB_FAILED", title="the job's body raised", cause=cause, fix="-", retryable=True
    )


async def _in_state(
    driver: RedisDriver, now: int, key: str, state: JobState, **fields: Any
) -> JobRecord:
    """A row put straight into `state` (and any other fields given) by the Python-built write,
    as the driver reads it back; a running row gets a lease token (`tok-<key>`)."""
    (result,) = await driver.enqueue([_request(now, key)])
    old = await driver.get(result.id)
    new = old.model_copy(update={"state": state, **fields})
    store = _store(driver)
    w = transition(store.keys, old, new)
    if state in ("running", "cancelled"):
        w.op("HSET", store.keys.job(new.id), "token", f"tok-{key}")
    assert await store.apply(w) >= 0
    return await driver.get(result.id)


async def _assert_stored(driver: RedisDriver, expected: JobRecord) -> None:
    """The hash holds `expected`, ranked by rules.claim_rank, and sits in exactly the indexes
    its state decides (the ones transitions.transition writes)."""
    store = _store(driver)
    keys = store.keys
    assert await driver.get(expected.id) == expected
    pipe = store.client.pipeline(transaction=False)
    pipe.hget(keys.job(expected.id), "rank")
    pipe.zscore(keys.queue(expected.queue), expected.id)
    pipe.zscore(keys.leases, expected.id)
    pipe.sismember(keys.live, expected.id)
    pipe.hget(
        keys.dedupe, dedupe_field(expected.name, expected.tenant_id, expected.idempotency_key)
    )
    pipe.zscore(keys.settled, expected.id)
    pipe.sismember(keys.failing, expected.id)
    pipe.zscore(keys.by_name(expected.name), expected.id)
    pipe.zscore(keys.by_tenant(expected.tenant_id or ""), expected.id)
    pipe.zscore(keys.by_queue(expected.queue), expected.id)
    for state in rules.SETTLING_STATES:
        group = failing_group(state, expected.tenant_id, expected.queue)
        pipe.zscore(keys.failing_group(group), expected.id)
    (
        rank,
        queued,
        leased,
        live,
        holder,
        settled,
        failing,
        named,
        tenanted,
        in_queue,
        *grouped,
    ) = await pipe.execute()
    # The indexes a list by name, tenant or queue walks (reads.py) hold every job of theirs.
    assert named == 0 and (tenanted == 0) == (expected.tenant_id is not None) and in_queue == 0
    assert int(rank) == rules.claim_rank(expected)[0]
    waiting = expected.state in rules.WAITING_STATES
    assert (queued is not None) == waiting
    if waiting:
        assert int(queued) == rules.claim_rank(expected)[0]
    running = expected.state == "running" and expected.lease_expires_at is not None
    assert leased == (expected.lease_expires_at if running else None)
    is_live = expected.state in rules.LIVE_STATES
    assert bool(live) == is_live
    assert (holder == expected.id) == is_live
    assert settled == (None if is_live else (expected.finished_at or 0))
    assert bool(failing) == (expected.state in rules.SETTLING_STATES)
    assert [g is not None for g in grouped] == [s == expected.state for s in rules.SETTLING_STATES]
    # A group is listed while it holds jobs, no longer (the reads walk the listed ones).
    for group in await store.client.smembers(keys.failing_groups):
        assert await store.client.exists(keys.failing_group(group)), group


async def test_a_claim_takes_exactly_the_rows_rules_calls_claimable(
    jobs: Jobs, clock: ManualClock
) -> None:
    driver = cast(RedisDriver, jobs.driver)
    now = clock.now_ms()
    records: list[JobRecord] = []
    cases = itertools.product(JOB_STATES, (now - 1, now, now + 1), (None, now - 1, now, now + 1))
    for n, (state, run_at, lease_expires_at) in enumerate(cases):
        records.append(
            await _in_state(
                driver, now, f"c{n}", state, run_at=run_at, lease_expires_at=lease_expires_at
            )
        )
    claimed = await driver.claim("w", len(records), 1_000)
    expected = {r.id for r in records if rules.is_claimable(r, now)}
    assert {c.record.id for c in claimed} == expected
    by_id = {r.id: r for r in records}
    for c in claimed:
        held = rules.claim_transition(by_id[c.record.id], "w", now, 1_000)
        assert c.record == held
        await _assert_stored(driver, held)


_NACK_FLAGS = ("delay_ms", "counts_as_attempt", "park", "dead_letter", "fail")
NACKS = [
    NackOptions(**dict(zip(_NACK_FLAGS, f, strict=True)))
    for f in itertools.product(
        (0, 5_000), (True, False), (False, True), (False, True), (False, True)
    )
]


@pytest.mark.parametrize("with_error", [False, True], ids=["no-error", "error"])
@pytest.mark.parametrize(
    "options", NACKS, ids=lambda o: ",".join(f"{k}={getattr(o, k)}" for k in _NACK_FLAGS)
)
async def test_a_nack_moves_the_row_and_writes_the_event_rules_say(
    jobs: Jobs, clock: ManualClock, options: NackOptions, with_error: bool
) -> None:
    driver = cast(RedisDriver, jobs.driver)
    if with_error:
        options = options.model_copy(update={"error": failure("it broke")})
    now = clock.now_ms()
    (result,) = await driver.enqueue([_request(now, "k", priority=3)])
    # A previous error, so that a nack naming none visibly keeps it.
    (claimed,) = await driver.claim("w", 1, 60_000)
    await driver.nack(result.id, claimed.token, NackOptions(error=failure("before")))
    (claimed,) = await driver.claim("w", 1, 60_000)
    assert await driver.acquire_slots(result.id, [("job:work", 1)], now + 60_000) is None
    clock.advance(10)
    moved = await driver.nack(result.id, claimed.token, options)
    expected = rules.apply_nack(claimed.record, options, clock.now_ms())
    assert moved == expected
    await _assert_stored(driver, expected)
    # The nack released the job's limiter slot: another job takes the cap of one.
    assert await driver.acquire_slots("other", [("job:work", 1)], now + 60_000) is None
    events = (await driver.load_trace(result.id)).events[1:]  # after the first nack's
    kind = rules.event_kind_for(options)
    if kind is None:
        assert events == []
    else:
        (event,) = events
        data = rules.nack_event_data(options, claimed.record.attempt, expected.run_at)
        assert (event.kind, event.data, event.tenant_id, event.at) == (
            kind,
            data,
            "t",
            clock.now_ms(),
        )
    # Settled for good or not, the token no longer holds it: JOB_SLOT_LOST, nothing written.
    with pytest.raises(JobsError) as raised:
        await driver.nack(result.id, claimed.token, options)
    assert raised.value.code == "JOB_SLOT_LOST"
    assert await driver.get(result.id) == expected


@pytest.mark.parametrize("backoff", ["fixed", "linear", "exponential"])
async def test_retries_follow_the_policy_arithmetic_for_every_attempt(
    jobs: Jobs, clock: ManualClock, backoff: Any
) -> None:
    """As run_job._after_failure: the policy's delay after each failed attempt (computed in
    Python and passed in), dead after the last one."""
    driver = cast(RedisDriver, jobs.driver)
    policy = Retry(attempts=5, backoff=backoff, base_delay=1.5, max_delay=5.0)
    (result,) = await driver.enqueue([_request(clock.now_ms(), "r", max_attempts=5)])
    for attempt in range(1, 6):
        (claimed,) = await driver.claim("w", 1, 60_000)
        assert claimed.record.attempt == attempt
        clock.advance(7)
        error = failure(f"attempt {attempt}")
        if attempt >= claimed.record.max_attempts:
            options = NackOptions(error=error, dead_letter=True)
        else:
            options = NackOptions(delay_ms=retry_delay_ms(policy, attempt), error=error)
        moved = await driver.nack(result.id, claimed.token, options)
        expected = rules.apply_nack(claimed.record, options, clock.now_ms())
        assert moved == expected
        await _assert_stored(driver, expected)
        if moved.state == "delayed":
            assert moved.run_at == clock.now_ms() + retry_delay_ms(policy, attempt)
            assert await driver.claim("w", 1, 60_000) == []  # not before its delay
            clock.advance(retry_delay_ms(policy, attempt))
    assert (await driver.get(result.id)).state == "dead"
    trace = (await driver.load_trace(result.id)).events
    assert [(e.kind, (e.data or {})["attempt"]) for e in trace] == [
        ("retried", 1),
        ("retried", 2),
        ("retried", 3),
        ("retried", 4),
        ("dead", 5),
    ]


@pytest.mark.parametrize("output", [None, {"ok": 1}], ids=["no-output", "output"])
async def test_an_ack_is_rules_ack_transition_and_clears_the_last_error(
    jobs: Jobs, clock: ManualClock, output: Any
) -> None:
    driver = cast(RedisDriver, jobs.driver)
    (result,) = await driver.enqueue([_request(clock.now_ms(), "a")])
    (claimed,) = await driver.claim("w", 1, 60_000)
    await driver.nack(result.id, claimed.token, NackOptions(error=failure()))
    (claimed,) = await driver.claim("w", 1, 60_000)
    assert claimed.record.last_error == failure()
    assert await driver.acquire_slots(result.id, [("job:work", 1)], clock.now_ms() + 60_000) is None
    clock.advance(10)
    (other,) = await driver.enqueue([_request(clock.now_ms(), "b")])
    settled, stale = await driver.ack_many(
        [AckWrite(result.id, claimed.token, output), AckWrite(other.id, "stale", output)]
    )
    assert settled is None
    assert stale is not None and stale.code == "JOB_SLOT_LOST"
    done = await driver.get(result.id)
    assert done == rules.ack_transition(claimed.record, clock.now_ms(), output)
    assert done.last_error is None
    await _assert_stored(driver, done)
    # The ack released the job's limiter slot (its expiry is still ahead): the cap is free.
    assert await driver.acquire_slots("other", [("job:work", 1)], clock.now_ms() + 60_000) is None
    (again,) = await driver.ack_many([AckWrite(result.id, claimed.token, output)])
    assert again is not None and again.code == "JOB_SLOT_LOST"


@pytest.mark.parametrize("state", JOB_STATES)
async def test_a_heartbeat_extends_only_the_holders_running_lease(
    jobs: Jobs, clock: ManualClock, state: JobState
) -> None:
    driver = cast(RedisDriver, jobs.driver)
    now = clock.now_ms()
    record = await _in_state(driver, now, "h", state, lease_expires_at=now + 5)
    clock.advance(10)
    if state not in ("running", "cancelled"):
        with pytest.raises(JobsError) as raised:
            await driver.heartbeat(record.id, "tok-h", 1_000)
        assert raised.value.code == "JOB_SLOT_LOST"
        return
    with pytest.raises(JobsError) as raised:
        await driver.heartbeat(record.id, "stale", 1_000)
    assert raised.value.code == "JOB_SLOT_LOST"
    beat = await driver.heartbeat(record.id, "tok-h", 1_000)
    if state == "cancelled":
        assert (beat.cancel_requested, beat.lease_expires_at) == (True, now + 5)
        assert await driver.get(record.id) == record
        return
    assert (beat.cancel_requested, beat.lease_expires_at) == (False, clock.now_ms() + 1_000)
    extended = record.model_copy(update={"lease_expires_at": clock.now_ms() + 1_000})
    await _assert_stored(driver, extended)


@pytest.mark.parametrize("state", JOB_STATES)
async def test_cancel_follows_rules_in_every_state(
    jobs: Jobs, clock: ManualClock, state: JobState
) -> None:
    driver = cast(RedisDriver, jobs.driver)
    now = clock.now_ms()
    record = await _in_state(driver, now, "x", state, lease_expires_at=now + 60_000)
    clock.advance(10)
    with pytest.raises(JobsError) as raised:
        await driver.cancel(record.id, "another tenant", "op")
    assert raised.value.code == "JOB_NOT_FOUND"
    if not rules.can_cancel(state):
        with pytest.raises(JobsError) as raised:
            await driver.cancel(record.id, None, "op")
        assert raised.value.code == "JOB_NOT_CANCELLABLE"
        assert await driver.get(record.id) == record
        return
    cancelled = await driver.cancel(record.id, "t", "op")
    expected = rules.cancel_transition(record, clock.now_ms())
    assert cancelled == expected
    await _assert_stored(driver, expected)
    (event,) = (await driver.load_trace(record.id)).events
    assert (event.kind, event.data, event.actor, event.tenant_id) == (
        "cancelled",
        rules.cancel_event_data(state),
        "op",
        "t",
    )
    # A running holder hears the cancel on its heartbeat, and cannot settle any more.
    if state == "running":
        assert (await driver.heartbeat(record.id, "tok-x", 1_000)).cancel_requested
    with pytest.raises(JobsError) as raised:
        await driver.nack(record.id, "tok-x", NackOptions())
    assert raised.value.code == "JOB_SLOT_LOST"


@pytest.mark.parametrize("include_cancelled", [False, True])
@pytest.mark.parametrize("state", JOB_STATES)
async def test_retry_follows_rules_in_every_state(
    jobs: Jobs, clock: ManualClock, state: JobState, include_cancelled: bool
) -> None:
    driver = cast(RedisDriver, jobs.driver)
    now = clock.now_ms()
    record = await _in_state(driver, now, "x", state, priority=2, finished_at=now)
    clock.advance(10)
    if not rules.can_retry(state, include_cancelled):
        with pytest.raises(JobsError) as raised:
            await driver.retry(record.id, None, include_cancelled, "op")
        assert raised.value.code == "JOB_NOT_RETRYABLE"
        assert await driver.get(record.id) == record
        return
    requeued = await driver.retry(record.id, None, include_cancelled, "op")
    expected = rules.retry_transition(record, clock.now_ms())
    assert requeued == expected
    await _assert_stored(driver, expected)
    (event,) = (await driver.load_trace(record.id)).events
    assert (event.kind, event.data, event.actor) == (
        "requeued",
        rules.retry_event_data(state),
        "op",
    )


async def test_a_retry_refuses_while_another_live_job_holds_the_key(
    jobs: Jobs, clock: ManualClock
) -> None:
    driver = cast(RedisDriver, jobs.driver)
    now = clock.now_ms()
    dead = await _in_state(driver, now, "d", "dead", finished_at=now)
    (holder,) = await driver.enqueue([_request(now, "d")])
    with pytest.raises(JobsError) as raised:
        await driver.retry(dead.id, None, False, "op")
    assert raised.value.code == "JOB_DUPLICATE"
    assert raised.value.details == {"job_id": holder.id}
    assert await driver.get(dead.id) == dead


async def test_each_settle_and_operator_action_is_one_script_call(
    jobs: Jobs, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never a read in Python before the write: each transition sends one EVALSHA (ack_many one
    pipeline of them), and nothing else."""
    from redis.asyncio.client import Pipeline

    driver = cast(RedisDriver, jobs.driver)
    client = _store(driver).client
    sent: list[list[str]] = []
    direct = client.execute_command
    pipelined = Pipeline.execute

    async def execute_command(*args: Any, **options: Any) -> Any:
        sent.append([str(args[0])])
        return await direct(*args, **options)

    async def execute(self: Pipeline, raise_on_error: bool = True) -> Any:
        sent.append([str(args[0]) for args, _ in self.command_stack])
        return await pipelined(self, raise_on_error)

    now = clock.now_ms()
    results = await driver.enqueue([_request(now, f"o{n}") for n in range(4)])
    claimed = {c.record.id: c.token for c in await driver.claim("w", 4, 60_000)}
    a, b, c, d = (r.id for r in results)
    monkeypatch.setattr(client, "execute_command", execute_command)
    monkeypatch.setattr(Pipeline, "execute", execute)
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: driver.heartbeat(a, claimed[a], 1_000),
        lambda: driver.nack(a, claimed[a], NackOptions(error=failure(), fail=True)),
        lambda: driver.retry(a, None, False, "op"),
        lambda: driver.cancel(a, "t", "op"),
        lambda: driver.ack_many([AckWrite(i, claimed[i], {"ok": 1}) for i in (b, c, d)]),
        lambda: driver.nack(b, claimed[b], NackOptions()),  # stale: refused in the one call
    ]
    for call in calls:
        sent.clear()
        try:
            await call()
        except JobsError as refused:
            assert refused.code == "JOB_SLOT_LOST"
        assert sent in ([["EVALSHA"]], [["EVALSHA"] * 3]), sent
