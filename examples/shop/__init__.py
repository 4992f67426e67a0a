"""A small shop on mcp-jobs: orders, supplier prices, receipts, a cron task and a backfill.

`mcp-jobs serve --app examples.shop` and `mcp-jobs worker --app examples.shop` import this
module, which registers everything below. The shop's data lives in a SQLite file (`SHOP_DB`);
its checkouts live in the jobs database, where the outbox stages their fulfilment in the same
transaction (`checkout.py`).
"""

from __future__ import annotations

from examples.shop.backfills import normalize_emails, seed_customers
from examples.shop.checkout import OrderTakenError, checkout
from examples.shop.jobs import fulfil_order, import_supplier_prices, send_receipt
from examples.shop.tasks import nightly_price_import

__all__ = [
    "OrderTakenError",
    "checkout",
    "fulfil_order",
    "import_supplier_prices",
    "nightly_price_import",
    "normalize_emails",
    "seed_customers",
    "send_receipt",
]
