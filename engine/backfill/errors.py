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

from engine.errors import ECHO_LIMIT, JobsError, quoted, short_repr
from engine.internal_jobs import BACKFILLS_COMMAND as ALL_COMMAND
from engine.internal_jobs import dry_run_command
from engine.iso_time import iso
from engine.meant import meant_note
from schemas.errors import NextCall


def _call(tool: str, **arguments: Any) -> NextCall:
    return NextCall(tool=tool, arguments=arguments)


def write_command(name: str) -> str:
    """The CLI line that writes (runs) backfill `name`, in this process's environment: never
    with an `MCP_JOBS_ENV=` of another, which would only relabel this deploy (the gate's bypass).
    A forced write is never a fix line: BACKFILL_APPLIED's is its dry run (`dry_run_command`)."""
    return f"mcp-jobs backfill {name} --write --json"


LIST_COMMAND = "mcp-jobs backfill --pending --json"
# ALL_COMMAND (imported): every declared backfill, pending or not, what a misspelt name is
# checked against; dry_run_command (imported) is the JOB_INTERNAL refusal's fix too.


class BackfillUnknownError(JobsError):
    """A name no declaration in this process carries: a typo, or a module that was not imported
    (or was deleted)."""

    code = "BACKFILL_UNKNOWN"
    title = "no backfill is declared under this name"

    def __init__(
        self, name: str, known: Sequence[str], *, handed_back_ms: int | None = None
    ) -> None:
        """`handed_back_ms`: raised by a pass that workers not declaring its backfill kept
        handing back for this long; it then fails, and the write is made again where it is
        declared."""
        names = sorted(known)
        hint, meant = meant_note(name, names)
        cause = (
            f'no backfill named "{name}" is declared{hint} (declared: {", ".join(names)})'
            if names
            else f'no backfill named "{name}" is declared, and this process declares none at all: '
            "the app module that declares it was not imported (--app MODULE or MCP_JOBS_APP)"
        )
        fix, call = ALL_COMMAND, _call("list_backfills")
        if handed_back_ms is not None:
            cause = (
                f'the pass of backfill "{name}" was handed back for {handed_back_ms / 3_600_000:g} '
                "h by workers that do not declare it, and no worker that does took it: "
                f"{cause}; run a worker whose --app imports the module declaring it, and write "
                "the backfill again from that deploy"
            )
            fix, call = write_command(name), _call("run_backfill", name=name)
        super().__init__(
            cause,
            fix,
            next_call=call,
            details={"backfill": name, "known": names, **meant},
        )


class BackfillEnvironmentError(JobsError):
    """The declaration names the environments it belongs to and this is not one. Declared data,
    never a hardcoded "cleanups are production": a staging rehearsal is correct practice.

    No command line fixes it: setting MCP_JOBS_ENV here would only relabel this deploy against
    its own database, the very sweep the gate stops. So the fix says where it runs (a deploy of
    a declared environment), or the code change that declares this one."""

    code = "BACKFILL_ENVIRONMENT"
    title = "this backfill does not run in this environment"

    def __init__(
        self,
        name: str,
        environment: str,
        declared: Sequence[str],
        *,
        started_for: str | None = None,
    ) -> None:
        """`started_for`: raised by a pass on a worker, the environment its write was gated
        for (the worker's own is `environment`)."""
        names = ", ".join(declared) or "every environment"
        if started_for is None:
            where = f"this process resolved {environment} (MCP_JOBS_ENV)"
        else:
            where = (
                f"its pass was started for {started_for} and this worker runs in {environment} "
                "(MCP_JOBS_ENV), so it read and wrote nothing"
            )
        if declared and environment not in declared:
            there = " or ".join(declared)
            also = ", ".join(f'"{e}"' for e in (*declared, environment))
            fix = (
                f"run it in a deploy whose MCP_JOBS_ENV is {there}, with that deploy's database "
                f'and worker, or declare backfill(name="{name}", environments=({also}), ...)'
            )
            why = (
                f"; a pass runs only in an environment its declaration names, so it runs in a "
                f'{there} deploy, or here once the declaration adds "{environment}"'
            )
        else:
            # Declared here too: the pass's environment is the one to run it in.
            target = started_for or environment
            fix = (
                f"start a worker whose MCP_JOBS_ENV is {target} for this pass, or write it "
                f"again in the deploy it should run in: mcp-jobs backfill {name} --write --json"
            )
            why = "; a pass runs only on a worker of the environment its ledger row records"
        super().__init__(
            f'backfill "{name}" declares environments: {names}, and {where}{why}',
            fix,
            details={
                "backfill": name,
                "environment": environment,
                "declared": list(declared),
                **({"started_for": started_for} if started_for is not None else {}),
            },
        )


