"""An empty value where a value narrows what a call selects is refused, not read as left out.

A tenant is never "": `tenant_id: ""` read as none widened a filter to every tenant's jobs (a
cancel_jobs for tenant "" planned, and would have cancelled, all of them) and enqueued a job with
no tenant; its audit line was lost (the event was refused for the same tenant). An empty list of
states read as none chose every state (a prune_history with `states: []` would prune them all),
and diagnose_queue for queue "" diagnosed every queue."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from engine import Jobs
from mcp_jobs.config import Settings
from mcp_jobs.server.audit import AUDIT_EVENT
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import stored_rows

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("list_jobs", {"state": "ready"}),
    ("enqueue_job", {"name": "greet", "input": {"user_id": 2}}),
    ("cancel_jobs", {"queue": "default"}),
    ("retry_jobs", {}),
    ("cancel_jobs", {"queue": "default", "write": True}),
    ("send_event", {"name": "paid", "key": "7"}),
]


@pytest.mark.parametrize("pinned", [None, "acme"])
async def test_an_empty_tenant_is_refused_and_nothing_is_written(
    jobs: Jobs, open_mcp: OpenMcp, caplog: pytest.LogCaptureFixture, pinned: str | None
) -> None:
    await jobs.enqueue("greet", {"user_id": 1}, tenant_id="acme")
    await jobs.enqueue("greet", {"user_id": 1}, tenant_id="globex")
    jobs_before = await stored_rows(jobs, "jobs")
    events_before = len(await stored_rows(jobs, "events"))
    with caplog.at_level(logging.ERROR, logger="mcp_jobs.server"):
        async with open_mcp(Settings(tenant=pinned)) as mcp:
            for tool, given in CALLS:
                call = {**given, "tenant_id": ""}
                error = await mcp.fails(tool, call, "INVALID_ARGUMENT")
                assert error["details"]["argument"] == "tenant_id", error
                # A slot, never the call without it: that would act on every tenant's jobs.
                named, _, mended = error["fix"].partition(" ")
                assert (named, json.loads(mended)) == (tool, {**call, "tenant_id": "<tenant_id>"})
                assert "next_call" not in error, error
    assert await stored_rows(jobs, "jobs") == jobs_before
    added = (await stored_rows(jobs, "events"))[events_before:]
    # The refused writes are audited: enqueue_job, send_event, cancel_jobs with write=true (a
    # bulk call without it is a plan: a read).
    assert sum(AUDIT_EVENT in str(row) for row in added) == 3
    assert "not recorded" not in caplog.text


# The slot a fix shows: a list where the argument takes only a list (a string there would be
# refused as given), else text.
EMPTY_CHOICES: list[tuple[str, dict[str, Any], str, object]] = [
    ("list_jobs", {"state": []}, "state", "<state>"),
    ("cancel_jobs", {"states": [], "write": True}, "states", ["<state>"]),
    ("retry_jobs", {"states": []}, "states", ["<state>"]),
    ("prune_history", {"states": [], "write": True}, "states", ["<state>"]),
    ("diagnose_queue", {"queue": ""}, "queue", "<queue>"),
]


async def test_an_empty_choice_is_refused_not_read_as_every_one(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    await jobs.enqueue("greet", {"user_id": 1})
    before = await stored_rows(jobs, "jobs")
    async with open_mcp() as mcp:
        for tool, call, argument, slot in EMPTY_CHOICES:
            error = await mcp.fails(tool, call, "INVALID_ARGUMENT")
            assert error["details"]["argument"] == argument, error
            named, _, mended = error["fix"].partition(" ")
            assert (named, json.loads(mended)) == (tool, {**call, argument: slot})
            assert "next_call" not in error, error
        # Asking for no queue's numbers is answered as asked: none.
        assert (await mcp.ok("queue_stats", {"queues": []}))["queues"] == []
    assert await stored_rows(jobs, "jobs") == before
