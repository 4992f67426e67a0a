"""list_backfills with `name` pages that backfill's ledger, newest first, with a cursor; the
paging arguments are strict and bounded, and without them the tool answers as it always did."""

from __future__ import annotations

from engine import Jobs
from engine.backfill import BackfillRegistry
from schemas.backfill import BackfillRun
from tests.backfill.support import Customers
from tests.mcp.conftest import OpenMcp

RUNS = 45


def _run(n: int, environment: str, name: str = "normalize_emails") -> BackfillRun:
    return BackfillRun(
        run_id=f"run{n:04d}",
        name=name,
        checksum="c",
        environment=environment,
        status="completed" if n == 0 else "failed",
        app_version=None,
        rows_processed=n,
        started_at=1_000 + n // 2,  # pairs share a start time; run_id breaks the tie
    )


async def test_list_backfills_pages_one_backfills_runs(
    jobs: Jobs, backfill_registry: BackfillRegistry, customers: Customers, open_mcp: OpenMcp
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    async with open_mcp() as mcp:
        plain = await mcp.ok("list_backfills")
        env = plain["environment"]
        for n in range(RUNS):
            await jobs.driver.backfill_save(_run(n, env))
            await jobs.driver.backfill_save(_run(100 + n, "elsewhere-" + env))
        expected = [f"run{n:04d}" for n in reversed(range(RUNS))]

        # Without the new arguments: every declared backfill, no runs, as before.
        plain = await mcp.ok("list_backfills")
        (state,) = plain["backfills"]
        assert state["last_run"]["run_id"] == expected[0] and state["pending"] is False
        assert "runs" not in plain and "runs_cursor" not in plain

        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            args = {"name": "normalize_emails", "runs_limit": 20}
            if cursor is not None:
                args["runs_cursor"] = cursor
            page = await mcp.ok("list_backfills", args)
            assert [b["name"] for b in page["backfills"]] == ["normalize_emails"]
            assert len(page["runs"]) <= 20
            assert {r["environment"] for r in page["runs"]} == {env}
            seen += [r["run_id"] for r in page["runs"]]
            pages += 1
            cursor = page.get("runs_cursor")
            if cursor is None:
                break
        assert seen == expected and pages == 3

        default = await mcp.ok("list_backfills", {"name": "normalize_emails"})
        assert [r["run_id"] for r in default["runs"]] == expected[:20] and default["runs_cursor"]
        done = await mcp.ok("list_backfills", {"name": "normalize_emails", "pending_only": True})
        assert done["backfills"] == [] and len(done["runs"]) == 20

        for bad in ({"runs_limit": 0}, {"runs_limit": 201}):
            await mcp.fails(
                "list_backfills", {"name": "normalize_emails", **bad}, "INVALID_ARGUMENT"
            )
        await mcp.fails(
            "list_backfills",
            {"name": "normalize_emails", "runs_limit": "9"},
            "TOOL_ARGUMENTS_INVALID",
        )
        for cursor_text in ("x", "12", "12.", "abc.run1"):
            error = await mcp.fails(
                "list_backfills",
                {"name": "normalize_emails", "runs_cursor": cursor_text},
                "CURSOR_INVALID",
            )
            assert error["details"]["argument"] == "runs_cursor"
        error = await mcp.fails(
            "list_backfills", {"runs_cursor": default["runs_cursor"]}, "INVALID_ARGUMENT"
        )
        assert error["details"]["argument"] == "runs_cursor"
        error = await mcp.fails("list_backfills", {"runs_limit": 5}, "INVALID_ARGUMENT")
        assert error["details"]["argument"] == "runs_limit"
        # Mended by leaving it out: the list of backfills, whose names page their runs.
        assert error["next_call"] == {"tool": "list_backfills", "arguments": {}}
        listed = await mcp.ok("list_backfills", {})
        assert [b["name"] for b in listed["backfills"]] == ["normalize_emails"]
        # With a name no backfill can have, the cursor's fix is the list (it was prose).
        nameless = await mcp.fails(
            "list_backfills", {"name": "", "runs_cursor": "junk"}, "CURSOR_INVALID"
        )
        assert nameless["next_call"] == {"tool": "list_backfills", "arguments": {}}
        unknown = await mcp.fails("list_backfills", {"name": "nosuch"}, "BACKFILL_UNKNOWN")
        assert unknown["details"]["known"] == ["normalize_emails"]
