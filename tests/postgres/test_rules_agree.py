"""Every rule the PostgreSQL driver computes in SQL agrees with its home in engine.rules, case by
case on a real server: the dedupe key and live states, which rows a claim takes, the stats
buckets, and the nack / ack / cancel / retry transitions with the events they write."""

from __future__ import annotations

import itertools
import random
from typing import TypeAlias

import asyncpg
import pytest

from engine import ManualClock, rules
from engine.drivers.postgres import PostgresDriver
from engine.errors import JobsError
from engine.settle import Settler
from schemas.jobs import JobRecord, NackOptions
from schemas.states import JOB_STATES, JobState
from tests.postgres.builders import failure, request

Sql: TypeAlias = "asyncpg.Connection[asyncpg.Record]"
HOUR_MS = 3_600_000


async def _in_state(
    driver: PostgresDriver,
    sql: Sql,
    now: int,
    key: str,
    state: JobState,
    *,
    queue: str = "default",
    tenant_id: str | None = None,
    **columns: int | None,
) -> JobRecord:
    """A row put straight into `state` (and any other columns given), as the driver reads it."""
    (result,) = await driver.enqueue([request(now, key=key, queue=queue, tenant_id=tenant_id)])
    sets = ", ".join(f"{name} = ${n}" for n, name in enumerate(["state", *columns], start=2))
    await sql.execute(
        f"UPDATE mcp_jobs.jobs SET {sets} WHERE id = $1", result.id, state, *columns.values()
    )
    return await driver.get(result.id)


async def test_the_dedupe_namespace_is_rules_dedupe_key(driver: PostgresDriver) -> None:
    now = 1
    spaces = [
        (name, tenant, key)
        for name in ("a", "b")
        for tenant in (None, "", "t")
        for key in ("k", "K")
    ]
    first: dict[rules.DedupeKey, str] = {}
    for name, tenant, key in spaces:
        (result,) = await driver.enqueue([request(now, name=name, tenant_id=tenant, key=key)])
        namespace = rules.dedupe_key(name, tenant, key)
        assert result.deduped == (namespace in first)
        assert result.id == first.setdefault(namespace, result.id)


@pytest.mark.parametrize("state", JOB_STATES)
async def test_a_row_holds_its_key_exactly_in_the_live_states(
    driver: PostgresDriver, clock: ManualClock, sql: Sql, state: JobState
) -> None:
    now = clock.now_ms()
    holder = await _in_state(driver, sql, now, "held", state)
    (again,) = await driver.enqueue([request(now, key="held")])
    assert again.deduped == (state in rules.LIVE_STATES)
    assert (again.id == holder.id) == again.deduped


async def test_a_claim_takes_exactly_the_rows_rules_calls_claimable(
    driver: PostgresDriver, clock: ManualClock, sql: Sql
) -> None:
    now = clock.now_ms()
    records: list[JobRecord] = []
    cases = itertools.product(JOB_STATES, (now - 1, now, now + 1), (None, now - 1, now, now + 1))
    for n, (state, run_at, lease_expires_at) in enumerate(cases):
        records.append(
            await _in_state(
                driver, sql, now, f"c{n}", state, run_at=run_at, lease_expires_at=lease_expires_at
            )
        )
    claimed = await driver.claim("w", len(records), 1_000)
    expected = {r.id for r in records if rules.is_claimable(r, now)}
    assert {c.record.id for c in claimed} == expected
    by_id = {r.id: r for r in records}
    for c in claimed:
        held = rules.claim_transition(by_id[c.record.id], "w", now, 1_000)
        assert c.record == held


async def test_stats_count_every_row_in_the_bucket_rules_gives_it(
    driver: PostgresDriver, clock: ManualClock, sql: Sql
) -> None:
    now = clock.now_ms()
    records: list[JobRecord] = []
    # queued_at past now: a row written by a worker whose clock runs ahead has no age yet.
    cases = itertools.product(
        JOB_STATES, (now - 5, now, now + 5), (None, now - 3, now + 3), (-12, -2, 9)
    )
    for n, (state, run_at, lease_expires_at, queued) in enumerate(cases):
        records.append(
            await _in_state(
                driver,
                sql,
                now,
                f"s{n}",
                state,
                queue=("q0", "q1")[n % 2],
                tenant_id=(None, "t1", "t2")[n % 3],
                run_at=run_at,
                queued_at=now + queued,
                lease_expires_at=lease_expires_at,
            )
        )
    for queues, tenant in ((None, None), (["q0"], None), (None, "t1"), (["q1"], "t2")):
        expected = rules.queue_stats(records, now, queues=queues, tenant_id=tenant)
        assert await driver.stats(queues, tenant_id=tenant) == expected


