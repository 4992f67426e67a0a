"""Backfills: declared one-off sweeps over an app's own data, run once per environment as durable,
resumable, rate-limited passes with a ledger, a gate, and a dry run.

    from engine.backfill import backfill, Backfills

    normalize = backfill(name="normalize_emails", count=count, read=read,
                         key=lambda row: row["id"], handle=handle, batch_size=100)
    plan = await Backfills(jobs).dry_run("normalize_emails")
"""

import sys
import types
from typing import Any, NoReturn

from engine.backfill.declare import BackfillDefinition, checksum_of, declare
from engine.backfill.errors import (
    BackfillAppliedError,
    BackfillDeclarationInvalidError,
    BackfillEnvironmentError,
    BackfillMigrationPendingError,
    BackfillNameTakenError,
    BackfillPackageCalledError,
    BackfillPendingError,
    BackfillRunningError,
    BackfillStalledError,
    BackfillUnknownError,
)
from engine.backfill.gate import DEFAULT_ENVIRONMENT, ENVIRONMENT_ENV, resolve_environment
from engine.backfill.ledger import APP_VERSION_ENV, app_version
from engine.backfill.pass_job import (
    PASS_JOB,
    PASS_QUEUE,
    PASS_RETRY,
    PassInput,
    install_pass,
    pass_key,
)
from engine.backfill.pending import pending_definitions, pending_errors
from engine.backfill.rate import Pacer, interval_ms
from engine.backfill.registry import BackfillRegistry, backfill, default_backfills
from engine.backfill.service import SAMPLE_KEYS, Backfills


class _Package(types.ModuleType):
    """This package, callable only to say what was meant. `from engine import backfill` gives
    the package, not its function `backfill`; the package cannot be that function (importing a
    submodule sets `engine.backfill` to the package again), so calling it names the import."""

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise BackfillPackageCalledError(kwargs.get("name"))


# A module's class set to a ModuleType subclass: the data model's own way to customise a module
# (Python reference, "Customizing module attribute access"); it stays this module object.
sys.modules[__name__].__class__ = _Package

__all__ = [
    "APP_VERSION_ENV",
    "DEFAULT_ENVIRONMENT",
    "ENVIRONMENT_ENV",
    "PASS_JOB",
    "PASS_QUEUE",
    "PASS_RETRY",
    "SAMPLE_KEYS",
    "BackfillAppliedError",
    "BackfillDeclarationInvalidError",
    "BackfillDefinition",
    "BackfillEnvironmentError",
    "BackfillMigrationPendingError",
    "BackfillNameTakenError",
    "BackfillPackageCalledError",
    "BackfillPendingError",
    "BackfillRegistry",
    "BackfillRunningError",
    "BackfillStalledError",
    "BackfillUnknownError",
    "Backfills",
    "Pacer",
    "PassInput",
    "app_version",
    "backfill",
    "checksum_of",
    "declare",
    "default_backfills",
    "install_pass",
    "interval_ms",
    "pass_key",
    "pending_definitions",
    "pending_errors",
    "resolve_environment",
]
