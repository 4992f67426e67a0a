"""`ctx.step.wait_for_event` refuses a bad value by the parameter the caller wrote: `match`, the
event's key, is named `match` in the refusal and its fix, never `key` (no such parameter)."""

from __future__ import annotations

from engine import JobContext, JobRegistry, Jobs
from engine.errors import InvalidArgumentError
from tests.engine.test_step_arguments import _refusal


async def test_a_bad_match_is_refused_naming_match(jobs: Jobs, registry: JobRegistry) -> None:
    async def call(ctx: JobContext) -> None:
        await ctx.step.wait_for_event("pay.done", match=5, timeout=10)  # type: ignore[arg-type]

    exc = await _refusal(jobs, registry, call)
    assert isinstance(exc, InvalidArgumentError) and exc.code == "INVALID_ARGUMENT"
    assert exc.argument == "match"
    assert exc.cause.startswith("match=5 ") and "key" not in exc.fix
