"""A backfill runs only through run_backfill's dry run and confirmation: its pass job is neither
enqueued, described nor rerun as an ordinary job; a dry run that is blocked hands out no token; a
guessed rerun is never a next_call; and a name in another spelling is mended like other names."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from engine import Jobs, ManualClock, Worker
from engine.backfill import PASS_JOB, BackfillRegistry
from tests.backfill.support import Customers
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import serve

BACKFILL = {"name": "normalize_emails"}
DRY_RUN = {"tool": "run_backfill", "arguments": BACKFILL}
SNEAKY = {"name": "normalize_emails", "run_id": "sneaky1", "environment": "production"}


@pytest.fixture
def backfill(backfill_registry: BackfillRegistry, customers: Customers) -> Customers:
    customers.declare(backfill_registry, batch_size=10)
    return customers


async def test_the_pass_is_not_an_ordinary_job(
    jobs: Jobs, backfill: Customers, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        refused = await mcp.fails(
            "enqueue_job", {"name": PASS_JOB, "input": {**SNEAKY, "force": True}}, "JOB_INTERNAL"
        )
        assert refused["retryable"] is False and refused["next_call"] == DRY_RUN
        assert "mcp-jobs backfill normalize_emails" in refused["fix"]
        described = await mcp.ok("describe_jobs")
        assert PASS_JOB not in [d["name"] for d in described["jobs"]]
        named = await mcp.fails("describe_jobs", {"name": PASS_JOB}, "JOB_INTERNAL")
        assert named["next_call"] == {"tool": "list_backfills", "arguments": {}}
        state = (await mcp.ok("list_backfills", BACKFILL))["backfills"][0]
        assert state["pending"] is True
    assert (await jobs.list()).jobs == [] and backfill.remaining() == 25


async def test_a_pass_is_rerun_through_run_backfill_not_retry_job(
    jobs: Jobs, backfill: Customers, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        started = await mcp.ok("run_backfill", {**BACKFILL, "write": True})
        job_id = started["start"]["job_id"]
        await Worker(jobs).run_until_idle()
        before = (await mcp.ok("list_backfills", BACKFILL))["runs"]
        for step in ("start", "batch-1", "Batch-1"):
            refused = await mcp.fails(
                "retry_job", {"job_id": job_id, "from_step": step}, "JOB_INTERNAL"
            )
            assert refused["retryable"] is False and refused["next_call"] == DRY_RUN
        assert (await mcp.ok("list_backfills", BACKFILL))["runs"] == before


async def test_step_unknown_offers_the_step_meant_and_runs_nothing(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    """Any job's rerun: a step in another spelling is named in the fix; the next call reads."""
    result = await jobs.enqueue("fulfil", {"order_id": 1})
    worker = Worker(jobs)
    await worker.run_until_idle()
    clock.advance(10_000)  # past the "settle" sleep
    await worker.run_until_idle()
    async with open_mcp() as mcp:
        unknown = await mcp.fails(
            "retry_job", {"job_id": result.id, "from_step": "Ship"}, "STEP_UNKNOWN"
        )
        assert unknown["details"]["meant"] == "ship"
        assert f"jobs retry {result.id} --from-step ship " in unknown["fix"]
        assert unknown["next_call"] == {"tool": "inspect_job", "arguments": {"job_id": result.id}}
    assert (await jobs.get(result.id)).state == "done"


async def test_a_blocked_dry_run_hands_out_no_token(
    jobs: Jobs, mode: str, backfill_registry: BackfillRegistry, backfill: Customers
) -> None:
    async with serve(jobs, mode, backfills=backfill_registry, elicitation=False) as mcp:
        offer = (await mcp.ok("run_backfill", BACKFILL))["confirm"]
        assert (await mcp.call(offer["next_call"]["tool"], offer["next_call"]["arguments"])).data[
            "ok"
        ]
        await Worker(jobs).run_until_idle()

        blocked = await mcp.ok("run_backfill", BACKFILL)
        assert blocked["plan"]["would_run"] is False and "confirm" not in blocked
        # A write of it answers the refusal itself, not a confirmation that leads to it.
        applied = await mcp.fails("run_backfill", {**BACKFILL, "write": True}, "BACKFILL_APPLIED")
        forced_dry_run = {"tool": "run_backfill", "arguments": {**BACKFILL, "force": True}}
        assert applied["next_call"] == forced_dry_run
        assert "--force --json" in applied["fix"] and "--write" not in applied["fix"]
        forced = await mcp.ok("run_backfill", applied["next_call"]["arguments"])
        assert forced["mode"] == "dry_run" and forced["plan"]["would_run"] is True
        assert forced["confirm"]["next_call"]["arguments"]["force"] is True


async def test_one_token_raced_writes_once_and_the_rest_are_refused_for_good(
    jobs: Jobs, mode: str, backfill_registry: BackfillRegistry, backfill: Customers
) -> None:
    async with serve(jobs, mode, backfills=backfill_registry, elicitation=False) as mcp:
        write = (await mcp.ok("run_backfill", BACKFILL))["confirm"]["next_call"]
        answers: list[dict[str, Any]] = []

        async def confirm() -> None:
            answers.append((await mcp.call(write["tool"], write["arguments"])).data)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                for _ in range(4):
                    group.start_soon(confirm)
    assert len([a for a in answers if a["ok"]]) == 1
    refused = [a["error"] for a in answers if not a["ok"]]
    assert [(e["code"], e["retryable"]) for e in refused] == [("CONFIRMATION_INVALID", False)] * 3
    assert len((await jobs.list(name=PASS_JOB)).jobs) == 1


async def test_list_backfills_mends_another_spelling(
    backfill: Customers, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        unknown = await mcp.fails(
            "list_backfills", {"name": "Normalize_Emails"}, "BACKFILL_UNKNOWN"
        )
        assert unknown["next_call"] == {"tool": "list_backfills", "arguments": BACKFILL}
        assert unknown["fix"] == 'list_backfills {"name": "normalize_emails"}'


async def test_the_backfill_prompt_refuses_an_unknown_backfill(
    backfill: Customers, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        for name, meant in (("nope", None), ("Normalize_Emails", "normalize_emails")):
            with pytest.raises(MCPError) as caught:
                await mcp.client.get_prompt("run_backfill_safely", {"name": name})
            error = caught.value.error
            assert error.code == INVALID_PARAMS and "BACKFILL_UNKNOWN" in error.message
            assert isinstance(error.data, dict) and error.data["code"] == "BACKFILL_UNKNOWN"
            assert error.data.get("meant") == meant
            assert error.data["known"] == ["normalize_emails"]
        rendered = await mcp.client.get_prompt("run_backfill_safely", BACKFILL)
        assert '"name": "normalize_emails"' in rendered.messages[0].content.text  # type: ignore[union-attr]
