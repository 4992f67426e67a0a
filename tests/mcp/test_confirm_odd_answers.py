"""A confirm question answered with something that is no yes or no (an accept with no content or
with content the question did not ask for, or an error from the client's handler) is a decline:
the tool's own WRITE_DECLINED envelope, not retryable, its next_call the dry run, nothing written.
In both protocol eras, for the single writes and the bulk ones."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from mcp.types import INTERNAL_ERROR, ElicitResult, ErrorData

from engine import JobRegistry, Jobs, ManualClock, Worker
from engine.retention import DAY_MS
from mcp_jobs.server.audit import AUDIT_EVENT
from tests.mcp.support import Person, serve, stored_rows

ODD_ANSWERS: dict[str, ElicitResult | ErrorData] = {
    "accept with no content": ElicitResult(action="accept"),
    "accept with a value of another type": ElicitResult(
        action="accept", content={"confirm": "maybe"}
    ),
    "accept with content not asked for": ElicitResult(action="accept", content={"other": True}),
    "an error from the client": ErrorData(code=INTERNAL_ERROR, message="boom"),
}

# Each write that asks, with its dry run (the next_call of a decline).
WRITES = [
    ("prune_history", {"write": True}, {}),
    ("cancel_jobs", {"name": "greet", "write": True}, {"name": "greet"}),
]


@dataclass
class OddPerson(Person):
    """A client whose answer to every question is `odd`."""

    odd: ElicitResult | ErrorData = field(default_factory=lambda: ElicitResult(action="accept"))

    async def __call__(self, context: Any, params: Any) -> Any:
        self.asked.append(params.message)
        return self.odd


@pytest.mark.parametrize("answer", list(ODD_ANSWERS))
async def test_an_answer_that_is_no_yes_or_no_declines_the_write(
    jobs: Jobs, app: JobRegistry, mode: str, clock: ManualClock, answer: str
) -> None:
    if answer == "an error from the client" and mode == "auto":
        pytest.skip("on 2026-07-28 the client's own driver ends the call: nothing reaches us")
    await jobs.enqueue("greet", {"user_id": 1})
    await Worker(jobs, queues="*", prune=False).run_until_idle()
    clock.advance(8 * DAY_MS)  # past retention: prune has something to delete
    await jobs.enqueue("greet", {"user_id": 2})  # live: cancel_jobs has something to cancel
    before = {table: await stored_rows(jobs, table) for table in ("jobs", "steps")}
    person = OddPerson(odd=ODD_ANSWERS[answer])
    async with serve(jobs, mode, person=person) as mcp:
        for tool, arguments, dry_run in WRITES:
            error = await mcp.fails(tool, arguments, "WRITE_DECLINED")
            assert error["retryable"] is False, error
            assert error["next_call"] == {"tool": tool, "arguments": dry_run}, error
            assert error["fix"].startswith(tool), error
        assert len(person.asked) >= len(WRITES)  # each was asked, and none written
    assert {table: await stored_rows(jobs, table) for table in ("jobs", "steps")} == before
    # Recorded as any declined write is: the audit trail shows what the agent attempted.
    events = await stored_rows(jobs, "events")
    declined = [row for row in events if AUDIT_EVENT in row and "WRITE_DECLINED" in str(row)]
    assert len(declined) == len(WRITES), events
