"""`mcp-jobs events send NAME KEY`: the tool's envelope under --json, the waiting job woken in
the database, --payload as JSON, --tenant scoping the event, a bad payload refused."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Worker, connect, job
from tests.cli.support import run


class Invoice(BaseModel):
    invoice_id: int


def _registry() -> JobRegistry:
    registry = JobRegistry()

    @job(idempotency_key=lambda i: f"inv:{i.invoice_id}", registry=registry)
    async def await_approval(input: Invoice, ctx: JobContext) -> Any:
        outcome = await ctx.step.wait_for_event(
            "invoice.approved", match=str(input.invoice_id), timeout=3600
        )
        return outcome.payload

    return registry


def _park(url: str, tenants: list[str | None]) -> list[str]:
    async def go() -> list[str]:
        jobs = await connect(url, registry=_registry())
        try:
            ids = [
                (await jobs.enqueue("await_approval", {"invoice_id": 1}, tenant_id=t)).id
                for t in tenants
            ]
            await Worker(jobs).run_until_idle()
            return ids
        finally:
            await jobs.close()

    return anyio.run(go)


def _resume(url: str, ids: list[str]) -> list[tuple[str, Any]]:
    async def go() -> list[tuple[str, Any]]:
        jobs = await connect(url, registry=_registry())
        try:
            await Worker(jobs).run_until_idle()
            return [((r := await jobs.get(i)).state, r.output) for i in ids]
        finally:
            await jobs.close()

    return anyio.run(go)


def test_send_wakes_the_waiting_job_with_the_payload(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (made,) = _park(url, [None])
    db = ["--database-url", url]
    argv = ["events", "send", "invoice.approved", "1", "--payload", '{"by": "ann"}', *db]
    code, sent = run(capsys, *argv, "--json")
    assert code == 0 and sent["ok"] is True and sent["woken"] == 1
    assert _resume(url, [made]) == [("done", {"by": "ann"})]
    code, text = run(capsys, "events", "send", "invoice.approved", "1", *db)
    assert code == 0 and "woke 0 waiting jobs" in text


def test_tenant_scopes_the_event(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    ours, theirs = _park(url, ["acme", "globex"])
    argv = ["events", "send", "invoice.approved", "1", "--tenant", "acme", "--database-url", url]
    code, sent = run(capsys, *argv, "--json")
    assert code == 0 and sent["woken"] == 1 and sent["tenant_id"] == "acme"
    assert _resume(url, [ours, theirs]) == [("done", None), ("suspended", None)]


def test_a_payload_that_is_not_json_is_refused(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["events", "send", "n", "k", "--payload", "{oops", "--database-url", url, "--json"]
    code, refused = run(capsys, *argv)
    assert code == 1 and refused["error"]["code"] == "INVALID_ARGUMENT"
