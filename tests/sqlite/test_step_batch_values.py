"""One job's step write that SQLite cannot bind fails that write alone: the writes sharing its
group commit (other jobs' steps) commit, as PostgreSQL's split batch lets them."""

from __future__ import annotations

from engine.drivers.base import StepWrite
from engine.drivers.sqlite import SqliteDriver
from schemas.steps import StepRecord
from tests.sqlite.enqueues import START, request


async def test_a_step_name_sqlite_cannot_bind_fails_only_its_own_write(
    driver: SqliteDriver,
) -> None:
    enqueued = await driver.enqueue([request(n) for n in range(5)])
    claimed = {c.record.id: c for c in await driver.claim("w", 5, 30_000)}
    names = ["fine0", "fine1", "a\ud800", "fine3", "fine4"]
    writes = [
        StepWrite(
            r.id,
            claimed[r.id].token,
            StepRecord(
                job_id=r.id,
                run_id=r.run_id,
                name=name,
                status="completed",
                started_at=START,
                finished_at=START,
                output=n,
            ),
        )
        for n, (r, name) in enumerate(zip(enqueued, names, strict=True))
    ]
    outcomes = await driver.save_steps_many(writes)
    refused = outcomes[2]
    assert refused is not None and not refused.retryable
    assert [o is None for o in outcomes] == [True, True, False, True, True]
    for n, r in enumerate(enqueued):
        if n != 2:
            assert [(s.name, s.output) for s in await driver.load_steps(r.run_id)] == [
                (names[n], n)
            ]
    assert await driver.load_steps(enqueued[2].run_id) == []
