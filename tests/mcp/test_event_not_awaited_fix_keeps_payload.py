"""A send that woke nothing because of a slip in the event's name answers EVENT_NOT_AWAITED with
the send meant as its fix. That line is what the user runs next, so it must carry the payload
they sent: without it the job wakes with no payload and its body (README "Waiting for an
event": `paid.payload["amount"]`) fails."""

from __future__ import annotations

import json
import shlex
from typing import Any

from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, Worker, job
from tests.mcp.conftest import OpenMcp


class Order(BaseModel):
    order_id: int


def _declare_waiter(registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: f"order:{i.order_id}", registry=registry)
    async def fulfil_paid(input: Order, ctx: JobContext) -> Any:
        paid = await ctx.step.wait_for_event(
            "payment.settled", match=str(input.order_id), timeout=3600
        )
        return paid.payload["amount"] if paid.received else None


async def test_the_fix_of_a_misnamed_send_resends_its_payload(
    jobs: Jobs, app: JobRegistry, open_mcp: OpenMcp
) -> None:
    _declare_waiter(app)
    await jobs.enqueue("fulfil_paid", {"order_id": 42})
    await Worker(jobs).run_until_idle()
    payload = {"amount": 1999, "note": "it's paid"}
    async with open_mcp() as mcp:
        missed = await mcp.ok(
            "send_event", {"name": "payment.setled", "key": "42", "payload": payload}
        )
    (notice,) = missed["notices"]
    assert notice["code"] == "EVENT_NOT_AWAITED", notice
    words = shlex.split(notice["fix"])
    assert words[words.index("events") : words.index("events") + 4] == [
        "events",
        "send",
        "payment.settled",
        "42",
    ], notice["fix"]
    assert "--payload" in words, notice["fix"]
    assert json.loads(words[words.index("--payload") + 1]) == payload, notice["fix"]


async def test_the_fix_of_a_misnamed_send_without_payload_has_none(
    jobs: Jobs, app: JobRegistry, open_mcp: OpenMcp
) -> None:
    _declare_waiter(app)
    await jobs.enqueue("fulfil_paid", {"order_id": 42})
    await Worker(jobs).run_until_idle()
    async with open_mcp() as mcp:
        missed = await mcp.ok("send_event", {"name": "payment.setled", "key": "42"})
    (notice,) = missed["notices"]
    assert "--payload" not in shlex.split(notice["fix"]), notice["fix"]
