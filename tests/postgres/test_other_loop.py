"""A PostgreSQL client belongs to the event loop it was created on: asyncpg's connections and
pool are bound to it. Used from another loop (a thread with its own loop, a sync framework's
`asyncio.run` per request with a module-level client) every call is refused as
DRIVER_OTHER_LOOP, terminal, whose fix (a client per loop) runs as given on that loop — never
asyncpg's raw RuntimeError ("attached to a different loop", "another operation is in
progress"), and nothing is written through the wrong loop."""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.to_thread
from pydantic import BaseModel

from engine import JobContext, JobRegistry, connect, job
from engine.errors import JobsError


class Ping(BaseModel):
    n: int


def _registry() -> JobRegistry:
    registry = JobRegistry()

    @job(queue="loops", idempotency_key=lambda i: f"ping:{i.n}", registry=registry)
    async def ping(input: Ping, ctx: JobContext) -> None:
        return None

    return registry


def _on_another_loop(call: Callable[[], Awaitable[Any]]) -> BaseException | None:
    """Run `call` on a new loop in this thread (as a sync framework's request does); what it
    raised, or None. Bounded: a call that hangs fails the test instead."""

    async def bounded() -> None:
        await asyncio.wait_for(call(), timeout=30)

    try:
        asyncio.run(bounded())
    except BaseException as exc:
        return exc
    return None


async def test_a_call_from_another_loop_is_refused_with_a_fix_that_runs(pg_url: str) -> None:
    registry = _registry()
    jobs = await connect(pg_url, registry=registry)
    try:
        await jobs.enqueue("ping", {"n": 0})  # the client's own connections, on its own loop
        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "enqueue": lambda: jobs.enqueue("ping", {"n": 1}),
            "list": lambda: jobs.list(),
            "stats": lambda: jobs.stats(),
        }
        refused: list[JobsError] = []
        for what, call in calls.items():
            raised = await anyio.to_thread.run_sync(_on_another_loop, call)
            assert isinstance(raised, JobsError), (what, repr(raised))
            refused.append(raised)
            assert (raised.code, raised.retryable) == ("DRIVER_OTHER_LOOP", False), what
            assert "loop" in raised.cause
        fix = refused[-1].fix
        ast.parse(fix)
        # The fix, run as given on the other loop: a client of that loop's own, which enqueues.
        code = compile(fix, "fix", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        # Where the app made the call: its `jobs`, whose registry the new client is given.
        assert "registry=jobs.registry" in fix
        scope = {"connect": connect, "jobs": jobs, "name": "ping", "input": {"n": 2}}

        async def run_fix() -> None:
            await eval(code, scope)

        assert await anyio.to_thread.run_sync(_on_another_loop, run_fix) is None
        # Still usable on its own loop, and only the own loop's and the fix's enqueues landed.
        names = sorted(j.input["n"] for j in (await jobs.list()).jobs)
        assert names == [0, 2]
    finally:
        await jobs.close()
