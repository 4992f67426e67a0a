"""The gate: whether a write may start a pass, and the typed refusal when it may not.

Checked in this order, each answering with a different next step: the environment (change
environment, or declare it), the precondition (migrate first), a live pass (look at it), a
completed pass here (force). A name nobody declared is refused before any of these, by the
registry. The same verdict is what a dry run reports as `blocked_by`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from engine.backfill.declare import BackfillDefinition, is_environment_name, mended_name
from engine.backfill.errors import (
    BackfillAppliedError,
    BackfillEnvironmentError,
    BackfillMigrationPendingError,
    BackfillRunningError,
)
from engine.backfill.registry import default_backfills
from engine.errors import NOTHING_NEAR, InvalidArgumentError, JobsError
from engine.meant import meant_as
from schemas.backfill import BackfillRun

ENVIRONMENT_ENV = "MCP_JOBS_ENV"
ENVIRONMENT_ARGUMENT = "environment"
DEFAULT_ENVIRONMENT = "development"
# What an unset environment is, said where the value was given: the variable, or the
# `environment=` argument (whose None reads the variable).
_UNSET_SAYS = "unset, the environment is"
_NONE_SAYS = f"None: {ENVIRONMENT_ENV}, else"


ENVIRONMENT_EXPECTED = (
    "an environment's name: 1-128 of A-Z a-z 0-9 _ . : - (starting alphanumeric), as "
    "`environments=` names them; unset, the environment is development"
)


def resolve_environment(
    explicit: str | None = None, *, declared: Iterable[BackfillDefinition] | None = None
) -> str:
    """The explicit environment, else `MCP_JOBS_ENV`, else "development": a name as a
    declaration's `environments=` holds one. An empty or malformed value is INVALID_ARGUMENT,
    never read as development (`MCP_JOBS_ENV="$ENV"` with ENV unset in production) nor as an
    environment of its own where every backfill would be pending again: so its fix is the value
    without the blanks around it, else the environment of `declared` (else this process's
    declarations) it plainly stands for, else unsetting the variable; never a name of its own."""
    if explicit is not None and not isinstance(explicit, str):
        raise InvalidArgumentError(
            ENVIRONMENT_ARGUMENT, explicit, f"None or {ENVIRONMENT_EXPECTED}"
        )
    value = explicit if explicit is not None else os.environ.get(ENVIRONMENT_ENV)
    if value is None:
        return DEFAULT_ENVIRONMENT
    if not is_environment_name(value):
        definitions = default_backfills if declared is None else declared
        names = sorted({e for d in definitions for e in d.environments})
        # The name as typed, without the blanks around it, is no new name; any other mending is.
        meant = value.strip() if is_environment_name(value.strip()) else None
        meant = meant or meant_as(mended_name(value) or value, names)
        expected = ENVIRONMENT_EXPECTED
        if names:
            expected += f"; the declarations name {', '.join(names)}"
        raise _refused(explicit is not None, value, expected, meant)
    return value


def _refused(
    explicit: bool, value: object, expected: str, meant: str | None, restart: str | None = None
) -> InvalidArgumentError:
    """The refusal of an environment where it was given: the `environment=` argument (which
    MCP_JOBS_ENV cannot override, so no export mends it), or the variable; `restart`: the
    command of a running process that read the variable when it started (`as_variable`)."""
    if explicit:
        expected = expected.replace(_UNSET_SAYS, _NONE_SAYS)
        return InvalidArgumentError(
            ENVIRONMENT_ARGUMENT,
            value,
            expected,
            fix=None if meant is None else f'pass environment="{meant}"',
            nearest=NOTHING_NEAR if meant is None else meant,
        )
    if restart is not None:
        # The export would not reach the running server: it starts again with the variable.
        expected += (
            "; the running server read it when it started, so only a restart with it changed "
            "takes effect"
        )
        fix = f"{ENVIRONMENT_ENV}={meant or DEFAULT_ENVIRONMENT} {restart}"
    else:
        fix = f"export {ENVIRONMENT_ENV}={meant}" if meant else f"unset {ENVIRONMENT_ENV}"
    return InvalidArgumentError(ENVIRONMENT_ENV, value, expected, fix=fix)


def as_variable(refused: JobsError, restart: str | None = None) -> JobsError:
    """`refused`, when it refuses an `environment=` argument, as the refusal of MCP_JOBS_ENV:
    for a face whose `environment=` is that variable's value (the CLI, the MCP server), where
    `pass environment=` is no line to run. `restart`: the command of such a process that read
    the variable when it started (`mcp-jobs serve`), which the fix starts again with it set.
    Any other refusal as it is."""
    # Exactly the class the gate raises: a subclass (a cursor's) carries fields of its own.
    if (
        not isinstance(refused, InvalidArgumentError)
        or type(refused) is not InvalidArgumentError
        or refused.argument != ENVIRONMENT_ARGUMENT
    ):
        return refused
    meant = refused.nearest if isinstance(refused.nearest, str) else None
    expected = refused.expected.replace(_NONE_SAYS, _UNSET_SAYS)
    return _refused(False, refused.value, expected, meant, restart)


def check_environment_case(
    environment: str, declared: Iterable[BackfillDefinition], *, explicit: bool = False
) -> None:
    """Refuse an environment that no declaration names but one spells in another case
    (`Production` for `production`): names are compared exactly, so it would be a new
    environment where every backfill is pending again. `explicit`: given as `environment=`."""
    names = {e for d in declared for e in d.environments}
    if environment in names:
        return
    same = sorted(e for e in names if e.casefold() == environment.casefold())
    if same:
        raise _refused(
            explicit,
            environment,
            f"an environment as the declarations spell it ({', '.join(same)}): names are "
            "case-sensitive",
            same[0],
        )


def check_environment(definition: BackfillDefinition, environment: str) -> None:
    if not definition.applies_to(environment):
        raise BackfillEnvironmentError(definition.name, environment, definition.environments)


def check_pass_environment(definition: BackfillDefinition, started_for: str) -> None:
    """Run by the pass on its worker: the worker's own environment must be the one the write
    was gated for, and one the backfill declares. Otherwise a pass written under another
    MCP_JOBS_ENV (or an older declaration) would sweep here and record itself as there."""
    here = resolve_environment()
    if here != started_for or not definition.applies_to(here):
        raise BackfillEnvironmentError(
            definition.name, here, definition.environments, started_for=started_for
        )


async def check_requires(definition: BackfillDefinition) -> None:
    """Run the declaration's precondition; raise BACKFILL_MIGRATION_PENDING when it names what
    is missing. Called before anything of the app's is read or written."""
    if definition.requires is None:
        return
    missing = await definition.requires()
    if missing is None:
        return
    if not isinstance(missing, str) or not missing:
        missing = repr(missing)
    raise BackfillMigrationPendingError(definition.name, missing, definition.requires_fix)


def write_verdict(
    definition: BackfillDefinition,
    environment: str,
    *,
    completed: BackfillRun | None,
    live_job_id: str | None,
    force: bool,
) -> JobsError | None:
    """The refusal a write would get once the precondition holds, or None when it may start.

    A live pass outranks a completed one: with a forced rerun in flight, `--force` again would
    not help, and the pass holding the name is what to look at.
    """
    if not definition.applies_to(environment):
        return BackfillEnvironmentError(definition.name, environment, definition.environments)
    if live_job_id is not None:
        return BackfillRunningError(definition.name, live_job_id)
    if completed is not None and not force:
        return BackfillAppliedError(
            definition.name, environment, completed.run_id, completed.finished_at
        )
    return None


__all__ = [
    "DEFAULT_ENVIRONMENT",
    "ENVIRONMENT_ARGUMENT",
    "ENVIRONMENT_ENV",
    "ENVIRONMENT_EXPECTED",
    "as_variable",
    "check_environment",
    "check_environment_case",
    "check_pass_environment",
    "check_requires",
    "resolve_environment",
    "write_verdict",
]
