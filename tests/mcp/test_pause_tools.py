"""`pause_queue` / `resume_queue`: idempotent answers, the claim held, what queue_stats,
diagnose_queue and describe_jobs show, the audit, the tenant pin and the read-only server."""

from __future__ import annotations

import pytest

from engine import Jobs, ManualClock
from mcp_jobs.config import Settings
from mcp_jobs.server import MUTATING_TOOLS
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import audit_log


async def test_pause_holds_the_queue_and_resume_lets_it_go(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    audited = audit_log(jobs, monkeypatch)
    await jobs.enqueue("greet", {"user_id": 1})
    at = clock.now_ms()
    async with open_mcp() as mcp:
        paused = await mcp.ok("pause_queue", {"queue": "mail", "reason": "smtp down"})
        assert paused["already_paused"] is False
        assert paused["pause"]["paused_by"] == "mcp:pause_queue"
        assert paused["pause"]["paused_at"] == at and paused["pause"]["reason"] == "smtp down"
        assert "queues resume mail" in paused["resume"]
        call = paused["resume_call"]
        assert call == {"tool": "resume_queue", "arguments": {"queue": "mail"}}
        assert await jobs.driver.claim("w", 10, 60_000) == []

        clock.advance(5_000)
        again = await mcp.ok("pause_queue", {"queue": "mail"})
        assert again["already_paused"] is True and again["pause"]["paused_at"] == at

        (mail,) = (await mcp.ok("queue_stats", {"queues": ["mail"]}))["queues"]
        assert mail["ready"] == 1 and mail["paused"]["paused_by"] == "mcp:pause_queue"
        diagnosis = await mcp.ok("diagnose_queue", {"queue": "mail"})
        (finding,) = [f for f in diagnosis["findings"] if f["code"] == "QUEUE_PAUSED"]
        assert finding["severity"] == "warning" and "mcp:pause_queue" in finding["cause"]
        assert finding["next_call"] == {"tool": "resume_queue", "arguments": {"queue": "mail"}}
        assert "queues resume mail" in finding["fix"] and diagnosis["healthy"] is False
        described = await mcp.ok("describe_jobs", {"name": "greet"})
        assert [(p["kind"], p["name"]) for p in described["paused"]] == [("queue", "mail")]

        resumed = await mcp.ok(call["tool"], call["arguments"])  # the call, as it was given
        assert resumed["was_paused"] is True and resumed["pause"]["reason"] == "smtp down"
        not_paused = await mcp.ok("resume_queue", {"queue": "mail"})
        assert not_paused["was_paused"] is False and "pause" not in not_paused
        assert len(await jobs.driver.claim("w", 10, 60_000)) == 1
        stats = await mcp.ok("queue_stats", {"queues": ["mail"]})
        assert "paused" not in stats["queues"][0]
    assert [(a["tool"], a["ok"]) for a in audited] == [
        ("pause_queue", True),
        ("pause_queue", True),
        ("resume_queue", True),
        ("resume_queue", True),
    ]
    assert audited[0]["arguments"]["queue"] == "mail"


async def test_a_paused_job_name_is_a_finding_listing_its_waiting_jobs(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    made = await jobs.enqueue("greet", {"user_id": 2})
    async with open_mcp() as mcp:
        paused = await mcp.ok("pause_queue", {"job": "greet"})
        assert paused["resume_call"] == {"tool": "resume_queue", "arguments": {"job": "greet"}}
        stats = await mcp.ok("queue_stats", {})
        assert [p["name"] for p in stats["paused_jobs"]] == ["greet"]
        diagnosis = await mcp.ok("diagnose_queue", {})
        (finding,) = [f for f in diagnosis["findings"] if f["code"] == "JOB_PAUSED"]
        assert finding["job_ids"] == [made.id] and finding["severity"] == "warning"
        assert finding["next_call"] == {"tool": "resume_queue", "arguments": {"job": "greet"}}
        assert "queues resume --job greet" in finding["fix"]
        assert await jobs.driver.claim("w", 10, 60_000) == []
        assert (await mcp.ok("resume_queue", {"job": "greet"}))["was_paused"] is True


async def test_a_pause_of_a_name_nothing_uses_says_so_and_its_next_call_lifts_it(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    """Held all the same (a queue may be paused before its first job), with a notice naming
    the known ones: a typo would otherwise leave the intended work running, unnoticed."""
    async with open_mcp() as mcp:
        for arguments, listed, code, known, meant in (
            ({"queue": "mial"}, {"queue": "mial"}, "QUEUE_UNKNOWN", "known queues: ", "mail"),
            ({"job": "greeet"}, {"name": "greeet"}, "JOB_UNKNOWN", "registered: ", "greet"),
        ):
            paused = await mcp.ok("pause_queue", arguments)
            (notice,) = paused["notices"]
            assert (notice["code"], notice["severity"]) == (code, "warning")
            assert known in notice["cause"] and "holds nothing now" in notice["cause"]
            # The name it plainly stands for is named, as for any unknown name.
            assert f"(meant {meant}?)" in notice["cause"], notice
            refused = await mcp.fails("list_jobs", listed, code)
            assert refused["details"]["meant"] == meant, refused
            assert notice["next_call"] == {"tool": "resume_queue", "arguments": arguments}
            lifted = await mcp.ok("resume_queue", notice["next_call"]["arguments"])
            assert lifted["was_paused"] is True
        assert "notices" not in await mcp.ok("pause_queue", {"queue": "mail"})
        assert "notices" not in await mcp.ok("pause_queue", {"job": "greet"})
    assert {(p.kind, p.name) for p in await jobs.pauses()} == {("queue", "mail"), ("job", "greet")}


async def test_exactly_one_of_queue_and_job(open_mcp: OpenMcp) -> None:
    async with open_mcp() as mcp:
        await mcp.fails("pause_queue", {}, "INVALID_ARGUMENT")
        await mcp.fails("pause_queue", {"queue": "mail", "job": "greet"}, "INVALID_ARGUMENT")
        await mcp.fails("resume_queue", {}, "INVALID_ARGUMENT")


async def test_a_tenant_pinned_server_may_not_pause_every_tenant(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    async with open_mcp(Settings(tenant="acme")) as mcp:
        refused = await mcp.fails("pause_queue", {"queue": "mail"}, "TENANT_SCOPE_EXCEEDED")
        assert refused["details"]["tenant_id"] == "acme"
        # The fix is the command for an operator over every tenant: no --tenant in it. The
        # agent is told it is the user's to run: the pin is what keeps the agent in its tenant.
        assert "queues pause mail" in refused["fix"] and "--tenant" not in refused["fix"]
        assert (
            "the fix is an operator's, over every tenant: give it to the user" in refused["cause"]
        )
        await mcp.fails("resume_queue", {"job": "greet"}, "TENANT_SCOPE_EXCEEDED")
    assert await jobs.pauses() == []


async def test_a_tenant_pinned_caller_is_refused_a_bad_pause_name_before_the_pin(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    """The pin's refusal hands the operator a command naming the pause: with a name no pause
    takes, that command failed too. The name is mended first; the mended call meets the pin,
    whose command then names what a pause takes."""
    async with open_mcp(Settings(tenant="acme")) as mcp:
        refused = await mcp.fails("pause_queue", {"queue": "ma\nil"}, "INVALID_ARGUMENT")
        assert refused["fix"] == 'pause_queue {"queue": "mail"}', refused
        pinned = await mcp.fails("pause_queue", {"queue": "mail"}, "TENANT_SCOPE_EXCEEDED")
        assert "queues pause mail" in pinned["fix"], pinned
    assert await jobs.pauses() == []


async def test_a_read_only_server_gives_the_resume_command_not_a_call_it_does_not_serve(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    await jobs.enqueue("greet", {"user_id": 1})
    await jobs.pause(queue="mail")
    async with open_mcp() as mcp:
        (paused,) = [
            f for f in (await mcp.ok("diagnose_queue"))["findings"] if f["code"] == "QUEUE_PAUSED"
        ]
        assert paused["next_call"] == {"tool": "resume_queue", "arguments": {"queue": "mail"}}
    async with open_mcp(Settings(read_only=True)) as mcp:
        (paused,) = [
            f for f in (await mcp.ok("diagnose_queue"))["findings"] if f["code"] == "QUEUE_PAUSED"
        ]
        assert "next_call" not in paused
        assert "mcp-jobs queues resume mail --database-url " in paused["fix"]


async def test_the_tools_are_idempotent_not_destructive_and_absent_when_read_only(
    open_mcp: OpenMcp,
) -> None:
    assert {"pause_queue", "resume_queue"} <= set(MUTATING_TOOLS)
    async with open_mcp() as mcp:
        tools = {t.name: t for t in (await mcp.client.list_tools()).tools}
        for name in ("pause_queue", "resume_queue"):
            hints = tools[name].annotations
            assert hints is not None and hints.read_only_hint is False
            assert hints.idempotent_hint is True and hints.destructive_hint is False
    async with open_mcp(Settings(read_only=True)) as mcp:
        assert not {"pause_queue", "resume_queue"} & set(mcp.schemas)


async def test_naming_both_or_neither_is_refused_with_a_call_that_runs(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    """A pause names one queue or one job name. Both: the fix is the same call on the job
    alone, the narrower write (the queue's paused every job in it); neither: the queue stats,
    which name the queues. Before, the fix was prose."""
    await jobs.enqueue("greet", {"user_id": 1})
    async with open_mcp() as mcp:
        for tool in ("pause_queue", "resume_queue"):
            both = await mcp.fails(tool, {"queue": "mail", "job": "greet"}, "INVALID_ARGUMENT")
            assert both["next_call"] == {"tool": tool, "arguments": {"job": "greet"}}
            assert both["details"]["argument"] == "queue" and not both["retryable"]
            neither = await mcp.fails(tool, {}, "INVALID_ARGUMENT")
            assert neither["next_call"] == {"tool": "queue_stats", "arguments": {}}
            stats = await mcp.ok(neither["next_call"]["tool"], neither["next_call"]["arguments"])
            assert "mail" in [q["queue"] for q in stats["queues"]]
        assert await jobs.pauses() == []
        paused = await mcp.ok("pause_queue", {"job": "greet"})  # both's call, as given
        assert (paused["pause"]["kind"], paused["pause"]["name"]) == ("job", "greet")


async def test_resuming_a_name_nothing_uses_or_holds_changes_nothing_and_says_so(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    """`resume_queue {"queue": "ordrs"}` with orders paused answers was_paused false, as any
    resume of what is not paused does (it is idempotent), with a notice naming the name meant
    and the pauses in force; its fix and next_call read them, never lift another pause."""
    async with open_mcp() as mcp:
        await mcp.ok("pause_queue", {"queue": "orders"})
        await mcp.ok("pause_queue", {"queue": "zeta"})  # a queue no job uses yet
        for arguments, code, meant in (
            ({"queue": "ordrs"}, "QUEUE_UNKNOWN", "orders"),
            ({"queue": "zeat"}, "QUEUE_UNKNOWN", "zeta"),
            ({"job": "gret"}, "JOB_UNKNOWN", "greet"),
        ):
            for _ in range(2):
                answer = await mcp.ok("resume_queue", arguments)
                assert answer["was_paused"] is False and "pause" not in answer
                (notice,) = answer["notices"]
                assert (notice["code"], notice["severity"]) == (code, "warning")
                assert f"(meant {meant}?)" in notice["cause"], notice
                assert notice["next_call"] == {"tool": "queue_stats", "arguments": {}}
                assert "resume" not in notice["fix"], notice
        assert {(p.kind, p.name) for p in await jobs.pauses()} == {
            ("queue", "orders"),
            ("queue", "zeta"),
        }
        lifted = await mcp.ok("resume_queue", {"queue": "orders"})
        assert lifted["was_paused"] is True
        # A known name that is not paused answers as before: nothing changes, nothing to note.
        again = await mcp.ok("resume_queue", {"queue": "orders"})
        assert again["was_paused"] is False and "notices" not in again
        assert (await mcp.ok("resume_queue", {"job": "greet"}))["was_paused"] is False
    assert [(p.kind, p.name) for p in await jobs.pauses()] == [("queue", "zeta")]


async def test_a_typo_paused_then_resumed_resumes_again_leaving_a_deliberate_pause(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    """The slip `send_reciept` paused and resumed once: running the same resume again (an
    agent retrying, a fix line run twice) must not point at the deliberate `send_receipt`."""
    async with open_mcp() as mcp:
        await mcp.ok("pause_queue", {"job": "receipt", "reason": "legit pause"})
        paused = await mcp.ok("pause_queue", {"job": "reciept"})
        (notice,) = paused["notices"]
        assert notice["next_call"] == {"tool": "resume_queue", "arguments": {"job": "reciept"}}
        first = await mcp.ok("resume_queue", notice["next_call"]["arguments"])
        assert first["was_paused"] is True
        again = await mcp.ok("resume_queue", notice["next_call"]["arguments"])
        assert again["was_paused"] is False
        (unknown,) = again["notices"]
        assert unknown["code"] == "JOB_UNKNOWN" and "(meant receipt?)" in unknown["cause"]
        assert unknown["next_call"] == {"tool": "queue_stats", "arguments": {}}
    assert [(p.kind, p.name, p.reason) for p in await jobs.pauses()] == [
        ("job", "receipt", "legit pause")
    ]
