"""What retry_job says to an agent and the dashboard's retry form say to a person agree with
what it does: a failed or dead job starts its attempts again, a delayed one only runs now and
keeps its count (`Retry(attempts)` counts every run)."""

from __future__ import annotations

import re

from engine import Jobs, ManualClock, Worker
from mcp_jobs.dashboard.actions import ACTIONS
from tests.mcp.conftest import OpenMcp

# A clause (up to . ; or ?) that names a delayed job and says its attempts are kept.
DELAYED_KEPT = re.compile(r"delayed[^.;?]*attempts kept|delayed[^.;?]*keep(s|ing) its attempts")


async def test_a_delayed_job_retried_keeps_its_attempts_as_the_texts_say(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    made = await jobs.enqueue("flaky", {"key": "delayed-kept"})
    await Worker(jobs).run_until_idle()  # fails once: waits out its backoff
    async with open_mcp() as mcp:
        waiting = await mcp.ok("inspect_job", {"job_id": made.id})
        assert (waiting["job"]["state"], waiting["job"]["attempt"]) == ("delayed", 1)
        now = await mcp.ok("retry_job", {"job_id": made.id})
        assert (now["job"]["state"], now["job"]["attempt"]) == ("ready", 1)
        (tool,) = [t for t in (await mcp.client.list_tools()).tools if t.name == "retry_job"]
    assert tool.description is not None and DELAYED_KEPT.search(tool.description), tool.description
    question = ACTIONS["retry"].question({"job_id": made.id})
    assert DELAYED_KEPT.search(question), question
