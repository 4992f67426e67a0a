"""`resume_queue` naming nothing paused nor known: JOB_UNKNOWN / QUEUE_UNKNOWN list the
registered names as registered and the paused names as paused, never a paused name as a
registered job (or a known queue)."""

from __future__ import annotations

from tests.mcp.conftest import OpenMcp


async def test_a_mistyped_resume_lists_paused_names_apart_from_registered_ones(
    open_mcp: OpenMcp,
) -> None:
    async with open_mcp() as mcp:
        await mcp.ok("pause_queue", {"job": "Greet"})
        await mcp.ok("pause_queue", {"queue": "Mails"})
        unknown = await mcp.fails("resume_queue", {"job": "greett"}, "JOB_UNKNOWN")
        assert "Greet" not in unknown["details"]["known"]
        assert "greet" in unknown["details"]["known"]
        assert unknown["details"]["paused"] == ["Greet"]
        assert "registered: " in unknown["cause"] and "paused: Greet" in unknown["cause"]
        registered = unknown["cause"].split("registered: ", 1)[1].split(";", 1)[0]
        assert "Greet" not in registered.split(", ")

        queue = await mcp.fails("resume_queue", {"queue": "mailz"}, "QUEUE_UNKNOWN")
        assert "Mails" not in queue["details"]["known"] and "mail" in queue["details"]["known"]
        assert queue["details"]["paused"] == ["Mails"]
        assert "paused: Mails" in queue["cause"]

        # The paused names still resume, and a paused name meant is still found.
        assert (await mcp.ok("resume_queue", {"job": "Greet"}))["was_paused"] is True
