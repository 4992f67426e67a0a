"""The example app's backfill over its real `customers` table, end to end on every driver."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from engine import JobRegistry, Jobs, Worker, connect
from engine.backfill import Backfills, default_backfills, interval_ms
from engine.drivers.sqlite.library import sqlite3
from engine.errors import JobsError
from tests.backfill.support import RecordingClock


async def test_the_shop_normalizes_its_customer_emails_once(
    database_url: str, registry: JobRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = RecordingClock()
    async with await connect(database_url, clock=clock, registry=registry) as jobs:
        await _sweep(jobs, clock, tmp_path, monkeypatch)


async def _sweep(
    jobs: Jobs, clock: RecordingClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shop_db = tmp_path / "shop.db"
    monkeypatch.setenv("SHOP_DB", str(shop_db))
    from examples.shop.backfills import normalize_emails, seed_customers

    assert default_backfills.require("normalize_emails") is normalize_emails
    service = Backfills(jobs, registry=default_backfills, environment="development")

    # Before the table exists the precondition names it, and the dry run creates nothing.
    with pytest.raises(JobsError) as caught:
        await service.dry_run("normalize_emails")
    assert caught.value.code == "BACKFILL_MIGRATION_PENDING"
    assert not shop_db.exists()

    to_do = seed_customers(120)
    assert to_do == 90
    plan = await service.dry_run("normalize_emails")
    assert (plan.rows_remaining, plan.batches) == (90, 2)
    assert plan.sample_keys == [1, 2, 3, 5, 6, 7, 9, 10, 11, 13]

    start = await service.write("normalize_emails")
    pause = interval_ms(normalize_emails.rate)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(Worker(jobs).run_until_idle)
            for _ in range(plan.batches):  # the throttle between batches, on the test's clock
                await clock.wait_for_sleep(pause)
                clock.advance(pause)

    assert (await jobs.get(start.job_id)).state == "done"
    with sqlite3.connect(shop_db) as conn:
        emails = [e for (e,) in conn.execute("SELECT email FROM customers ORDER BY id")]
    conn.close()
    assert emails == [f"customer{i}@shop.example" for i in range(1, 121)]
    (run,) = await jobs.driver.backfill_runs("normalize_emails", "development")
    assert run.status == "completed" and run.rows_processed == 90 and run.cursor == 119
    assert [s.name for s in await service.list(pending_only=True)] == []
