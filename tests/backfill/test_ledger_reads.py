"""A ledger of many runs: `list`, `pending` and a dry run's verdict stay right and read a bounded
number of ledger rows per declared backfill — the newest run and the newest completed one — never
the whole ledger (#21: the ledger is kept, so its reads must not grow with it)."""

from __future__ import annotations

from typing import Any

from engine import Jobs
from engine.backfill import BackfillRegistry, Backfills, backfill
from schemas.backfill import BackfillRun
from schemas.states import BackfillStatus

MANY = 300


class CountingLedger:
    """The driver's ledger, counting the rows each read hands back."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.rows = 0
        self.reads = 0

    async def backfill_save(self, run: BackfillRun) -> None:
        await self.inner.backfill_save(run)

    async def backfill_runs(self, *args: Any, **kwargs: Any) -> list[BackfillRun]:
        found: list[BackfillRun] = await self.inner.backfill_runs(*args, **kwargs)
        self.reads += 1
        self.rows += len(found)
        return found


def _declare(registry: BackfillRegistry, name: str, environments: tuple[str, ...] = ()) -> None:
    async def count() -> int:
        return 0

    async def read(after: Any, limit: int) -> list[Any]:
        return []

    async def handle(rows: list[Any]) -> None:
        return None

    backfill(
        name=name, count=count, read=read, key=lambda row: row, handle=handle,
        environments=environments, registry=registry,
    )  # fmt: skip


def _run(
    n: int, name: str, status: BackfillStatus, environment: str = "development"
) -> BackfillRun:
    return BackfillRun(
        run_id=f"{name}-{environment}-{n:05d}",
        name=name,
        checksum="c",
        environment=environment,
        status=status,
        app_version=None,
        rows_processed=n,
        started_at=1_000 + n,
    )


async def test_list_pending_and_the_verdict_read_a_few_rows_of_a_long_ledger(
    jobs: Jobs, backfill_registry: BackfillRegistry
) -> None:
    for name in ("applied_long_ago", "always_fails", "reran", "untouched"):
        _declare(backfill_registry, name)
    _declare(backfill_registry, "prod_only", ("production",))
    ledger = jobs.driver
    # Completed once, then failed MANY times since (forced reruns that went wrong).
    await ledger.backfill_save(_run(0, "applied_long_ago", "completed"))
    for n in range(1, MANY):
        await ledger.backfill_save(_run(n, "applied_long_ago", "failed"))
    # Never completed here, though it did in staging.
    for n in range(MANY):
        await ledger.backfill_save(_run(n, "always_fails", "failed"))
    await ledger.backfill_save(_run(MANY, "always_fails", "completed", "staging"))
    # Completed MANY times (forced reruns); the newest is still running.
    for n in range(MANY):
        await ledger.backfill_save(_run(n, "reran", "completed"))
    await ledger.backfill_save(_run(MANY, "reran", "running"))

    svc = Backfills(jobs, registry=backfill_registry, environment="development")
    counting = CountingLedger(svc.ledger)
    svc.ledger = counting

    states = {s.name: s for s in await svc.list()}
    assert {n: s.pending for n, s in states.items()} == {
        "always_fails": True,
        "applied_long_ago": False,
        "prod_only": False,
        "reran": False,
        "untouched": True,
    }
    last = {n: s.last_run.run_id if s.last_run else None for n, s in states.items()}
    assert last == {
        "always_fails": f"always_fails-development-{MANY - 1:05d}",
        "applied_long_ago": f"applied_long_ago-development-{MANY - 1:05d}",
        "prod_only": None,
        "reran": f"reran-development-{MANY:05d}",
        "untouched": None,
    }
    assert [s.name for s in await svc.list(pending_only=True)] == ["always_fails", "untouched"]
    pending = [e.details["backfill"] for e in await svc.pending() if e.details]
    assert pending == ["always_fails", "untouched"]

    # Three calls over five declared backfills: at most two rows per backfill per call.
    assert counting.rows <= 3 * 5 * 2, counting.rows
    assert counting.reads <= 3 * 5 * 2, counting.reads

    before = counting.rows
    plan = await svc.dry_run("applied_long_ago")
    assert plan.blocked_by is not None and plan.blocked_by.code == "BACKFILL_APPLIED"
    assert (await svc.dry_run("always_fails")).would_run
    assert counting.rows - before <= 2

    page = await svc.runs_page("applied_long_ago", limit=25)
    assert len(page.runs) == 25 and page.runs_cursor is not None
    assert page.runs[0].run_id == f"applied_long_ago-development-{MANY - 1:05d}"
