"""An enqueue_job whose name slipped (JOB_UNKNOWN) is fixed as the call with the name meant AS
THAT JOB TAKES IT: the engine's own check of the meant job, nothing stored
(`operations.meant_job`). Its fix kept a `key` the meant job refuses (it computes its own), and
ran into INVALID_ARGUMENT (exploreA2: `build_reprt` with key "zz"); now the key is the one it
computes and the input's fields are renamed where plain, whether the engine refused the name
(the tool ran) or the strict model refused another argument first (`name_first`). An input no
rename mends is said in the cause, the fix shown only."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import Jobs
from tests.mcp.conftest import OpenMcp


def _call(fix: str) -> tuple[str, dict[str, Any]]:
    tool, _, arguments = fix.partition(" ")
    return tool, json.loads(arguments)


MEANT = {"name": "greet", "input": {"user_id": 2}, "key": "greet:2"}


@pytest.mark.parametrize(
    ("asked", "fixed"),
    [
        ({"name": "gret", "input": {"user_id": 2}, "key": "zz"}, MEANT),
        ({"name": "Greet", "input": {"user_id": 2}, "key": "zz"}, MEANT),
        ({"name": "gret", "input": {"userId": 2}, "key": "zz"}, MEANT),
        # Refused by the strict model too (`delay`): JOB_UNKNOWN first, from the call its fix
        # shows (`delay_seconds`), not the one typed.
        (
            {"name": "gret", "input": {"userId": 2}, "key": "zz", "delay": 5},
            {**MEANT, "delay_seconds": 5},
        ),
    ],
)
async def test_the_fix_is_the_call_the_meant_job_takes_and_it_runs(
    jobs: Jobs, open_mcp: OpenMcp, asked: dict[str, Any], fixed: dict[str, Any]
) -> None:
    async with open_mcp() as mcp:
        error = await mcp.fails("enqueue_job", asked, "JOB_UNKNOWN")
        assert error.get("next_call") is None  # a write under another name: shown only
        tool, arguments = _call(error["fix"])
        assert (tool, arguments) == ("enqueue_job", fixed), error
        made = await mcp.ok(tool, arguments)
    job = await jobs.get(made["job_id"])
    assert (job.name, job.idempotency_key, job.input["user_id"]) == ("greet", "greet:2", 2)


async def test_an_input_the_meant_job_refuses_unmended_is_said_and_shown_only(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    asked = {"name": "gret", "input": {"colour": "red"}, "key": "zz"}
    async with open_mcp() as mcp:
        error = await mcp.fails("enqueue_job", asked, "JOB_UNKNOWN")
        assert 'input for "greet" is invalid' in error["cause"], error
        assert error.get("next_call") is None
        assert _call(error["fix"])[1]["name"] == "greet"
    assert (await jobs.list()).jobs == []
