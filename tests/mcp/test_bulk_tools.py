"""retry_jobs / cancel_jobs: a plan (counts, sample, a token for a client that cannot be asked),
then an action on exactly the planned jobs; a job changed in between is skipped; the tenant pin
holds; a read-only server has neither tool; a token is single use and expires; a decline writes
nothing; one audit event per action."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from engine import JobRegistry, Jobs, ManualClock, Worker
from engine.testing.kit.test_select import dead
from mcp_jobs.config import Settings
from mcp_jobs.operations import bulk
from mcp_jobs.operations.bulk import BulkFilter, BulkPlan, plan_bulk
from mcp_jobs.operations.scope import Scope
from mcp_jobs.server.audit import AUDIT_EVENT
from tests.mcp.support import Caller, Person, audit_log, serve, stored_rows

FILTER = {"name": "fulfil", "error_code": "DRIVER_UNAVAILABLE", "since_seconds": 3600}


async def _next(mcp: Caller, call: dict[str, Any]) -> dict[str, Any]:
    return (await mcp.call(call["tool"], call["arguments"])).data


async def _audits(jobs: Jobs, tool: str) -> list[Any]:
    return [e for e in await stored_rows(jobs, "events") if AUDIT_EVENT in e and tool in str(e)]


async def test_plan_then_act_on_exactly_the_plan_and_skip_what_changed(
    jobs: Jobs, app: JobRegistry, mode: str, clock: ManualClock
) -> None:
    stale = await dead(jobs.driver, "DRIVER_UNAVAILABLE")
    clock.advance(2 * 3600_000)
    first = await dead(jobs.driver, "DRIVER_UNAVAILABLE")
    second = await dead(jobs.driver, "DRIVER_UNAVAILABLE")
    await dead(jobs.driver, "JOB_FAILED")
    async with serve(jobs, mode, elicitation=False) as mcp:
        planned = await mcp.ok("retry_jobs", FILTER)
        plan = planned["plan"]
        assert planned["mode"] == "plan" and plan["matched"] == 2
        assert plan["by_name"] == {"fulfil": 2} and plan["by_error_code"] == {
            "DRIVER_UNAVAILABLE": 2
        }
        assert [j["job_id"] for j in plan["sample"]] == [second, first]
        write = planned["confirm"]["next_call"]
        assert write["tool"] == "retry_jobs" and write["arguments"]["write"] is True
        # A new match appears and one planned job is retried by someone else in between.
        await dead(jobs.driver, "DRIVER_UNAVAILABLE")
        clock.advance(1000)
        await jobs.retry(second)
        done = await _next(mcp, write)
        assert done["ok"] and done["mode"] == "write"
        assert done["outcome"]["acted_ids"] == [first]
        (skip,) = done["outcome"]["skipped"]
        assert skip["job_id"] == second and skip["code"] == "CHANGED_SINCE_PLAN"
        reused = await _next(mcp, write)
        assert reused["error"]["code"] == "CONFIRMATION_INVALID"
    assert (await jobs.get(first)).state == "ready"
    assert (await jobs.get(stale)).state == "dead"
    # One event for the action (not one per job) with its counts, one for the refused reuse.
    acted, refused = await _audits(jobs, "retry_jobs")
    for count in ("matched", "acted", "skipped", "DRIVER_UNAVAILABLE"):
        assert count in str(acted)
    assert "CONFIRMATION_INVALID" in str(refused) and "acted" not in str(refused)


async def test_retry_jobs_runs_the_delayed_jobs_it_is_asked_for_now(
    jobs: Jobs, app: JobRegistry, mode: str, clock: ManualClock
) -> None:
    waiting = sorted([(await jobs.enqueue("flaky", {"key": k})).id for k in ("d1", "d2")])
    assert await Worker(jobs).run_until_idle() == 2  # each failed once: waiting out its backoff
    later = await jobs.enqueue("greet", {"user_id": 1}, delay=3600)
    async with serve(jobs, mode, elicitation=False) as mcp:
        default = await mcp.ok("retry_jobs", {"name": "flaky"})
        assert default["plan"]["matched"] == 0  # failed and dead only, unless asked
        planned = await mcp.ok("retry_jobs", {"states": ["delayed"], "error_code": "JOB_FAILED"})
        assert planned["plan"]["states"] == ["delayed"] and planned["plan"]["matched"] == 2
        done = await _next(mcp, planned["confirm"]["next_call"])
        assert sorted(done["outcome"]["acted_ids"]) == waiting
    for job_id in waiting:
        record = await jobs.get(job_id)
        # Run early, not given a new budget: the one run so far still counts.
        assert (record.state, record.run_at, record.attempt) == ("ready", clock.now_ms(), 1)
    assert (await jobs.get(later.id)).state == "delayed"


async def test_a_write_without_token_answers_the_plan_and_tokens_expire(
    jobs: Jobs, app: JobRegistry, mode: str, clock: ManualClock
) -> None:
    job = await dead(jobs.driver, "DRIVER_UNAVAILABLE")
    settings = Settings(confirm_ttl_seconds=60)
    async with serve(jobs, mode, settings, elicitation=False) as mcp:
        required = await mcp.fails("retry_jobs", {**FILTER, "write": True}, "CONFIRMATION_REQUIRED")
        assert required["details"]["plan"]["matched"] == 1
        clock.advance(60_000)
        expired = await _next(mcp, required["next_call"])
        assert "expired" in expired["error"]["cause"]
        assert (await jobs.get(job)).state == "dead"
        other = await mcp.ok("retry_jobs", {"name": "fulfil"})
        token = other["confirm"]["token"]
        # A token is bound to its filter: another filter's write refuses it.
        wrong = await mcp.call("retry_jobs", {**FILTER, "write": True, "confirm": token})
        assert wrong.code == "CONFIRMATION_INVALID"
    assert (await jobs.get(job)).state == "dead"


async def test_the_person_confirms_the_plan_or_declines_and_nothing_moves(
    jobs: Jobs, app: JobRegistry, mode: str
) -> None:
    job = await dead(jobs.driver, "DRIVER_UNAVAILABLE")
    async with serve(jobs, mode, person=Person("decline")) as mcp:
        await mcp.fails("retry_jobs", {**FILTER, "write": True}, "WRITE_DECLINED")
        assert mcp.person is not None and "retry 1 job(s)" in mcp.person.asked[0]
    assert (await jobs.get(job)).state == "dead"
    async with serve(jobs, mode) as mcp:
        assert "confirm" not in await mcp.ok("retry_jobs", FILTER)
        done = await mcp.ok("retry_jobs", {**FILTER, "write": True})
        assert done["outcome"]["acted_ids"] == [job]
    assert (await jobs.get(job)).state == "ready"
    assert len(await _audits(jobs, "retry_jobs")) == 2  # the decline and the action, once each


async def test_cancel_jobs_in_the_pinned_tenant_only(
    jobs: Jobs, app: JobRegistry, mode: str
) -> None:
    ours = await jobs.enqueue("receipt", {"order_id": 1}, tenant_id="acme")
    theirs = await jobs.enqueue("receipt", {"order_id": 2}, tenant_id="globex")
    async with serve(jobs, mode, Settings(tenant="acme")) as mcp:
        plan = (await mcp.ok("cancel_jobs", {"name": "receipt"}))["plan"]
        assert plan["matched"] == 1 and plan["by_tenant"] == {"acme": 1}
        await mcp.fails("cancel_jobs", {"tenant_id": "globex"}, "TENANT_PINNED")
        done = await mcp.ok("cancel_jobs", {"name": "receipt", "write": True})
        assert done["outcome"]["acted_ids"] == [ours.id]
    assert (await jobs.get(ours.id)).state == "cancelled"
    assert (await jobs.get(theirs.id)).state == "ready"


async def test_a_read_only_server_has_no_bulk_tool(jobs: Jobs, mode: str) -> None:
    async with serve(jobs, mode, Settings(read_only=True)) as mcp:
        assert not {"retry_jobs", "cancel_jobs"} & set(mcp.schemas)


async def test_a_filter_naming_no_known_job_or_queue_is_refused_not_planned_empty(
    jobs: Jobs, app: JobRegistry, mode: str
) -> None:
    """A typo in a bulk filter matched nothing and answered a healthy empty plan, with a token
    to act on it: now JOB_UNKNOWN / QUEUE_UNKNOWN as `list_jobs` answers, naming the one meant."""
    job = await dead(jobs.driver, "DRIVER_UNAVAILABLE")
    async with serve(jobs, mode, elicitation=False) as mcp:
        nope = await mcp.fails("retry_jobs", {"name": "nope"}, "JOB_UNKNOWN")
        assert nope["retryable"] is False and "fulfil" in nope["details"]["known"]
        assert nope["next_call"] == {"tool": "describe_jobs", "arguments": {}}
        slip = await mcp.fails("retry_jobs", {"name": "fulfl"}, "JOB_UNKNOWN")
        # A write's name mended by a guess: shown in the fix (a dry run), not run.
        assert slip["details"]["meant"] == "fulfil" and "(meant fulfil?)" in slip["cause"]
        assert slip["fix"] == 'retry_jobs {"name": "fulfil"}' and "next_call" not in slip
        planned = await mcp.ok("retry_jobs", {"name": "fulfil"})
        assert planned["plan"]["matched"] == 1
        queue = await mcp.fails("cancel_jobs", {"queue": "defualt", "write": True}, "QUEUE_UNKNOWN")
        assert queue["details"]["meant"] == "default" and "next_call" not in queue
        # A slip mended by a guess: the fix is the dry run (a plan), not the write.
        assert queue["fix"] == 'cancel_jobs {"queue": "default"}', queue
        # A known job with nothing to retry is still a plan of nothing, not an error.
        assert (await mcp.ok("retry_jobs", {"name": "greet"}))["plan"]["matched"] == 0
    assert (await jobs.get(job)).state == "dead"


async def test_an_error_code_nothing_holds_or_writes_is_refused_not_planned_empty(
    jobs: Jobs, app: JobRegistry, mode: str
) -> None:
    """exploreZ: `retry_jobs {"error_code": "JOB_FAILD"}` answered ok, matched 0, with a token,
    and the agent took it that nothing was to retry. A code no matched job holds and the engine
    does not write is ERROR_CODE_UNKNOWN, naming the one meant; an app's own code stored on a
    job, or an engine code no job holds now, is still a plan."""
    job = await dead(jobs.driver, "PAYMENT_DECLINED")  # an app's own code
    await dead(jobs.driver, "JOB_FAILED")
    async with serve(jobs, mode, elicitation=False) as mcp:
        for tool in ("retry_jobs", "cancel_jobs"):
            slip = await mcp.fails(tool, {"error_code": "JOB_FAILD"}, "ERROR_CODE_UNKNOWN")
            assert slip["retryable"] is False and slip["details"]["meant"] == "JOB_FAILED", slip
            assert "(meant JOB_FAILED?)" in slip["cause"] and "next_call" not in slip
            assert slip["fix"] == f'{tool} {{"error_code": "JOB_FAILED"}}', slip
        wrong = await mcp.fails(
            "retry_jobs", {"error_code": "PAYMENT_DECLIND", "write": True}, "ERROR_CODE_UNKNOWN"
        )
        # A slip on a write is shown as its plan, not run.
        assert wrong["fix"] == 'retry_jobs {"error_code": "PAYMENT_DECLINED"}', wrong
        assert "PAYMENT_DECLINED" in wrong["cause"] and "next_call" not in wrong
        nothing = await mcp.fails("retry_jobs", {"error_code": "zzzz"}, "ERROR_CODE_UNKNOWN")
        assert nothing["next_call"] == {"tool": "retry_jobs", "arguments": {}}, nothing
        held = await mcp.ok("retry_jobs", {"error_code": "PAYMENT_DECLINED"})
        assert held["plan"]["matched"] == 1
        none_now = await mcp.ok("retry_jobs", {"error_code": "DRIVER_UNAVAILABLE"})
        assert none_now["plan"]["matched"] == 0
    assert (await jobs.get(job)).state == "dead"


def _failing_on(jobs: Jobs, monkeypatch: pytest.MonkeyPatch, method: str, nth: int) -> None:
    """`jobs.<method>` fails with a bug's exception on its `nth` call (an injected point)."""
    real = getattr(jobs, method)
    calls = 0

    async def failing(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == nth:
            raise RuntimeError("injected")
        return await real(*args, **kwargs)

    monkeypatch.setattr(jobs, method, failing)


async def test_an_action_cut_short_records_how_far_it_got_and_its_token_acts_once(
    jobs: Jobs, app: JobRegistry, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that failed part way left 2 of 5 jobs retried and one audit event without counts;
    now the action's event says how far it got, once, and a replayed token is refused with the
    plan of what is left as its next call."""
    planned_ids = [await dead(jobs.driver, "DRIVER_UNAVAILABLE") for _ in range(5)]
    audited = audit_log(jobs, monkeypatch)
    async with serve(jobs, mode, elicitation=False) as mcp:
        planned = await mcp.ok("retry_jobs", {"name": "fulfil"})
        assert planned["plan"]["matched"] == 5
        write = planned["confirm"]["next_call"]
        _failing_on(jobs, monkeypatch, "retry", 3)
        failed = await mcp.call(write["tool"], write["arguments"])
        assert failed.code == "INTERNAL"
        monkeypatch.undo()
        done = [j for j in planned_ids if (await jobs.get(j)).state == "ready"]
        assert len(done) == 2
        (event,) = [a for a in audited if a["tool"] == "retry_jobs" and a["arguments"]["write"]]
        assert event["arguments"]["acted"] == 2 and event["arguments"]["interrupted"] is True
        assert event["arguments"]["matched"] == 5 and event["arguments"]["name"] == "fulfil"
        # The token acted once; its next call plans what still matches.
        replay = await mcp.fails(write["tool"], write["arguments"], "CONFIRMATION_INVALID")
        rest = await mcp.ok(replay["next_call"]["tool"], replay["next_call"]["arguments"])
        assert rest["plan"]["matched"] == 3


async def test_a_cancelled_action_stops_between_jobs_and_records_its_counts(
    jobs: Jobs, app: JobRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that cancels the call (a timeout, notifications/cancelled) stops the action
    after the job in hand: the jobs acted on are exactly those counted in its audit event."""
    ids = [(await jobs.enqueue("greet", {"user_id": n})).id for n in range(1, 6)]
    audited = audit_log(jobs, monkeypatch)
    scope = Scope(jobs=jobs, settings=Settings(), tool="cancel_jobs", actor="mcp:cancel_jobs")
    wanted = BulkFilter(name="greet")
    plan, planned = await plan_bulk(scope, "cancel", wanted)
    real = jobs.cancel
    calls = 0
    run = bulk.BulkRun()
    with anyio.CancelScope() as call:

        async def cancel_then_cut(*args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == 3:
                call.cancel()  # injected: the call is cancelled while this job is in hand
            return await real(*args, **kwargs)

        monkeypatch.setattr(jobs, "cancel", cancel_then_cut)
        await bulk.act_bulk(scope, "cancel", plan, planned, wanted.given(), run)
    assert call.cancelled_caught
    monkeypatch.undo()
    cancelled = [j for j in ids if (await jobs.get(j)).state == "cancelled"]
    assert len(cancelled) == 3 and sorted(run.acted) == sorted(cancelled)
    (event,) = audited
    assert event["tool"] == "cancel_jobs" and event["ok"] is False
    assert event["arguments"]["acted"] == 3 and event["arguments"]["interrupted"] is True


async def test_a_plan_says_how_many_match_beyond_the_cap(
    jobs: Jobs, app: JobRegistry, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With more matches than one action takes, the plan showed the cap as the count
    (`matched: 1000` for 200,000): it now says how many match, or at least how many."""
    for n in range(1, 6):
        await jobs.enqueue("greet", {"user_id": n})
    monkeypatch.setattr(bulk, "MAX_BULK_JOBS", 3)
    async with serve(jobs, mode, elicitation=False) as mcp:
        plan = (await mcp.ok("cancel_jobs", {"name": "greet"}))["plan"]
        assert (plan["matched"], plan["total"], plan["over_limit"]) == (3, 5, True)
        assert not plan["scan_capped"] and "3 of 5" in bulk.summary(BulkPlan(**plan))
        monkeypatch.setattr(bulk, "COUNT_SCAN_ROWS", 4)
        plan = (await mcp.ok("cancel_jobs", {"name": "greet"}))["plan"]
        assert (plan["matched"], plan["total"], plan["scan_capped"]) == (3, 4, True)
        assert "3 of at least 4" in bulk.summary(BulkPlan(**plan))


async def test_a_plan_of_nothing_names_the_tenant_stored_in_another_case(
    jobs: Jobs, app: JobRegistry, mode: str
) -> None:
    """retry_jobs for tenant ACME planned 0 beside acme's dead jobs, and said nothing more."""
    stored = await dead(jobs.driver, "JOB_FAILED", tenant="acme")
    async with serve(jobs, mode, elicitation=False) as mcp:
        planned = await mcp.ok("retry_jobs", {"tenant_id": "ACME"})
        assert planned["plan"]["matched"] == 0
        (notice,) = planned["notices"]
        assert notice["code"] == "TENANT_SPELT_OTHERWISE" and "'acme'" in notice["cause"]
        listed = await _next(mcp, notice["next_call"])
        assert [j["id"] for j in listed["jobs"]] == [stored]
        replanned = await mcp.ok("retry_jobs", {"tenant_id": "acme"})
        assert replanned["plan"]["matched"] == 1 and not replanned.get("notices")
