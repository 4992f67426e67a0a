"""Where a numbered schema stands against this build's migrations, in the one set of words that
`mcp-jobs db report` and `db migrate` both print; and the optional capability of a driver whose
schema is numbered migrations (SQLite, PostgreSQL): migrating and saying what it applied.

A schema ahead of this build (a newer build migrated it) is said, not refused: builds of two
versions run side by side during a rolling deploy, within what README's upgrade notes allow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


def version_words(version: int, latest: int, migrate: str) -> str:
    """`version` (0: never installed) against this build's `latest`; `migrate`: the command
    that brings it there."""
    if version == 0:
        return f"not installed (run {migrate})"
    if version < latest:
        return f"version {version}, behind this package's {latest} (run {migrate})"
    if version > latest:
        return (
            f"version {version}, ahead of this package's {latest} "
            "(a newer mcp-jobs migrated it: upgrade this one)"
        )
    return f"version {version}, this package's"


@dataclass(frozen=True)
class Migrated:
    """What a migration did: the versions this call applied, in order, and the schema's line
    as `db report` prints it afterwards."""

    applied: list[int]
    schema: str


@runtime_checkable
class VersionedSchema(Protocol):
    """A driver whose schema is numbered migrations. Optional: `db migrate` says what it applied
    where a driver offers it, and that the store is up to date elsewhere."""

    async def migrate_versions(self) -> Migrated:
        """`migrate()`, answering what it applied and where the schema then stands."""
        ...


__all__ = ["Migrated", "VersionedSchema", "version_words"]
