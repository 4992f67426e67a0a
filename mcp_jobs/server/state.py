"""The running server's state: one jobs client and the settings, opened by the lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

import anyio
from mcp.server.mcpserver import MCPServer

from engine.backfill import BackfillRegistry
from engine.client import Jobs, connect
from mcp_jobs.config import Settings
from mcp_jobs.fix_context import written_by_face


@dataclass
class AppState:
    """The lifespan context every handler reads: one jobs client and the settings."""

    jobs: Jobs
    settings: Settings
    backfills: BackfillRegistry | None = None


class StateHolder:
    """The running server's state, for handlers the SDK gives no Context (static resources)."""

    def __init__(self) -> None:
        self.state: AppState | None = None
        # Run when the last session leaves, before the client closes (the subscription listener).
        self.on_stop: list[Callable[[], Awaitable[None]]] = []

    def require(self) -> AppState:
        if self.state is None:
            raise RuntimeError("the server is not running (its lifespan has not started)")
        return self.state


def lifespan_for(
    settings: Settings,
    jobs: Jobs | None,
    holder: StateHolder,
    backfills: BackfillRegistry | None = None,
) -> Callable[[MCPServer[AppState]], AbstractAsyncContextManager[AppState]]:
    """A given client is borrowed (its owner closes it); otherwise one is opened on the first
    session and closed when the last one ends, so HTTP sessions share one pool."""
    users = 0
    opened: Jobs | None = None
    lock = anyio.Lock()

    @asynccontextmanager
    async def lifespan(_: MCPServer[AppState]) -> AsyncIterator[AppState]:
        nonlocal users, opened
        async with lock:
            if jobs is None and opened is None:
                opened = await connect(settings.url)
        client = jobs if jobs is not None else opened
        assert client is not None
        written_by_face(client)  # its fix lines get this server's context (FixContext)
        users += 1
        holder.state = AppState(jobs=client, settings=settings, backfills=backfills)
        try:
            yield holder.state
        finally:
            users -= 1
            if users == 0:
                with anyio.CancelScope(shield=True):
                    for stop in holder.on_stop:
                        await stop()
            if users == 0 and opened is not None:
                closing, opened = opened, None
                holder.state = None
                with anyio.CancelScope(shield=True):
                    await closing.close()

    return lifespan
