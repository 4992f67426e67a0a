"""The backfill ledger, read a page at a time: newest first by (started_at, run_id), a keyset
position walks every row once, a limit is a limit, a status filter finds the newest completed run,
and a cursor that is not one is refused before any driver sees it."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Jobs
from engine.backfill import BackfillRegistry, Backfills, backfill
from engine.backfill.ledger import MAX_RUNS_PAGE, runs_cursor
from engine.drivers.base import RunPosition
from engine.errors import InvalidArgumentError
from schemas.backfill import BackfillRun
from schemas.states import BackfillStatus

RUNS = 57  # in "fill"/"development", with ties of started_at that run_id breaks


def _run(
    n: int, *, name: str = "fill", environment: str = "development", **fields: Any
) -> BackfillRun:
    status: BackfillStatus = "completed" if n % 10 == 3 else "failed" if n % 2 else "running"
    values: dict[str, Any] = {
        "run_id": f"run{n:04d}",
        "name": name,
        "checksum": "c1",
        "environment": environment,
        "status": status,
        "app_version": None,
        "rows_processed": n,
        "started_at": 1_000 + n // 3,  # three runs share each start time
    }
    values.update(fields)
    return BackfillRun(**values)


async def _ledger(jobs: Jobs) -> list[BackfillRun]:
    """RUNS rows of "fill" in development, saved out of order, among rows that must not show:
    another name, another environment. Returns the expected rows, newest first."""
    ledger = jobs.driver
    mine = [_run(n) for n in range(RUNS)]
    for run in mine[::2] + mine[1::2]:
        await ledger.backfill_save(run)
    for n in range(5):
        await ledger.backfill_save(
            _run(100 + n, name="other", status="failed", started_at=5_000 + n)
        )
        await ledger.backfill_save(
            _run(200 + n, environment="production", status="failed", started_at=5_000 + n)
        )
    return sorted(mine, key=lambda r: (r.started_at, r.run_id), reverse=True)


async def test_the_ledger_pages_newest_first_and_a_position_walks_every_row_once(
    jobs: Jobs,
) -> None:
    expected = await _ledger(jobs)
    ledger = jobs.driver
    assert await ledger.backfill_runs("fill", "development") == expected

    for limit in (1, 7, RUNS, RUNS + 1):
        seen: list[BackfillRun] = []
        before: RunPosition | None = None
        pages = 0
        while True:
            page = await ledger.backfill_runs("fill", "development", before=before, limit=limit)
            assert len(page) <= limit
            pages += 1
            assert pages <= RUNS + 1, "the walk does not end"
            if not page:
                break
            seen += page
            before = RunPosition(page[-1].started_at, page[-1].run_id)
        assert seen == expected, limit
        assert len({r.run_id for r in seen}) == RUNS

    # A position between rows: only the strictly older ones, ties broken by run_id.
    tie = expected[10]
    older = await ledger.backfill_runs("fill", "development", before=RunPosition(*_key(tie)))
    assert older == expected[11:]

    # The general read (a filter absent) takes the same paging.
    everything = await ledger.backfill_runs(None, "development", limit=3)
    assert [r.name for r in everything] == ["other"] * 3


def _key(run: BackfillRun) -> tuple[int, str]:
    return run.started_at, run.run_id


async def test_a_status_filter_answers_the_newest_run_of_that_status(jobs: Jobs) -> None:
    expected = await _ledger(jobs)
    ledger = jobs.driver
    completed = [r for r in expected if r.status == "completed"]
    assert await ledger.backfill_runs("fill", "development", status="completed") == completed
    (newest,) = await ledger.backfill_runs("fill", "development", status="completed", limit=1)
    assert newest == completed[0]
    after = RunPosition(*_key(completed[1]))
    assert (
        await ledger.backfill_runs("fill", "development", status="completed", before=after)
        == completed[2:]
    )
    assert await ledger.backfill_runs("fill", "staging", status="completed", limit=1) == []
    assert await ledger.backfill_runs("nosuch", "development", limit=1) == []


async def test_the_service_pages_one_backfills_runs_with_cursors(jobs: Jobs) -> None:
    expected = await _ledger(jobs)
    svc = Backfills(jobs, registry=BackfillRegistry(), environment="development")
    seen: list[BackfillRun] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = await svc.runs_page("fill", limit=10, cursor=cursor)
        assert len(page.runs) <= 10
        seen += page.runs
        pages += 1
        cursor = page.runs_cursor
        if cursor is None:
            break
        assert cursor == runs_cursor(page.runs[-1])
    assert seen == expected and pages == 6

    first = await svc.runs_page("fill")  # default page
    assert first.runs == expected[:20] and first.runs_cursor == runs_cursor(expected[19])
    whole = await svc.runs_page("fill", limit=MAX_RUNS_PAGE)
    assert whole.runs == expected and whole.runs_cursor is None
    exact = await svc.runs_page("fill", limit=RUNS)
    assert exact.runs == expected and exact.runs_cursor is None
    assert (await svc.runs_page("nosuch")).runs == []

    for bad in ("", "x", "12", "12.", ".run1", "-1.run1", "1e3.run1", "12.a\x00b", "9" * 20 + ".r"):
        with pytest.raises(InvalidArgumentError) as raised:
            await svc.runs_page("fill", cursor=bad)
        assert (raised.value.details or {}).get("argument") == "cursor", bad
    for limit in (0, MAX_RUNS_PAGE + 1, True, 2.5, "9"):
        with pytest.raises(InvalidArgumentError) as raised:
            await svc.runs_page("fill", limit=limit)  # type: ignore[arg-type]
        assert (raised.value.details or {}).get("argument") == "limit", limit


async def test_list_and_pending_read_the_newest_and_the_newest_completed(jobs: Jobs) -> None:
    await _ledger(jobs)
    registry = BackfillRegistry()

    async def count() -> int:
        return 0

    async def read(after: Any, limit: int) -> list[Any]:
        return []

    async def handle(rows: list[Any]) -> None:
        return None

    for name in ("fill", "other", "never"):
        backfill(
            name=name, count=count, read=read, key=lambda row: row, handle=handle,
            registry=registry,
        )  # fmt: skip
    # "other" failed many times since it last completed, and never completed in production.
    for n in range(40):
        await jobs.driver.backfill_save(
            _run(300 + n, name="other", status="failed", started_at=9_000 + n)
        )
    await jobs.driver.backfill_save(
        _run(400, name="other", status="completed", started_at=10, environment="development")
    )
    development = Backfills(jobs, registry=registry, environment="development")
    states = {s.name: s for s in await development.list()}
    assert states["fill"].last_run is not None and states["fill"].last_run.run_id == "run0056"
    assert not states["fill"].pending  # completed runs among its 57
    assert states["other"].last_run is not None and states["other"].last_run.run_id == "run0339"
    assert not states["other"].pending  # an old completed run, under 40 newer failures
    assert states["never"].last_run is None and states["never"].pending
    assert [e.details["backfill"] for e in await development.pending() if e.details] == ["never"]

    production = Backfills(jobs, registry=registry, environment="production")
    assert [s.name for s in await production.list(pending_only=True)] == ["fill", "never", "other"]
