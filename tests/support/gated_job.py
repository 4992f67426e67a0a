"""A job whose bodies say when they start and wait for the test to let them finish, and a bounded
wait on the worker that needs no timer: what the tests of a worker that goes (cancelled, its
client closed) share on every driver."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import anyio
import anyio.lowlevel
from pydantic import BaseModel

from engine import JobContext, JobDefinition, JobRegistry, job


class Numbered(BaseModel):
    n: int


class Gated:
    """The job `gated`: each body appends its number to `started`, sets `first_started`, then
    waits for `release`; `finished` lists the bodies that got past it."""

    def __init__(self, registry: JobRegistry) -> None:
        self.started: list[int] = []
        self.finished: list[int] = []
        self.first_started = asyncio.Event()
        self.release = asyncio.Event()

        @job(name="gated", idempotency_key=lambda i: f"g:{i.n}", registry=registry)
        async def gated(input: Numbered, ctx: JobContext) -> None:
            self.started.append(input.n)
            self.first_started.set()
            await self.release.wait()
            self.finished.append(input.n)

        self.job: JobDefinition[Numbered] = gated


async def until(done: Callable[[], bool]) -> None:
    """Let the worker run (its claims may be on a socket) until `done()`, for at most 10 s."""
    with anyio.fail_after(10):
        while not done():
            await anyio.lowlevel.checkpoint()
