"""Confirmation before writes: run_backfill and prune_history with write=true ask the person
(elicitation, both protocol eras) or need the dry run's confirm token (a client that cannot be
asked); a decline writes nothing; a token is single use, short-lived and bound to its plan."""

from __future__ import annotations

from typing import Any

import pytest

from engine import JobRegistry, Jobs, ManualClock, Worker
from engine.backfill import BackfillRegistry
from engine.retention import DAY_MS
from mcp_jobs.config import Settings
from mcp_jobs.errors import ConfirmSettingInvalidError
from mcp_jobs.server.confirm_settings import confirm_settings
from tests.backfill.support import Customers
from tests.mcp.support import Caller, Person, serve, stored_rows

BACKFILL = {"name": "normalize_emails"}
WRITE = {**BACKFILL, "write": True}


async def _done(jobs: Jobs, user_id: int) -> str:
    result = await jobs.enqueue("greet", {"user_id": user_id})
    await Worker(jobs, queues="*", prune=False).run_until_idle()
    return result.id


async def _next(mcp: Caller, call: dict[str, Any]) -> dict[str, Any]:
    answer = await mcp.call(call["tool"], call["arguments"])
    return answer.data


@pytest.fixture
def backfill(backfill_registry: BackfillRegistry, customers: Customers) -> Customers:
    customers.declare(backfill_registry, batch_size=10)
    return customers


async def test_the_person_sees_the_plan_and_an_accept_writes(
    jobs: Jobs,
    app: JobRegistry,
    mode: str,
    backfill_registry: BackfillRegistry,
    backfill: Customers,
) -> None:
    person = Person("accept")
    async with serve(jobs, mode, backfills=backfill_registry, person=person) as mcp:
        dry = await mcp.ok("run_backfill", BACKFILL)
        assert "confirm" not in dry  # a client that can be asked gets no token
        started = await mcp.ok("run_backfill", WRITE)
    assert started["mode"] == "write" and started["start"]["job_id"]
    (question,) = person.asked
    assert "run_backfill" in question and "environment development" in question
    assert "25 row(s) in 3 batch(es) of 10" in question


@pytest.mark.parametrize("action", ["decline", "cancel", "no"])
async def test_a_decline_or_cancel_writes_nothing(
    jobs: Jobs,
    app: JobRegistry,
    mode: str,
    backfill_registry: BackfillRegistry,
    backfill: Customers,
    clock: ManualClock,
    action: str,
) -> None:
    before = await stored_rows(jobs, "jobs")
    await _done(jobs, 1)
    clock.advance(8 * DAY_MS)
    settled = await stored_rows(jobs, "jobs")
    assert settled != before
    async with serve(jobs, mode, backfills=backfill_registry, person=Person(action)) as mcp:
        error = await mcp.fails("run_backfill", WRITE, "WRITE_DECLINED")
        assert error["retryable"] is False and error["next_call"]["arguments"] == BACKFILL
        ledger = await mcp.ok("list_backfills", BACKFILL)
        assert ledger["runs"] == [] and ledger["backfills"][0]["pending"] is True
        pruned = await mcp.fails("prune_history", {"write": True}, "WRITE_DECLINED")
        assert pruned["next_call"] == {"tool": "prune_history", "arguments": {}}
        assert mcp.person is not None and len(mcp.person.asked) == 2
        assert "delete 1 settled job(s)" in mcp.person.asked[1]
    assert await stored_rows(jobs, "jobs") == settled
    assert backfill.remaining() == 25


async def test_an_accepted_prune_deletes_what_was_shown(
    jobs: Jobs, app: JobRegistry, mode: str, clock: ManualClock
) -> None:
    old = await _done(jobs, 1)
    clock.advance(8 * DAY_MS)
    fresh = await _done(jobs, 2)
    async with serve(jobs, mode) as mcp:
        pruned = await mcp.ok("prune_history", {"write": True})
    assert pruned["by_state"]["done"] == 1
    assert [j.id for j in (await jobs.list(state="done")).jobs] == [fresh] != [old]


async def test_a_client_that_cannot_be_asked_confirms_in_two_steps(
    jobs: Jobs,
    app: JobRegistry,
    mode: str,
    backfill_registry: BackfillRegistry,
    backfill: Customers,
) -> None:
    async with serve(jobs, mode, backfills=backfill_registry, elicitation=False) as mcp:
        required = await mcp.fails("run_backfill", WRITE, "CONFIRMATION_REQUIRED")
        assert required["details"]["plan"]["rows_remaining"] == 25
        assert (await mcp.ok("list_backfills", BACKFILL))["runs"] == []
        write = required["next_call"]
        assert write["arguments"]["confirm"] and required["fix"].startswith("run_backfill {")
        started = await _next(mcp, write)
        assert started["ok"] and started["mode"] == "write"
        again = await _next(mcp, write)
        assert again["error"]["code"] == "CONFIRMATION_INVALID"
        assert "already used" in again["error"]["cause"]
        assert again["error"]["next_call"]["arguments"] == BACKFILL
        # `true` for the token: the fix is the write without it, which answers the token.
        guessed = await mcp.fails(
            "retry_jobs", {"write": True, "confirm": True}, "TOOL_ARGUMENTS_INVALID"
        )
        assert guessed["next_call"] == {"tool": "retry_jobs", "arguments": {"write": True}}
        asked = await _next(mcp, guessed["next_call"])
        assert asked["error"]["code"] == "CONFIRMATION_REQUIRED", asked
        assert asked["error"]["next_call"]["arguments"]["confirm"], asked


