"""The backfill errors: each answers "why is this sweep not running?" and sends the reader somewhere
different — run it, force it, change environment, migrate first, look at the live pass, fix the
predicates, fix the name, or fix the declaration.

Every `fix` is ONE line to run or apply verbatim; explanations live in `cause`. A name reaches a
shell command here unquoted, which is safe because a declaration refuses any name outside
`[A-Za-z0-9_.:-]` (see `declaration.NAME_PATTERN`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.errors import JobsError
from engine.internal_jobs import BACKFILLS_COMMAND as ALL_COMMAND
from engine.internal_jobs import dry_run_command
from engine.meant import meant_note
from schemas.errors import NextCall


def _call(tool: str, **arguments: Any) -> NextCall:
    return NextCall(tool=tool, arguments=arguments)


def write_command(name: str, *, force: bool = False, environment: str | None = None) -> str:
    """The CLI line that writes (runs) backfill `name`."""
    prefix = f"MCP_JOBS_ENV={environment} " if environment is not None else ""
    flags = " --write --force" if force else " --write"
    return f"{prefix}mcp-jobs backfill {name}{flags} --json"


LIST_COMMAND = "mcp-jobs backfill --pending --json"
# ALL_COMMAND (imported): every declared backfill, pending or not, what a misspelt name is
# checked against; dry_run_command (imported) is the JOB_INTERNAL refusal's fix too.


class BackfillUnknownError(JobsError):
    """A name no declaration in this process carries: a typo, or a module that was not imported
    (or was deleted)."""

    code = "BACKFILL_UNKNOWN"
    title = "no backfill is declared under this name"

    def __init__(self, name: str, known: Sequence[str]) -> None:
        names = sorted(known)
        hint, meant = meant_note(name, names)
        cause = (
            f'no backfill named "{name}" is declared{hint} (declared: {", ".join(names)})'
            if names
            else f'no backfill named "{name}" is declared, and this process declares none at all: '
            "the app module that declares it was not imported (--app MODULE or MCP_JOBS_APP)"
        )
        super().__init__(
            cause,
            ALL_COMMAND,
            next_call=_call("list_backfills"),
            details={"backfill": name, "known": names, **meant},
        )


class BackfillEnvironmentError(JobsError):
    """The declaration names the environments it belongs to and this is not one. Declared data,
    never a hardcoded "cleanups are production": a staging rehearsal is correct practice."""

    code = "BACKFILL_ENVIRONMENT"
    title = "this backfill is not declared for this environment"

    def __init__(self, name: str, environment: str, declared: Sequence[str]) -> None:
        # The first declared environment, because the fix is ONE runnable line and the list is
        # ordered by the author. An empty list means "every environment" and never gets here,
        # but the constructor is public, so it answers with the listing rather than `ENV=None`.
        target = declared[0] if declared else None
        super().__init__(
            f'backfill "{name}" declares environments: {", ".join(declared) or "(none)"} and this '
            f'process resolved {environment} (MCP_JOBS_ENV); add "{environment}" to its '
            "environments if this deploy should sweep too",
            write_command(name, environment=target) if target is not None else LIST_COMMAND,
            details={"backfill": name, "environment": environment, "declared": list(declared)},
        )


class BackfillMigrationPendingError(JobsError):
    """The declaration's `requires` precondition (typically an app schema migration) does not
    hold yet, so nothing was read or written."""

    code = "BACKFILL_MIGRATION_PENDING"
    title = "the backfill's precondition does not hold yet"

    def __init__(self, name: str, requirement: str, fix: str | None = None) -> None:
        # Without a declared `requires_fix` the one runnable line is the dry run, which checks
        # the precondition again and shows the plan once it holds; how to apply it is cause.
        how = (
            ""
            if fix
            else f"; apply {requirement} to the app's database (declare requires_fix= with the "
            "command that does it, and this fix becomes that command)"
        )
        super().__init__(
            f'backfill "{name}" requires {requirement}, which its requires() check reports as '
            f"not applied; nothing was read or written{how}",
            fix or dry_run_command(name),
            details={"backfill": name, "requirement": requirement},
        )


class BackfillAppliedError(JobsError):
    """Already swept here. A rerun is legitimate, so this names the flag rather than refusing."""

    code = "BACKFILL_APPLIED"
    title = "this backfill already completed in this environment"

    def __init__(self, name: str, environment: str, run_id: str, completed_at: int | None) -> None:
        super().__init__(
            f'backfill "{name}" completed in {environment} as run {run_id} at {completed_at} '
            "(epoch ms); a forced rerun writes a NEW ledger row and never edits that one",
            write_command(name, force=True),
            # The forced write is shown only; the call to make is its dry run, which shows the
            # plan (and, to a client that cannot be asked, the token the write needs).
            next_call=_call("run_backfill", name=name, force=True),
            details={
                "backfill": name,
                "environment": environment,
                "run_id": run_id,
                "completed_at": completed_at,
            },
        )


class BackfillRunningError(JobsError):
    """One name holds one live pass. Distinct from APPLIED (a pass that finished): the answer
    here is to look at the run holding the name, not to force."""

    code = "BACKFILL_RUNNING"
    title = "a pass of this backfill is already live"
    retry = "transient"

    def __init__(self, name: str, job_id: str) -> None:
        super().__init__(
            f'backfill "{name}" already has a live pass queued as job {job_id}, and one name '
            "holds one live pass; its step trace names the batch it is on, and a pass that is "
            "not advancing is a worker that lost its lease or no worker running",
            f"mcp-jobs jobs show {job_id} --json",
            next_call=_call("inspect_job", job_id=job_id),
            details={"backfill": name, "job_id": job_id},
        )


class BackfillStalledError(JobsError):
    """The source ran dry and the declaration's own `count()` still matches rows. Two predicates
    that disagree is an authoring bug, so the pass fails rather than record a success over rows
    it never visited."""

    code = "BACKFILL_STALLED"
    title = "the sweep ended with rows its own count still matches"

    def __init__(self, name: str, remaining: int, swept: int) -> None:
        super().__init__(
            f'backfill "{name}" swept {swept} rows, exhausted read(), and count() still matches '
            f"{remaining}; a WHERE that read() narrows and count() does not (or rows written "
            "behind the cursor during the pass) is what leaves rows behind",
            f'make count() select exactly the rows read() selects in backfill(name="{name}")',
            details={"backfill": name, "remaining": remaining, "swept": swept},
        )


class BackfillPendingError(JobsError):
    """Declared for this environment and never completed here: the alarm that a sweep was merged
    and deployed and nothing ran it. Returned as a finding, raised by nothing in the engine."""

    code = "BACKFILL_PENDING"
    title = "a declared backfill has not completed in this environment"

    def __init__(self, name: str, environment: str) -> None:
        super().__init__(
            f'backfill "{name}" is declared for {environment} and the ledger holds no completed '
            "pass for it there",
            write_command(name),
            next_call=_call("run_backfill", name=name),
            details={"backfill": name, "environment": environment},
        )


class BackfillDeclarationInvalidError(JobsError):
    """A declaration (or a value one of its functions returned) that can never sweep correctly."""

    code = "BACKFILL_DECLARATION_INVALID"
    title = "a backfill declaration has a value that can never work"

    def __init__(
        self, name: str, field: str, value: object, expected: str, *, mended: str | None = None
    ) -> None:
        # `name` itself refused: the fix names it once, `mended` (a name that is valid) when
        # there is one, and `...` stands for the declaration's other arguments as given.
        if field == "name":
            fix = f'backfill(name="{mended or f"<{expected}>"}", ...)'
        else:
            fix = f"backfill(name={name!r}, {field.split('(')[0]}=<{expected}>)"
        super().__init__(
            f'backfill "{name}" has {field}={value!r}; {field} must be {expected}',
            fix,
            details={"backfill": name, "field": field, "value": repr(value)},
        )


class BackfillNameTakenError(JobsError):
    code = "BACKFILL_NAME_TAKEN"
    title = "two backfills were declared under one name"

    def __init__(self, name: str, first: str, second: str) -> None:
        super().__init__(
            f'backfill name "{name}" is declared by {first} and again by {second}',
            f'backfill(name="{name}_v2", ...)',
            details={"backfill": name, "first": first, "second": second},
        )


__all__ = [
    "ALL_COMMAND",
    "LIST_COMMAND",
    "BackfillAppliedError",
    "BackfillDeclarationInvalidError",
    "BackfillEnvironmentError",
    "BackfillMigrationPendingError",
    "BackfillNameTakenError",
    "BackfillPendingError",
    "BackfillRunningError",
    "BackfillStalledError",
    "BackfillUnknownError",
    "dry_run_command",
    "write_command",
]
