"""run_backfill and list_backfills over a real SQLite table of the test app."""

from __future__ import annotations

from typing import Any

import anyio

from engine import Jobs, ManualClock, Worker
from engine.backfill import BackfillRegistry
from engine.testing.blocked import wait_all_tasks_blocked
from mcp_jobs.config import Settings
from tests.backfill.support import Customers
from tests.mcp.conftest import OpenMcp
from tests.support.fix_lines import command_words


async def test_a_dry_run_plans_and_writes_nothing(
    jobs: Jobs, backfill_registry: BackfillRegistry, customers: Customers, open_mcp: OpenMcp
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    before = customers.snapshot()
    async with open_mcp() as mcp:
        dry = await mcp.ok("run_backfill", {"name": "normalize_emails"})
    assert dry["mode"] == "dry_run" and "start" not in dry
    plan = dry["plan"]
    assert plan["rows_remaining"] == 25 and plan["batches"] == 3 and plan["batch_size"] == 10
    assert plan["sample_keys"] == customers.dirty_ids[:10]
    assert plan["would_run"] is True and "blocked_by" not in plan
    assert customers.snapshot() == before
    assert (await jobs.list()).jobs == []


async def test_a_write_runs_the_pass_and_a_second_needs_force(
    jobs: Jobs, backfill_registry: BackfillRegistry, customers: Customers, open_mcp: OpenMcp
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    async with open_mcp() as mcp:
        pending = await mcp.ok("list_backfills", {"pending_only": True})
        assert [b["name"] for b in pending["backfills"]] == ["normalize_emails"]

        started = await mcp.ok("run_backfill", {"name": "normalize_emails", "write": True})
        start = started["start"]
        assert started["mode"] == "write" and start["deduped"] is False
        running = await mcp.fails(
            "run_backfill", {"name": "normalize_emails", "write": True}, "BACKFILL_RUNNING"
        )
        assert start["job_id"] in running["fix"]

        await Worker(jobs).run_until_idle()
        assert customers.remaining() == 0
        assert (await jobs.get(start["job_id"])).state == "done"

        listed = await mcp.ok("list_backfills")
        (state,) = listed["backfills"]
        assert state["pending"] is False and state["last_run"]["status"] == "completed"
        assert state["last_run"]["rows_processed"] == 25
        assert (await mcp.ok("list_backfills", {"pending_only": True}))["backfills"] == []

        plan = (await mcp.ok("run_backfill", {"name": "normalize_emails"}))["plan"]
        assert plan["would_run"] is False and plan["blocked_by"]["code"] == "BACKFILL_APPLIED"
        applied = await mcp.fails(
            "run_backfill", {"name": "normalize_emails", "write": True}, "BACKFILL_APPLIED"
        )
        # Its next call is the forced dry run (the forced write is shown in the fix only).
        assert applied["next_call"]["arguments"] == {"name": "normalize_emails", "force": True}
        forced_plan = await mcp.ok("run_backfill", applied["next_call"]["arguments"])
        assert forced_plan["mode"] == "dry_run" and forced_plan["plan"]["would_run"] is True
        forced = await mcp.ok("run_backfill", {**applied["next_call"]["arguments"], "write": True})
        assert forced["start"]["run_id"] != start["run_id"]
        trace = await jobs.trace(forced["start"]["job_id"])
        assert [e.actor for e in trace.events if e.kind == "mcp.call"] == ["mcp:run_backfill"]


async def _followed_write(
    mcp: Any, worker: Worker, clock: ManualClock, on_progress: Any = None
) -> dict[str, Any]:
    """run_backfill's write of normalize_emails, waiting 20 s, while `worker` runs what is due
    and the clock moves on a poll at a time (bounded)."""
    answer: dict[str, Any] = {}

    async def write() -> None:
        arguments = {"name": "normalize_emails", "write": True, "wait_seconds": 20}
        answer.update(await mcp.ok("run_backfill", arguments, progress_callback=on_progress))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(write)
            while not answer:
                await wait_all_tasks_blocked()
                await worker.run_until_idle()
                clock.advance(250)
    return answer


async def test_a_write_followed_here_reports_progress(
    jobs: Jobs,
    clock: ManualClock,
    backfill_registry: BackfillRegistry,
    customers: Customers,
    open_mcp: OpenMcp,
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    worker = Worker(jobs)
    async with open_mcp() as mcp:
        answer = await _followed_write(mcp, worker, clock, on_progress)
    assert answer["settled"] is True
    run = answer["run"]
    assert isinstance(run, dict) and run["status"] == "completed"
    assert seen and seen[-1] == (25, 25)


async def test_backfill_refusals(
    jobs: Jobs, backfill_registry: BackfillRegistry, customers: Customers, open_mcp: OpenMcp
) -> None:
    customers.declare(backfill_registry, name="staging_only", environments=["staging"])

    async def missing() -> str | None:
        return "migration 0042_customers_email_idx"

    customers.declare(
        backfill_registry,
        name="needs_migration",
        requires=missing,
        requires_fix="alembic upgrade head",
    )
    async with open_mcp() as mcp:
        unknown = await mcp.fails("run_backfill", {"name": "nope"}, "BACKFILL_UNKNOWN")
        assert unknown["details"]["known"] == ["needs_migration", "staging_only"]
        await mcp.fails(
            "run_backfill", {"name": "staging_only", "write": True}, "BACKFILL_ENVIRONMENT"
        )
        blocked = (await mcp.ok("run_backfill", {"name": "staging_only"}))["plan"]["blocked_by"]
        assert blocked["code"] == "BACKFILL_ENVIRONMENT"
        pending = await mcp.fails(
            "run_backfill", {"name": "needs_migration", "write": True}, "BACKFILL_MIGRATION_PENDING"
        )
        assert pending["fix"] == "alembic upgrade head"
        await mcp.fails("run_backfill", {"name": "needs_migration"}, "BACKFILL_MIGRATION_PENDING")
        await mcp.fails(
            "run_backfill",
            {"name": "staging_only", "write": True, "wait_seconds": 51},
            "LIMIT_EXCEEDED",
        )
    assert (await jobs.list()).jobs == []


async def test_diagnose_lists_pending_backfills_with_the_call_that_runs_them(
    backfill_registry: BackfillRegistry, customers: Customers, open_mcp: OpenMcp
) -> None:
    customers.declare(backfill_registry)
    async with open_mcp() as mcp:
        found = await mcp.ok("diagnose_queue")
    (pending,) = [f for f in found["findings"] if f["code"] == "BACKFILL_PENDING"]
    assert pending["severity"] == "info" and found["healthy"] is True
    call = {"tool": "run_backfill", "arguments": {"name": "normalize_emails"}}
    assert pending["next_call"] == call


async def test_a_tenant_pinned_server_refuses_to_sweep_every_tenant(
    jobs: Jobs, backfill_registry: BackfillRegistry, customers: Customers, open_mcp: OpenMcp
) -> None:
    customers.declare(backfill_registry)
    async with open_mcp(Settings(tenant="acme")) as mcp:
        await mcp.fails(
            "run_backfill", {"name": "normalize_emails", "write": True}, "TENANT_SCOPE_EXCEEDED"
        )
    assert (await jobs.list()).jobs == []


async def test_a_dry_run_refuses_wait_seconds_with_the_call_without_it(
    jobs: Jobs, backfill_registry: BackfillRegistry, customers: Customers, open_mcp: OpenMcp
) -> None:
    """A dry run starts no pass, so it has nothing to wait for: refused as an argument given
    where it has no use (as list_backfills' runs_limit without name), not silently ignored."""
    customers.declare(backfill_registry, batch_size=10)
    async with open_mcp() as mcp:
        asked = {"name": "normalize_emails", "wait_seconds": 30}
        error = await mcp.fails("run_backfill", asked, "INVALID_ARGUMENT")
        assert error["details"]["argument"] == "wait_seconds" and error["retryable"] is False
        assert error["next_call"] == {
            "tool": "run_backfill",
            "arguments": {"name": "normalize_emails"},
        }
        dry = await mcp.ok(error["next_call"]["tool"], error["next_call"]["arguments"])
        assert dry["mode"] == "dry_run"
        # 0 (the default) waits for nothing: no use, and no harm.
        await mcp.ok("run_backfill", {"name": "normalize_emails", "wait_seconds": 0})
    assert (await jobs.list()).jobs == []


async def test_a_write_that_waits_follows_the_live_pass_in_place_of_a_new_one(
    jobs: Jobs,
    clock: ManualClock,
    backfill_registry: BackfillRegistry,
    customers: Customers,
    open_mcp: OpenMcp,
) -> None:
    """Refused BACKFILL_RUNNING (retryable), a deploy script retrying its write met
    BACKFILL_APPLIED once the live pass completed, and exited 1 for a backfill applied; an
    agent then followed APPLIED's fix into a forced second pass (exploreR). A write without a
    wait, and a forced one, still are refused while the pass is live."""
    customers.declare(backfill_registry, batch_size=10)
    worker = Worker(jobs)
    async with open_mcp() as mcp:
        first = (await mcp.ok("run_backfill", {"name": "normalize_emails", "write": True}))["start"]
        await mcp.fails(
            "run_backfill", {"name": "normalize_emails", "write": True}, "BACKFILL_RUNNING"
        )
        forced = {"name": "normalize_emails", "write": True, "force": True, "wait_seconds": 20}
        await mcp.fails("run_backfill", forced, "BACKFILL_RUNNING")
        answer = await _followed_write(mcp, worker, clock)
        applied = await mcp.fails(
            "run_backfill", {"name": "normalize_emails", "write": True}, "BACKFILL_APPLIED"
        )
    start = answer["start"]
    assert isinstance(start, dict) and start["deduped"] is True
    assert (start["job_id"], start["run_id"]) == (first["job_id"], first["run_id"])
    run = answer["run"]
    assert answer["settled"] is True and isinstance(run, dict) and run["status"] == "completed"
    assert len((await jobs.list(name="backfill.pass")).jobs) == 1  # no second pass
    # Its fix rehearses the forced write; it writes nothing.
    assert command_words(applied["fix"])[:5] == [
        "mcp-jobs",
        "backfill",
        "normalize_emails",
        "--force",
        "--json",
    ]
    assert applied["next_call"] == {
        "tool": "run_backfill",
        "arguments": {"name": "normalize_emails", "force": True},
    }
