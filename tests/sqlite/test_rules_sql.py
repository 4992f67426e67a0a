"""Where the SQLite driver spells a rule of engine/rules.py in SQL (claim, ack, stats, dedupe),
the SQL and the function agree on every case."""

from __future__ import annotations

import itertools
import random
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from engine import ManualClock, rules
from engine.drivers.base import AckWrite
from engine.drivers.sqlite import SqliteDriver
from engine.drivers.sqlite.library import sqlite3
from engine.errors import JobsError
from schemas.errors import ErrorPayload
from schemas.jobs import EnqueueRequest, JobFilter, JobRecord
from schemas.states import JOB_STATES

NOW = 1_767_225_600_000
# Times either side of now, and now itself: every boundary a rule compares against.
TIMES = (NOW - 1_000, NOW, NOW + 1_000)


@pytest.fixture
async def driver(tmp_path: Path) -> AsyncIterator[SqliteDriver]:
    d = SqliteDriver(str(tmp_path / "jobs.db"), clock=ManualClock(NOW))
    await d.migrate()
    yield d
    await d.close()


def _request(
    n: int, *, name: str = "send", tenant: str | None = None, key: str = ""
) -> EnqueueRequest:
    return EnqueueRequest(
        id=f"job{n:05d}",
        run_id=f"run{n:05d}",
        name=name,
        queue=f"q{n % 3}",
        tenant_id=tenant,
        idempotency_key=key or f"k{n}",
        input={"n": n},
        run_at=NOW,
        max_attempts=3,
    )


def _set(driver: SqliteDriver, job_id: str, **columns: object) -> None:
    """Write columns straight into a row: the cases no sequence of calls reaches cheaply."""
    assignments = ", ".join(f"{name} = :{name}" for name in columns)
    with sqlite3.connect(driver.path, isolation_level=None) as conn:
        conn.execute(
            f"UPDATE mcp_jobs_jobs SET {assignments} WHERE id = :id", {**columns, "id": job_id}
        )
    conn.close()


async def _every_shape(driver: SqliteDriver) -> list[JobRecord]:
    """One row for every state × run_at × queued_at × lease around now."""
    shapes = list(itertools.product(JOB_STATES, TIMES, TIMES, (None, *TIMES)))
    await driver.enqueue([_request(n) for n in range(len(shapes))])
    for n, (state, run_at, queued_at, lease) in enumerate(shapes):
        _set(
            driver,
            f"job{n:05d}",
            state=state,
            run_at=run_at,
            queued_at=queued_at,
            lease_expires_at=lease,
            token="t" if state == "running" else None,
        )
    return (await driver.list_jobs(JobFilter(limit=1000))).jobs


async def test_the_stats_statement_counts_as_rules_queue_stats(driver: SqliteDriver) -> None:
    rows = await _every_shape(driver)
    assert await driver.stats() == rules.queue_stats(rows, NOW)
    wanted = ["q1", "q2"]
    assert await driver.stats(wanted) == rules.queue_stats(rows, NOW, queues=wanted)