async def test_a_dry_run_token_writes_once_and_expires(
    jobs: Jobs, app: JobRegistry, mode: str, clock: ManualClock
) -> None:
    await _done(jobs, 1)
    clock.advance(8 * DAY_MS)
    settings = Settings(confirm_ttl_seconds=60)
    async with serve(jobs, mode, settings, elicitation=False) as mcp:
        dry = await mcp.ok("prune_history", {})
        offer = dry["confirm"]
        assert offer["expires_at"] == clock.now_ms() + 60_000
        clock.advance(60_000)
        expired = await _next(mcp, offer["next_call"])
        assert expired["error"]["code"] == "CONFIRMATION_INVALID"
        assert "expired" in expired["error"]["cause"]
        assert (await jobs.list(state="done")).jobs != []

        offer = (await mcp.ok("prune_history", {}))["confirm"]
        pruned = await _next(mcp, offer["next_call"])
        assert pruned["ok"] and pruned["by_state"]["done"] == 1
        assert (await jobs.list(state="done")).jobs == []


async def test_a_token_for_another_plan_or_call_is_refused(
    jobs: Jobs, app: JobRegistry, mode: str, clock: ManualClock
) -> None:
    await _done(jobs, 1)
    clock.advance(8 * DAY_MS)
    async with serve(jobs, mode, elicitation=False) as mcp:
        token = (await mcp.ok("prune_history", {}))["confirm"]["token"]
        other = await mcp.call(
            "prune_history", {"write": True, "states": ["dead"], "confirm": token}
        )
        assert (
            other.code == "CONFIRMATION_INVALID" and "another call" in other.data["error"]["cause"]
        )
        forged = await mcp.call("prune_history", {"write": True, "confirm": token[:-2] + "xx"})
        assert forged.code == "CONFIRMATION_INVALID"
        garbage = await mcp.call("prune_history", {"write": True, "confirm": "not-a-token"})
        assert garbage.code == "CONFIRMATION_INVALID"

        # Another server prunes the row the plan counted: the plan the token was for is gone.
        async with serve(jobs, mode, Settings(confirm_writes=False)) as other_server:
            await other_server.ok("prune_history", {"write": True})
        await _done(jobs, 2)
        changed = await mcp.call("prune_history", {"write": True, "confirm": token})
        assert changed.code == "CONFIRMATION_INVALID"
        assert "changed" in changed.data["error"]["cause"]
        assert len((await jobs.list(state="done")).jobs) == 1


async def test_a_backfill_plan_that_changed_voids_its_token(
    jobs: Jobs,
    app: JobRegistry,
    mode: str,
    backfill_registry: BackfillRegistry,
    backfill: Customers,
) -> None:
    async with serve(jobs, mode, backfills=backfill_registry, elicitation=False) as mcp:
        offer = (await mcp.ok("run_backfill", BACKFILL))["confirm"]
        # The app's table moves on after the dry run: one row the plan counted is clean now.
        backfill.db.execute(
            "UPDATE customers SET email = lower(trim(email)) WHERE id = ?", (backfill.dirty_ids[0],)
        )
        changed = await _next(mcp, offer["next_call"])
        assert changed["error"]["code"] == "CONFIRMATION_INVALID"
        assert (await mcp.ok("list_backfills", BACKFILL))["runs"] == []


async def test_confirmation_off_by_configuration_writes_unasked(
    jobs: Jobs,
    app: JobRegistry,
    mode: str,
    backfill_registry: BackfillRegistry,
    backfill: Customers,
) -> None:
    person = Person("decline")
    settings = Settings(confirm_writes=False)
    async with serve(jobs, mode, settings, backfills=backfill_registry, person=person) as mcp:
        started = await mcp.ok("run_backfill", WRITE)
    assert started["mode"] == "write" and person.asked == []
    async with serve(jobs, mode, settings, elicitation=False) as mcp:
        assert "confirm" not in await mcp.ok("prune_history", {})
        assert (await mcp.ok("prune_history", {"write": True}))["mode"] == "write"


def test_the_bypass_is_a_server_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_JOBS_CONFIRM_WRITES", raising=False)
    assert confirm_settings(Settings(), None).confirm_writes is True
    assert confirm_settings(Settings(), "off").confirm_writes is False
    monkeypatch.setenv("MCP_JOBS_CONFIRM_WRITES", "off")
    assert confirm_settings(Settings(), None).confirm_writes is False
    assert confirm_settings(Settings(), "on").confirm_writes is True
    monkeypatch.setenv("MCP_JOBS_CONFIRM_WRITES", "maybe")
    with pytest.raises(ConfirmSettingInvalidError):
        confirm_settings(Settings(), None)


@pytest.mark.parametrize(("typed", "confirm"), [("no", False), ("YES", True), ("0", False)])
def test_the_bypass_takes_the_words_every_switch_takes(
    monkeypatch: pytest.MonkeyPatch, typed: str, confirm: bool
) -> None:
    """MCP_JOBS_PRUNE=no was taken while MCP_JOBS_CONFIRM_WRITES=no was refused: one rule now
    (engine/switches.py)."""
    monkeypatch.setenv("MCP_JOBS_CONFIRM_WRITES", typed)
    assert confirm_settings(Settings(), None).confirm_writes is confirm


def test_a_slip_in_the_bypass_is_mended_to_the_switch_it_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MCP_JOBS_CONFIRM_WRITES", "of")
    with pytest.raises(ConfirmSettingInvalidError) as refused:
        confirm_settings(Settings(), None)
    assert refused.value.fix == "export MCP_JOBS_CONFIRM_WRITES=off"
