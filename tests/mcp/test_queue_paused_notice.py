"""An enqueue into a paused queue, and a wait that timed out on a job a pause holds, say so: the
answer was `ready` or `settled: false` with no reason, and only `diagnose_queue` named the pause.
The notice names who paused it, when and why, and its call resumes it. A job no pause holds
(running, settled, or its queue not paused) carries none."""

from __future__ import annotations

from typing import Any

from engine import Jobs, ManualClock
from mcp_jobs.config import Settings
from tests.mcp.conftest import OpenMcp


def _codes(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["code"]: n for n in answer.get("notices") or []}


async def test_an_enqueue_into_a_paused_queue_says_so_and_its_call_resumes_it(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    await jobs.pause(queue="mail", actor="alice", reason="smtp down")
    clock.advance(90_000)
    async with open_mcp() as mcp:
        held = await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": 1}})
        notice = _codes(held)["QUEUE_PAUSED"]
        assert notice["severity"] == "warning" and notice["queue"] == "mail", notice
        assert notice["job_ids"] == [held["job_id"]], notice
        cause = notice["cause"]
        assert "queue mail was paused by alice 90 s ago (smtp down)" in cause, cause
        assert "queues resume mail --database-url " in notice["fix"], notice
        call = notice["next_call"]
        assert call == {"tool": "resume_queue", "arguments": {"queue": "mail"}}, notice
        resumed = await mcp.ok(call["tool"], call["arguments"])
        assert resumed["was_paused"] is True, resumed
        free = await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": 2}})
        assert "QUEUE_PAUSED" not in _codes(free), free
    assert len(await jobs.driver.claim("w", 10, 60_000)) == 2


async def test_a_job_pause_holds_too_and_a_job_not_yet_due_is_not_held(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    await jobs.pause(queue="mail")
    await jobs.pause(job="fulfil", reason="stock count")
    async with open_mcp() as mcp:
        # Not due: its time holds it, and a resume now would lift the pause for nothing
        # (exploreW: a job waiting for its event got a next_call that resumed the queue).
        later = {"name": "greet", "input": {"user_id": 1}, "delay_seconds": 60}
        delayed = await mcp.ok("enqueue_job", later)
        assert delayed["state"] == "delayed" and "QUEUE_PAUSED" not in _codes(delayed), delayed
        waited = await mcp.ok("wait_for_job", {"job_id": delayed["job_id"], "timeout_seconds": 0})
        assert "QUEUE_PAUSED" not in _codes(waited), waited
        clock.advance(60_000)  # due now: the pause is what holds it
        waited = await mcp.ok("wait_for_job", {"job_id": delayed["job_id"], "timeout_seconds": 0})
        assert "QUEUE_PAUSED" in _codes(waited), waited
        order = await mcp.ok("enqueue_job", {"name": "fulfil", "input": {"order_id": 1}})
        notice = _codes(order)["JOB_PAUSED"]
        assert 'job "fulfil" was paused' in notice["cause"] and notice["queue"] == "orders"
        assert notice["next_call"] == {"tool": "resume_queue", "arguments": {"job": "fulfil"}}
        assert "QUEUE_PAUSED" not in _codes(order), order  # queue orders is not paused
        other = await mcp.ok("enqueue_job", {"name": "flaky", "input": {"key": "k"}})
        assert not {"QUEUE_PAUSED", "JOB_PAUSED"} & set(_codes(other)), other


async def test_a_wait_that_timed_out_behind_a_pause_says_so_and_no_other_wait_does(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    running = await jobs.enqueue("greet", {"user_id": 1})
    (claimed,) = await jobs.driver.claim("w", 10, 60_000)
    assert claimed.record.id == running.id
    ended = await jobs.enqueue("greet", {"user_id": 2})
    await jobs.cancel(ended.id)
    free = await jobs.enqueue("flaky", {"key": "k"})  # queue catalog, not paused
    await jobs.pause(queue="mail", actor="alice")
    held = await jobs.enqueue("greet", {"user_id": 3})
    async with open_mcp() as mcp:
        waited = await mcp.ok("wait_for_job", {"job_id": held.id, "timeout_seconds": 0})
        notice = _codes(waited)["QUEUE_PAUSED"]
        assert waited["settled"] is False and notice["job_ids"] == [held.id], waited
        assert "paused by alice" in notice["cause"], notice
        assert notice["next_call"] == {"tool": "resume_queue", "arguments": {"queue": "mail"}}
        for job_id in (running.id, ended.id, free.id):
            answer = await mcp.ok("wait_for_job", {"job_id": job_id, "timeout_seconds": 0})
            assert "QUEUE_PAUSED" not in _codes(answer), answer
        await mcp.ok("resume_queue", {"queue": "mail"})
        lifted = await mcp.ok("wait_for_job", {"job_id": held.id, "timeout_seconds": 0})
        assert "QUEUE_PAUSED" not in _codes(lifted), lifted


async def test_a_tenant_pinned_caller_is_told_as_diagnose_tells_it(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    """A pause spans every tenant: a pinned caller sees it (as in diagnose_queue) and gets the
    operator's resume line, but no resume_queue call, which its server would refuse."""
    await jobs.pause(queue="mail")
    async with open_mcp(Settings(tenant="acme")) as mcp:
        held = await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": 1}})
        notice = _codes(held)["QUEUE_PAUSED"]
        diagnosed = await mcp.ok("diagnose_queue", {"queue": "mail"})
    (finding,) = [f for f in diagnosed["findings"] if f["code"] == "QUEUE_PAUSED"]
    assert notice["fix"] == finding["fix"] and "--tenant" not in notice["fix"], notice
    assert "next_call" not in notice and "next_call" not in finding, notice
