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
    """Stage through `closed` (refused: OUTBOX_NO_TX), run the fix, and answer it: staged by
    its definition, the fix is a template (`name, input` the caller's to fill in); by name with
    a literal input, it is the call as made, run with nothing but `jobs` in scope."""
    confirm = declare_confirm(registry)
    template = await _refused(jobs, closed, confirm, {"order_id": "o-1"})
    assert "name, input" in template
    await _run(template, {"jobs": jobs, "name": confirm.name, "input": {"order_id": "o-1"}})
    assert await published(jobs) == 1
    fix = await _refused(jobs, closed, confirm.name, {"order_id": "o-2"}, tenant_id=None)
    assert "name, input" not in fix and f'"{confirm.name}", {{"order_id": "o-2"}}' in fix
    await _run(fix, {"jobs": jobs})
    assert await published(jobs) == 1
    inputs = [j.input for j in (await jobs.list()).jobs]
    assert sorted(i["order_id"] for i in inputs) == ["o-1", "o-2"]
    return fix


async def _refused(jobs: Jobs, closed: Any, job: Any, input: Any, **options: Any) -> str:
    """The fix of OUTBOX_NO_TX for `jobs.stage(closed, job, input, **options)`; nothing staged."""
    with pytest.raises(JobsError) as caught:
        await jobs.stage(closed, job, input, **options)
    assert caught.value.code == "OUTBOX_NO_TX"
    assert await published(jobs) == 0
    return caught.value.fix


async def _run(fix: str, scope: dict[str, Any]) -> None:
    await eval(compile(fix, "fix", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), scope)
