"""The shop's cron task: import each supplier's price list every night, in the shop's own zone.

Any worker started with `--app examples.shop` runs the scheduler in-process; one of them leads,
and each night's occurrence becomes exactly one `import_supplier_prices` job per supplier, keyed
`task:nightly-price-import:<occurrence_ms>` whichever worker fired it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from engine.tasks import task
from examples.shop.jobs import import_supplier_prices

SHOP_ZONE = "Europe/London"
SUPPLIERS = ("leafco",)


def price_imports(occurrence_ms: int) -> list[tuple[object, dict[str, str]]]:
    """One import per supplier, batched by the shop's local date of the occurrence, so a rerun
    of the same night dedupes into the same batch."""
    night = datetime.fromtimestamp(occurrence_ms / 1000, UTC).astimezone(ZoneInfo(SHOP_ZONE))
    batch = night.date().isoformat()
    return [(import_supplier_prices, {"supplier": s, "batch": batch}) for s in SUPPLIERS]


nightly_price_import = task(
    name="nightly-price-import",
    # London's clocks change between 01:00 and 02:00, so 02:30 happens exactly once every
    # night. (A time inside the gap would fire an hour later that night; one inside the repeated
    # hour fires on its first pass only. See engine/tasks/occurrences.py.)
    cron="30 2 * * *",
    tz=SHOP_ZONE,
    enqueue=price_imports,
    # After an outage, import only the latest night's prices: older lists are stale anyway.
    catch_up="skip",
    description="import every supplier's price list, nightly at 02:30 shop time",
)

__all__ = ["nightly_price_import", "price_imports"]
