"""A prune_history write that stops at its batch limit answers `more: true` with what goes on:
for a client that confirms by token, a fresh single-use token for the same plan (its cutoffs,
taken at the instant the person confirmed) as `confirm.next_call`, so "call again" works."""

from __future__ import annotations

from typing import Any

import pytest

from engine import JobRegistry, Jobs, ManualClock
from engine.retention import DAY_MS, DEFAULT_BATCH_SIZE
from engine.testing.kit.test_retention import settle
from mcp_jobs.server import confirm_plans
from tests.mcp.support import Caller, serve

pytestmark = pytest.mark.drivers("memory", reason="the confirm flow, not the storage")


async def _follow(mcp: Caller, call: dict[str, Any]) -> dict[str, Any]:
    return (await mcp.call(call["tool"], call["arguments"])).data


async def test_more_carries_a_fresh_token_that_goes_on(
    jobs: Jobs, app: JobRegistry, mode: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(confirm_plans, "TOOL_MAX_BATCHES", 1)
    for _ in range(DEFAULT_BATCH_SIZE + 3):
        await settle(jobs.driver, "done")
    clock.advance(1)
    async with serve(jobs, mode, elicitation=False) as mcp:
        dry = await mcp.ok("prune_history", {"older_than_seconds": 0})
        first_call = dry["confirm"]["next_call"]
        first = await _follow(mcp, first_call)
        assert first["ok"] and first["more"] is True, first
        assert first["by_state"]["done"] == DEFAULT_BATCH_SIZE
        go_on = first["confirm"]["next_call"]
        assert go_on["arguments"]["confirm"] != first_call["arguments"]["confirm"]
        # Rows that expire after the confirmed instant are not the person's plan: the
        # continuation keeps its cutoffs.
        clock.advance(1_000)
        await settle(jobs.driver, "done")
        clock.advance(1_000)
        rest = await _follow(mcp, go_on)
        assert rest["ok"] and rest["more"] is False, rest
        assert rest["by_state"]["done"] == 3 and "confirm" not in rest
        assert rest["at"] == first["at"] == dry["at"]
        # Each token stays single use.
        again = await _follow(mcp, go_on)
        assert again["error"]["code"] == "CONFIRMATION_INVALID"
    assert len((await jobs.list(state="done")).jobs) == 1


async def test_a_client_that_is_asked_calls_again(
    jobs: Jobs, app: JobRegistry, mode: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(confirm_plans, "TOOL_MAX_BATCHES", 1)
    for _ in range(DEFAULT_BATCH_SIZE + 1):
        await settle(jobs.driver, "done")
    clock.advance(8 * DAY_MS)
    async with serve(jobs, mode) as mcp:
        first = await mcp.ok("prune_history", {"write": True})
        assert first["more"] is True and "confirm" not in first
        rest = await mcp.ok("prune_history", {"write": True})
        assert rest["more"] is False and rest["by_state"]["done"] == 1