@pytest.mark.parametrize("seed", range(4))
async def test_the_stats_recent_window_and_its_cap_are_rules_recent_settled_since(
    driver: SqliteDriver, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Done and cancelled rows around the window's edges, ties and past-now finishes included,
    over three queues and two tenants: every filter counts the rows, and finds the window (the
    whole history's), that rules.queue_stats does under a cap of 4."""
    monkeypatch.setattr(rules, "RECENT_SETTLED_CAP", 4)
    rng = random.Random(seed)
    hour = rules.RECENT_SETTLED_MS
    finishes = (NOW - hour - 1, NOW - hour, NOW - 40, NOW - 7, NOW - 7, NOW, NOW + 3)
    await driver.enqueue([_request(n, tenant=rng.choice((None, "t1"))) for n in range(40)])
    for n in range(40):
        state = rng.choice(("done", "done", "cancelled", "dead", "ready"))
        finished = rng.choice(finishes) if state != "ready" else None
        _set(driver, f"job{n:05d}", state=state, finished_at=finished)
    rows = (await driver.list_jobs(JobFilter(limit=1000))).jobs
    for queues, tenant in ((None, None), (["q0"], None), (None, "t1"), (["q1", "q2"], "t1")):
        expected = rules.queue_stats(rows, NOW, queues=queues, tenant_id=tenant)
        assert await driver.stats(queues, tenant_id=tenant) == expected


async def test_the_claim_statement_takes_what_rules_is_claimable_allows(
    driver: SqliteDriver,
) -> None:
    rows = await _every_shape(driver)
    before = {row.id: row for row in rows}
    claimed = await driver.claim("w1", 1_000, 30_000)
    assert {c.record.id for c in claimed} == {r.id for r in rows if rules.is_claimable(r, NOW)}
    for c in claimed:
        assert c.record == rules.claim_transition(before[c.record.id], "w1", NOW, 30_000)
        assert c.lease_expires_at == NOW + 30_000


@pytest.mark.parametrize("output", [None, {"sent": True}])
async def test_the_ack_statement_writes_rules_ack_transition(
    driver: SqliteDriver, output: object
) -> None:
    await driver.enqueue([_request(1)])
    error = ErrorPayload(code="JOB_FAILED", title="t", cause="c", fix="f", retryable=True)
    _set(driver, "job00001", output='{"old":1}', last_error=error.model_dump_json())
    (held,) = await driver.claim("w1", 1, 30_000)
    assert held.record.last_error == error
    assert await driver.ack_many([AckWrite(held.record.id, held.token, output)]) == [None]
    acked = await driver.get(held.record.id)
    assert acked == rules.ack_transition(held.record, NOW, output)


TENANTS: Sequence[str | None] = (None, "", "a", "b")


@pytest.mark.parametrize(("first", "second"), list(itertools.product(TENANTS, TENANTS)))
async def test_the_unique_index_dedupes_by_rules_dedupe_key(
    driver: SqliteDriver, first: str | None, second: str | None
) -> None:
    await driver.enqueue([_request(1, tenant=first, key="same")])
    (result,) = await driver.enqueue([_request(2, tenant=second, key="same")])
    same = rules.dedupe_key("send", first, "same") == rules.dedupe_key("send", second, "same")
    assert result.deduped is same
    (other_name,) = await driver.enqueue([_request(3, name="mail", tenant=first, key="same")])
    assert other_name.deduped is False


@pytest.mark.parametrize("state", JOB_STATES)
async def test_only_a_row_in_a_live_state_holds_its_key(driver: SqliteDriver, state: str) -> None:
    await driver.enqueue([_request(1, key="same")])
    _set(driver, "job00001", state=state)
    (result,) = await driver.enqueue([_request(2, key="same")])
    assert result.deduped is (state in rules.LIVE_STATES)


async def test_a_batch_ack_writes_rules_ack_transition_per_item_and_fences_each(
    driver: SqliteDriver,
) -> None:
    """The batch statement (ACK_MANY): every item as ack_transition, a stale token refused
    for its own item only, and the slots released of exactly the jobs it settled."""
    await driver.enqueue([_request(n) for n in range(1, 6)])
    _set(driver, "job00001", output='{"old":1}')
    held = {c.record.id: c for c in await driver.claim("w1", 5, 30_000)}
    for job_id in held:
        assert await driver.acquire_slots(job_id, [("cap", 10)], NOW + 30_000) is None
    stale = "job00003"
    outputs: dict[str, object] = {"job00002": {"sent": True}, "job00004": [1, "é"], "job00005": "x"}
    writes = [
        AckWrite(job_id, "stale" if job_id == stale else held[job_id].token, outputs.get(job_id))
        for job_id in sorted(held)
    ]
    outcomes = await driver.ack_many(writes)
    assert [None if o is None else o.code for o in outcomes] == [
        None,
        None,
        "JOB_SLOT_LOST",
        None,
        None,
    ]
    for job_id, claimed in held.items():
        expected = (
            claimed.record
            if job_id == stale
            else rules.ack_transition(claimed.record, NOW, outputs.get(job_id))
        )
        assert await driver.get(job_id) == expected
    conn = sqlite3.connect(driver.path)
    left = {row[0] for row in conn.execute("SELECT job_id FROM mcp_jobs_leases")}
    conn.close()
    assert left == {stale}


async def test_a_batch_naming_one_job_twice_settles_it_once(driver: SqliteDriver) -> None:
    await driver.enqueue([_request(1)])
    (held,) = await driver.claim("w1", 1, 30_000)
    first, second = AckWrite("job00001", held.token, {"n": 1}), AckWrite("job00001", held.token, 2)
    outcomes = await driver.ack_many([first, second])
    assert [None if o is None else o.code for o in outcomes] == [None, "JOB_SLOT_LOST"]
    assert await driver.get("job00001") == rules.ack_transition(held.record, NOW, {"n": 1})


def _batch() -> list[EnqueueRequest]:
    """Every way an item of a batch meets a key: a live row's (null and '' tenant alike), a
    settled row's, an earlier item's, another tenant's or name's, and a delayed start."""
    return [
        _request(10, key="held"),
        _request(11, tenant="", key="held"),
        _request(12, key="gone"),
        _request(13, key="gone"),
        _request(14, tenant="a", key="gone"),
        _request(15, name="mail", key="gone"),
        _request(16, key="later")._replace(run_at=NOW + 1_000),
        _request(17, tenant="a", key="gone"),
    ]


async def _keys_taken(driver: SqliteDriver) -> None:
    await driver.enqueue([_request(1, key="held"), _request(2, key="gone")])
    _set(driver, "job00002", state="dead")


async def test_a_batch_enqueue_dedupes_as_one_enqueue_per_item(
    driver: SqliteDriver, tmp_path: Path
) -> None:
    """The batch statement (INSERT_JOBS) against INSERT_JOB one item at a time: the same
    results, the same rows."""
    alone = SqliteDriver(str(tmp_path / "alone.db"), clock=ManualClock(NOW))
    await alone.migrate()
    try:
        await _keys_taken(driver)
        await _keys_taken(alone)
        one_by_one = [(await alone.enqueue([request]))[0] for request in _batch()]
        assert await driver.enqueue(_batch()) == one_by_one
        deduped = [True, True, False, True, False, False, False, True]
        assert [r.deduped for r in one_by_one] == deduped
        every = JobFilter(limit=100)
        assert (await driver.list_jobs(every)).jobs == (await alone.list_jobs(every)).jobs
    finally:
        await alone.close()


async def test_a_batch_enqueue_with_on_conflict_error_stores_nothing(driver: SqliteDriver) -> None:
    await _keys_taken(driver)
    batch = _batch()
    batch[3] = batch[3]._replace(on_conflict="error")  # meets item 2 of the same batch
    with pytest.raises(JobsError) as raised:
        await driver.enqueue(batch)
    assert raised.value.code == "JOB_DUPLICATE"
    assert {job.id for job in (await driver.list_jobs(JobFilter(limit=100))).jobs} == {
        "job00001",
        "job00002",
    }
