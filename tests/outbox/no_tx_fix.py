"""Shared by the drivers' OUTBOX_NO_TX tests: the refusal of a transaction that is no longer (or
never was) open, and its fix run as given (the body of an async function) staging the job."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from engine import JobRegistry, Jobs
from engine.errors import JobsError
from tests.outbox.test_stage import declare_confirm, published


async def the_fix_runs_as_given(jobs: Jobs, registry: JobRegistry, closed: Any) -> str:
    """Stage through `closed` (refused: OUTBOX_NO_TX), run the fix, and answer it."""
    confirm = declare_confirm(registry)
    with pytest.raises(JobsError) as caught:
        await jobs.stage(closed, confirm, {"order_id": "o-1"})
    assert caught.value.code == "OUTBOX_NO_TX"
    assert await published(jobs) == 0
    fix = caught.value.fix
    code = compile(fix, "fix", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    input = {"order_id": "o-2"}
    await eval(code, {"jobs": jobs, "name": confirm.name, "input": input})
    assert await published(jobs) == 1
    assert [j.input for j in (await jobs.list()).jobs] == [input]
    return fix
