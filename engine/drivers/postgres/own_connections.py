"""Connections the driver keeps out of the pool: opened on demand up to a limit, reused without
the pool's bookkeeping, closed (never reused) once their session state is unknown.

Each set opens its connections with its own session settings: the claim's set plans its
statements once (`plan_cache_mode`), the general set keeps the server's defaults.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TypeAlias

import asyncpg

from engine.drivers.postgres.faults import DRIVER_FAILURES

Connection: TypeAlias = "asyncpg.Connection[asyncpg.Record]"

# Real time: after a connection of a set failed to open, that set stays out of the way this long
# (the pool serves meanwhile, and reports the failure if there is one).
RETRY_OPEN_S = 1.0


class OwnConnections:
    """Up to `limit` connections to `url` opened with `settings`; `all` holds every one of them,
    `free` the ones no operation holds."""

    def __init__(
        self,
        url: str,
        *,
        limit: int,
        settings: Mapping[str, str],
        statement_cache_size: int,
        connect_timeout_s: float,
    ) -> None:
        self.url = url
        self.limit = limit
        self.settings = dict(settings)
        self.statement_cache_size = statement_cache_size
        self.connect_timeout_s = connect_timeout_s
        self.all: set[Connection] = set()
        self.free: list[Connection] = []
        self._connecting = 0
        self._retry_at = 0.0
        self.closed = False

    def take_free(self) -> Connection | None:
        """A free connection that is open (taken), without a coroutine: the common path."""
        free = self.free
        while free and not self.closed:
            conn = free.pop()
            if not conn.is_closed():
                return conn
            self.all.discard(conn)
        return None

    async def open(self) -> Connection | None:
        """A newly opened connection (taken), when none is free and there is room."""
        if self.closed or len(self.all) + self._connecting >= self.limit:
            return None
        if time.monotonic() < self._retry_at:
            return None
        self._connecting += 1
        try:
            conn = await asyncpg.connect(
                self.url,
                statement_cache_size=self.statement_cache_size,
                timeout=self.connect_timeout_s,
                server_settings=self.settings,
            )
        except DRIVER_FAILURES:
            self._retry_at = time.monotonic() + RETRY_OPEN_S
            return None
        finally:
            self._connecting -= 1
        if self.closed:
            conn.terminate()
            return None
        self.all.add(conn)
        return conn

    def give_back(self, conn: Connection, clean: bool) -> None:
        """Return a taken connection. One that was interrupted (a cancellation may land
        mid-statement), broke (its session was ended under it: asyncpg may not have seen the
        socket close yet, and reusing it fails mid-protocol) or was left inside a transaction
        has an unknown session: it is closed, never reused. An ordinary error raised between
        statements (a refused duplicate, an invalid item of a batch) leaves the session as it
        was."""
        if clean and not self.closed and conn in self.all and not conn.is_in_transaction():
            self.free.append(conn)
        else:
            self.all.discard(conn)
            conn.terminate()

    def detach(self) -> tuple[set[Connection], set[Connection]]:
        """Close the set to new use; returns (every connection, the free ones) for closing."""
        self.closed = True
        every, free = self.all, set(self.free)
        self.all, self.free = set(), []
        return every, free
