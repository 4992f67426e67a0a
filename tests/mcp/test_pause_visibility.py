"""Every pause in force shows where pauses are shown, and only where it holds: a job pause is a
finding of its job's queue alone, a queue pause is listed before the queue holds any row, and
a queue name in another spelling is mended in diagnose_queue as in queue_stats."""

from __future__ import annotations

from engine import Jobs, ManualClock
from engine.instants import iso
from tests.mcp.conftest import OpenMcp


async def test_a_job_pause_is_a_finding_of_its_own_queue_only(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    await jobs.enqueue("greet", {"user_id": 1})  # queue mail
    await jobs.enqueue("flaky", {"key": "k"})  # queue catalog
    async with open_mcp() as mcp:
        await mcp.ok("pause_queue", {"job": "fulfil"})  # declared in queue orders
        await mcp.ok("pause_queue", {"job": "zzz_unknown"})
        mail = await mcp.ok("diagnose_queue", {"queue": "mail"})
        assert [f["code"] for f in mail["findings"] if f["code"] == "JOB_PAUSED"] == []
        catalog = await mcp.ok("diagnose_queue", {"queue": "catalog"})
        assert [f for f in catalog["findings"] if f["code"] == "JOB_PAUSED"] == []
        orders = await mcp.ok("diagnose_queue", {"queue": "orders"})
        paused = [f for f in orders["findings"] if f["code"] == "JOB_PAUSED"]
        assert [(f["queue"], f["next_call"]["arguments"]) for f in paused] == [
            ("orders", {"job": "fulfil"})
        ]
        every = await mcp.ok("diagnose_queue", {})
        named = sorted(
            f["next_call"]["arguments"]["job"]
            for f in every["findings"]
            if f["code"] == "JOB_PAUSED"
        )
        assert named == ["fulfil", "zzz_unknown"]


async def test_a_pause_of_a_queue_with_no_rows_is_listed_and_diagnosed(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    await jobs.enqueue("greet", {"user_id": 1})  # rows in mail only
    async with open_mcp() as mcp:
        await mcp.ok("pause_queue", {"queue": "catalog", "reason": "r2"})
        await mcp.ok("pause_queue", {"queue": "Orders"})  # a typo: no queue is named so
        (catalog,) = (await mcp.ok("queue_stats", {"queues": ["catalog"]}))["queues"]
        assert catalog["queue"] == "catalog" and catalog["paused"]["reason"] == "r2"
        assert catalog["ready"] == 0
        every = await mcp.ok("queue_stats", {})
        shown = {q["queue"]: q.get("paused") is not None for q in every["queues"]}
        assert shown == {"mail": False, "catalog": True, "Orders": True}
        diagnosis = await mcp.ok("diagnose_queue", {"queue": "catalog"})
        (finding,) = diagnosis["findings"]
        assert finding["code"] == "QUEUE_PAUSED" and finding["queue"] == "catalog"
        assert finding["next_call"] == {"tool": "resume_queue", "arguments": {"queue": "catalog"}}
        everywhere = await mcp.ok("diagnose_queue", {})
        assert sorted(
            f["queue"] for f in everywhere["findings"] if f["code"] == "QUEUE_PAUSED"
        ) == [
            "Orders",
            "catalog",
        ]


async def test_diagnose_mends_a_queue_in_another_spelling_as_queue_stats_does(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    await jobs.enqueue("greet", {"user_id": 1})
    async with open_mcp() as mcp:
        stats = await mcp.fails("queue_stats", {"queues": ["MAIL"]}, "QUEUE_UNKNOWN")
        assert stats["next_call"] == {"tool": "queue_stats", "arguments": {"queues": ["mail"]}}
        diagnosis = await mcp.ok("diagnose_queue", {"queue": "MAIL"})
        (finding,) = diagnosis["findings"]
        assert finding["code"] == "QUEUE_UNKNOWN"
        call = {"tool": "diagnose_queue", "arguments": {"queue": "mail"}}
        assert finding["next_call"] == call
        assert finding["fix"] == 'diagnose_queue {"queue": "mail"}'
        again = await mcp.ok(call["tool"], call["arguments"])
        assert again["healthy"] is not None


async def test_every_pause_shown_carries_its_time_in_iso(
    jobs: Jobs, open_mcp: OpenMcp, clock: ManualClock
) -> None:
    """The README: every time has an ISO 8601 twin; pause_queue's answer had one, the pauses
    queue_stats, diagnose_queue and describe_jobs show had none."""
    await jobs.enqueue("greet", {"user_id": 1})  # queue mail
    async with open_mcp() as mcp:
        await mcp.ok("pause_queue", {"queue": "mail", "reason": "r"})
        await mcp.ok("pause_queue", {"job": "fulfil"})
        at = iso(clock.now_ms())
        stats = await mcp.ok("queue_stats", {})
        (mail,) = [q for q in stats["queues"] if q["queue"] == "mail"]
        (held,) = stats["paused_jobs"]
        diagnosis = await mcp.ok("diagnose_queue", {})
        (diagnosed,) = [q for q in diagnosis["queues"] if q["queue"] == "mail"]
        described = await mcp.ok("describe_jobs", {"name": "greet"})
        shown = [mail["paused"], held, diagnosed["paused"], *described["paused"]]
        assert [p["paused_at_iso"] for p in shown] == [at] * len(shown), shown
