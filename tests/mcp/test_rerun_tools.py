"""`retry_job from_step` (a rerun in a new run, engine/reruns.py) and `inspect_job run_id` (an
earlier run's steps): answers, errors with runnable fixes, the audit, the tenant pin and the
read-only server."""

from __future__ import annotations

import pytest

from engine import Jobs, ManualClock, Worker
from mcp_jobs.config import Settings
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import audit_log


async def _done_order(jobs: Jobs, clock: ManualClock, order_id: int = 1) -> str:
    r = await jobs.enqueue("fulfil", {"order_id": order_id})
    worker = Worker(jobs)
    await worker.run_until_idle()
    clock.advance(10_000)  # past the "settle" sleep
    await worker.run_until_idle()
    assert (await jobs.get(r.id)).state == "done"
    return r.id


async def test_retry_from_a_step_makes_a_linked_run_and_the_old_one_stays_readable(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    audited = audit_log(jobs, monkeypatch)
    job_id = await _done_order(jobs, clock)
    old_run = (await jobs.get(job_id)).run_id
    async with open_mcp() as mcp:
        rerun = await mcp.ok("retry_job", {"job_id": job_id, "from_step": "ship"})
        assert rerun["rerun_of"] == old_run and rerun["job"]["run_id"] != old_run
        assert rerun["job"]["state"] == "ready" and rerun["job"]["attempt"] == 0
        new_run = rerun["job"]["run_id"]

        now = await mcp.ok("inspect_job", {"job_id": job_id})
        assert now["job"]["run_id"] == new_run and now["job"]["rerun_of"] == old_run
        assert [s["name"] for s in now["steps"]] == ["reserve", "settle"]
        (event,) = [e for e in now["events"] if e["kind"] == "requeued"]
        assert event["data"]["from_step"] == "ship" and event["data"]["previous_run_id"] == old_run
        before = await mcp.ok("inspect_job", {"job_id": job_id, "run_id": old_run})
        assert [s["name"] for s in before["steps"]] == ["reserve", "settle", "ship"]
        assert before["steps_total"] == 3 and before["job"]["run_id"] == new_run
        short = await mcp.ok("inspect_job", {"job_id": job_id, "run_id": old_run, "steps_limit": 1})
        assert [s["name"] for s in short["steps"]] == ["ship"] and short["steps_total"] == 3

        await Worker(jobs).run_until_idle()
        assert (await jobs.get(job_id)).state == "done"
        plain = await mcp.fails("retry_job", {"job_id": job_id}, "JOB_NOT_RETRYABLE")
        assert plain["details"]["state"] == "done"

        unknown = await mcp.fails(
            "retry_job", {"job_id": job_id, "from_step": "pack"}, "STEP_UNKNOWN"
        )
        assert "reserve, settle, ship" in unknown["cause"] and unknown["retryable"] is False
        # A rerun is a write: with no step the name stands for, none is proposed, and the next
        # call reads the job's steps.
        assert unknown["next_call"] == {"tool": "inspect_job", "arguments": {"job_id": job_id}}
        assert f"mcp-jobs jobs show {job_id} --json --database-url " in unknown["fix"]
        again = await mcp.ok("retry_job", {"job_id": job_id, "from_step": "reserve"})
        assert again["rerun_of"] == new_run

        live = await mcp.fails(
            "retry_job", {"job_id": job_id, "from_step": "ship"}, "JOB_NOT_RETRYABLE"
        )
        assert "failed, dead or done" in live["cause"]
        cursor_too = await mcp.fails(
            "inspect_job",
            {"job_id": job_id, "run_id": old_run, "steps_cursor": "x"},
            "INVALID_ARGUMENT",
        )
        # Mended by leaving the cursor out (a placeholder for it before): the call runs.
        call = cursor_too["next_call"]
        assert call == {"tool": "inspect_job", "arguments": {"job_id": job_id, "run_id": old_run}}
        assert (await mcp.ok(call["tool"], call["arguments"]))["job"]["id"] == job_id
    reruns = [a for a in audited if a["tool"] == "retry_job"]
    assert [(a["arguments"].get("from_step"), a["ok"]) for a in reruns][:2] == [
        ("ship", True),
        (None, False),
    ]


async def test_a_pinned_server_reruns_and_reads_runs_of_its_tenant_only(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    theirs = await jobs.enqueue("receipt", {"order_id": 1}, tenant_id="acme")
    await Worker(jobs).run_until_idle()
    run = (await jobs.get(theirs.id)).run_id
    async with open_mcp(Settings(tenant="globex")) as mcp:
        await mcp.fails("retry_job", {"job_id": theirs.id, "from_step": "x"}, "JOB_NOT_FOUND")
        await mcp.fails("inspect_job", {"job_id": theirs.id, "run_id": run}, "JOB_NOT_FOUND")
    async with open_mcp(Settings(tenant="acme")) as mcp:
        # A job without steps has no rerun point: the next call reads it.
        error = await mcp.fails(
            "retry_job", {"job_id": theirs.id, "from_step": "x"}, "STEP_UNKNOWN"
        )
        assert error["next_call"] == {"tool": "inspect_job", "arguments": {"job_id": theirs.id}}
        seen = await mcp.ok("inspect_job", {"job_id": theirs.id, "run_id": run})
        assert seen["steps"] == [] and seen["steps_total"] == 0


async def test_the_arguments_are_published_and_a_read_only_server_has_no_retry(
    open_mcp: OpenMcp,
) -> None:
    async with open_mcp() as mcp:
        tools = {t.name: t for t in (await mcp.client.list_tools()).tools}
        retry = tools["retry_job"]
        # Optional, so published without its null (server/schemas.py): a string of one byte up.
        assert retry.input_schema["properties"]["from_step"]["minLength"] == 1
        hints = retry.annotations
        assert hints is not None and hints.read_only_hint is False
        assert "run_id" in tools["inspect_job"].input_schema["properties"]
        await mcp.fails(
            "retry_job", {"job_id": "0" * 32, "from_step": ""}, "TOOL_ARGUMENTS_INVALID"
        )
    async with open_mcp(Settings(read_only=True)) as mcp:
        assert "retry_job" not in mcp.schemas and "inspect_job" in mcp.schemas


async def test_a_run_id_the_job_never_had_is_run_not_found_naming_its_runs(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    """It read as a run with no steps (ok, steps_total 0), as did another job's run id."""
    job_id = await _done_order(jobs, clock)
    first_run = (await jobs.get(job_id)).run_id
    other = await _done_order(jobs, clock, order_id=2)
    other_run = (await jobs.get(other)).run_id
    async with open_mcp() as mcp:
        # One run only: the fix reads the job itself, which shows that run.
        alone = await mcp.fails(
            "inspect_job", {"job_id": job_id, "run_id": "nope"}, "RUN_NOT_FOUND"
        )
        assert alone["retryable"] is False and first_run in alone["cause"]
        assert alone["details"]["runs"] == [first_run]
        assert alone["next_call"] == {"tool": "inspect_job", "arguments": {"job_id": job_id}}
        assert (await mcp.ok("inspect_job", alone["next_call"]["arguments"]))["steps_total"] == 3

        second = (await mcp.ok("retry_job", {"job_id": job_id, "from_step": "ship"}))["job"]
        await Worker(jobs).run_until_idle()
        third = (await mcp.ok("retry_job", {"job_id": job_id, "from_step": "ship"}))["job"]
        runs = [third["run_id"], second["run_id"], first_run]
        for wrong in ("nope", other_run):
            refused = await mcp.fails(
                "inspect_job", {"job_id": job_id, "run_id": wrong}, "RUN_NOT_FOUND"
            )
            assert refused["details"]["runs"] == runs, refused
            assert all(run in refused["cause"] for run in runs)
            # The run before this one, the one a rerun left behind: the call runs as given.
            call = refused["next_call"]
            assert call == {
                "tool": "inspect_job",
                "arguments": {"job_id": job_id, "run_id": second["run_id"]},
            }
            assert f"jobs show {job_id} --run-id {second['run_id']}" in refused["fix"]
            shown = await mcp.ok(call["tool"], call["arguments"])
            assert [s["name"] for s in shown["steps"]] == ["reserve", "settle", "ship"]
        # Every real run still reads, the first one included.
        oldest = await mcp.ok("inspect_job", {"job_id": job_id, "run_id": first_run})
        assert oldest["steps_total"] == 3
