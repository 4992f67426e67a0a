"""Whether the server holds the store a driver's URL names (a PostgreSQL schema, a Redis prefix,
a NATS bucket), asked before `migrate()` would install it: a command that only reads stored jobs
installs none (mcp_jobs/cli/database_installed.py). Asked on the driver's own connection."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class StoreAbsent:
    """The driver's store is not on its server. `what`: "schema", "prefix" or "bucket";
    `installed`: the mcp-jobs stores the server does hold, sorted; `naming(other)`: the
    driver's URL naming one of them instead."""

    what: str
    name: str
    installed: list[str]
    naming: Callable[[str], str]


@runtime_checkable
class InstalledStore(Protocol):
    """A driver whose store is installed on a server (memory and SQLite have none to ask)."""

    async def store_absent(self) -> StoreAbsent | None:
        """None when this driver's store is installed; else what the server holds instead."""
        ...


__all__ = ["InstalledStore", "StoreAbsent"]
