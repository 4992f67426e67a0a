"""Where the SQLite driver spells a rule of engine/rules.py in SQL (claim, ack, stats, dedupe),
the SQL and the function agree on every case."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from engine import ManualClock, rules
from engine.drivers.base import AckWrite
from engine.drivers.sqlite import SqliteDriver
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
    expected = rules.queue_stats([r for r in rows if r.queue in wanted], NOW)
    assert await driver.stats(wanted) == expected


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
