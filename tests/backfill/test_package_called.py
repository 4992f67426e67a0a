"""`from engine import job, backfill` gives the package `engine.backfill`, not its declaring
function `engine.backfill.backfill`. Calling the package (`backfill(...)`, `@backfill(...)`) is
refused as BACKFILL_PACKAGE_CALLED, whose fix is the import that gives the function; before, it
was `TypeError: 'module' object is not callable`, which names neither. The package stays the
package: its submodules import and resolve as before."""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

import pytest

from engine.backfill import BackfillDefinition, BackfillRegistry
from engine.errors import JobsError


async def _count() -> int:
    return 0


async def _read(after: Any, limit: int) -> list[dict[str, int]]:
    return []


async def _handle(rows: list[dict[str, int]]) -> None:
    return None


def _arguments(registry: BackfillRegistry) -> dict[str, Any]:
    return {
        "name": "normalize_emails",
        "count": _count,
        "read": _read,
        "key": lambda row: row["id"],
        "handle": _handle,
        "registry": registry,
    }


def test_calling_the_package_names_the_import_of_the_function() -> None:
    from engine import backfill as imported  # the mistake: the package, not the function

    with pytest.raises(JobsError) as caught:
        imported(**_arguments(BackfillRegistry()))
    error = caught.value
    assert error.code == "BACKFILL_PACKAGE_CALLED"
    assert error.fix == "from engine.backfill import backfill"
    assert error.details == {"backfill": "normalize_emails"}

    # The fix runs as given, and what it binds declares the backfill.
    scope: dict[str, Any] = {}
    exec(error.fix, scope)
    registry = BackfillRegistry()
    declared = scope["backfill"](**_arguments(registry))
    assert isinstance(declared, BackfillDefinition) and registry.get("normalize_emails") is declared


def test_used_as_a_decorator_it_is_refused_the_same_way() -> None:
    from engine import backfill as imported

    with pytest.raises(JobsError) as caught:

        @imported(name="normalize_emails")  # type: ignore[operator]
        async def sweep() -> None:
            return None

    assert caught.value.code == "BACKFILL_PACKAGE_CALLED"


def test_the_package_and_its_submodules_import_and_resolve_as_before() -> None:
    import engine
    import engine.backfill.registry

    package = sys.modules["engine.backfill"]
    assert engine.backfill is package and isinstance(package, types.ModuleType)
    assert engine.backfill.registry is importlib.import_module("engine.backfill.registry")
    from engine.backfill import backfill

    assert backfill is engine.backfill.registry.backfill
    assert not isinstance(backfill, types.ModuleType)
