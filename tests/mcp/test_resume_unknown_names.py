"""`resume_queue` naming nothing paused nor known: its JOB_UNKNOWN / QUEUE_UNKNOWN notice lists
the registered names as registered and the paused names as paused, never a paused name as a
registered job (or a known queue)."""

from __future__ import annotations

from tests.mcp.conftest import OpenMcp


async def test_a_mistyped_resume_lists_paused_names_apart_from_registered_ones(
    open_mcp: OpenMcp,
) -> None:
    async with open_mcp() as mcp:
        await mcp.ok("pause_queue", {"job": "Greet"})
        await mcp.ok("pause_queue", {"queue": "Mails"})
        answer = await mcp.ok("resume_queue", {"job": "greett"})
        assert answer["was_paused"] is False
        (unknown,) = answer["notices"]
        assert unknown["code"] == "JOB_UNKNOWN"
        assert "registered: " in unknown["cause"] and "paused: Greet" in unknown["cause"]
        registered = unknown["cause"].split("registered: ", 1)[1].split(";", 1)[0]
        assert "Greet" not in registered.split(", ") and "greet" in registered.split(", ")

        answer = await mcp.ok("resume_queue", {"queue": "mailz"})
        (queue,) = answer["notices"]
        assert queue["code"] == "QUEUE_UNKNOWN" and "paused: Mails" in queue["cause"]
        known = queue["cause"].split("known queues: ", 1)[1].split(";", 1)[0]
        assert "Mails" not in known.split(", ") and "mail" in known.split(", ")

        # The paused names still resume, and a paused name meant is still found.
        assert (await mcp.ok("resume_queue", {"job": "Greet"}))["was_paused"] is True
