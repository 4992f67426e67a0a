"""The shop's jobs: fulfil an order (several steps and a durable sleep), import a supplier's prices
(a flaky upstream that dead-letters until an operator retries), send a receipt (per tenant).

Delays are a second or less so the demo and the tests finish quickly; a real shop would sleep for
minutes or hours with exactly the same code.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from pydantic import BaseModel, Field

from engine import JobContext, Retry, job, uses_environment
from examples.shop.db import transaction

# How long fulfilment waits for a card payment to settle before shipping.
SETTLE_SECONDS_ENV = "SHOP_SETTLE_SECONDS"
uses_environment(SETTLE_SECONDS_ENV)
SETTLE_SECONDS = float(os.environ.get(SETTLE_SECONDS_ENV, "1"))
# The simulated supplier rejects this many calls of every import before it answers.
SUPPLIER_OUTAGE_CALLS = 2


class OutOfStockError(Exception):
    """Raised by the reserve step; the order is retried, as a restock may land meanwhile."""


class SupplierUnavailableError(Exception):
    """The supplier's API answered 503."""


# --- fulfil_order -------------------------------------------------------------------------------


class OrderInput(BaseModel):
    order_id: int = Field(ge=1, description="the shop's order number")
    sku: str = Field(min_length=1, description="what was ordered, e.g. tea-green")
    quantity: int = Field(ge=1, le=100)


def reserve_stock(order_id: int, sku: str, quantity: int) -> dict[str, Any]:
    with transaction() as conn:
        row = conn.execute(
            "SELECT on_hand, price_cents FROM stock WHERE sku = ?", (sku,)
        ).fetchone()
        if row is None or row["on_hand"] < quantity:
            on_hand = row["on_hand"] if row else 0
            raise OutOfStockError(f"{sku}: {on_hand} on hand, {quantity} asked")
        conn.execute("UPDATE stock SET on_hand = on_hand - ? WHERE sku = ?", (quantity, sku))
        amount = row["price_cents"] * quantity
        conn.execute(
            "INSERT INTO orders (id, sku, quantity, status, amount_cents) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET status = excluded.status, "
            "amount_cents = excluded.amount_cents, updated_at = CURRENT_TIMESTAMP",
            (order_id, sku, quantity, "reserved", amount),
        )
    return {"sku": sku, "quantity": quantity, "amount_cents": amount}


def charge_card(order_id: int, amount_cents: int) -> dict[str, Any]:
    charge_id = f"ch_{order_id:06d}"
    with transaction() as conn:
        conn.execute(
            "UPDATE orders SET status = 'charged', charge_id = ?, updated_at = CURRENT_TIMESTAMP "
            "WHERE id = ?",
            (charge_id, order_id),
        )
    return {"charge_id": charge_id, "amount_cents": amount_cents}


def ship(order_id: int) -> dict[str, Any]:
    tracking = f"TRK{order_id:08d}"
    with transaction() as conn:
        conn.execute(
            "UPDATE orders SET status = 'shipped', tracking = ?, updated_at = CURRENT_TIMESTAMP "
            "WHERE id = ?",
            (tracking, order_id),
        )
    return {"tracking": tracking}


@job(
    queue="orders",
    idempotency_key=lambda i: f"order:{i.order_id}",
    retry=Retry(attempts=3, backoff="exponential", base_delay=0.5, max_delay=10),
    timeout=60,
)
async def fulfil_order(input: OrderInput, ctx: JobContext) -> dict[str, Any]:
    """Reserve stock, charge the card, wait for the payment to settle, then ship. Each step's
    result is stored, so a retry or a crashed worker never charges twice."""
    reserved = await ctx.step.run(
        "reserve-stock", reserve_stock, input.order_id, input.sku, input.quantity
    )
    charge = await ctx.step.run(
        "charge-card", charge_card, input.order_id, reserved["amount_cents"]
    )
    await ctx.step.sleep("settle-payment", SETTLE_SECONDS)
    shipment = await ctx.step.run("ship", ship, input.order_id)
    return {"order_id": input.order_id, **charge, **shipment}


# --- import_supplier_prices ---------------------------------------------------------------------


class PriceImport(BaseModel):
    supplier: str = Field(min_length=1, description="the supplier's code, e.g. leafco")
    batch: str = Field(min_length=1, description="the price list's batch id, e.g. 2026-05")


def fetch_price_list(import_run: str, supplier: str) -> list[dict[str, Any]]:
    """The supplier's API, simulated: it is in a maintenance window for the first
    SUPPLIER_OUTAGE_CALLS calls of each import, then answers."""
    with transaction() as conn:
        conn.execute("INSERT INTO supplier_calls (import_run) VALUES (?)", (import_run,))
        (calls,) = conn.execute(
            "SELECT COUNT(*) FROM supplier_calls WHERE import_run = ?", (import_run,)
        ).fetchone()
    if calls <= SUPPLIER_OUTAGE_CALLS:
        raise SupplierUnavailableError(
            f"{supplier} answered 503 Service Unavailable (maintenance window, call {calls})"
        )
    return [{"sku": "tea-green", "price_cents": 475}, {"sku": "tea-black", "price_cents": 425}]


def apply_prices(prices: list[dict[str, Any]]) -> int:
    with transaction() as conn:
        conn.executemany(
            "UPDATE stock SET price_cents = :price_cents WHERE sku = :sku",
            [dict(p) for p in prices],
        )
    return len(prices)


@job(
    queue="catalog",
    idempotency_key=lambda i: f"prices:{i.supplier}:{i.batch}",
    retry=Retry(attempts=2, backoff="fixed", base_delay=0.2),
)
async def import_supplier_prices(input: PriceImport, ctx: JobContext) -> dict[str, Any]:
    """Fetch a supplier's price list and apply it. The supplier is often down for a while: after
    its two attempts the job dead-letters, and an operator retries it once the supplier is up."""
    prices = await ctx.step.run("fetch-price-list", fetch_price_list, ctx.run_id, input.supplier)
    updated = await ctx.step.run("apply-prices", apply_prices, prices)
    return {"supplier": input.supplier, "batch": input.batch, "prices_updated": updated}


# --- send_receipt (per tenant) ------------------------------------------------------------------


class ReceiptInput(BaseModel):
    order_id: int = Field(ge=1)
    email: str = Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$", description="where to send it")


def record_receipt(tenant: str, order_id: int, email: str) -> bool:
    with transaction() as conn:
        try:
            conn.execute(
                "INSERT INTO receipts (order_id, tenant, email) VALUES (?, ?, ?)",
                (order_id, tenant, email),
            )
        except sqlite3.IntegrityError:
            return False  # already sent: a replay must not mail the customer twice
    return True


@job(
    queue="emails",
    idempotency_key=lambda i: f"receipt:{i.order_id}",
    tenant_required=True,
    retry=Retry(attempts=5, base_delay=1),
    priority=5,  # a customer waits for it: ahead of the mail queue's bulk sends
)
async def send_receipt(input: ReceiptInput, ctx: JobContext) -> dict[str, Any]:
    """Email the order's receipt. Each storefront is a tenant: the same order number in two
    storefronts is two receipts, never one swallowing the other."""
    assert ctx.tenant_id is not None  # tenant_required: the engine refused an enqueue without
    sent = await ctx.step.run(
        "send-email", record_receipt, ctx.tenant_id, input.order_id, input.email
    )
    return {"order_id": input.order_id, "tenant": ctx.tenant_id, "sent": sent}
