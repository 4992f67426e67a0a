"""The backfills this process declares, by name, and `backfill(...)`: declare and register.

Registered by importing the module that declares them, exactly like jobs (`--app package.module`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from engine.backfill.declaration import (
    BackfillDefinition,
    CountFn,
    HandleFn,
    KeyFn,
    ReadFn,
    RequiresFn,
    declare,
    is_declared,
)
from engine.backfill.errors import (
    BackfillDeclarationInvalidError,
    BackfillNameTakenError,
    BackfillUnknownError,
)


class BackfillRegistry:
    """Declared backfills by name."""

    def __init__(self) -> None:
        self._backfills: dict[str, BackfillDefinition] = {}

    def add(self, definition: BackfillDefinition) -> None:
        if not is_declared(definition):
            raise BackfillDeclarationInvalidError(
                str(getattr(definition, "name", "?")),
                "definition",
                definition,
                "built by backfill(...)",
            )
        existing = self._backfills.get(definition.name)
        # The same handler declaring again is a module re-import; anything else is two sweeps
        # fighting over one ledger name.
        if existing is not None and existing.qualified_name != definition.qualified_name:
            raise BackfillNameTakenError(
                definition.name, existing.qualified_name, definition.qualified_name
            )
        self._backfills[definition.name] = definition

    def get(self, name: str) -> BackfillDefinition | None:
        return self._backfills.get(name)

    def require(self, name: str) -> BackfillDefinition:
        found = self._backfills.get(name)
        if found is None:
            raise BackfillUnknownError(name, list(self._backfills))
        return found

    def names(self) -> list[str]:
        return sorted(self._backfills)

    def remove(self, name: str) -> None:
        self._backfills.pop(name, None)

    def __iter__(self) -> Iterator[BackfillDefinition]:
        return iter([self._backfills[n] for n in sorted(self._backfills)])

    def __len__(self) -> int:
        return len(self._backfills)

    def __contains__(self, name: object) -> bool:
        return name in self._backfills


# The registry `backfill(...)` writes into. Importing an app module registers its backfills here.
default_backfills = BackfillRegistry()


def backfill(
    *,
    name: str,
    count: CountFn,
    read: ReadFn,
    key: KeyFn,
    handle: HandleFn,
    batch_size: int = 100,
    rate: float | None = None,
    environments: Sequence[str] = (),
    requires: RequiresFn | None = None,
    requires_fix: str | None = None,
    description: str | None = None,
    registry: BackfillRegistry | None = None,
) -> BackfillDefinition:
    """Declare a backfill and register it (in `default_backfills` unless `registry` is given).

    - `count()`: rows still to do. The pass fails with BACKFILL_STALLED if `read` runs dry while
      this still matches, so it must select exactly the rows `read` selects.
    - `read(after, limit)`: the next batch after the cursor `after` (None at the start), in key
      order, at most `limit` rows.
    - `key(row)`: the row's cursor value (JSON); the last row's key is the next cursor.
    - `handle(rows)`: the work. It may run again for a batch whose completion was not recorded
      (a crash mid-batch), never for one that was, so it should be idempotent per row.
    - `rate`: at most this many batches per second; `environments`: empty = every environment;
      `requires()`: None when the precondition holds, else the name of what is missing;
      `requires_fix`: the one command that satisfies it (e.g. "alembic upgrade head").
    """
    definition = declare(
        name=name,
        count=count,
        read=read,
        key=key,
        handle=handle,
        batch_size=batch_size,
        rate=rate,
        environments=environments,
        requires=requires,
        requires_fix=requires_fix,
        description=description,
    )
    (registry if registry is not None else default_backfills).add(definition)
    return definition


__all__ = ["BackfillRegistry", "backfill", "default_backfills"]
