"""The backfills this process declares, by name, and `backfill(...)`: declare and register.

Registered by importing the module that declares them, exactly like jobs (`--app package.module`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engine.backfill.declare import (
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
from engine.errors import JobsError
from engine.registry import Registry


class BackfillRegistry(Registry[BackfillDefinition]):
    """Declared backfills by name."""

    def __init__(self) -> None:
        super().__init__()
        self._on_first: dict[object, Callable[[], object]] = {}

    def when_declared(self, key: object, callback: Callable[[], object]) -> None:
        """Call `callback` once this registry holds a declaration: now if it already does. One
        callback waits per `key` (a later one replaces it), so a caller that asks again each
        time it is built adds nothing. The pass job is registered this way, so a process that
        declares no backfill serves none."""
        if len(self):
            callback()
        else:
            self._on_first[key] = callback

    def add(self, definition: BackfillDefinition) -> None:
        super().add(definition)
        waiting, self._on_first = self._on_first, {}
        for callback in waiting.values():
            callback()

    def check(self, definition: object) -> BackfillDefinition:
        if not is_declared(definition):
            raise BackfillDeclarationInvalidError(
                str(getattr(definition, "name", "?")),
                "definition",
                definition,
                "built by backfill(...)",
            )
        return definition

    def clash(
        self, existing: BackfillDefinition, definition: BackfillDefinition
    ) -> JobsError | None:
        # The same declaration again is a module re-import; anything else, even by a shared
        # handler, is two sweeps fighting over one ledger name (and one would drop the other's
        # environments or batch size unseen).
        if existing.same_as(definition):
            return None
        return BackfillNameTakenError(
            definition.name,
            existing.qualified_name,
            definition.qualified_name,
            checksums=(existing.checksum, definition.checksum),
        )

    def unknown(self, name: str, known: Sequence[str]) -> JobsError:
        return BackfillUnknownError(name, known)


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