@pytest.mark.parametrize("seed", range(4))
async def test_the_stats_recent_window_and_its_cap_are_rules_recent_settled_since(
    driver: PostgresDriver, clock: ManualClock, sql: Sql, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Done and cancelled rows around the window's edges, ties and past-now finishes included,
    over two queues and tenants: every filter counts the rows, and finds the window (the whole
    history's), that rules.queue_stats does under a cap of 4."""
    monkeypatch.setattr(rules, "RECENT_SETTLED_CAP", 4)
    now = clock.now_ms()
    rng = random.Random(seed)
    finishes = (now - HOUR_MS - 1, now - HOUR_MS, now - 40, now - 7, now - 7, now, now + 3)
    records: list[JobRecord] = []
    for n in range(40):
        queue, tenant = rng.choice(("q0", "q1")), rng.choice((None, "t1"))
        (made,) = await driver.enqueue([request(now, key=f"r{n}", queue=queue, tenant_id=tenant)])
        state = rng.choice(("done", "done", "cancelled", "dead", "ready"))
        finished = rng.choice(finishes) if state != "ready" else None
        await sql.execute(
            "UPDATE mcp_jobs.jobs SET state = $2, finished_at = $3 WHERE id = $1",
            made.id,
            state,
            finished,
        )
        records.append(await driver.get(made.id))
    for queues, tenant in ((None, None), (["q0"], None), (None, "t1"), (["q1"], "t1")):
        expected = rules.queue_stats(records, now, queues=queues, tenant_id=tenant)
        assert await driver.stats(queues, tenant_id=tenant) == expected


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
    driver: PostgresDriver, clock: ManualClock, options: NackOptions, with_error: bool
) -> None:
    if with_error:
        options = options.model_copy(update={"error": failure("it broke")})
    now = clock.now_ms()
    (result,) = await driver.enqueue([request(now)])
    (claimed,) = await driver.claim("w", 1, 60_000)
    clock.advance(10)
    moved = await driver.nack(result.id, claimed.token, options)
    assert moved == rules.apply_nack(claimed.record, options, clock.now_ms())
    events = (await driver.load_trace(result.id)).events
    kind = rules.event_kind_for(options)
    if kind is None:
        assert events == []
    else:
        (event,) = events
        outcome = rules.nack_transition(options, clock.now_ms(), 1, now)
        data = rules.nack_event_data(options, claimed.record.attempt, outcome.run_at)
        assert (event.kind, event.data) == (kind, data)


async def test_an_ack_is_rules_ack_transition_and_clears_the_last_error(
    driver: PostgresDriver, clock: ManualClock
) -> None:
    settler = Settler(driver)
    (result,) = await driver.enqueue([request(clock.now_ms())])
    (claimed,) = await driver.claim("w", 1, 60_000)
    await driver.nack(result.id, claimed.token, NackOptions(error=failure()))
    (claimed,) = await driver.claim("w", 1, 60_000)
    assert claimed.record.last_error == failure()
    clock.advance(10)
    await settler.ack(result.id, claimed.token, {"ok": 1})
    done = await driver.get(result.id)
    assert done == rules.ack_transition(claimed.record, clock.now_ms(), {"ok": 1})
    assert done.last_error is None


@pytest.mark.parametrize("state", JOB_STATES)
async def test_cancel_follows_rules_in_every_state(
    driver: PostgresDriver, clock: ManualClock, sql: Sql, state: JobState
) -> None:
    now = clock.now_ms()
    record = await _in_state(driver, sql, now, "x", state)
    clock.advance(10)
    if not rules.can_cancel(state):
        with pytest.raises(JobsError) as raised:
            await driver.cancel(record.id, None, "op")
        assert raised.value.code == "JOB_NOT_CANCELLABLE"
        return
    cancelled = await driver.cancel(record.id, None, "op")
    assert cancelled == rules.cancel_transition(record, clock.now_ms())
    (event,) = (await driver.load_trace(record.id)).events
    assert (event.kind, event.data) == ("cancelled", rules.cancel_event_data(state))


@pytest.mark.parametrize("include_cancelled", [False, True])
@pytest.mark.parametrize("state", JOB_STATES)
async def test_retry_follows_rules_in_every_state(
    driver: PostgresDriver,
    clock: ManualClock,
    sql: Sql,
    state: JobState,
    include_cancelled: bool,
) -> None:
    now = clock.now_ms()
    record = await _in_state(driver, sql, now, "x", state)
    clock.advance(10)
    if not rules.can_retry(state, include_cancelled):
        with pytest.raises(JobsError) as raised:
            await driver.retry(record.id, None, include_cancelled, "op")
        assert raised.value.code == "JOB_NOT_RETRYABLE"
        return
    requeued = await driver.retry(record.id, None, include_cancelled, "op")
    assert requeued == rules.retry_transition(record, clock.now_ms())
    (event,) = (await driver.load_trace(record.id)).events
    assert (event.kind, event.data) == ("requeued", rules.retry_event_data(state))
