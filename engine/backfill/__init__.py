"""Backfills: declared one-off sweeps over an app's own data, run once per environment as durable,
resumable, rate-limited passes with a ledger, a gate, and a dry run.

    from engine.backfill import backfill, Backfills

    normalize = backfill(name="normalize_emails", count=count, read=read,
                         key=lambda row: row["id"], handle=handle, batch_size=100)
    plan = await Backfills(jobs).dry_run("normalize_emails")
"""

from engine.backfill.declare import BackfillDefinition, checksum_of, declare
from engine.backfill.errors import (
    BackfillAppliedError,
    BackfillDeclarationInvalidError,
    BackfillEnvironmentError,
    BackfillMigrationPendingError,
    BackfillNameTakenError,
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