class BackfillMigrationPendingError(JobsError):
    """The declaration's `requires` precondition (typically an app schema migration) does not
    hold yet, so nothing was read or written."""

    code = "BACKFILL_MIGRATION_PENDING"
    title = "the backfill's precondition does not hold yet"

    def __init__(self, name: str, requirement: str, fix: str | None = None) -> None:
        # Without a declared `requires_fix` there is no line of ours to run: the dry run would
        # only fail the same way. The precondition is the app's, so the fix says what to apply.
        how = (
            ""
            if fix
            else " (declare requires_fix= with the command that applies it, and this fix "
            "becomes that command)"
        )
        super().__init__(
            f'backfill "{name}" requires {requirement}, which its requires() check reports as '
            f"not applied; nothing was read or written{how}",
            fix
            or f'apply what backfill "{name}"\'s requires() reports missing ({requirement}) '
            "to the app's database, then run the backfill again",
            details={"backfill": name, "requirement": requirement},
        )


class BackfillAppliedError(JobsError):
    """Already swept here. A rerun is legitimate, so this names the flag; its fix rehearses the
    forced write (as the MCP next_call does), which shows the plan and the line that writes:
    run as given by a loop retrying a write, a forced write swept again what nobody asked for."""

    code = "BACKFILL_APPLIED"
    title = "this backfill already completed in this environment"

    def __init__(self, name: str, environment: str, run_id: str, completed_at: int | None) -> None:
        at = f" at {iso(completed_at)}" if completed_at is not None else ""
        super().__init__(
            f'backfill "{name}" completed in {environment} as run {run_id}{at}: there is '
            "nothing to do unless it must sweep again; a forced rerun writes a NEW ledger row "
            "and never edits that one",
            dry_run_command(name, force=True),
            # The call to make is the forced write's dry run, which shows the plan (and, to a
            # client that cannot be asked, the token the write needs).
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
        self.job_id = job_id


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


class BackfillFunctionFailedError(JobsError):
    """One of the declaration's own functions raised while a dry run or a write checked it:
    the app's code (a query, a connection), not the engine, so the answer names the call."""

    code = "BACKFILL_FUNCTION_FAILED"
    title = "a backfill's own function raised"

    def __init__(self, name: str, call: str, error: BaseException, fix: str) -> None:
        """`fix`: the line that makes the same call again (app_calls.again_line)."""
        super().__init__(
            f'backfill "{name}" {call} raised {type(error).__name__}: '
            f"{short_repr(str(error))}; nothing was started or written",
            fix,
            details={"backfill": name, "call": call, "exception": type(error).__name__},
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
        # A value one of its functions returned (`count()`, `key(row)`) is fixed in that
        # function, so the slot describes the function, as the keyword takes one.
        keyword, _, called = field.partition("(")
        if field == "name":
            fix = f'backfill(name="{mended or f"<{expected}>"}", ...)'
        elif called:
            kind = "a function" if keyword == "key" else "an async def"
            fix = f"backfill(name={name!r}, {keyword}=<{kind} returning {expected}>)"
        else:
            fix = f"backfill(name={name!r}, {keyword}=<{expected}>)"
        super().__init__(
            f'backfill "{name}" has {field}={value!r}; {field} must be {expected}',
            fix,
            details={"backfill": name, "field": field, "value": repr(value)},
        )


class BackfillNameTakenError(JobsError):
    code = "BACKFILL_NAME_TAKEN"
    title = "two backfills were declared under one name"

    def __init__(
        self, name: str, first: str, second: str, *, checksums: tuple[str, str] | None = None
    ) -> None:
        """`checksums`: the two declarations' (they differ, or one would be a re-import)."""
        again = f"again by {second}"
        if first == second and checksums is not None:
            again = (
                f"again, by the same handler, with other values (checksum {checksums[0]}, then "
                f"{checksums[1]}): only the same declaration imported twice shares a name"
            )
        super().__init__(
            f'backfill name "{name}" is declared by {first} and {again}',
            f'backfill(name="{name}_v2", ...)',
            details={"backfill": name, "first": first, "second": second},
        )


class BackfillPackageCalledError(JobsError):
    """The package `engine.backfill` called in place of its function `backfill`, as after
    `from engine import backfill` (which gives the package): raised by the package itself."""

    code = "BACKFILL_PACKAGE_CALLED"
    title = "the engine.backfill package was called in place of its backfill function"

    def __init__(self, name: object = None) -> None:
        """`name`: the `name=` the call gave, if any."""
        named = name if isinstance(name, str) else None
        what = f" to declare {quoted(named)}" if named is not None else ""
        super().__init__(
            f"engine.backfill, the package (what `from engine import backfill` gives), was "
            f"called{what}; a backfill is declared by its function engine.backfill.backfill, "
            "called, not used as a decorator: "
            "normalize = backfill(name=..., count=..., read=..., key=..., handle=...)",
            "from engine.backfill import backfill",
            details={"backfill": named[:ECHO_LIMIT]} if named is not None else None,
        )


__all__ = [
    "ALL_COMMAND",
    "LIST_COMMAND",
    "BackfillAppliedError",
    "BackfillDeclarationInvalidError",
    "BackfillEnvironmentError",
    "BackfillFunctionFailedError",
    "BackfillMigrationPendingError",
    "BackfillNameTakenError",
    "BackfillPackageCalledError",
    "BackfillPendingError",
    "BackfillRunningError",
    "BackfillStalledError",
    "BackfillUnknownError",
    "dry_run_command",
    "write_command",
]
