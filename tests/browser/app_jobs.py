"""The app the browser tests seed and the dashboard serves: jobs that end in every state, a
multi-step job whose second step is retried, failures under two error codes, and a backfill.

`declare` registers it into the given registries. The seeding calls it with fresh ones; the
dashboard subprocess imports `tests.browser.seed_app`, which calls it with the defaults.
"""

from __future__ import annotations

from typing import Any

import anyio
from pydantic import BaseModel

from engine import JobContext, JobRegistry, ManualClock, Permanent, Retry, job
from engine.backfill import BackfillRegistry, backfill

BACKFILL = "tag_invoices"
INVOICES = 40
SMTP_DOWN = "smtp.example.com refused the connection"


class Greet(BaseModel):
    user_id: int


class Order(BaseModel):
    order_id: int


class Invoice(BaseModel):
    invoice_id: int


class Feed(BaseModel):
    feed: str


def declare(registry: JobRegistry | None = None, backfills: BackfillRegistry | None = None) -> None:
    @job(idempotency_key=lambda i: f"greet:{i.user_id}", queue="mail", registry=registry)
    async def greet(input: Greet, ctx: JobContext) -> dict[str, Any]:
        """Say hello."""
        return {"greeted": input.user_id}

    @job(
        idempotency_key=lambda i: f"ship:{i.order_id}",
        queue="orders",
        retry=Retry(attempts=3, backoff="fixed", base_delay=1),
        registry=registry,
    )
    async def ship_order(input: Order, ctx: JobContext) -> None:
        """Reserve, charge (fails once), notify (the mail server is down): dead after three runs."""
        await ctx.step.run("reserve", lambda: {"order": input.order_id})

        def charge() -> str:
            if ctx.attempt == 1:
                raise RuntimeError("card processor timed out")
            return f"ch_{input.order_id}"

        await ctx.step.run("charge", charge)

        def notify() -> None:
            raise RuntimeError(SMTP_DOWN)

        await ctx.step.run("notify", notify)

    @job(idempotency_key=lambda i: f"fulfil:{i.order_id}", queue="orders", registry=registry)
    async def fulfil(input: Order, ctx: JobContext) -> None:
        """Reserve, then wait a day for the warehouse: suspended."""
        await ctx.step.run("reserve", lambda: input.order_id)
        await ctx.step.sleep("warehouse", 86_400)

    @job(
        idempotency_key=lambda i: f"charge:{i.invoice_id}",
        queue="billing",
        retry=Retry(attempts=2, backoff="fixed", base_delay=1),
        registry=registry,
    )
    async def charge_invoice(input: Invoice, ctx: JobContext) -> None:
        """Always fails: dead (JOB_FAILED) after two runs."""
        raise RuntimeError(f"invoice {input.invoice_id}: gateway 502")

    @job(
        idempotency_key=lambda i: f"render:{i.invoice_id}",
        queue="billing",
        timeout=1,
        retry=Retry(attempts=1),
        registry=registry,
    )
    async def render_invoice(input: Invoice, ctx: JobContext) -> None:
        """Hangs past its one-second timeout (the manual clock moves while it waits): dead with
        JOB_TIMEOUT."""
        clock = ctx.clock
        assert isinstance(clock, ManualClock)
        while True:
            clock.advance(500)
            await anyio.lowlevel.checkpoint()

    @job(idempotency_key=lambda i: f"refund:{i.invoice_id}", queue="billing", registry=registry)
    async def refund(input: Invoice, ctx: JobContext) -> None:
        """Refuses for good: failed."""
        raise Permanent(f"invoice {input.invoice_id} was never paid")

    @job(idempotency_key=lambda i: f"report:{i.user_id}", queue="reports", registry=registry)
    async def build_report(input: Greet, ctx: JobContext) -> None:
        """Waits in a paused queue."""

    @job(idempotency_key=lambda i: f"feed:{i.feed}", queue="imports", registry=registry)
    async def import_feed(input: Feed, ctx: JobContext) -> None:
        """Held by the seeded worker: running."""

    tagged: set[int] = set()

    async def count() -> int:
        return INVOICES - len(tagged)

    async def read(after: Any, limit: int) -> list[dict[str, Any]]:
        start = 0 if after is None else int(after)
        return [{"id": i} for i in range(start + 1, INVOICES + 1) if i not in tagged][:limit]

    async def handle(rows: list[dict[str, Any]]) -> None:
        tagged.update(int(r["id"]) for r in rows)

    backfill(
        name=BACKFILL,
        count=count,
        read=read,
        key=lambda row: row["id"],
        handle=handle,
        batch_size=10,
        description="tag every invoice with its tax region",
        registry=backfills,
    )
