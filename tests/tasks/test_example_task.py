"""The example app's cron task fires one price import per supplier, batched by the shop's date."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from engine import ManualClock, Scheduler, connect, default_registry, describe_tasks
from examples.shop.tasks import SHOP_ZONE, nightly_price_import


async def test_the_nightly_price_import_fires_once_per_night_in_shop_time() -> None:
    london = ZoneInfo(SHOP_ZONE)
    # The evening before the clocks go forward (01:00 -> 02:00): 02:30 still happens, once.
    clock = ManualClock(int(datetime(2026, 3, 28, 20, tzinfo=london).timestamp() * 1000))
    jobs = await connect("memory://", clock=clock, registry=default_registry)
    try:
        (described,) = await describe_tasks(jobs, nightly_price_import.name, count=2)
        assert [o.local for o in described.next_occurrences] == [
            "2026-03-29T02:30:00+01:00",
            "2026-03-30T02:30:00+01:00",
        ]
        scheduler = Scheduler(jobs, holder="example")
        clock.set(described.next_occurrences[1].at)  # both nights due; catch_up='skip'
        (fired,) = (await scheduler.round()).fired
        assert fired.occurrence_ms == described.next_occurrences[1].at
        (record,) = (await jobs.list()).jobs
        assert record.name == "import_supplier_prices"
        assert record.input == {"supplier": "leafco", "batch": "2026-03-30"}
        assert record.idempotency_key == f"task:nightly-price-import:{fired.occurrence_ms}"
    finally:
        await jobs.close()
